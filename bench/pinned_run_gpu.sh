#!/usr/bin/env bash
# Pinned host memory on a GPU: CuMem (bench/pinned_bench.jl) and PyTorch
# (bench/pinned_anchor.py) in one call, then the table (bench/pinned_table.py).
#
#   OUT=dir JULIA=julia bash bench/pinned_run_gpu.sh [--quick]
#
# Writes $OUT/pinned_cumem.jsonl, $OUT/pinned_anchor.jsonl and $OUT/pinned_table.md, and
# prints the table. Needs the engine built (target/release/libcumem.so or CUMEM_LIBRARY),
# Julia, and python3 with torch. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results/pinned}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
echo "== CuMem (bench/pinned_bench.jl)" >&2
CUMEM_DEVICE=${CUMEM_DEVICE:-cuda} "$JULIA" --project=. bench/pinned_bench.jl "$@" | tee "$OUT/pinned_cumem.jsonl"
echo "== PyTorch (bench/pinned_anchor.py)" >&2
python3 bench/pinned_anchor.py "$@" | tee "$OUT/pinned_anchor.jsonl"
python3 bench/pinned_table.py "$OUT/pinned_cumem.jsonl" "$OUT/pinned_anchor.jsonl" | tee "$OUT/pinned_table.md"

#!/usr/bin/env bash
# Pinned host memory on a GPU: CuMem (bench/julia/pinned_bench.jl) and PyTorch
# (bench/anchors/pinned_anchor.py) in one call, then the table (bench/anchors/pinned_table.py).
#
#   OUT=dir JULIA=julia bash bench/gpu/pinned_run_gpu.sh [--quick]
#
# Writes $OUT/pinned_cumem.jsonl, $OUT/pinned_anchor.jsonl and $OUT/pinned_table.md, and
# prints the table. Needs the engine built (target/release/libcumem.so or CUMEM_LIBRARY),
# Julia, and python3 with torch. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
echo "== CuMem (bench/julia/pinned_bench.jl)" >&2
CUMEM_DEVICE=${CUMEM_DEVICE:-cuda} "$JULIA" --project=. bench/julia/pinned_bench.jl "$@" | tee "$OUT/pinned_cumem.jsonl"
echo "== PyTorch (bench/anchors/pinned_anchor.py)" >&2
python3 bench/anchors/pinned_anchor.py "$@" | tee "$OUT/pinned_anchor.jsonl"
python3 bench/anchors/pinned_table.py "$OUT/pinned_cumem.jsonl" "$OUT/pinned_anchor.jsonl" | tee "$OUT/pinned_table.md"

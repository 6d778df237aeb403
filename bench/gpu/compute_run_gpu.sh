#!/usr/bin/env bash
# The compute benchmarks on a GPU, CuMem and its anchors in one call, then the table.
#
#   OUT=dir JULIA=julia bash bench/gpu/compute_run_gpu.sh [--quick]
#
# Writes $OUT/compute_cumem.jsonl (bench/julia/compute_bench.jl with CUMEM_DEVICE=cuda),
# $OUT/compute_anchor.jsonl (bench/anchors/compute_anchor.py: PyTorch eager, CuPy if it imports)
# and $OUT/compute_table.md (bench/anchors/compute_table.py), and prints the table. Needs the
# engine built (target/release/libcumem.so or CUMEM_LIBRARY), Julia, python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
echo "== CuMem (bench/julia/compute_bench.jl)" >&2
CUMEM_DEVICE=${CUMEM_DEVICE:-cuda} "$JULIA" --project=. bench/julia/compute_bench.jl "$@" | tee "$OUT/compute_cumem.jsonl"
echo "== PyTorch/CuPy (bench/anchors/compute_anchor.py)" >&2
python3 bench/anchors/compute_anchor.py "$@" | tee "$OUT/compute_anchor.jsonl"
python3 bench/anchors/compute_table.py "$OUT/compute_cumem.jsonl" "$OUT/compute_anchor.jsonl" | tee "$OUT/compute_table.md"

#!/usr/bin/env bash
# Time to first result on a GPU (the `first-result` suite): every row of
# bench/julia/first_result.jl (using; first x .+ y, sum, sort; the ten first operations; the
# demo's first epoch against a steady one) in fresh processes with the kernel cache on disk
# cold and warm, then the anchors (bench/anchors/first_result_anchor.py: import torch/cupy,
# first x + x and sum; CuPy cold and warm).
#
#   OUT=dir [REPS=3] [JULIA=julia] bash bench/gpu/first_result_run_gpu.sh
#
# Needs the engine built (target/release/libcumem.so or CUMEM_LIBRARY) and Julia on PATH;
# python3 with torch (and CuPy if it imports) for the anchors. Writes $OUT/cumem.jsonl,
# $OUT/anchor.jsonl (their stderr in *.log) and $OUT/run.log. About 5 minutes on an H100.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a directory outside the checkout}
mkdir -p "$OUT"
. bench/gpu/lib.sh
JULIA=${JULIA:-julia}
REPS=${REPS:-3}
export CUMEM_DEVICE=cuda
step precompile "$OUT/precompile.log" "$JULIA" --project=. -e 'using CuMem'   # once, unmeasured
step cumem "$OUT/cumem.log" bash -c "$JULIA --project=. bench/julia/first_result.jl --reps $REPS > $OUT/cumem.jsonl"
step anchors "$OUT/anchor.log" bash -c "python3 bench/anchors/first_result_anchor.py --reps $REPS > $OUT/anchor.jsonl"
exit $status

#!/usr/bin/env bash
# The prefetching CuIterator's figures on a GPU (docs/performance.md, "Streams").
#
#   OUT=dir JULIA=julia bash bench/streams_run_gpu.sh [--quick]
#
# Runs bench/streams_bench.jl with CUMEM_DEVICE=cuda and writes $OUT/streams.jsonl (one
# line per batch size and compute/upload ratio: upload time per batch, epoch time with
# and without prefetching, the fraction of upload time hidden, the speedup). Needs the
# engine built (target/release/libcumem.so or CUMEM_LIBRARY) and Julia; on the GPU
# machine, set up Julia first as docs/performance.md shows for bench/multigpu_run_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results/streams}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
CUMEM_DEVICE=${CUMEM_DEVICE:-cuda} "$JULIA" --project=. bench/streams_bench.jl "$@" | tee "$OUT/streams.jsonl"

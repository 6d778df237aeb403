#!/usr/bin/env bash
# The prefetching CuIterator's figures on a GPU (docs/performance.md, "Streams").
#
#   OUT=dir JULIA=julia bash bench/gpu/streams_run_gpu.sh [--quick]
#
# Runs bench/julia/streams_bench.jl with CUMEM_DEVICE=cuda and writes $OUT/streams.jsonl (one
# line per batch size and compute/upload ratio: upload time per batch, epoch time with
# and without prefetching, the fraction of upload time hidden, the speedup). Needs the
# engine built (target/release/libcumem.so or CUMEM_LIBRARY) and Julia; on the GPU
# machine, set up Julia first as docs/performance.md shows for bench/gpu/multigpu_run_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
CUMEM_DEVICE=${CUMEM_DEVICE:-cuda} "$JULIA" --project=. bench/julia/streams_bench.jl "$@" | tee "$OUT/streams.jsonl"

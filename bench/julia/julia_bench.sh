#!/usr/bin/env bash
# Runs bench/julia/julia_bench.jl once per pool (the pool is read when CuMem loads).
#   bench/julia/julia_bench.sh [--quick] [TRACE]     JULIA=... to choose the julia binary
set -euo pipefail
cd "$(dirname "$0")/../.."
JULIA=${JULIA:-.julia-local/bin/julia}
for pool in ${POOLS:-binned split expandable simple none}; do
    JULIA_CUDA_MEMORY_POOL=$pool "$JULIA" --project=. bench/julia/julia_bench.jl "$@"
done

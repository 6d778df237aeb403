#!/usr/bin/env bash
# The Julia hot path on a GPU (issue 15; docs/design.md, "The Julia hot path"), in one
# call: the pair and GC-freed figures of every caching pool (bench/julia/julia_bench.jl), the
# breakdown of the pair into its pieces (bench/julia/julia_breakdown.jl) for binned and split,
# and the engine's cache-hit pair on `Engine` directly (examples/hotloop.rs) and through
# the C functions the package calls (examples/capi_hotloop.rs), so that the difference
# between the engine pair and the Julia pair can be read off on that machine.
#
#   OUT=dir JULIA=julia bash bench/gpu/julia_hotpath_run_gpu.sh
#
# Writes $OUT/julia_bench.jsonl, $OUT/julia_breakdown.jsonl and $OUT/engine_pair.txt.
# Needs `cargo build --release --examples` done (the two examples and libcumem.so) and
# Julia (every line names its version: the GC and finalizers differ between releases).
# (examples/hotloop.rs runs on a host-device engine wherever it runs: a cache hit does not
# touch the device.) Takes about two minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
export CUMEM_DEVICE=${CUMEM_DEVICE:-cuda}
mkdir -p "$OUT"
: > "$OUT/julia_bench.jsonl"
: > "$OUT/julia_breakdown.jsonl"
: > "$OUT/engine_pair.txt"
for pool in ${POOLS:-binned split expandable simple}; do
    echo "== $pool: bench/julia/julia_bench.jl" >&2
    JULIA_CUDA_MEMORY_POOL=$pool "$JULIA" --project=. bench/julia/julia_bench.jl | tee -a "$OUT/julia_bench.jsonl"
done
for pool in binned split; do
    echo "== $pool: bench/julia/julia_breakdown.jl" >&2
    JULIA_CUDA_MEMORY_POOL=$pool "$JULIA" --project=. bench/julia/julia_breakdown.jl | tee -a "$OUT/julia_breakdown.jsonl"
    for ex in hotloop capi_hotloop; do
        for run in 1 2 3; do
            r=$(JULIA_CUDA_MEMORY_POOL=$pool REPORT=1 N=${N:-20000000} target/release/examples/$ex $pool 2>&1 | tail -1)
            echo "$pool $ex run $run: $r" | tee -a "$OUT/engine_pair.txt"
        done
    done
done

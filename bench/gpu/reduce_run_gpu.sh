#!/usr/bin/env bash
# Issue 23, the reduction-like kernel families on a GPU: mapreduce with and without dims,
# count/any/all, findmax/findmin, accumulate and the bitonic sort, their element functions
# and operators compiled from Julia's typed IR (branches, structs, tuples, Complex, Float16,
# user operators, Julia's exceptions). Runs the Julia suites that hold them under
# CUMEM_DEVICE=cuda (test/compute/reduce/mapreduce_tests.jl with the shared cases of
# test/compute/reduce/reduce_cases.jl, test/compute/algorithms/arraylib_tests.jl), then the small-operation
# and bandwidth rows (bench/julia/smallops_bench.jl --bandwidth: sum(x) of 2^28 Float32 and
# the 1-element sum) for this build and, when BEFORE names an earlier tree with its
# libcumem.so, for that build in the same call, so the two are comparable.
#
#   OUT=dir [BEFORE=dir] bash bench/gpu/reduce_run_gpu.sh
#
# Needs Julia 1.5.3 on PATH (JULIA) and this tree's engine (CUMEM_LIBRARY, default
# target/release/libcumem.so). Writes $OUT/{mapreduce_tests.log, arraylib_tests.log,
# smallops_after.jsonl, smallops_before.jsonl, run.log}; exits 1 if a step failed. About 6
# minutes. What to look for: both test logs end with their testsets passed (no failure or
# error); the `sum(x)` GB/s row of smallops_after.jsonl is within noise of
# smallops_before.jsonl (the kernel's grid and 16-byte loads are unchanged).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
JULIA=${JULIA:-julia}
export CUMEM_LIBRARY=${CUMEM_LIBRARY:-$PWD/target/release/libcumem.so}
# log and step: bench/gpu/lib.sh
source "bench/gpu/lib.sh"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 | tee -a "$LOG" >&2

step "julia mapreduce_tests.jl (with reduce_cases.jl)" "$OUT/mapreduce_tests.log" \
    env CUMEM_DEVICE=cuda timeout 300 "$JULIA" --project=. test/compute/reduce/mapreduce_tests.jl
step "julia arraylib_tests.jl" "$OUT/arraylib_tests.log" \
    env CUMEM_DEVICE=cuda timeout 300 "$JULIA" --project=. test/compute/algorithms/arraylib_tests.jl
step "smallops bandwidth, this build" "$OUT/smallops_after.jsonl" \
    env CUMEM_DEVICE=cuda BUILD=after timeout 240 "$JULIA" --project=. bench/julia/smallops_bench.jl --bandwidth
if [ -n "${BEFORE:-}" ]; then
    step "smallops bandwidth, $BEFORE" "$OUT/smallops_before.jsonl" \
        env CUMEM_DEVICE=cuda BUILD=before CUMEM_LIBRARY="$BEFORE/libcumem.so" timeout 240 \
        "$JULIA" --project="$BEFORE" "$BEFORE/bench/julia/smallops_bench.jl" --bandwidth
fi
grep -h 'sum' "$OUT"/smallops_*.jsonl 2>/dev/null | tee -a "$LOG" >&2
exit $status

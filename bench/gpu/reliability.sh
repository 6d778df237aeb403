#!/usr/bin/env bash
# Issue 22 (reliability, round 3) on a GPU: the CUDA runs of the suites that test items
# 1-5 (interior addresses in stream pools, snapshots of stream pools, atomic
# unsafe_free!, async uploads that keep their host buffer, calls on the task's device),
# and the C ABI stress program. Needs no Rust toolchain on the GPU machine.
#
# Built on the development machine and carried in $KIT (default .device/):
#   $KIT/libcumem.so          target/release/libcumem.so
#   $KIT/reliability-test     cargo test --release --no-run --test reliability (the binary
#   $KIT/streams-test         it names, strip --strip-debug), likewise --test streams,
#   $KIT/pools-test           --test pools and --test ffi
#   $KIT/ffi-test
# and Julia 1.5.3 on PATH (source .device/julia-env.sh .device/julia-1.5.3-bundle.tar.xz).
# Run from the repository root:
#   OUT=/some/dir KIT=.device bash bench/gpu/reliability.sh
# Writes $OUT/<step>.log and $OUT/summary.txt (one line per step with its exit status);
# exit status 0 when every step passed. About 5 minutes on an H100 (one GPU: the
# two-device test of item 5 runs only with two GPUs or more, and says so otherwise).
set -uo pipefail
KIT=${KIT:-.device}
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
status=0
step() { # step NAME TIMEOUT CMD...: run with output to $OUT/NAME.log, record the exit status
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc after $((SECONDS - t0)) s" | tee -a "$SUMMARY"
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1 || true
export CUMEM_LIBRARY=$PWD/$KIT/libcumem.so CUMEM_TEST_CUDA=1 CUMEM_DEVICE=cuda
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)

# Rust: one test at a time (tests on one GPU disturb each other's timing: docs/reliability.md).
for t in reliability streams pools ffi; do
    [ -x "$KIT/$t-test" ] || chmod +x "$KIT/$t-test" 2>/dev/null
    step "rust-$t" 400 "$KIT/$t-test" --test-threads=1
done

# The C ABI under load on the GPU: 4 threads, with and without injected faults.
if command -v cc >/dev/null 2>&1; then
    cc -O2 -pthread -Iinclude tests/c/capi_stress.c -o "$OUT/capi_stress" -L"$KIT" -lcumem \
        -Wl,-rpath,"$PWD/$KIT" > "$OUT/capi_stress-build.log" 2>&1
    step capi-stress 200 "$OUT/capi_stress" 4 20000
    CUMEM_FAULT=alloc:0.02,free:0.02,copy:0.01,stream:0.01,seed=5 \
        step capi-stress-faults 200 "$OUT/capi_stress" 4 20000
fi

# Julia: the reliability tests under the stream-ordered pools (items 1, 3, 4, 11) inside
# the pool suite, with 2 threads; the fault suite; two devices for item 5.
for pool in split expandable; do
    JULIA_CUDA_MEMORY_POOL=$pool JULIA_NUM_THREADS=2 \
        step "julia-pool-$pool" 600 julia --startup-file=no --project=. test/pooltests.jl
done
JULIA_CUDA_MEMORY_POOL=split CUMEM_FAULT=alloc:0.3,free:0.2,copy:0.05,stream:0.02,seed=11 \
    step julia-faults 300 julia --startup-file=no --project=. test/memory/faulttests.jl
if [ "$ngpu" -ge 2 ]; then
    JULIA_CUDA_MEMORY_LIMIT=1GiB step julia-multidevice 300 julia --startup-file=no --project=. test/devices/multidevice_tests.jl
else
    echo "julia-multidevice: skipped ($ngpu GPU; item 5's test needs two)" | tee -a "$SUMMARY"
fi
exit $status

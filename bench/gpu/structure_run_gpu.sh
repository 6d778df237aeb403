#!/usr/bin/env bash
# The CUDA checks of the julia/ reorganisation (issue 21) and the device switch inside the
# bindings (issue 22 item 5): the bindings against the header, the pool suite, the compute
# suite, and, with two GPUs or more, the multi-device suite with the task-vs-thread device
# test (test/devices/device_switch_tests.jl); FULL=1 adds the whole Pkg.test.
#
# On the GPU machine (no Rust there), from the repository root, with Julia 1.5.3 or later on
# PATH (or in $JULIA) and a libcumem.so built elsewhere from this checkout:
#   CUMEM_LIBRARY=<kit>/libcumem.so OUT=<dir outside the checkout> bash bench/gpu/structure_run_gpu.sh
# Writes $OUT/{layers_header,pool_split,compute,multidevice,pkgtest}.log and $OUT/summary.txt
# (one line per step: name, exit status, seconds). About 6 minutes on one H100 without FULL.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to an output folder outside the checkout}"
: "${CUMEM_LIBRARY:?set CUMEM_LIBRARY to the libcumem.so built from this checkout}"
mkdir -p "$OUT"
JULIA=${JULIA:-julia}
export CUMEM_DEVICE=cuda CUMEM_LIBRARY
if [ -z "${CUMEM_CUBLAS_LIBRARY:-}" ] && [ -d /usr/local/cuda/lib64 ]; then
    export CUMEM_CUBLAS_LIBRARY=/usr/local/cuda/lib64 CUMEM_NVRTC_LIBRARY=/usr/local/cuda/lib64
fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
step() { # step NAME LOG CMD...
    local name=$1 log=$2; shift 2
    local t0=$SECONDS
    "$@" > "$log" 2>&1
    local rc=$?
    echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$SUMMARY"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$SUMMARY"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)

step "layers + bindings against the header" "$OUT/layers_header.log" \
    timeout 300 "$JULIA" --project=. -e 'for f in ARGS; include(f); end' test/layers_tests.jl test/lib/header_tests.jl
step "pool tests, split, 2 threads" "$OUT/pool_split.log" \
    env JULIA_CUDA_MEMORY_POOL=split JULIA_NUM_THREADS=2 timeout 600 "$JULIA" --project=. test/pooltests.jl
step "compute tests" "$OUT/compute.log" \
    timeout 600 "$JULIA" --project=. test/compute/runtime/compute_tests.jl
if [ "$NGPU" -ge 2 ]; then
    step "multidevice tests (with device_switch_tests.jl)" "$OUT/multidevice.log" \
        env JULIA_CUDA_MEMORY_LIMIT=4GiB timeout 600 "$JULIA" --project=. test/devices/multidevice_tests.jl
else
    echo "multidevice tests: skipped ($NGPU GPU)" | tee -a "$SUMMARY"
fi
if [ "${FULL:-0}" = 1 ]; then
    step "Pkg.test" "$OUT/pkgtest.log" \
        env CUMEM_TEST_SKIP_INSTALL=1 timeout 1800 "$JULIA" --project=. -e 'using Pkg; Pkg.test()'
fi
grep -h 'Test Summary\|Pass\|Fail\|Error' "$OUT"/*.log | grep -v '^\s*$' | tail -40 >> "$SUMMARY"

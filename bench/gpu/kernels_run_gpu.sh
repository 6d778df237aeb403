#!/usr/bin/env bash
# The kernel language (@cuda, intrinsics, shared memory, atomics, shuffles, printf,
# exceptions) on a GPU: test/compute/device/kernel_tests.jl with CUMEM_DEVICE=cuda, then
# bench/julia/kernel_bench.jl (gpu_add3! vs `y .+= x`, a shared-memory reduction vs `sum`,
# the @cuda launch vs the broadcast fast path), its JSONL rows into $OUT/kernel_bench.jsonl.
#
#   OUT=dir JULIA=julia bash bench/gpu/kernels_run_gpu.sh
#
# Needs the engine built from this tree (target/release/libcumem.so: cumem_kernel_occupancy)
# and Julia 1.5.3. Exit status: 0 when the tests passed and the bench ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
status=0
echo "== test/compute/device/kernel_tests.jl (CUMEM_DEVICE=cuda)" >&2
CUMEM_DEVICE=cuda timeout 900 "$JULIA" --project=. test/compute/device/kernel_tests.jl > "$OUT/kernel_tests.log" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
grep -E "Test Summary|^[a-zA-Z].*\| +[0-9]|Error During|Test Failed" "$OUT/kernel_tests.log" | head -40
echo "   exit $rc (log: $OUT/kernel_tests.log)"
echo "== bench/julia/kernel_bench.jl (CUMEM_DEVICE=cuda)" >&2
CUMEM_DEVICE=cuda timeout 600 "$JULIA" --project=. bench/julia/kernel_bench.jl > "$OUT/kernel_bench.jsonl" 2> "$OUT/kernel_bench.err"
rc=$?
[ $rc -eq 0 ] || status=1
cat "$OUT/kernel_bench.jsonl"
[ $rc -eq 0 ] || tail -20 "$OUT/kernel_bench.err"
exit $status

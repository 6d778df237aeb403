#!/usr/bin/env bash
# Issue 23 (kernels compiled from Julia's typed IR) on a GPU: the compiler's cases
# (test/compute/compiler/compiler_cases.jl: branches, loops, structs in and out, tuples, Complex,
# Float16, mapped math, const Refs read at each launch, a redefined function, and Julia's
# exceptions from kernels: DivideError, InexactError, DomainError, OverflowError,
# BoundsError) run as real kernels against Base, then the broadcast and compute tests with
# CUMEM_DEVICE=cuda, and the translation time of a new function.
#
#   OUT=dir JULIA=julia bash bench/gpu/compiler_run_gpu.sh
#
# Needs the engine (target/release/libcumem.so, or CUMEM_LIBRARY) and Julia 1.5.3. Each
# log goes to $OUT; the summary lines (Test Summary, translation times) are printed.
# Exit status: 0 when every test file passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
status=0
for t in compiler_tests broadcast_tests compute_tests; do
    echo "== test/compute/$t.jl (CUMEM_DEVICE=cuda)" >&2
    CUMEM_DEVICE=cuda timeout 900 "$JULIA" --project=. "test/compute/$t.jl" > "$OUT/$t.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    grep -E "Test Summary|^[a-zA-Z].*\| +[0-9]|translation of a new function|compiler tests on|Error During|Test Failed" "$OUT/$t.log" | head -40
    echo "   exit $rc (log: $OUT/$t.log)"
done
exit $status

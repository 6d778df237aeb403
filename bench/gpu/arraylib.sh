#!/usr/bin/env bash
# Issue 24 on a GPU: the array-library tests with CUMEM_DEVICE=cuda (every kernel of
# statistics, sorting, scans, searching, masks and random numbers run for real, at sizes
# that take the multi-block paths), then the sort benchmark beside torch.sort and CuPy's
# sort at 10^6 and 10^8 elements, written as JSON lines and a table.
#
#   OUT=dir JULIA=julia bash bench/gpu/arraylib.sh
#
# With GPUARRAYS_TEST set to the `test` folder of GPUArrays.jl v6.4.1 (copied to the GPU
# machine; never into the checkout), GPUArrays' array test suite also runs against
# CuMem.CuArray (bench/julia/gpuarrays_suite.jl) into $OUT/gpuarrays_suite.txt.
#
# Needs the engine (target/release/libcumem.so, or CUMEM_LIBRARY), Julia 1.5.3, python3
# with torch (CuPy optional). Exit status: the tests' (the benchmark runs either way).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to an output folder outside the checkout}
JULIA=${JULIA:-julia}
mkdir -p "$OUT"
echo "== tests (test/compute/algorithms/arraylib_tests.jl, CUMEM_DEVICE=cuda)" >&2
CUMEM_DEVICE=cuda "$JULIA" --project=. test/compute/algorithms/arraylib_tests.jl 2>&1 | tail -40
status=${PIPESTATUS[0]}
if [ -n "${GPUARRAYS_TEST:-}" ]; then
    echo "== GPUArrays.jl v6.4.1 test suite (bench/julia/gpuarrays_suite.jl, CUMEM_DEVICE=cuda)" >&2
    CUMEM_DEVICE=cuda timeout 1500 "$JULIA" --project=. bench/julia/gpuarrays_suite.jl "$GPUARRAYS_TEST" \
        > "$OUT/gpuarrays_suite.txt" 2>&1
    grep -v '^    ' "$OUT/gpuarrays_suite.txt" | head -30
fi
echo "== CuMem sort (bench/julia/sort_bench.jl)" >&2
CUMEM_DEVICE=cuda timeout 240 "$JULIA" --project=. bench/julia/sort_bench.jl | tee "$OUT/sort_cumem.jsonl"
echo "== torch / CuPy (bench/anchors/sort_anchor.py)" >&2
timeout 180 python3 bench/anchors/sort_anchor.py | tee "$OUT/sort_anchor.jsonl"
python3 - "$OUT/sort_cumem.jsonl" "$OUT/sort_anchor.jsonl" <<'PY' | tee "$OUT/sort_table.md"
import json, sys
rows = {}
for f in sys.argv[1:]:
    for line in open(f):
        if line.startswith("{"):
            r = json.loads(line); rows.setdefault((r["op"], r["n"]), {})[r["impl"]] = r["ms"]
print("| op | n | CuMem ms | torch ms | CuPy ms |\n|---|---|---|---|---|")
for (op, n), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"| {op} | {n:.0e} | {v.get('cumem', '-')} | {v.get('torch', '-')} | {v.get('cupy', '-')} |")
PY
echo "tests exit status: $status" >&2
exit $status

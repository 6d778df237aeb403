#!/usr/bin/env bash
# Issue 26 (small operations at the launch limit) on a GPU, in one call: the launch limit
# below Julia (driver vs CuMem's C ABI), the 1-element rows and the 2^28 bandwidth rows and
# the demo's MLP step for the build before (main at the branch point) and after, PyTorch
# and CuPy beside them, a fresh process's first broadcast/sum with the kernel cache on
# disk cold and warm, and the host device's rows against Base in the same process.
#
#   OUT=dir BEFORE=dir AFTER_LIB=path LAUNCH=path bash bench/gpu/smallops_run_gpu.sh
#
# BEFORE: a tree of the earlier build (Project.toml, src/, julia/, demo/, data/ and its
# libcumem.so); AFTER_LIB: this tree's engine (default target/release/libcumem.so);
# LAUNCH: the launch_bench example (cargo build --release -p cumem-bench --example
# launch_bench). Needs Julia on PATH (JULIA), python3 with torch (CuPy if it imports).
# Writes $OUT/*.jsonl and $OUT/table.md (bench/anchors/smallops_table.py). About 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a directory outside the checkout}
BEFORE=${BEFORE:-.device/before}
AFTER_LIB=${AFTER_LIB:-target/release/libcumem.so}
LAUNCH=${LAUNCH:-target/release/examples/launch_bench}
JULIA=${JULIA:-julia}
BASE_DEPOT=${JULIA_DEPOT_PATH:-/opt/julia-depot}
mkdir -p "$OUT"
: > "$OUT/launch.jsonl"; : > "$OUT/cumem.jsonl"; : > "$OUT/anchor.jsonl"; : > "$OUT/first.jsonl"; : > "$OUT/host.jsonl"

proj() { [ "$1" = before ] && echo "$BEFORE" || echo .; }
lib() { [ "$1" = before ] && echo "$BEFORE/libcumem.so" || echo "$AFTER_LIB"; }
# one depot per build (its precompiled package and its kernel cache), then the shared one
jl() { local b=$1; shift; JULIA_DEPOT_PATH=/tmp/smallops-depot-$b:$BASE_DEPOT CUMEM_LIBRARY=$(lib $b) BUILD=$b \
       "$JULIA" --project=$(proj $b) "$@"; }

if [ -x "$LAUNCH" ]; then
    echo "== launch limit below Julia ($LAUNCH)" >&2
    CUMEM_DEVICE=cuda "$LAUNCH" 20000 5 | tee -a "$OUT/launch.jsonl"
else
    echo "== no $LAUNCH: the launch rows below Julia are skipped" >&2
fi

for b in before after; do                      # precompile each build once, unmeasured
    CUMEM_DEVICE=cuda jl $b -e 'using CuMem' || echo "precompile of $b failed" >&2
done
for b in before after; do
    echo "== $b: 1-element rows, bandwidth, MLP step" >&2
    CUMEM_DEVICE=cuda jl $b bench/julia/smallops_bench.jl --bandwidth --mlp | tee -a "$OUT/cumem.jsonl"
done
echo "== PyTorch / CuPy" >&2
python3 bench/anchors/smallops_anchor.py --bandwidth | tee -a "$OUT/anchor.jsonl"
for b in before after; do
    echo "== $b: first broadcast of a fresh process, kernel cache cold then warm" >&2
    rm -rf /tmp/smallops-depot-$b/compiled/cumem_kernels
    for c in cold warm warm; do
        CUMEM_DEVICE=cuda CACHE=$c jl $b bench/julia/smallops_first.jl | tee -a "$OUT/first.jsonl"
    done
done
for b in before after; do
    echo "== $b: host device against Base" >&2
    CUMEM_DEVICE=host jl $b bench/julia/smallops_bench.jl | tee -a "$OUT/host.jsonl"
done
python3 bench/anchors/smallops_table.py "$OUT" | tee "$OUT/table.md"

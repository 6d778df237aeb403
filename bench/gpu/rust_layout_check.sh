#!/usr/bin/env bash
# The GPU check of the Rust layout (issue 21): the engine split into src/engine/, the
# device registry in src/engines.rs, the C ABI in src/ffi/ and the stream-taking C
# functions renamed to `_async` (cumem_kernel_launch_async, cumem_gemm_async). Moves
# only, so the check is that the CUDA suites still pass: the Rust suites that reach the
# moved code on a real GPU (CUMEM_TEST_CUDA=1), and the Julia suites that launch kernels
# and GEMMs on streams through the renamed functions (CUMEM_DEVICE=cuda).
#
# Two steps:
#   bash bench/gpu/rust_layout_check.sh kit [DIR]
#       on the development machine: builds the release library and the Rust test
#       binaries and copies them, debug info stripped (about 40 MB in all), into DIR
#       (default target/gpu-kit/rust-layout), to carry to the GPU machine;
#   OUT=/some/dir bash bench/gpu/rust_layout_check.sh run [DIR]
#       on the GPU machine, from the repository root, with `julia` (1.5.3) on PATH: runs
#       each Rust suite with one test thread (tests on one GPU disturb each other with
#       more, docs/reliability.md), then test/compute_tests.jl, test/multidevice_tests.jl
#       and test/pooltests.jl (split pool, 2 threads: the stream suite is in it) with
#       CUMEM_LIBRARY=DIR/libcumem.so. Writes OUT/results.jsonl (one line per suite:
#       name, exit status, passed and failed counts, seconds) and OUT/logs/ (the logs,
#       not for the repository). Exit status 0 when every suite passed. About 6 minutes
#       on an H100 (the Julia compute suite ~1 min, pooltests ~3 min).
set -uo pipefail

MODE=${1:?usage: rust_layout_check.sh kit|run [DIR]}
D=${2:-target/gpu-kit/rust-layout}
SUITES="compute ffi streams multidevice pinned pools copy_race memtools thread_cache threads faults"

if [ "$MODE" = kit ]; then
    mkdir -p "$D"
    cargo build --release --workspace || exit 1
    cp target/release/libcumem.so "$D/" && strip --strip-debug "$D/libcumem.so"
    for s in $SUITES; do
        exe=$(cargo test --release --no-run --test "$s" 2>&1 | sed -n 's/.*Executable .* (\(.*\))$/\1/p' | tail -1)
        [ -n "$exe" ] || { echo "no test binary for $s" >&2; exit 1; }
        cp "$exe" "$D/$s" && strip --strip-debug "$D/$s"
    done
    echo "kit in $D: $(ls "$D" | tr '\n' ' ')"
    exit 0
fi

[ "$MODE" = run ] || { echo "unknown mode $MODE" >&2; exit 2; }
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT/logs"
R="$OUT/results.jsonl"
: > "$R"
status=0
record() { # record NAME RC SECONDS LOG PASS_REGEX FAIL_REGEX
    local pass fail
    pass=$(grep -Eo "$5" "$4" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
    fail=$(grep -Eo "$6" "$4" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
    printf '{"suite":"%s","exit":%d,"passed":%d,"failed":%d,"seconds":%d}\n' "$1" "$2" "$pass" "$fail" "$3" >> "$R"
    echo "$1: exit $2, passed $pass, failed $fail, $3 s" >&2
    [ "$2" -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/logs/gpu.txt" 2>&1 || true
git rev-parse HEAD > "$OUT/logs/commit.txt" 2>/dev/null || true

for s in $SUITES; do
    chmod +x "$D/$s" 2>/dev/null
    t0=$SECONDS
    CUMEM_TEST_CUDA=1 CUMEM_DEVICE=cuda timeout 300 "$D/$s" --test-threads=1 > "$OUT/logs/$s.log" 2>&1
    record "rust/$s" $? $((SECONDS - t0)) "$OUT/logs/$s.log" '[0-9]+ passed' '[0-9]+ failed'
done

export CUMEM_LIBRARY="$PWD/$D/libcumem.so" CUMEM_DEVICE=cuda
# Julia's Test prints "name | Pass Total" and "name | 243 243": count the first number of
# each summary line after a header.
jsum() { awk '/Test Summary:/ {h=1; next} h && /\|/ {split($0, a, "|"); split(a[2], n, " "); p+=n[1]; h=0} END {print p+0}' "$1"; }
for spec in "compute:test/compute_tests.jl:" \
            "multidevice:test/multidevice_tests.jl:JULIA_CUDA_MEMORY_LIMIT=1GiB" \
            "pooltests_split:test/pooltests.jl:JULIA_CUDA_MEMORY_POOL=split JULIA_NUM_THREADS=2"; do
    IFS=: read -r name file vars <<< "$spec"
    t0=$SECONDS
    env $vars timeout 600 julia --startup-file=no --project=. "$file" > "$OUT/logs/$name.log" 2>&1
    rc=$?
    pass=$(jsum "$OUT/logs/$name.log")
    fail=$(grep -c -E 'Test Failed|Error During Test' "$OUT/logs/$name.log")
    printf '{"suite":"julia/%s","exit":%d,"passed":%d,"failed":%d,"seconds":%d}\n' "$name" "$rc" "$pass" "$fail" $((SECONDS - t0)) >> "$R"
    echo "julia/$name: exit $rc, passed $pass, failed $fail, $((SECONDS - t0)) s" >&2
    [ "$rc" -eq 0 ] || status=1
done
exit $status

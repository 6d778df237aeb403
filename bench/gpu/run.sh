#!/usr/bin/env bash
# CuMem's one GPU driver: runs named suites on the GPU machine (no Rust or Julia installed
# there; both come in the kit that bench/gpu/kit.sh builds into .kit/ on the development
# machine), each beside its anchors, and packs what they wrote into at most four files.
#
#   OUT=<dir> bash bench/gpu/run.sh SUITE...        (from the repository root)
#   OUT=<dir> bash bench/gpu/run.sh --lanes 'a: tests' 'b: RUST_TESTS=pools,ffi rust-cuda' ...
#                                                   (runs side by side, all ended and packed
#                                                    by DEADLINE seconds, default 570)
#   bash bench/gpu/run.sh --list                    (the suites, their budgets and needs)
#
# Suites (budget in seconds; `needs`: the kit parts, see kit.sh):
#   tests        Pkg.test with CUMEM_DEVICE=cuda, CUMEM_TEST_SKIP_INSTALL=1; with
#                TESTS="test/a.jl test/b.jl" only those files, each in a process of its own;
#                with GPUARRAYS_TEST=<GPUArrays.jl v6.4.1's test/ folder> also that suite
#                (bench/julia/gpuarrays_suite.jl; GPUARRAYS_SETS="statistics;uniformscaling" only those testsets)
#   rust-cuda    every Rust test binary of the kit with CUMEM_TEST_CUDA=1, one test thread
#                (RUST_TESTS="compute ffi" narrows them; the binaries named in RUST_PER_TEST,
#                default "linalg", run one process per test: a cuSOLVER fault poisons its context)
#   replay       cumem-bench replay/pair/threads of every pool beside bench/anchors/anchor_bench.py
#                (PyTorch default and expandable segments, cudaMallocAsync, cudaMalloc), over
#                data/*.trace, .kit traces and traces generated here by gen_varlen_trace.py
#                (seeds in REPLAY_SEEDS, default "2 3 4", the i-th with the i-th length
#                distribution of REPLAY_LENGTHS, default "uniform lognormal bimodal"; pick new
#                seeds for traces no pool was tuned on); RECORD=1 also records
#                bertsmall_infer_varlen with bench/anchors/record_trace.py (needs transformers)
#   compute-bench  bench/julia/compute_bench.jl beside bench/anchors/compute_anchor.py
#   smallops     the launch limit (launch_bench, if in the kit), bench/julia/smallops_bench.jl
#                --bandwidth --mlp beside bench/anchors/smallops_anchor.py, the first broadcast of a
#                fresh process with the kernel cache cold then warm, the host device against Base
#   bandwidth    pinned host memory (bench/julia/pinned_bench.jl beside pinned_anchor.py) and the
#                prefetching iterator (bench/julia/streams_bench.jl)
#   linalg       test/compute/linalg/linalg{_factor,}_tests.jl, bench/julia/linalg_bench.jl beside
#                bench/anchors/linalg_anchor.py (LINALG=tests or LINALG=bench: one half; the
#                Rust tests/linalg.rs is in rust-cuda)
#   sort         bench/julia/sort_bench.jl (SORT_LIMIT seconds, default 270) beside bench/anchors/sort_anchor.py (torch, CuPy);
#                CUMEM_SORT_VARIANTS / CUMEM_SCAN_VARIANTS: tunings measured in the same call
#                (sort_bench.jl's header; rows "op@tuning" in sort_table.md; a variant's cell
#                (sorts and scans): its ms, its ratio to the default timed interleaved with it,
#                the default's ms; scan and copy cells also "[events ms]": the time between
#                timing events on the stream, as the anchors time theirs)
#   overhead     bench/julia/host_overhead.jl on this GPU (µs and CPU µs a call of small operations
#                and of the demo's step), twice, alternating with OVERHEAD_OLD where given: the
#                folder of an earlier commit's package (its Project.toml, julia/ and demo/, e.g.
#                `git worktree add`), rows "build": "before" / "after"; overhead.jsonl
#   hotpath      bench/julia/julia_bench.jl for every caching pool, julia_breakdown.jl, and the
#                engine's pair (examples hotloop, capi_hotloop, if in the kit)
#   multigpu     (two GPUs or more) the Rust multidevice tests, test/devices/{multidevice,distributed}
#                _tests.jl, peer copies through CuMem beside PyTorch
#   reliability  tests/c/capi_stress.c (built here if cc exists) with and without injected faults
#   first-result bench/julia/first_result.jl (REPS, default 1; FR_ROWS: its rows, default all) beside bench/anchors/first_result_anchor.py,
#                bench/julia/load_time.jl (LOAD_REPS, default 5), bench/julia/compiler_translate.jl
#   sysimage     CuMem.create_sysimage on this machine (its default workload, scripts/precompile_workload.jl,
#                on this GPU) into $KU (outside the tree and $OUT; seconds of the build and of each step,
#                bytes, statements), a check in a process started from it (a broadcast and a sum equal to
#                Base's), and bench/julia/first_result.jl's rows FR_ROWS (default ten,using) with the kernel
#                cache warm, REPS processes each (default 2), without the image (beside the build, which
#                keeps one core busy) and with it (FR_SYSIMAGE); sysimage.md: the medians side by side;
#                SYSIMAGE_BUILD_LIMIT: the build's time limit in seconds (default 420: room for a second
#                julia --output-o when the first aborts, see julia/tools/sysimage.jl)
#   kernels      the kernel language: test/compute/device/*_tests.jl, then bench/julia/kernel_bench.jl
#                (@cuda kernels beside broadcasts and `sum`)
#   cudajl       bench/julia/cudajl_suite.jl (if present; CUDAJL_ARGS="--kernels" or "--array" for one half)
#   probe        one-off measurements: each file of PROBE (commas; .jl with julia, .py with python3,
#                .sh with bash, from the repository root) in turn, its log in probe/, its JSON lines
#                in probe.jsonl (a .sh gets JL_LDLP/JL_PRELOAD, the Julia bundle's environment)
#   graphs       CUDA graphs: the demo's MLP step eager and replayed from a graph
#                (bench/julia/graph_bench.jl) beside PyTorch eager and torch.cuda.graph replay
#                (bench/anchors/graph_anchor.py): median µs per step, weights equal to eager,
#                graph pool memory against the step's peak, growth over 10 000 replays, and
#                eager/replay with programmatic dependent launch off (rows eager_nopdl,
#                graph_nopdl; CuMem.pdl!(false)); the tests: TESTS=test/compute/runtime/graphs_tests.jl
#                with the tests suite
#   fuzz         the differential fuzzer on the GPU: test/fuzz/fuzz_tests.jl (the regression
#                cases, FUZZ_N functions (default 40) from the fixed seed and FUZZ_N from a
#                seed of this run, printed), then test/fuzz/fuzz.jl --ulps (ulps.md); the JSON
#                summaries in fuzz.jsonl, reproducers of disagreements in repro/
#   fuzz-campaign  a campaign of the differential fuzzer (test/fuzz/campaign.sh): FUZZ_PROCS
#                processes (default: the CPU count) side by side, seeds FUZZ_SEED+1... (default:
#                the clock, printed), each fuzzing FUZZ_SECONDS (default: the budget less 120 s)
#                after its loading, in FUZZ_MODE cuda (default; with two GPUs the processes
#                alternate), host or emu (CUMEM_DEVICE=host, no GPU: kernels to PTX, or through
#                g++ on CPU threads); campaign.jsonl (a line per process and the total) and
#                campaign.md: functions, checks, wrong values, exception mismatches, crashes,
#                refused; reproducers in repro/ (the first 200)
#   profile      Nsight Compute (ncu --set full, PROFILE_SET to change) over one call of each operation
#                of PROFILE_OPS (default "sort_f32 cumsum_f32"; OP:N for N elements, default 10^8;
#                bench/julia/profile_ops.jl lists them): ncu_<op>.txt, every kernel's sections as text;
#                PROFILE_OPTS: more ncu options, commas for spaces (e.g. "--clock-control,none": the GPU's own clocks
#                rather than ncu's locked base clock)
#   sanitize     compute-sanitizer over the CUDA suite's kernel-running test files (SANITIZE_SUITE
#                below; SANITIZE_TESTS="a.jl b.jl" instead), each file under every tool of
#                SANITIZE_TOOLS (default memcheck racecheck synccheck initcheck) in a process of
#                its own, SANITIZE_PROCS at once (default: the CPU count, at most 24) spread
#                over the GPUs, each within SANITIZE_LIMIT s (default 420), SANITIZE_POOL: the
#                pool of every file (default its own), SANITIZE_OPTS: more options of the tool
#                (e.g. --report-api-errors no); sanitize.md: errors (failing driver calls
#                among them counted apart), exit status and seconds of each file and tool
# A suite whose script is missing says "missing" and does not fail the run. `bench` names
# replay compute-bench smallops bandwidth linalg sort first-result kernels cudajl.
#
# Environment: OUT (required); KIT (default .kit); BUDGET_<suite> (seconds, `-` as `_`);
# RUN_LIMIT (default 570: the whole run stops starting suites so that packing ends in time);
# QUICK=1 (the benchmarks' --quick where they have one).
# What comes back, under $OUT: summary.md (GPU, versions, commit, per-suite exit status and
# seconds, every table), results.tar.xz (<suite>/*.jsonl, *.md, *.svg: what goes into
# bench/results/<dir>/), logs.tar.xz (<suite>/*.log). Exit status: 0 when every suite that
# ran passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
KIT=${KIT:-.kit}
# List-valued settings take commas as well as spaces ("a.jl,b.jl"): a lane's spec splits on
# spaces, so commas are how a lane passes a list.
for v in PROBE TESTS SANITIZE_TESTS SANITIZE_TOOLS RUST_TESTS RUST_PER_TEST REPLAY_SEEDS REPLAY_LENGTHS PROFILE_OPS PROFILE_OPTS; do
    [ -n "${!v:-}" ] && export "$v=${!v//,/ }"
done
ALL="probe tests rust-cuda replay compute-bench smallops bandwidth linalg sort hotpath overhead multigpu reliability first-result sysimage kernels cudajl graphs fuzz fuzz-campaign sanitize profile"
BENCH="replay compute-bench smallops bandwidth linalg sort first-result kernels cudajl graphs"

budget_of() { # default seconds of a suite (from the old drivers' measured times, with slack)
    local v="BUDGET_${1//-/_}"
    if [ -n "${!v:-}" ]; then echo "${!v}"; return; fi
    case $1 in
        tests) echo 560 ;; rust-cuda) echo 420 ;; replay) echo 480 ;; compute-bench) echo 240 ;;
        smallops) echo 300 ;; bandwidth) echo 180 ;; linalg) echo 480 ;; sort) echo 360 ;;
        hotpath) echo 240 ;; overhead) echo 420 ;; multigpu) echo 480 ;; reliability) echo 240 ;; first-result) echo 600 ;; sysimage) echo 480 ;;
        kernels) echo 560 ;; cudajl) echo 540 ;; graphs) echo 150 ;; fuzz) echo 150 ;; fuzz-campaign) echo 540 ;; sanitize) echo 560 ;; profile) echo 300 ;; probe) echo 300 ;; *) echo 0 ;;
    esac
}
needs_of() {
    case $1 in
        probe|tests|compute-bench|bandwidth|linalg|sort|first-result|sysimage|kernels|cudajl|graphs|fuzz|fuzz-campaign|sanitize|profile|overhead) echo "engine julia" ;;
        smallops|hotpath) echo "engine julia bench" ;;
        rust-cuda) echo "engine rust" ;; replay) echo "bench" ;;
        multigpu) echo "engine julia rust" ;; reliability) echo "engine" ;;
    esac
}

if [ "${1:-}" = --list ]; then
    for s in $ALL; do printf '%-13s %4s s  needs: %s\n' "$s" "$(budget_of $s)" "$(needs_of $s)"; done
    exit 0
fi

# ---------------------------------------------------------------- the kit on this machine
KU=${CUMEM_KIT_UNPACKED:-/tmp/cumem-kit}     # the kit's binaries, unpacked outside the tree
setup_kit() {
    mkdir -p "$KU"
    local part sum
    for part in engine rust bench; do   # unpacked again when the carried archive changed (a warm machine)
        [ -f "$KIT/$part/$part.tar.xz" ] || continue
        sum=$(cksum < "$KIT/$part/$part.tar.xz")
        if [ "$(cat "$KU/.$part" 2>/dev/null)" != "$sum" ]; then
            [ "$part" = rust ] && rm -rf "$KU/rust"
            tar -C "$KU" -xJf "$KIT/$part/$part.tar.xz" && echo "$sum" > "$KU/.$part"
        fi
    done
    [ -f "$KU/libcumem.so" ] && export CUMEM_LIBRARY="$KU/libcumem.so"
    # cuBLAS, cuSOLVER (and NVRTC) are in /usr/local/cuda/lib64 there, outside the loader's cache.
    local v
    for v in CUMEM_CUBLAS_LIBRARY CUMEM_CUSOLVER_LIBRARY CUMEM_NVRTC_LIBRARY; do
        if [ -z "${!v:-}" ] && [ -d /usr/local/cuda/lib64 ]; then export "$v=/usr/local/cuda/lib64"; fi
    done
    if [ -f "$KIT/julia/julia-env.sh" ] && ! command -v julia >/dev/null 2>&1; then
        # The bundle's environment (its libraries on LD_LIBRARY_PATH, its libunwind preloaded) is
        # for Julia only: kept in JL_LDLP / JL_PRELOAD for jl(), out of the way of Python, the
        # Rust binaries and the driver's tools.
        local ldlp=${LD_LIBRARY_PATH-}
        # shellcheck disable=SC1090
        source "$KIT/julia/julia-env.sh" "$(ls "$KIT"/julia/*.tar.xz | head -1)" >/dev/null 2>&1 || true
        export JL_LDLP=${LD_LIBRARY_PATH-} JL_PRELOAD=${LD_PRELOAD-}
        export LD_LIBRARY_PATH=$ldlp
        unset LD_PRELOAD
    fi
    export CUMEM_DEVICE=cuda
}

# ---------------------------------------------------------------- helpers inside a suite
# $D: this suite's folder (results), $L: its logs folder; `step NAME LOGFILE CMD...` runs CMD
# with stdout+stderr in LOGFILE, prints its exit status and seconds, keeps going.
status=0
log() { echo "[$(date -u +%T)] $*" | tee -a "$L/run.log" >&2; }
step() {
    local name=$1 out=$2; shift 2
    log "$name: $*"
    local t0=$SECONDS
    "$@" > "$out" 2>&1
    local rc=$?
    tail -n "${TAIL:-8}" "$out" | sed 's/^/    /' | tee -a "$L/run.log" >&2
    log "$name: exit $rc after $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
    return $rc
}
# jl SECONDS [VAR=value...] FILE ARGS...: Julia on this checkout; py likewise for python3 (without
# the Julia bundle's LD_PRELOAD of libunwind).
jl() { local t=$1 v=(); shift; while [[ ${1:-} == [A-Z]*=* ]]; do v+=("$1"); shift; done
       env LD_LIBRARY_PATH="${JL_LDLP-${LD_LIBRARY_PATH-}}" LD_PRELOAD="${JL_PRELOAD-}" "${v[@]}" \
           timeout "$t" julia --startup-file=no --project=. "$@"; }
py() { local t=$1 v=(); shift; while [[ ${1:-} == [A-Z]*=* ]]; do v+=("$1"); shift; done
       env -u LD_PRELOAD "${v[@]}" timeout "$t" python3 "$@"; }
jsonl() { grep -h '^{' "$@" 2>/dev/null || true; }                         # the JSON lines of logs
have() { [ -f "$1" ] || { log "missing: $1 (skipped)"; echo "missing: $1" >> "$D/missing.txt"; return 1; }; }
need_julia() { command -v julia >/dev/null 2>&1 || { log "no julia: carry the kit's julia part ($KIT/julia)"; status=1; return 1; }; }
need_lib() { [ -n "${CUMEM_LIBRARY:-}" ] || { log "no libcumem.so: carry the kit's engine part ($KIT/engine)"; status=1; return 1; }; }
ngpu() { nvidia-smi -L 2>/dev/null | grep -c '^GPU'; }
# the GPU indices a suite may use: CUDA_VISIBLE_DEVICES's list when set, else 0 .. ngpu-1
gpu_list() { if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then echo "${CUDA_VISIBLE_DEVICES//,/ }";
             else local n; n=$(ngpu); [ "$n" -ge 1 ] || n=1; seq -s ' ' 0 $((n - 1)); fi; }
quick() { [ "${QUICK:-0}" = 1 ] && echo --quick; }

suite_tests() {
    need_julia && need_lib || return
    if [ -n "${TESTS:-}" ]; then
        local f
        for f in $TESTS; do
            have "$f" || continue
            step "julia $f" "$L/$(basename "$f" .jl).log" jl "$(budget_of tests)" "$f"
        done
    else
        TAIL=40 step "Pkg.test (CUMEM_DEVICE=cuda)" "$L/pkgtest.log" \
            jl "$(budget_of tests)" CUMEM_TEST_SKIP_INSTALL=1 -e 'using Pkg; Pkg.test()'
    fi
    if [ -n "${GPUARRAYS_TEST:-}" ]; then   # GPUArrays.jl v6.4.1's test folder, copied there (never into the checkout)
        local sets=()
        IFS=';' read -r -a sets <<< "${GPUARRAYS_SETS:-}"     # testset names, ';'-separated (default: all)
        step "GPUArrays.jl test suite" "$L/gpuarrays_suite.log" jl 1500 bench/julia/gpuarrays_suite.jl "$GPUARRAYS_TEST" "${sets[@]}"
        grep -v '^    ' "$L/gpuarrays_suite.log" | head -40 > "$D/gpuarrays_suite.txt"
    fi
    find "$L" -name '*.log' ! -name run.log -exec grep -h -E 'Test Summary|^ *[A-Za-z].*\| +[0-9]+ +[0-9]' {} + | grep -v '^\s*$' > "$D/test_summary.txt" || true
}

suite_rust_cuda() {
    need_lib || return
    local t name tn pass fail failed per
    ls "$KU"/rust/* >/dev/null 2>&1 || { log "no Rust test binaries: carry the kit's rust part ($KIT/rust)"; status=1; return; }
    : > "$D/rust.jsonl"
    for t in "$KU"/rust/*; do
        name=$(basename "$t")
        if [ -n "${RUST_TESTS:-}" ] && ! grep -qw "$name" <<<"$RUST_TESTS"; then continue; fi
        local t0=$SECONDS rc=0
        if grep -qw "$name" <<<"${RUST_PER_TEST:-linalg}"; then
            pass=0; fail=0; failed=""
            : > "$L/rust_$name.log"
            for tn in $("$t" --list 2>/dev/null | sed -n 's/: test$//p'); do
                if env CUMEM_TEST_CUDA=1 timeout 120 "$t" --exact "$tn" --test-threads=1 >> "$L/rust_$name.log" 2>&1; then
                    pass=$((pass + 1))
                else
                    fail=$((fail + 1)); failed="$failed $tn"; rc=1
                fi
            done
            log "rust $name (one process a test): $pass passed, $fail failed:${failed:- none}"
            [ $rc -eq 0 ] || status=1
        else
            step "rust $name" "$L/rust_$name.log" env CUMEM_TEST_CUDA=1 timeout 300 "$t" --test-threads=1
            rc=$?
            pass=$(grep -Eo '[0-9]+ passed' "$L/rust_$name.log" | awk '{s+=$1} END {print s+0}')
            fail=$(grep -Eo '[0-9]+ failed' "$L/rust_$name.log" | awk '{s+=$1} END {print s+0}')
        fi
        printf '{"suite":"rust/%s","exit":%d,"passed":%d,"failed":%d,"seconds":%d}\n' \
            "$name" "$rc" "$pass" "$fail" $((SECONDS - t0)) >> "$D/rust.jsonl"
        grep -E "panicked|^---- " "$L/rust_$name.log" | head -n 10 | sed 's/^/      /' | tee -a "$L/run.log" >&2
    done
}

suite_replay() {
    local BIN="$KU/cumem-bench"
    [ -x "$BIN" ] || { log "no cumem-bench: carry the kit's bench part ($KIT/bench)"; status=1; return; }
    local T="$KU/traces-run"; rm -rf "$T"; mkdir -p "$T"
    cp data/*.trace "$T/"
    cp "$KIT"/traces/*.trace "$T/" 2>/dev/null || true
    local s i=0 lens
    read -r -a lens <<< "${REPLAY_LENGTHS-uniform lognormal bimodal}"
    for s in ${REPLAY_SEEDS-2 3 4}; do
        # The i-th seed with the i-th length distribution (cycled): traces no pool was tuned on.
        local d=${lens[$((i % ${#lens[@]}))]} n
        i=$((i + 1))
        n=bertlike_infer_varlen_seed$s; [ "$d" = uniform ] || n=bertlike_infer_varlen_${d}_seed$s
        py 60 bench/anchors/gen_varlen_trace.py --seed "$s" --lengths "$d" --name "$n" \
            > "$T/$n.trace" 2>> "$L/gen.log" || log "gen_varlen_trace.py --seed $s --lengths $d failed"
    done
    if [ "${RECORD:-0}" = 1 ]; then
        step "record bertsmall_infer_varlen" "$L/record.log" py 300 OUT="$T" bench/anchors/record_trace.py bertsmall_infer_varlen
    fi
    log "traces: $(ls "$T" | tr '\n' ' ')"
    step anchor "$L/anchor.log" py "${ANCHOR_LIMIT:-300}" bench/anchors/anchor_bench.py "$T" $(quick)
    jsonl "$L/anchor.log" > "$D/anchor.jsonl"
    local R="$D/results.jsonl"; : > "$R"
    step replay "$L/replay.log" timeout 240 "$BIN" replay "$T"/*.trace --pool all --device cuda --json
    step pair "$L/pair.log" timeout 90 "$BIN" pair --pool all --device cuda --json
    step threads "$L/threads.log" timeout 90 "$BIN" threads --threads 1,4,16 --pool binned,split,expandable --device cuda --json
    jsonl "$L/replay.log" "$L/pair.log" "$L/threads.log" > "$R"
    step chart "$L/chart.log" "$BIN" chart --input "$R" --anchor "$D/anchor.jsonl" --out "$D/perf.svg"
    py 60 bench/anchors/tables.py "$D" > "$D/tables.md" 2>> "$L/run.log" || log "tables.py failed"
}

suite_compute_bench() {
    have bench/julia/compute_bench.jl || return 0
    need_julia && need_lib || return
    step "CuMem compute_bench.jl" "$L/compute_cumem.log" jl 150 bench/julia/compute_bench.jl $(quick)
    jsonl "$L/compute_cumem.log" > "$D/compute_cumem.jsonl"
    step "PyTorch/CuPy compute_anchor.py" "$L/compute_anchor.log" py 120 bench/anchors/compute_anchor.py $(quick)
    jsonl "$L/compute_anchor.log" > "$D/compute_anchor.jsonl"
    py 30 bench/anchors/compute_table.py "$D/compute_cumem.jsonl" "$D/compute_anchor.jsonl" > "$D/compute_table.md" 2>> "$L/run.log"
}

suite_smallops() {
    have bench/julia/smallops_bench.jl || return 0
    need_julia && need_lib || return
    local W="$KU/smallops"; rm -rf "$W"; mkdir -p "$W"
    if [ -x "$KU/launch_bench" ]; then
        step "launch limit below Julia" "$L/launch.log" timeout 60 "$KU/launch_bench" 20000 5
        jsonl "$L/launch.log" > "$W/launch.jsonl"
    else
        log "no launch_bench in the kit's bench part: the launch rows are skipped"
    fi
    step "CuMem 1-element rows, bandwidth, MLP step" "$L/cumem.log" jl 200 BUILD=after bench/julia/smallops_bench.jl --bandwidth --mlp
    jsonl "$L/cumem.log" > "$W/cumem.jsonl"
    step "PyTorch/CuPy smallops_anchor.py" "$L/anchor.log" py 120 bench/anchors/smallops_anchor.py --bandwidth
    jsonl "$L/anchor.log" > "$W/anchor.jsonl"
    if have bench/julia/smallops_first.jl; then
        # A depot of its own, the package precompiled there first (unmeasured), then its kernel
        # cache on disk emptied: the first process compiles its kernels (cold), the next ones find
        # them (warm).
        local depot="$KU/smallops-depot" c dp="$KU/smallops-depot:${JULIA_DEPOT_PATH:-}"
        rm -rf "$depot"
        : > "$L/first.log"
        jl 300 JULIA_DEPOT_PATH="$dp" -e 'using CuMem' >> "$L/first.log" 2>&1 || log "precompile in $depot failed"
        rm -rf "$depot/compiled/cumem_kernels"
        for c in cold warm warm; do
            jl 120 JULIA_DEPOT_PATH="$dp" CACHE=$c BUILD=after bench/julia/smallops_first.jl >> "$L/first.log" 2>&1 \
                || { log "smallops_first.jl ($c) failed"; status=1; }
        done
        jsonl "$L/first.log" > "$W/first.jsonl"
    fi
    step "host device against Base" "$L/host.log" jl 120 CUMEM_DEVICE=host BUILD=after bench/julia/smallops_bench.jl
    jsonl "$L/host.log" > "$W/host.jsonl"
    cp "$W"/*.jsonl "$D/"
    py 30 bench/anchors/smallops_table.py "$W" > "$D/table.md" 2>> "$L/run.log" || log "smallops_table.py failed"
}

suite_bandwidth() {
    need_julia && need_lib || return
    if have bench/julia/pinned_bench.jl; then
        step "CuMem pinned_bench.jl" "$L/pinned_cumem.log" jl 90 bench/julia/pinned_bench.jl $(quick)
        jsonl "$L/pinned_cumem.log" > "$D/pinned_cumem.jsonl"
        step "PyTorch pinned_anchor.py" "$L/pinned_anchor.log" py 60 bench/anchors/pinned_anchor.py $(quick)
        jsonl "$L/pinned_anchor.log" > "$D/pinned_anchor.jsonl"
        py 30 bench/anchors/pinned_table.py "$D/pinned_cumem.jsonl" "$D/pinned_anchor.jsonl" > "$D/pinned_table.md" 2>> "$L/run.log"
    fi
    if have bench/julia/streams_bench.jl; then
        step "CuMem streams_bench.jl" "$L/streams.log" jl 90 bench/julia/streams_bench.jl $(quick)
        jsonl "$L/streams.log" > "$D/streams.jsonl"
    fi
}

suite_linalg() {
    need_julia && need_lib || return
    if [ "${LINALG:-all}" != bench ]; then
        step "julia linalg_factor_tests.jl" "$L/julia_linalg_factor.log" jl 420 test/compute/linalg/linalg_factor_tests.jl
        step "julia linalg_tests.jl" "$L/julia_linalg.log" jl 120 test/compute/linalg/linalg_tests.jl
    fi
    [ "${LINALG:-all}" != tests ] || return 0
    have bench/julia/linalg_bench.jl || return 0
    step "CuMem linalg_bench.jl" "$L/linalg_cumem.log" jl 330 bench/julia/linalg_bench.jl $(quick)
    jsonl "$L/linalg_cumem.log" > "$D/linalg_cumem.jsonl"
    step "PyTorch linalg_anchor.py" "$L/linalg_torch.log" py 240 bench/anchors/linalg_anchor.py $(quick)
    jsonl "$L/linalg_torch.log" > "$D/linalg_torch.jsonl"
    py 30 bench/anchors/linalg_table.py "$D/linalg_cumem.jsonl" "$D/linalg_torch.jsonl" > "$D/linalg_table.md" 2>> "$L/run.log"
}

suite_probe() {
    need_julia && need_lib || return
    local f b
    for f in ${PROBE:-}; do
        have "$f" || continue
        b=$(basename "$f"); b=${b%.*}
        case $f in
            *.jl) step "probe $f" "$L/$b.log" jl "${PROBE_LIMIT:-240}" "$f" ;;
            *.py) step "probe $f" "$L/$b.log" py "${PROBE_LIMIT:-240}" "$f" ;;
            *.sh) step "probe $f" "$L/$b.log" timeout "${PROBE_LIMIT:-240}" bash "$f" ;;
        esac
        jsonl "$L/$b.log" >> "$D/probe.jsonl"
        cp "$L/$b.log" "$D/$b.txt"
    done
}

suite_sort() {
    have bench/julia/sort_bench.jl || return 0
    need_julia && need_lib || return
    step "CuMem sort_bench.jl" "$L/sort_cumem.log" jl "${SORT_LIMIT:-270}" bench/julia/sort_bench.jl
    jsonl "$L/sort_cumem.log" > "$D/sort_cumem.jsonl"
    step "torch/CuPy sort_anchor.py" "$L/sort_anchor.log" py 120 bench/anchors/sort_anchor.py
    jsonl "$L/sort_anchor.log" > "$D/sort_anchor.jsonl"
    py 30 - "$D/sort_cumem.jsonl" "$D/sort_anchor.jsonl" > "$D/sort_table.md" <<'PY'
import json, sys
rows, device = {}, "?"
for f in sys.argv[1:]:
    for line in open(f):
        if line.startswith("{"):
            r = json.loads(line); ms = r.get("ms", "failed")
            if "ratio" in r:   # (a sort variant timed interleaved with the default: its ratio to it)
                ms = f'{ms} ({r["ratio"]}x default {r["ms_default"]}{"" if r.get("ok", True) else ", WRONG"})'
            if "ms_events" in r:   # (the scans and the copy: also timed between events on the stream, as the anchors)
                ms = f'{ms} [events {r["ms_events"]}]'
            rows.setdefault((r["op"], r["n"]), {})[r["impl"]] = ms
            device = r.get("device", device)
print("| op | n | CuMem ms | torch ms | CuPy ms |\n|---|---|---:|---:|---:|")
for (op, n), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"| {op} | {n:.0e} | {v.get('cumem', '-')} | {v.get('torch', '-')} | {v.get('cupy', '-')} |")
PY
}

suite_overhead() {
    need_julia && need_lib || return
    have bench/julia/host_overhead.jl || return 0
    local r
    for r in 1 2; do
        if [ -n "${OVERHEAD_OLD:-}" ]; then
            step "host_overhead.jl, $OVERHEAD_OLD (before), round $r" "$L/overhead_before_$r.log" \
                env LD_LIBRARY_PATH="${JL_LDLP-${LD_LIBRARY_PATH-}}" LD_PRELOAD="${JL_PRELOAD-}" BUILD=before \
                timeout 240 julia --startup-file=no --project="$OVERHEAD_OLD" bench/julia/host_overhead.jl --reps 5
        fi
        step "host_overhead.jl (after), round $r" "$L/overhead_after_$r.log" jl 240 BUILD=after bench/julia/host_overhead.jl --reps 5
    done
    jsonl "$L"/overhead_*.log > "$D/overhead.jsonl"
}
suite_hotpath() {
    need_julia && need_lib || return
    local pool ex run
    : > "$D/engine_pair.txt"
    for pool in binned split expandable simple; do
        step "$pool: julia_bench.jl" "$L/julia_bench_$pool.log" jl 60 JULIA_CUDA_MEMORY_POOL=$pool bench/julia/julia_bench.jl
    done
    jsonl "$L"/julia_bench_*.log > "$D/julia_bench.jsonl"
    for pool in binned split; do
        step "$pool: julia_breakdown.jl" "$L/julia_breakdown_$pool.log" jl 60 JULIA_CUDA_MEMORY_POOL=$pool bench/julia/julia_breakdown.jl
    done
    jsonl "$L"/julia_breakdown_*.log > "$D/julia_breakdown.jsonl"
    # The engine's cache-hit pair (4 KiB, one shard) on this machine's CPU: examples/hotloop.rs on
    # `Engine` and examples/capi_hotloop.rs through the C functions, thread caches on and off,
    # 3 interleaved runs; glibc's malloc+free in the same process (cumem-bench pair --malloc).
    local tc
    for run in 1 2 3; do
        for pool in binned split expandable simple; do
            for ex in hotloop capi_hotloop; do
                [ -x "$KU/$ex" ] || continue
                for tc in 1 0; do
                    echo "$pool $ex thread_cache=$tc run $run: $(CUMEM_THREAD_CACHE=$tc JULIA_CUDA_MEMORY_POOL=$pool REPORT=1 \
                        N=${N:-10000000} timeout 60 "$KU/$ex" $pool 2>&1 | tail -1)" >> "$D/engine_pair.txt"
                done
            done
        done
        [ -x "$KU/cumem-bench" ] && timeout 60 "$KU/cumem-bench" pair --sizes 4KiB --malloc --pool binned,split --json \
            >> "$L/malloc_pair.log" 2>&1
    done
    jsonl "$L/malloc_pair.log" > "$D/malloc_pair.jsonl"
    [ -x "$KU/hotloop" ] || log "no hotloop/capi_hotloop in the kit's bench part: the engine pair is skipped"
}

suite_multigpu() {
    local n; n=$(ngpu)
    if [ "$n" -lt 2 ]; then log "multigpu: skipped ($n GPU)"; echo "skipped: $n GPU" > "$D/skipped.txt"; return; fi
    need_julia && need_lib || return
    { nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } > "$D/topology.txt" 2>&1
    local t
    for t in "$KU"/rust/multidevice; do
        [ -x "$t" ] && step "rust multidevice" "$L/rust_multidevice.log" env CUMEM_TEST_CUDA=1 timeout 300 "$t" --test-threads=1
    done
    step "julia multidevice_tests.jl" "$L/julia_multidevice.log" jl 400 JULIA_CUDA_MEMORY_LIMIT=4GiB test/devices/multidevice_tests.jl
    step "julia distributed_tests.jl" "$L/julia_distributed.log" jl 400 test/devices/distributed_tests.jl
    step "peer copy, CuMem" "$L/peer_cumem.log" jl 300 bench/julia/peer_copy.jl "${PEER_MIB:-256}" "${PEER_REPS:-20}"
    jsonl "$L/peer_cumem.log" > "$D/peer_cumem.jsonl"
    step "peer copy, PyTorch" "$L/peer_torch.log" py 300 bench/anchors/peer_copy_torch.py "${PEER_MIB:-256}" "${PEER_REPS:-20}"
    jsonl "$L/peer_torch.log" > "$D/peer_torch.jsonl"
    py 30 - "$D/peer_cumem.jsonl" "$D/peer_torch.jsonl" > "$D/peer_table.md" <<'PY'
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
if rows:
    print(f"Copies of {rows[0]['bytes'] >> 20} MiB ({rows[0]['device']}), medians, each ending with a synchronize\n")
print("| implementation | copy | median (ms) | GB/s |\n|---|---|---:|---:|")
for r in rows:
    print(f"| {r['impl']} | {r['what']} | {1000 * r['median_s']:.2f} | {r['GBps']:.1f} |")
PY
}

suite_reliability() {
    need_lib || return
    command -v cc >/dev/null 2>&1 || { log "no C compiler here: capi_stress.c skipped"; echo "skipped: no cc" > "$D/skipped.txt"; return; }
    step "build capi_stress" "$L/capi_stress_build.log" cc -O2 -pthread -Iinclude tests/c/capi_stress.c \
        -o "$KU/capi_stress" -L"$(dirname "$CUMEM_LIBRARY")" -lcumem -Wl,-rpath,"$(dirname "$CUMEM_LIBRARY")" || return
    step "capi_stress 4 threads" "$L/capi_stress.log" timeout 200 "$KU/capi_stress" 4 20000
    step "capi_stress 4 threads, injected faults" "$L/capi_stress_faults.log" \
        env CUMEM_FAULT=alloc:0.02,free:0.02,copy:0.01,stream:0.01,seed=5 timeout 200 "$KU/capi_stress" 4 20000
}

suite_first_result() {
    [ -f bench/julia/first_result.jl ] || [ -f bench/julia/compiler_translate.jl ] || { have bench/julia/first_result.jl; return 0; }
    need_julia && need_lib || return
    if have bench/julia/first_result.jl; then
        # ~18 fresh processes (6 rows, cold and warm, one untimed priming run each)
        # FR_ROWS (e.g. using,sort,ten): only those rows of first_result.jl (default: all)
        step "first_result.jl" "$L/first_result.log" jl 450 bench/julia/first_result.jl --reps "${REPS:-1}" \
            ${FR_ROWS:+--rows "$FR_ROWS"}
        jsonl "$L/first_result.log" > "$D/first_result.jsonl"
        if have bench/anchors/first_result_anchor.py; then
            step "first_result_anchor.py" "$L/first_result_anchor.log" py 120 bench/anchors/first_result_anchor.py --reps 2
            jsonl "$L/first_result_anchor.log" > "$D/first_result_anchor.jsonl"
        fi
    fi
    if have bench/julia/load_time.jl; then
        # where `using CuMem` goes: LOAD_REPS fresh processes (default 5), invalidations, what loading compiles
        step "load_time.jl" "$L/load_time.log" jl 90 bench/julia/load_time.jl --reps "${LOAD_REPS:-5}"
        jsonl "$L/load_time.log" > "$D/load_time.jsonl"
    fi
    if have bench/julia/compiler_translate.jl; then
        step "compiler_translate.jl" "$L/compiler_translate.log" jl 120 bench/julia/compiler_translate.jl
        jsonl "$L/compiler_translate.log" > "$D/compiler_translate.jsonl"
    fi
}

suite_sysimage() {
    need_julia && need_lib || return
    have bench/julia/first_result.jl && have julia/tools/sysimage.jl || return 0
    local img="$KU/cumem_sysimage.so" rows=${FR_ROWS:-ten,using} pkg rc
    rm -f "$img"
    # the package's rows meanwhile: they need no image, and the build keeps one core busy
    jl 200 bench/julia/first_result.jl --reps "${REPS:-2}" --cache warm --rows "$rows" > "$L/first_result_package.log" 2>&1 &
    pkg=$!
    # the image (its seconds, each step's: the workload traced, julia --output-o, cc)
    TAIL=4 step "CuMem.create_sysimage" "$L/create_sysimage.log" jl "${SYSIMAGE_BUILD_LIMIT:-420}" -e '
        using CuMem
        r = CuMem.create_sysimage(ARGS[1])
        println("{\"bench\":\"sysimage_build\",\"seconds\":", round(r.seconds; digits = 1),
                ",\"workload_s\":", round(r.step_seconds[1]; digits = 1), ",\"output_o_s\":", round(r.step_seconds[2]; digits = 1),
                ",\"link_s\":", round(r.step_seconds[3]; digits = 1), ",\"bytes\":", r.bytes,
                ",\"statements\":", r.statements, ",\"precompiled\":", r.precompiled, ",\"trees_kept\":", r.trees_kept,
                ",\"device\":\"", CuMem.device_name(), "\"}")' "$img"
    rc=$?
    wait "$pkg"
    local prc=$?
    log "first_result.jl without the image (beside the build): exit $prc"
    tail -n 4 "$L/first_result_package.log" | sed 's/^/    /' >&2
    [ $prc -eq 0 ] || status=1
    [ $rc -eq 0 ] || { jsonl "$L/first_result_package.log" > "$D/first_result_sysimage.jsonl"; return; }
    jsonl "$L/create_sysimage.log" > "$D/sysimage_build.jsonl"
    step "a process from the image" "$L/sysimage_check.log" jl 60 -J "$img" -e '
        t = @elapsed using CuMem
        x = CuArray(rand(Float32, 1000)); h = Array(x)
        Array(x .+ x) == h .+ h && sum(x) ≈ sum(h) && maximum(x) == maximum(h) || error("wrong values from the image")
        println("sysimage check: ok on ", CuMem.device_name(), ", stale: ", CuMem.sysimage_stale(), ", using ", t, " s")'
    step "first_result.jl with the image" "$L/first_result_image.log" jl 80 FR_SYSIMAGE="$img" bench/julia/first_result.jl \
        --reps "${REPS:-2}" --cache warm --rows "$rows"
    jsonl "$L/first_result_package.log" "$L/first_result_image.log" > "$D/first_result_sysimage.jsonl"
    py 20 - "$D/first_result_sysimage.jsonl" "$D/sysimage_build.jsonl" > "$D/sysimage.md" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
build = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
for b in build:
    print(f"image: {b['bytes'] / 2**20:.0f} MiB, built in {b['seconds']} s on {b['device']} "
          f"(workload {b['workload_s']} s, julia --output-o {b['output_o_s']} s, cc {b['link_s']} s); "
          f"{b['precompiled']} of {b['statements']} precompile statements compiled, {b['trees_kept']} trees kept\n")
keys = ["start_s", "start_cpu_s", "using_s", "total_s", "total_cpu_s", "bcast_s", "sum_s", "matmul_s", "sort_s", "qr_s",
        "maximum_dims_s", "cumsum_s", "findall_s", "rand_s", "mean_dims_s"]
print("| row | image | n | " + " | ".join(keys) + " |")
print("|---|---|---:|" + "---:|" * len(keys))
for row in sorted({r["row"] for r in rows}):
    for img in sorted({r["sysimage"] for r in rows}):
        rs = [r for r in rows if r["row"] == row and r["sysimage"] == img]
        if not rs:
            continue
        cells = [f"{statistics.median(r[k] for r in rs):.3f}" if all(k in r for r in rs) else "" for k in keys]
        print(f"| {row} | {img} | {len(rs)} | " + " | ".join(cells) + " |")
PYEOF
}

suite_kernels() {
    local f files=""
    for f in test/compute/device/*_tests.jl; do [ -f "$f" ] && files="$files $f"; done
    [ -n "$files" ] || { log "missing: test/compute/device/*_tests.jl"; echo "missing: test/compute/device/*_tests.jl" >> "$D/missing.txt"; }
    [ -n "$files" ] || [ -f bench/julia/kernel_bench.jl ] || { have bench/julia/kernel_bench.jl; return 0; }
    need_julia && need_lib || return
    for f in $files; do
        step "julia $f" "$L/$(basename "$f" .jl).log" jl 400 "$f"
    done
    if have bench/julia/kernel_bench.jl; then
        step "kernel_bench.jl" "$L/kernel_bench.log" jl 200 bench/julia/kernel_bench.jl
        jsonl "$L/kernel_bench.log" > "$D/kernel_bench.jsonl"
    fi
}

suite_cudajl() {
    have bench/julia/cudajl_suite.jl || return 0
    need_julia && need_lib || return
    # CUDAJL_ARGS: the script's options and files (e.g. `--kernels`, `--array`, `execution`)
    step "cudajl_suite.jl" "$L/cudajl_suite.log" jl "$(budget_of cudajl)" bench/julia/cudajl_suite.jl ${CUDAJL_ARGS:-}
    jsonl "$L/cudajl_suite.log" > "$D/cudajl_suite.jsonl"
}

suite_fuzz() {
    have test/fuzz/fuzz_tests.jl || return 0
    need_julia && need_lib || return
    # the regression cases, then FUZZ_N functions from the fixed seed and FUZZ_N from a new
    # one (printed), in one process; then each transcendental function alone (ulps.md)
    TAIL=14 step "fuzz (regressions, 2 x ${FUZZ_N:-40} functions)" "$L/fuzz_tests.log" \
        jl "${FUZZ_LIMIT:-110}" FUZZ_N="${FUZZ_N:-40}" FUZZ_OUT="$D/repro" test/fuzz/fuzz_tests.jl
    jsonl "$L/fuzz_tests.log" > "$D/fuzz.jsonl"
    step "ulps of each function alone" "$L/ulps.log" jl 35 test/fuzz/fuzz.jl --ulps --seed 1
    grep '^|' "$L/ulps.log" > "$D/ulps.md" || true
}

suite_fuzz_campaign() {
    have test/fuzz/campaign.sh || return 0
    need_julia && need_lib || return
    local mode=${FUZZ_MODE:-cuda} t0=$SECONDS
    step "precompile CuMem" "$L/precompile.log" jl 300 -e 'using CuMem'
    # (by default: what is left of the budget, less loading, the last function and the table)
    local secs=${FUZZ_SECONDS:-$(( ${SUITE_BUDGET:-$(budget_of fuzz-campaign)} - (SECONDS - t0) - 120 ))}
    # (every process stopped 20 s before the suite's end, so that the table is written)
    local deadline=$(( $(date +%s) + ${SUITE_BUDGET:-$(budget_of fuzz-campaign)} - (SECONDS - t0) - 20 ))
    # Julia with the bundle's environment; g++ (emu) with this machine's
    TAIL=6 step "fuzz campaign ($mode, ${FUZZ_PROCS:-$(nproc)} processes, $secs s each)" "$L/campaign.log" \
        env FUZZ_MODE="$mode" FUZZ_SECONDS="$secs" FUZZ_GRACE="${FUZZ_GRACE:-90}" FUZZ_DEADLINE="$deadline" FUZZ_OUT="$L/campaign" \
        CUMEM_EMU_LD_LIBRARY_PATH="${LD_LIBRARY_PATH-}" \
        JULIA="env LD_LIBRARY_PATH=${JL_LDLP-${LD_LIBRARY_PATH-}} LD_PRELOAD=${JL_PRELOAD-} julia --startup-file=no" \
        bash test/fuzz/campaign.sh
    cp "$L/campaign/campaign.jsonl" "$L/campaign/campaign.md" "$D/" 2>/dev/null
    if [ -d "$L/campaign/repro" ]; then
        mkdir -p "$D/repro"
        find "$L/campaign/repro" -name '*.jl' | head -n 200 | xargs -r cp -t "$D/repro"
    fi
}
# The test files of the CUDA suite (test/runtests.jl's jobs on CUMEM_DEVICE=cuda) that run
# kernels, with an environment where their job has one, longest first (seconds of a plain
# run on the 2-core CI machine: the order in which the sanitize suite starts them).
SANITIZE_SUITE="370:test/compute/broadcast/broadcast_tests.jl 170:test/compute/algorithms/arraylib_tests.jl
90:test/compute/device/kernel_cudajl_tests.jl 90:test/compute/reduce/mapreduce_tests.jl
60:test/compute/algorithms/sort_large_tests.jl 60:test/fuzz/fuzz_tests.jl 60:JULIA_NUM_THREADS=2:test/fuzz/threads_stress.jl
60:JULIA_NUM_THREADS=2:test/pooltests.jl 55:test/compute/algorithms/basefuncs_tests.jl 40:test/compute/random/random_tests.jl
30:test/compute/runtime/graphs_tests.jl 26:demo/demo.jl 25:test/compute/linalg/linalg_factor_tests.jl
22:test/compute/device/kernel_tests.jl 20:test/compute/broadcast/bcparity_tests.jl 20:test/compute/linalg/extras_tests.jl
19:JULIA_CUDA_MEMORY_LIMIT=4GiB:test/devices/multidevice_tests.jl 17:test/devices/distributed_tests.jl
16:test/compute/runtime/compute_tests.jl 15:test/compute/random/draws_tests.jl 12:test/compute/algorithms/indexing_tests.jl
9:CUMEM_PINNED_LIMIT=64MiB:JULIA_NUM_THREADS=2:test/memory/pinned_tests.jl 7:test/compute/linalg/linalg_tests.jl
5:test/compute/show_tests.jl 5:test/fuzz/sanitize_workload.jl"

# One (file, tool) job of the sanitize suite: `sanitize_one TOOL GPU SPEC` (SPEC: the
# list's cost:VAR=value:...:file); writes its log and one JSON line.
sanitize_one() {
    local t=$1 gpu=$2 spec=$3 f envs=() rest t0=$SECONDS rc n
    rest=${spec#*:}; f=${rest##*:}
    while [[ $rest == *:* ]]; do envs+=("${rest%%:*}"); rest=${rest#*:}; done
    local base; base=$(echo "${f%.jl}" | tr '/' '_')
    local lf="$L/${base}_$t.log"
    [ -f "$f" ] || { echo "{\"file\":\"$f\",\"tool\":\"$t\",\"errors\":null,\"exit\":null,\"seconds\":0,\"missing\":true}" > "$L/${base}_$t.json"; return; }
    # (no process outlives the suite: the limit is what is left before SANITIZE_DEADLINE)
    local lim=${SANITIZE_LIMIT:-420} left=$(( SANITIZE_DEADLINE - $(date +%s) ))
    [ "$left" -ge "$lim" ] || lim=$left
    if [ "$lim" -lt 30 ]; then
        echo "{\"file\":\"$f\",\"tool\":\"$t\",\"errors\":null,\"exit\":null,\"seconds\":0,\"not_run\":true}" > "$L/${base}_$t.json"; return
    fi
    # (SANITIZE_POOL: the pool of every file, e.g. `none`, where each array is a cuMemAlloc of
    # its own and memcheck sees an access past its end; default: the file's own)
    # (CUMEM_TEST_PROGRESS=1: files that read it print a line as each test set starts, so that
    # the log of a run stopped by the limit shows where it stood)
    env LD_LIBRARY_PATH="${JL_LDLP-${LD_LIBRARY_PATH-}}" LD_PRELOAD="${JL_PRELOAD-}" CUDA_VISIBLE_DEVICES="$gpu" \
        CUMEM_TEST_PROGRESS=1 ${SANITIZE_POOL:+JULIA_CUDA_MEMORY_POOL=$SANITIZE_POOL} "${envs[@]}" \
        timeout -k 10 "$lim" "$cs" --tool "$t" --target-processes all --error-exitcode 97 \
        --print-limit 100 ${SANITIZE_OPTS:-} julia --startup-file=no --project=. "$f" > "$lf" 2>&1
    rc=$?
    # memcheck, synccheck and initcheck end with "ERROR SUMMARY: N errors"; racecheck with
    # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)": its errors are E
    n=$(grep -Eo 'ERROR SUMMARY: [0-9]+|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+' "$lf" | grep -Eo '[0-9]+$' | awk '{s+=$1} END {print (NR ? s : "null")}')
    local tests; tests=$(grep -E '^Test Summary|^[^|]+\| +[0-9]+' "$lf" | tail -1 | tr -s ' ' | sed 's/"//g')
    # failing driver calls (a test's deliberate bad input among them) apart from the kernels' errors
    local api; api=$(grep -c 'Program hit CUDA_ERROR' "$lf")
    local calls; calls=$(grep -Eo 'Program hit CUDA_ERROR_[A-Z_]+ \(error [0-9]+\) (due to "[^"]*" )?on CUDA API call to [A-Za-z0-9_]+' "$lf" \
        | sed -E 's/Program hit (CUDA_ERROR_[A-Z_]+).*call to ([A-Za-z0-9_]+)/\2: \1/' | sort | uniq -c | sort -rn | head -4 \
        | awk '{c=$1; $1=""; printf "%s%s x%d", (NR>1?"; ":""), substr($0,2), c}')
    printf '{"file":"%s","tool":"%s","gpu":"%s","errors":%s,"api_errors":%d,"api_calls":"%s","exit":%d,"seconds":%d,"tests":"%s"}\n' \
        "$f" "$t" "$gpu" "$n" "$api" "$calls" "$rc" $((SECONDS - t0)) "$tests" > "$L/${base}_$t.json"
}
export -f sanitize_one

# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over the CUDA suite's
# kernel-running test files: one process per file and tool, SANITIZE_PROCS at once (default:
# the CPU count, at most 24), spread over the GPUs (CUDA_VISIBLE_DEVICES), longest first, each
# within SANITIZE_LIMIT seconds (default 420); the error summary of each is tabulated
# (sanitize.md, sanitize.jsonl: file, tool, errors, exit, seconds).
suite_sanitize() {
    need_julia && need_lib || return
    cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
    [ -x "$cs" ] || { log "no compute-sanitizer"; status=1; return; }
    local specs=() s f t
    if [ -n "${SANITIZE_TESTS:-}" ]; then
        for f in $SANITIZE_TESTS; do specs+=("0:$f"); done
    else
        for s in $SANITIZE_SUITE; do specs+=("$s"); done
    fi
    local tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
    # the GPUs to spread over: CUDA_VISIBLE_DEVICES's when set (a lane kept off a GPU that
    # another lane times on), else every GPU
    local gl; read -r -a gl <<< "$(gpu_list)"
    local g=${#gl[@]}
    # (the default is capped at 24; a SANITIZE_PROCS given is taken as it is, e.g. 36 on
    # the four-GPU machine's 64 cores)
    local procs=${SANITIZE_PROCS:-$(nproc)}; [ -n "${SANITIZE_PROCS:-}" ] || [ "$procs" -le 24 ] || procs=24
    # each process ends by the suite's budget (what the run has left), less the table's time
    SANITIZE_DEADLINE=$(( $(date +%s) + ${SUITE_BUDGET:-$(budget_of sanitize)} - 25 ))
    export cs L SANITIZE_LIMIT SANITIZE_POOL SANITIZE_OPTS SANITIZE_DEADLINE JL_LDLP JL_PRELOAD
    # the package precompiled once, outside the tool, before processes start side by side
    step "precompile CuMem" "$L/precompile.log" jl 300 -e 'using CuMem'
    log "sanitize: ${#specs[@]} files x tools ($tools), $procs processes at once over $g GPU(s)"
    # the job list: longest file first, its tools one after another; GPUs in turn
    local i=0
    for s in "${specs[@]}"; do
        for t in $tools; do echo "$t ${gl[$((i % g))]} $s"; i=$((i + 1)); done
    done | xargs -P "$procs" -L 1 bash -c 'sanitize_one "$0" "$1" "$2"'
    cat "$L"/*.json > "$D/sanitize.jsonl" 2>/dev/null
    py 30 - "$D/sanitize.jsonl" "$tools" > "$D/sanitize.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tools = sys.argv[2].split()
by = {}
for r in rows: by.setdefault(r["file"], {})[r["tool"]] = r
cell = lambda r: "-" if r is None else ("missing" if r.get("missing") else "not run (time)" if r.get("not_run") else
    f"{'?' if r['errors'] is None else r['errors']}{' (' + str(r['api_errors']) + ' API)' if r.get('api_errors') else ''} (exit {r['exit']}, {r['seconds']} s)")
print("Errors reported by each tool (ERROR SUMMARY; of them failing driver calls: API), the process's exit status "
      "(97: the tool found errors; 124: SANITIZE_LIMIT) and seconds.\n")
print("| file | " + " | ".join(tools) + " |\n|---|" + "---|" * len(tools))
for f, d in by.items():
    print(f"| {f} | " + " | ".join(cell(d.get(t)) for t in tools) + " |")
tot = {t: sum((by[f].get(t) or {}).get("errors") or 0 for f in by) for t in tools}
bad = [f"{r['file']} {r['tool']}" for r in rows if r.get("errors") != 0 or r.get("exit") != 0]
print("\n| all files | " + " | ".join(str(tot[t]) for t in tools) + " |")
api = sorted({c for r in rows for c in (r.get("api_calls") or "").split("; ") if c})
if api:
    print("\nFailing driver calls (counted among the errors; a test's deliberate bad input is one): " + "; ".join(api[:12]))
print(f"\n{len(rows)} runs; not clean (errors, no summary, or a non-zero exit): {len(bad)}" + (": " + "; ".join(bad) if bad else ""))
PY
    grep -q 'not clean (errors, no summary, or a non-zero exit): 0$' "$D/sanitize.md" || status=1
    tail -n 3 "$D/sanitize.md" | tee -a "$L/run.log" >&2
}

suite_profile() {
    have bench/julia/profile_ops.jl || return 0
    need_julia && need_lib || return
    local ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
    [ -x "$ncu" ] || { log "no ncu"; status=1; return; }
    local op
    # one ncu process per operation: the report of each is a text file of its own
    for op in ${PROFILE_OPS:-sort_f32 cumsum_f32}; do   # (commas already spaces)
        step "ncu $op" "$L/ncu_${op//:/_}.log" env LD_LIBRARY_PATH="${JL_LDLP-}" LD_PRELOAD="${JL_PRELOAD-}" \
            timeout 240 "$ncu" --profile-from-start off --set "${PROFILE_SET:-full}" ${PROFILE_OPTS:-} --print-units base \
            julia --startup-file=no --project=. bench/julia/profile_ops.jl "$op"
        cp "$L/ncu_${op//:/_}.log" "$D/ncu_${op//:/_}.txt"
    done
}

suite_graphs() {
    have bench/julia/graph_bench.jl || return 0
    need_julia && need_lib || return
    step "CuMem graph_bench.jl" "$L/graph_cumem.log" jl 100 bench/julia/graph_bench.jl
    jsonl "$L/graph_cumem.log" > "$D/graph_cumem.jsonl"
    step "PyTorch graph_anchor.py" "$L/graph_torch.log" py 45 bench/anchors/graph_anchor.py
    jsonl "$L/graph_torch.log" > "$D/graph_torch.jsonl"
    py 30 - "$D/graph_cumem.jsonl" "$D/graph_torch.jsonl" > "$D/graph_table.md" <<'PY'
import json, sys
rows, checks = {}, []
for f in sys.argv[1:]:
    for line in open(f):
        if line.startswith("{"):
            r = json.loads(line)
            if "mode" in r: rows[(r["impl"], r["mode"])] = r
            else: checks.append(r)
print("| step (MLP 64-128-10, batch 64, SGD) | µs per step (median, synchronized) | launch only µs | graph nodes (kernels, memcpy, memset, other) | edges | depth | programmatic edges | kernels with PDL |\n|---|---:|---:|---|---:|---:|---:|---:|")
for k in [("cumem", "eager"), ("cumem", "eager_nopdl"), ("cumem", "graph"), ("cumem", "graph_nopdl"), ("cumem", "graph_chain"), ("cumem", "eager_cublas"), ("cumem", "graph_cublas"), ("torch", "eager"), ("torch", "graph")]:
    r = rows.get(k)
    if r:
        shape = f"{r['nodes']} ({r['kernels']}, {r['memcpys']}, {r['memsets']}, {r['others']}) | {r['edges']} | {r['depth']} | {r.get('programmatic', '-')}" if "nodes" in r else "- | - | - | -"
        pdl = f"{r['pdl_kernels']} of {r['loaded_kernels']}" if "pdl_kernels" in r else "-"
        print(f"| {k[0]} {k[1]} | {r['us']} | {r.get('us_launch_only', '-')} | {shape} | {pdl} |")
cg, tg, ce = rows.get(("cumem", "graph")), rows.get(("torch", "graph")), rows.get(("cumem", "eager"))
if cg and tg and ce:
    print(f"\nCuMem graph / PyTorch graph: {cg['us'] / tg['us']:.2f} (launch only {cg['us_launch_only'] / tg['us_launch_only']:.2f}); CuMem graph / CuMem eager: {cg['us'] / ce['us']:.3f}")
    ok = cg['us'] <= 0.5 * tg['us'] and cg['us'] <= 0.1 * ce['us']
    cn, en = rows.get(("cumem", "graph_nopdl")), rows.get(("cumem", "eager_nopdl"))
    if cn and en:
        print(f"\nprogrammatic dependent launch: graph {cg['us']} µs against {cn['us']} µs without ({cg['us'] / cn['us']:.3f}), launch only {cg['us_launch_only']} against {cn['us_launch_only']}; eager {ce['us']} against {en['us']} ({ce['us'] / en['us']:.3f})")
    print(f"\ntarget (graph <= 0.5 x PyTorch graph and <= 0.1 x CuMem eager): {'met' if ok else 'NOT met'}")
for c in checks:
    print("\n" + ", ".join(f"{k} {v}" for k, v in c.items() if k != "device"))
PY
}

# ---------------------------------------------------------------- one suite, in its own process
if [ "${1:-}" = --inner ]; then
    s=$2; D=$3; L=$4
    setup_kit
    "suite_${s//-/_}"
    exit $status
fi

# ---------------------------------------------------------------- lanes side by side
# --lanes 'NAME: [VAR=value ...] SUITE...' ...: each lane a run of this script of its own,
# all at once (on one GPU: correctness suites beside each other; keep timed suites alone),
# within DEADLINE seconds of the call's start (default 570) whatever each lane's budgets say:
# every lane gets RUN_LIMIT = what is left, so a suite is cut at the deadline rather than
# the call at 600 s (a lane's suites start no later than that and end by it). The lanes'
# summaries, results and logs are packed into the usual three files under $OUT.
if [ "${1:-}" = --lanes ]; then
    shift
    for spec in "$@"; do      # (a spec splits on spaces: quotes would reach the suite as text)
        case $spec in *\"*|*\'*) echo "lane '$spec': no quotes in a lane; a list takes commas (TESTS=a.jl,b.jl)" >&2; exit 2 ;; esac
    done
    : "${OUT:?set OUT to the output folder}"
    DEADLINE=${DEADLINE:-570}
    LD=$(mktemp -d /tmp/cumem-lanes.XXXXXX)
    mkdir -p "$OUT"
    # the kit unpacked once, before the lanes (each would otherwise unpack it at the same time)
    OUT="$LD/.warm" TESTS=test/layers_tests.jl bash "$ROOT/bench/gpu/run.sh" tests > "$LD/warm-up.txt" 2>&1
    pids=()
    for spec in "$@"; do
        name=${spec%%:*}; envs=(); suites=()
        read -r -a words <<< "${spec#*:}"
        for w in "${words[@]}"; do if [[ $w == [A-Z]*=* ]]; then envs+=("$w"); else suites+=("$w"); fi; done
        left=$((DEADLINE - SECONDS - 25))        # (packing this lane and all lanes)
        echo "[$(date -u +%T)] lane $name: ${envs[*]} ${suites[*]} (RUN_LIMIT $left s)" >&2
        env OUT="$LD/$name" "${envs[@]}" RUN_LIMIT=$left bash "$ROOT/bench/gpu/run.sh" "${suites[@]}" > "$LD/$name.txt" 2>&1 &
        pids+=($!)
    done
    overall=0
    for p in "${pids[@]}"; do wait "$p" || overall=1; done
    { echo "# CuMem GPU run: lanes ($*)"
      for d in "$LD"/*/; do
          n=$(basename "$d"); [ -f "$d/summary.md" ] || continue
          printf '\n# lane %s\n\n' "$n"; cat "$d/summary.md"
      done; } > "$OUT/summary.md"
    mkdir -p "$LD/pack/results" "$LD/pack/logs"
    for d in "$LD"/*/; do
        n=$(basename "$d"); [ "$n" = pack ] && continue
        mkdir -p "$LD/pack/results/$n" "$LD/pack/logs/$n"
        [ -f "$d/results.tar.xz" ] && tar -C "$LD/pack/results/$n" -xJf "$d/results.tar.xz"
        [ -f "$d/logs.tar.xz" ] && tar -C "$LD/pack/logs/$n" -xJf "$d/logs.tar.xz"
        cp "$LD/$n.txt" "$LD/pack/logs/$n/" 2>/dev/null || true
    done
    cp "$LD/warm-up.txt" "$LD/pack/logs/" 2>/dev/null || true
    tar -C "$LD/pack/results" -cJf "$OUT/results.tar.xz" .
    tar -C "$LD/pack/logs" -cJf "$OUT/logs.tar.xz" .
    rm -rf "$LD"
    grep -E '^# lane|^\| [a-z-]+ \|' "$OUT/summary.md" >&2
    echo "lanes: $SECONDS s" >&2
    exit $overall
fi

# ---------------------------------------------------------------- the run
: "${OUT:?set OUT to the output folder}"
[ $# -gt 0 ] || { echo "usage: OUT=dir bash bench/gpu/run.sh SUITE... (bash bench/gpu/run.sh --list)" >&2; exit 2; }
SUITES=""
for a in "$@"; do
    case $a in
        all) SUITES="$SUITES $ALL" ;; bench) SUITES="$SUITES $BENCH" ;;
        *) if grep -qw -- "$a" <<<"$ALL"; then SUITES="$SUITES $a"; else echo "unknown suite: $a ($ALL)" >&2; exit 2; fi ;;
    esac
done
mkdir -p "$OUT"
STAGE=$(mktemp -d /tmp/cumem-run.XXXXXX)
mkdir -p "$STAGE/results" "$STAGE/logs"
START=$SECONDS
LIMIT=${RUN_LIMIT:-570}
SUMMARY="$STAGE/summary.md"
setup_kit
# The tree's commit: the "tree" line that bench/gpu/kit.sh writes first into $KIT/manifest.txt
# at every call (`kit.sh sizes` refreshes it in seconds; the GPU machine has no git repository
# of this tree, and a git command there answers for whatever repository it finds, if any), with
# git's where this folder is a repository's root and its HEAD differs; git's alone without that
# line (a run without a kit).
tree_commit() {
    local top g="" rec
    top=$(git rev-parse --show-toplevel 2>/dev/null)
    if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$(pwd -P)" ]; then
        g="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    fi
    rec=$(sed -n 's/^tree \([^ ]*\) on \(.*\)$/\1 (recorded by kit.sh at \2)/p' "$KIT/manifest.txt" 2>/dev/null | head -1)
    if [ -n "$rec" ]; then
        if [ -n "$g" ] && [ "${rec%%[+ ]*}" != "${g%% *}" ]; then echo "$rec; git here: $g"; else echo "$rec"; fi
    else
        echo "${g:-? (no git repository here and no tree line in $KIT/manifest.txt: run bench/gpu/kit.sh sizes before the call)}"
    fi
}
{
    echo "# CuMem GPU run: $*"
    echo
    echo "- date: $(date -u +%FT%TZ); commit: $(tree_commit)"
    gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | paste -sd ';' -)
    echo "- GPU: ${gpus:-none}"
    echo "- CUDA: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -o 'V[0-9.]*' || echo '?'); julia: $(julia --version 2>/dev/null || echo none); python: $(env -u LD_PRELOAD python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>/dev/null || echo '?')"
    manifest=$(paste -sd ';' - < "$KIT/manifest.txt" 2>/dev/null)
    echo "- kit: ${manifest:-no $KIT/manifest.txt}"
    echo
    echo "| suite | exit | seconds | budget |"
    echo "|---|---:|---:|---:|"
} > "$SUMMARY"
overall=0
for s in $SUITES; do
    D="$STAGE/results/$s"; L="$STAGE/logs/$s"; mkdir -p "$D" "$L"
    b=$(budget_of "$s")
    left=$((LIMIT - (SECONDS - START)))
    if [ "$left" -lt 30 ]; then
        echo "| $s | not run (time) | 0 | $b |" >> "$SUMMARY"; overall=1; continue
    fi
    [ "$b" -le "$left" ] || b=$left
    echo "[$(date -u +%T)] == $s (budget $b s)" >&2
    t0=$SECONDS
    SUITE_BUDGET=$b timeout -k 5 "$b" bash "$ROOT/bench/gpu/run.sh" --inner "$s" "$D" "$L"
    rc=$?
    note=""
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && note=" (budget)"
    [ -s "$D/missing.txt" ] && note="$note (missing: $(sed 's/^missing: //' "$D/missing.txt" | paste -sd, -))"
    echo "| $s | $rc$note | $((SECONDS - t0)) | $b |" >> "$SUMMARY"
    [ $rc -eq 0 ] || overall=1
done
{
    for s in $SUITES; do
        for f in "$STAGE/results/$s"/*.md "$STAGE/results/$s"/*.txt; do
            [ -s "$f" ] || continue
            printf '\n## %s: %s\n\n' "$s" "$(basename "$f")"
            case $f in *.txt) echo '```'; head -n 60 "$f"; echo '```' ;; *) cat "$f" ;; esac
        done
        if [ -s "$STAGE/logs/$s/run.log" ]; then
            printf '\n## %s: run.log (last 25 lines)\n\n```\n' "$s"; tail -n 25 "$STAGE/logs/$s/run.log"; echo '```'
        fi
    done
} >> "$SUMMARY"
cp "$SUMMARY" "$OUT/summary.md"
tar -C "$STAGE/results" -cJf "$OUT/results.tar.xz" . 2>/dev/null
tar -C "$STAGE/logs" -cJf "$OUT/logs.tar.xz" . 2>/dev/null
rm -rf "$STAGE"
cat "$OUT/summary.md" | sed -n '1,/^$/p;/^| suite/,/^$/p' >&2
exit $overall

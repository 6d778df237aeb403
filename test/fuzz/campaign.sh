#!/usr/bin/env bash
# A campaign of the differential fuzzer (test/fuzz/fuzz.jl): FUZZ_PROCS processes side by
# side, process i with seed FUZZ_SEED + i, each starting new functions for FUZZ_SECONDS
# seconds after its loading (the loading is paid once per process), then one table of the
# totals. From the repository root:
#
#   FUZZ_MODE=host|emu|cuda FUZZ_PROCS=P FUZZ_SECONDS=S [FUZZ_SEED=N] [FUZZ_OUT=dir] \
#       bash test/fuzz/campaign.sh
#
# FUZZ_MODE: host (CUMEM_DEVICE=host: every kernel generated and, with libnvrtc, compiled
#   to PTX; Base computes the elements), emu (CUMEM_DEVICE=host and every kernel compiled
#   by g++ and run on CPU threads, CUMEM_EMU_OPT default -O0), cuda (CUMEM_DEVICE=cuda:
#   the GPU runs them; with several GPUs process i gets CUDA_VISIBLE_DEVICES=i mod GPUs);
# FUZZ_PROCS (default: the CPU count), FUZZ_SECONDS (default 60), FUZZ_SEED (default: from
#   the clock; printed), FUZZ_N (functions per process at most, default 0: no limit),
#   FUZZ_LEN (elements per input, default 24), FUZZ_OUT (default fuzz-campaign/): each
#   process's log proc_<i>.log, reproducers in repro/, campaign.jsonl (one JSON line per
#   process, then a line "total"), campaign.md (the table). JULIA: the command that runs
#   Julia (default: julia on PATH, else .julia-local/bin/julia); FUZZ_JULIA_OPTS: Julia's
#   options for the fuzzer (default -O1, as CI's host jobs: Julia's own code generation is a
#   quarter of a function's cost at -O2, a good part of it saved at -O1; the kernels are
#   NVRTC's or g++'s, and Julia's semantics, Base's results, are the same at every level).
#   FUZZ_GRACE (default 240):
#   seconds a process may run past FUZZ_SECONDS (loading, the last function) before
#   `timeout` stops it; FUZZ_DEADLINE (seconds since the epoch): no process runs past it.
#   A process stopped that way keeps the counts of the functions it finished ("stopped").
# Exit status 0 when every process printed its summary and nothing disagreed (a process
# that died without its summary counts as a crash).
set -uo pipefail
MODE=${FUZZ_MODE:-host}
case $MODE in host|emu|cuda) ;; *) echo "FUZZ_MODE is host, emu or cuda (not $MODE)" >&2; exit 2 ;; esac
PROCS=${FUZZ_PROCS:-$(nproc)}
SECS=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-$(( $(date +%s%N) % 1000000000 ))}
OUTD=${FUZZ_OUT:-fuzz-campaign}
if [ -z "${JULIA:-}" ]; then
    if command -v julia >/dev/null 2>&1; then JULIA="julia --startup-file=no"; else JULIA=".julia-local/bin/julia --startup-file=no"; fi
fi
mkdir -p "$OUTD/repro"
if [ "$MODE" = emu ] && ! echo '_Float16 h;' | env ${CUMEM_EMU_LD_LIBRARY_PATH+LD_LIBRARY_PATH="$CUMEM_EMU_LD_LIBRARY_PATH"} \
        g++ -x c++ -std=c++20 -fsyntax-only - 2>/dev/null; then
    echo "campaign: FUZZ_MODE=emu needs g++ with C++20 and _Float16 (GCC 12 or later on x86-64)" >&2
    exit 2
fi
# the GPUs (cuda mode): CUDA_VISIBLE_DEVICES's list when set, else every GPU
gpus=(0)
if [ "$MODE" = cuda ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then read -r -a gpus <<< "${CUDA_VISIBLE_DEVICES//,/ }"
    else n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$n" -ge 1 ] || n=1; read -r -a gpus <<< "$(seq -s ' ' 0 $((n - 1)))"; fi
fi
ngpu=${#gpus[@]}
echo "campaign: mode $MODE, $PROCS processes, seeds $((SEED + 1))..$((SEED + PROCS)) (FUZZ_SEED=$SEED), $SECS s each after loading"
pids=()
for i in $(seq 1 "$PROCS"); do
    envs=(CUMEM_DEVICE=host)
    fmode=host
    case $MODE in
        emu) fmode=emu; envs+=(CUMEM_EMU_OPT="${CUMEM_EMU_OPT:--O0}") ;;
        cuda) envs=(CUMEM_DEVICE=cuda)
              envs+=(CUDA_VISIBLE_DEVICES=${gpus[$(( (i - 1) % ngpu ))]}) ;;
    esac
    # the outer limit: the fuzzing time, the loading, and one slow function at the end; no
    # later than FUZZ_DEADLINE (seconds since the epoch) where it is given
    lim=$((SECS + ${FUZZ_GRACE:-240}))
    if [ -n "${FUZZ_DEADLINE:-}" ] && [ $((FUZZ_DEADLINE - $(date +%s))) -lt "$lim" ]; then lim=$((FUZZ_DEADLINE - $(date +%s))); fi
    [ "$lim" -ge 10 ] || lim=10
    env "${envs[@]}" timeout "$lim" $JULIA ${FUZZ_JULIA_OPTS--O1} --project=. test/fuzz/fuzz.jl --mode "$fmode" \
        --seed $((SEED + i)) --n "${FUZZ_N:-0}" --seconds "$SECS" --len "${FUZZ_LEN:-24}" --quiet --profile --partial \
        --out "$OUTD/repro" > "$OUTD/proc_$i.log" 2>&1 &
    pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
# one line per process (its summary; the last partial one, with "stopped": 1, when the outer
# limit stopped it during a function, or "crashes" one more when it died otherwise; a crash
# record when it printed none), then the total
: > "$OUTD/campaign.jsonl"
for i in $(seq 1 "$PROCS"); do
    line=$(grep -h '^{"mode"' "$OUTD/proc_$i.log" | tail -1)
    rc=${rcs[$((i - 1))]}
    if [ -z "$line" ]; then
        line="{\"mode\":\"$MODE\",\"seed\":$((SEED + i)),\"functions\":0,\"checks\":0,\"wrong_values\":0,\"exception_mismatches\":0,\"crashes\":1,\"refused\":0,\"seconds\":0,\"startup_s\":0,\"no_summary_exit\":$rc}"
    elif [[ $line == *'"partial":true'* ]]; then
        if [ "$rc" -eq 124 ]; then
            line="${line%\}},\"stopped\":1,\"exit\":$rc}"
        else
            c=$(echo "$line" | sed -E 's/.*"crashes":([0-9]+).*/\1/')
            line="$(echo "${line%\}}" | sed -E "s/\"crashes\":[0-9]+/\"crashes\":$((c + 1))/"),\"exit\":$rc}"
        fi
    fi
    echo "$line" >> "$OUTD/campaign.jsonl"
done
awk -v mode="$MODE" -v procs="$PROCS" -v secs="$SECS" -v seed="$SEED" '
    function num(k,   m) { return match($0, "\"" k "\":[0-9.]+") ? substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3) + 0 : 0 }
    { f += num("functions"); c += num("checks"); w += num("wrong_values"); x += num("exception_mismatches")
      cr += num("crashes"); r += num("refused"); bm += num("base_miscompiled"); s += num("seconds"); cpu += num("cpu_s"); st += num("startup_s"); sp += num("stopped") }
    END {
        printf "{\"total\":true,\"mode\":\"%s\",\"processes\":%d,\"seeds\":\"%d..%d\",\"seconds_each\":%s,\"functions\":%d,\"checks\":%d,\"wrong_values\":%d,\"exception_mismatches\":%d,\"crashes\":%d,\"refused\":%d,\"stopped\":%d,\"functions_per_s_per_process\":%.3f,\"cpu_s_per_function\":%.2f,\"mean_startup_s\":%.1f,\"base_miscompiled\":%d}\n",
            mode, procs, seed + 1, seed + procs, secs, f, c, w, x, cr, r, sp, (s > 0 ? f / s : 0), (f > 0 ? cpu / f : 0), st / NR, bm
    }' "$OUTD/campaign.jsonl" > "$OUTD/total.json"
cat "$OUTD/total.json" >> "$OUTD/campaign.jsonl"
{
    echo "| mode | processes | seeds | functions | checks | wrong values | exception mismatches | crashes | refused | stopped by the limit | functions/s per process | CPU s per function | mean startup (s) | Base miscompiled |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk '{ gsub(/[{}"]/, ""); n = split($0, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, ":"); v[p[1]] = p[2] }
           printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v["mode"], v["processes"], v["seeds"], v["functions"],
               v["checks"], v["wrong_values"], v["exception_mismatches"], v["crashes"], v["refused"], v["stopped"], v["functions_per_s_per_process"],
               v["cpu_s_per_function"], v["mean_startup_s"], v["base_miscompiled"] }' "$OUTD/total.json"
} > "$OUTD/campaign.md"
cat "$OUTD/campaign.md"
for f in "$OUTD"/repro/inflight_*.jl; do [ -f "$f" ] && echo "a process died while running the function in $f"; done
nrep=$(find "$OUTD/repro" -name 'fuzz_*.jl' | wc -l)
[ "$nrep" -eq 0 ] || echo "reproducers: $nrep in $OUTD/repro (refusals included)"
grep -q '"wrong_values":0,"exception_mismatches":0,"crashes":0,' "$OUTD/total.json"

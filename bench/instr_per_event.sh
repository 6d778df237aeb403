#!/usr/bin/env bash
# Warm instructions per event of cumem-bench replay, by callgrind (where wall time is noise).
#
#   bench/instr_per_event.sh POOLS TRACE...   (POOLS: comma list, e.g. binned,expandable)
#
# For each trace and pool: two callgrind runs of `cumem-bench replay --device host` with 2
# and 6 passes (the expandable pool with `--host-capacity 16GiB`: valgrind cannot reserve
# its default address space; the others with the default 64 GiB, as binned needs more
# than 16 GiB for gpt2_train); the difference of their instruction counts
# over 4 × the trace's events is the warm passes' instructions per event (trace loading,
# the cold pass and the engine's set-up cancel out). Prints one JSON object per line: the
# replay row of the 6-pass run (device calls per warm pass, reserved ÷ live) with
# "instr_per_event_warm" added. Needs valgrind and target/release/cumem-bench.
#
# SIM=1: cachegrind with its cache and branch simulation instead of callgrind (the same
# instruction counts), adding per warm event "branch_misses_per_event_warm" (conditional
# branches mispredicted), "d1_read_misses_per_event_warm" and "d1_write_misses_per_event_warm"
# (first-level data cache; cachegrind models this machine's caches). PASSES="LO HI" sets
# the two runs' passes (default "2 6"; the warm passes are HI − LO).
set -euo pipefail
pools=$1; shift
bin=${CUMEM_BENCH:-target/release/cumem-bench}
read -r lo hi <<< "${PASSES:-2 6}"
tool=(--tool=callgrind); out=--callgrind-out-file
[ "${SIM:-0}" = 1 ] && { tool=(--tool=cachegrind --cache-sim=yes --branch-sim=yes); out=--cachegrind-out-file; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for t in "$@"; do
    for p in ${pools//,/ }; do
        cap=()
        [ "$p" = expandable ] && cap=(--host-capacity 16GiB)
        for n in "$lo" "$hi"; do
            valgrind "${tool[@]}" "$out=$tmp/cg.$n" "$bin" replay "$t" --pool "$p" \
                --device host "${cap[@]}" --passes "$n" --json > "$tmp/row.$n" 2> "$tmp/err.$n"
        done
        python3 - "$tmp" "$lo" "$hi" <<'PY'
import json, sys
tmp, lo, hi = sys.argv[1], sys.argv[2], sys.argv[3]
def summary(n):
    events = None
    for line in open(f"{tmp}/cg.{n}"):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            return dict(zip(events, map(int, line.split()[1:])))
a, b = summary(lo), summary(hi)
row = json.loads(open(f"{tmp}/row.{hi}").readline())
warm = (int(hi) - int(lo)) * row["events"]
per = lambda e: round((b[e] - a[e]) / warm, 2)
row["instr_per_event_warm"] = round((b["Ir"] - a["Ir"]) / warm, 1)
if "Bcm" in a:
    row["branch_misses_per_event_warm"] = per("Bcm")
    row["d1_read_misses_per_event_warm"] = per("D1mr")
    row["d1_write_misses_per_event_warm"] = per("D1mw")
for k in ("ns_per_event_warm", "ns_per_event_cold"):
    row.pop(k, None)  # host-device ns under valgrind say nothing
print(json.dumps(row), flush=True)
PY
    done
done

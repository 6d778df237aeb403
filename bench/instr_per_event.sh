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
set -euo pipefail
pools=$1; shift
bin=${CUMEM_BENCH:-target/release/cumem-bench}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for t in "$@"; do
    for p in ${pools//,/ }; do
        cap=()
        [ "$p" = expandable ] && cap=(--host-capacity 16GiB)
        for n in 2 6; do
            valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n" "$bin" replay "$t" --pool "$p" \
                --device host "${cap[@]}" --passes "$n" --json > "$tmp/row.$n" 2> "$tmp/err.$n"
        done
        i2=$(sed -n 's/^summary: //p' "$tmp/cg.2"); i6=$(sed -n 's/^summary: //p' "$tmp/cg.6")
        python3 - "$tmp/row.6" "$i2" "$i6" <<'PY'
import json, sys
row = json.loads(open(sys.argv[1]).readline())
row["instr_per_event_warm"] = round((int(sys.argv[3]) - int(sys.argv[2])) / (4 * row["events"]), 1)
for k in ("ns_per_event_warm", "ns_per_event_cold"):
    row.pop(k, None)  # host-device ns under valgrind say nothing
print(json.dumps(row), flush=True)
PY
    done
done

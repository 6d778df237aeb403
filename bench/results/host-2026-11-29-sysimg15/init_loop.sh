#!/bin/bash
# init_loop.sh <label> <root> <depot> <n> <out.jsonl>: n runs of init_repro.jl under --output-o
label=$1; root=$2; depot=$3; n=$4; out=$5
here=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 1 $n); do
    log=$(mktemp)
    s=$(date +%s.%N)
    JULIA_DEPOT_PATH=$depot nice -n 5 "$JULIA" --startup-file=no --cpu-target=native --project="$root" -J "$BASE" \
        --output-o="${TMPDIR:-/tmp}/init_repro_$label.o" "$here/init_repro.jl" > "$log" 2>&1
    rc=$?
    e=$(date +%s.%N)
    sym=$(grep -ao 'Symbol "[^"]*"' "$log" | head -1 | sed 's/Symbol "\(.*\)"/\1/')
    ok=false; grep -q INIT_OK "$log" && [ $rc = 0 ] && ok=true
    printf '{"label":"%s","run":%d,"ok":%s,"rc":%d,"abort":%s,"seconds":%.1f}\n' "$label" "$i" "$ok" "$rc" \
        "$( [ -n "$sym" ] && echo "\"$sym\"" || echo null)" "$(echo "$e - $s" | bc)" | tee -a "$out"
    [ $ok = false ] && [ -z "$sym" ] && cp "$log" "$out.$label.$i.log"
    rm -f "$log"
done

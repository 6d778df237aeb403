#!/bin/bash
# Alternates step-2 runs of the code before the fix (BEFORE_ROOT) and after it (AFTER_ROOT),
# one julia --output-o at a time, until STOP_AT (date +%s) or ROUNDS rounds; each tree has its
# own depot (its precompiled CuMem) and its own step-1 trace, recorded once.
#   BEFORE_ROOT=.. AFTER_ROOT=.. BEFORE_DEPOT=.. AFTER_DEPOT=.. TRACE_DIR=.. OUT=results.jsonl \
#   STOP_AT=$(date -d 05:40 +%s) ROUNDS=20 CUMEM_DEVICE=host CUMEM_LIBRARY=.. bash alternate.sh
here=$(cd "$(dirname "$0")" && pwd)
julia=${JULIA:-julia}
for r in $(seq 1 "${ROUNDS:-20}"); do
    for side in before after; do
        [ "$(date +%s)" -ge "${STOP_AT:-9999999999}" ] && exit 0
        if [ $side = before ]; then root=$BEFORE_ROOT; depot=$BEFORE_DEPOT; else root=$AFTER_ROOT; depot=$AFTER_DEPOT; fi
        JULIA_DEPOT_PATH=$depot nice -n 5 "$julia" --startup-file=no --project="$root" "$here/step2_loop.jl" \
            "$side" 1 "$OUT" "$TRACE_DIR/trace_$side.jl"
    done
done

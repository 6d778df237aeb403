# Helpers of the bench/gpu drivers (source it after setting OUT): `log MSG` appends a
# timestamped line to $OUT/run.log and stderr; `step NAME LOGFILE CMD...` runs CMD with its
# output in LOGFILE, logs its exit status, time and last TAIL lines (default 15), and
# keeps going (a failure sets `status=1`, which the driver exits with).
LOG="$OUT/run.log"
log() { echo "[$(date +%T)] $*" | tee -a "$LOG" >&2; }
status=0
step() {
    local name=$1 out=$2; shift 2
    log "$name: $*"
    local t0=$SECONDS
    "$@" > "$out" 2>&1
    local rc=$?
    tail -n "${TAIL:-15}" "$out" | sed 's/^/    /' | tee -a "$LOG" >&2
    log "$name: exit $rc after $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
    return 0
}

#!/usr/bin/env bash
# CuMem's benchmark on the GPU machine, beside the anchor allocators, in one run.
#
# The GPU machine needs no Rust toolchain. Before the run, put into a folder copied along
# with the checkout (default target/gpu-kit/, or $CUMEM_KIT_DIR):
#   target/gpu-kit/cumem-bench       the release binary (cargo build --release -p cumem-bench)
#   target/gpu-kit/traces/*.trace    other traces (optional; else data/ is used)
# and run from the repository root:  OUT=/some/dir bash bench/gpu/run_gpu.sh
# The anchors come from bench/anchors/anchor_bench.py (PyTorch must be installed there).
#
# Writes under $OUT: anchor.jsonl (+ anchor.log), results.jsonl (replay, pair and threads
# JSON lines of cumem-bench), tables.txt (the same as tables), perf.svg (the chart),
# run.log, and tables.md (bench/anchors/tables.py: the Markdown tables of docs/performance.md, every
# pool beside PyTorch with and without expandable segments, cudaMallocAsync and cudaMalloc). Expected time: ~2.5 min for anchor_bench.py (two PyTorch configurations; 25 s building its C++
# extension; its cudaMalloc replay of random_seed1 is ~10 s), ~1.5 min for cumem-bench
# (the `none` pool's cuMemAlloc replay of random_seed1 is ~5 s a pass × 5), well under 6.
set -uo pipefail

D=${CUMEM_KIT_DIR:-target/gpu-kit}
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
BIN="$D/cumem-bench"
if [ -d "$D/traces" ] && compgen -G "$D/traces/*.trace" >/dev/null; then
    TRACES="$D/traces"
elif compgen -G "$D/*.trace" >/dev/null; then
    TRACES="$D"
else
    TRACES=data
fi
ANCHOR=bench/anchors/anchor_bench.py
chmod +x "$BIN" 2>/dev/null || true
LOG="$OUT/run.log"
log() { echo "[$(date +%T)] $*" | tee -a "$LOG" >&2; }
status=0
step() { # step NAME CMD... : run, log its exit status, keep going
    local name=$1; shift
    log "$name: $*"
    local t0=$SECONDS
    "$@"
    local rc=$?
    log "$name: exit $rc after $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
    return 0
}

log "traces: $TRACES ($(ls "$TRACES"/*.trace | xargs -n1 basename | tr '\n' ' '))"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 | tee -a "$LOG" >&2 || true

# 1. The anchors: PyTorch's caching allocator, the cudaMallocAsync pool, cudaMalloc.
step anchor timeout 400 python3 "$ANCHOR" "$TRACES" > "$OUT/anchor.jsonl" 2> "$OUT/anchor.log"

# 2. CuMem: every pool on the CUDA device.
R="$OUT/results.jsonl"
: > "$R"
step replay timeout 200 "$BIN" replay "$TRACES"/*.trace --pool all --device cuda --json >> "$R"
step pair timeout 90 "$BIN" pair --pool all --device cuda --json >> "$R"
step threads timeout 90 "$BIN" threads --threads 1,4,16 --pool binned,split,expandable --device cuda --json >> "$R"

# 3. The chart, and the results as tables for reading.
step chart "$BIN" chart --input "$R" --anchor "$OUT/anchor.jsonl" --out "$OUT/perf.svg"
python3 - "$R" "$OUT/anchor.jsonl" > "$OUT/tables.txt" 2>>"$LOG" <<'PY' || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
try:
    anc = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
except OSError:
    anc = []
print("replay (ns/event warm | cold; peak reserved / peak live, cold | warm; hit rate warm; device allocs cold | warm; "
      "device calls cold | per warm pass | last pass; failed)")
for r in rows:
    if r.get("bench") == "replay":
        print(f'{r["trace"]:16} {r["pool"]:7} {r["ns_per_event_warm"]:10.1f} {r["ns_per_event_cold"]:10.1f}  '
              f'{r["reserved_over_live"]:6.3f} {r["reserved_over_live_warm"]:6.3f}  {r["hit_rate"]:.4f}  '
              f'{r["device_allocs_cold"]:7} {r["device_allocs_warm"]:7}  '
              f'{r.get("device_calls_cold", "")} {r.get("device_calls_per_warm_pass", "")} {r.get("device_calls_last_pass", "")}  {r["failed"]}')
for a in anc:
    if a.get("bench") == "replay":
        for k in ("torch_caching", "torch_expandable", "cuda_async_pool", "cudaMalloc"):
            if k + "_ns_per_event" not in a:   # not measured in this run
                continue
            print(f'{a["trace"]:16} {k:16} {a[k + "_ns_per_event"]:10.1f}  {a[k + "_peak_reserved"] / a["peak_live_bytes"]:6.3f}  fails {a.get(k + "_fails", "")}')
print("\npair (ns per alloc+free, median)")
for r in rows:
    if r.get("bench") == "pair":
        print(f'{r["pool"]:7} {r["size"]:>10} {r["ns_per_pair"]:12.1f}')
for a in anc:
    if a.get("bench") == "pair":
        print(f'anchor  {a["bytes"]:>10}  ' + "  ".join(f'{n} {a[k]:.1f}' for n, k in (("torch", "torch_caching_ns"), ("torch-expandable", "torch_expandable_ns"), ("async", "cuda_async_pool_ns"), ("cudaMalloc", "cudaMalloc_ns")) if k in a))
print("\nthreads (aggregate ns per pair)")
for r in rows:
    if r.get("bench") == "threads":
        print(f'{r["pool"]:7} {r["threads"]:>3} threads {r["ns_per_pair"]:10.1f}')
for a in anc:
    if a.get("bench") == "threads":
        print(f'anchor  {a["threads"]:>3} threads  ' + "  ".join(f'{n} {a[k]:.1f}' for n, k in (("torch", "torch_caching_ns_per_pair"), ("torch-expandable", "torch_expandable_ns_per_pair"), ("async", "cuda_async_ns_per_pair")) if k in a))
PY
python3 bench/anchors/tables.py "$OUT" > "$OUT/tables.md" 2>>"$LOG" || log "tables.py failed"
cat "$OUT/tables.txt" 2>/dev/null
log "done (status $status); files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $status

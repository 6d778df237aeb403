#!/usr/bin/env bash
# The engine's cache-hit alloc+free pair (4 KiB, one shard, host device: the CPU side of
# issue 15's ≤ 20 ns target) on the GPU machine's CPU, for binned, split, expandable and
# simple with thread caches on and off (CUMEM_THREAD_CACHE), 5 interleaved runs of
# examples/hotloop.rs; with `perf` there, also cycles, instructions and 4K-aliasing
# counts per pair (docs/design.md, "Why split's pair got slower than binned's").
#
# No Rust there: build here and carry the binaries (default folder target/gpu-kit/, or
# $CUMEM_KIT_DIR):
#   cargo build --release --example hotloop -p cumem && cargo build --release -p cumem-bench
#   mkdir -p target/gpu-kit && cp target/release/examples/hotloop target/release/cumem-bench target/gpu-kit/
# then, on the GPU machine, with target/gpu-kit copied along:  bash bench/gpu/pair_perf_gpu.sh
# cumem-bench is optional: when present, `pair --sizes 4KiB --malloc` runs 5 times too, for
# glibc's malloc+free in the same process. HOTLOOP=<path> runs another build's hotloop
# (e.g. one built at 5585f9e, for before/after on the same machine). About 1.5 min.
set -uo pipefail
D=${CUMEM_KIT_DIR:-target/gpu-kit}
H=${HOTLOOP:-$D/hotloop}
N=${N:-10000000}
POOLS="binned split expandable simple"
[ -x "$H" ] || chmod +x "$H" 2>/dev/null || { echo "no $H (see the header)" >&2; exit 1; }
T=$(mktemp -d)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $H, N=$N pairs a run"

for rep in 1 2 3 4 5; do
    for pool in $POOLS; do
        for tc in 1 0; do
            CUMEM_THREAD_CACHE=$tc REPORT=1 N=$N "$H" $pool 2>&1 | awk -v p=$pool -v t=$tc '/ns per pair/ {print p, t, $1}' >> "$T/ns"
        done
    done
    if [ -x "$D/cumem-bench" ]; then
        "$D/cumem-bench" pair --sizes 4KiB --malloc --pool binned,split --json 2>/dev/null >> "$T/bench"
    fi
done

# perf stat: the fullest event list that works here, else none.
PERF=""
if command -v perf >/dev/null 2>&1; then
    for ev in cycles,instructions,ld_blocks_partial.address_alias,machine_clears.memory_ordering cycles,instructions; do
        out=$(perf stat -x, -e "$ev" true 2>&1) && ! grep -q '<not' <<<"$out" && { PERF=$ev; break; }
    done
fi
if [ -n "$PERF" ]; then
    for pool in $POOLS; do
        for tc in 1 0; do
            CUMEM_THREAD_CACHE=$tc N=$N perf stat -x, -e "$PERF" "$H" $pool 2> "$T/perf.$pool.$tc" >/dev/null
        done
    done
else
    echo "perf: absent, not permitted, or no counters here (a VM): no counts"
fi

python3 - "$T" "$N" "$PERF" <<'EOF'
import sys, os, json, statistics as st
t, n, perf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {}
for line in open(os.path.join(t, "ns")):
    p, tc, ns = line.split()
    runs.setdefault((p, tc), []).append(float(ns))
evs = perf.split(",") if perf else []
short = {"instructions": "instr", "ld_blocks_partial.address_alias": "4k_alias", "machine_clears.memory_ordering": "mo_clears"}
print(f"{'pool':10} {'tc':>2} {'median ns':>9} {'min':>6} {'max':>6}" + "".join(f" {short.get(e, e)[:10]:>10}" for e in evs) + ("   (perf: per pair)" if evs else ""))
for (p, tc), v in runs.items():
    row = f"{p:10} {tc:>2} {st.median(v):9.1f} {min(v):6.1f} {max(v):6.1f}"
    f = os.path.join(t, f"perf.{p}.{tc}")
    if evs and os.path.exists(f):
        got = {}
        for l in open(f):
            c = l.strip().split(",")
            if len(c) > 2 and c[0].replace(".", "").isdigit():
                got[c[2].split(":")[0]] = float(c[0])
        row += "".join(f" {got[e] / n:10.2f}" if e in got else f" {'-':>10}" for e in evs)
    print(row)
b = os.path.join(t, "bench")
if os.path.exists(b):
    pr = {}
    for l in open(b):
        j = json.loads(l)
        pr.setdefault(j["pool"], []).append(j["ns_per_pair"])
    print("cumem-bench pair 4 KiB (thread caches on), median of 5: " + ", ".join(f"{k} {st.median(v):.1f} ns" for k, v in pr.items()))
EOF
rm -rf "$T"

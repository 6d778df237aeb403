#!/usr/bin/env python3
"""Markdown tables for docs/performance.md from one GPU run's JSON lines.

    python3 bench/anchors/tables.py bench/results/<run>/   (results.jsonl, anchor.jsonl, julia_bench.jsonl)
"""
import json, os, sys

d = sys.argv[1]
load = lambda f: [json.loads(l) for l in open(os.path.join(d, f)) if l.startswith("{")] if os.path.exists(os.path.join(d, f)) else []
R, A, J = load("results.jsonl"), load("anchor.jsonl"), load("julia_bench.jsonl")
ANCH = [("torch_caching", "PyTorch caching allocator"), ("torch_expandable", "PyTorch, expandable segments"),
        ("cuda_async_pool", "cudaMallocAsync pool"), ("cudaMalloc", "cudaMalloc")]

print("### Trace replay (ns per event; peak reserved ÷ peak live)\n")
print("| trace | allocator | ns/event warm | ns/event cold | reserved ÷ live, cold | reserved ÷ live, warm | device allocs cold / warm | device calls cold / per warm pass / last pass |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
TRACES = sorted({r["trace"] for r in R if r["bench"] == "replay"} | {a["trace"].replace(".trace", "") for a in A if a.get("bench") == "replay"})
for tr in TRACES:
    for r in R:
        if r["bench"] == "replay" and r["trace"] == tr:
            print(f"| {tr} | CuMem `{r['pool']}` | {r['ns_per_event_warm']:.0f} | {r['ns_per_event_cold']:.0f} | "
                  f"{r['reserved_over_live']:.3f} | {r['reserved_over_live_warm']:.3f} | {r['device_allocs_cold']} / {r['device_allocs_warm']} | "
                  + (f"{r['device_calls_cold']} / {r['device_calls_per_warm_pass']:.1f} / {r['device_calls_last_pass']} |" if "device_calls_cold" in r else " |"))
    for a in A:
        if a.get("bench") == "replay" and a["trace"].replace(".trace", "") == tr:
            live = a["peak_live_bytes"]
            for k, name in ANCH:
                if f"{k}_ns_per_event" not in a:   # not measured in this run
                    continue
                cold_ns = a.get(f"{k}_cold_ns_per_event")
                cold_res = a.get(f"{k}_cold_peak_reserved")
                print(f"| {tr} | {name} | {a[f'{k}_ns_per_event']:.0f} | {'' if cold_ns is None else f'{cold_ns:.0f}'} | "
                      f"{'' if cold_res is None else f'{cold_res / live:.3f}'} | {a[f'{k}_peak_reserved'] / live:.3f} | | |")

print("\n### Cache-hit alloc+free pair (ns, median)\n")
sizes = sorted({r["size"] for r in R if r["bench"] == "pair"})
print("| allocator | " + " | ".join(f"{s:,} B" for s in sizes) + " |")
print("|---|" + "---:|" * len(sizes))
POOLS = ["binned", "split", "expandable", "simple", "none"]
for pool in POOLS:
    row = {r["size"]: r["ns_per_pair"] for r in R if r["bench"] == "pair" and r["pool"] == pool}
    if row:
        print(f"| CuMem `{pool}` | " + " | ".join(f"{row[s]:.1f}" if s in row else "" for s in sizes) + " |")
for k, name in ANCH:
    row = {a["bytes"]: a[f"{k}_ns"] for a in A if a.get("bench") == "pair" and f"{k}_ns" in a}
    if not row:
        continue
    print(f"| {name} | " + " | ".join(f"{row[s]:.0f}" if s in row else "" for s in sizes) + " |")

print("\n### Threads: 4 KiB pairs, aggregate ns per pair (wall time ÷ all pairs)\n")
ts = sorted({r["threads"] for r in R if r["bench"] == "threads"})
print("| allocator | " + " | ".join(f"{t} thread{'s' * (t > 1)}" for t in ts) + " |")
print("|---|" + "---:|" * len(ts))
for pool in POOLS:
    row = {r["threads"]: r["ns_per_pair"] for r in R if r["bench"] == "threads" and r["pool"] == pool}
    if row:
        print(f"| CuMem `{pool}` | " + " | ".join(f"{row[t]:.1f}" if t in row else "" for t in ts) + " |")
for k, name in [("torch_caching", ANCH[0][1]), ("torch_expandable", ANCH[1][1]), ("cuda_async", ANCH[2][1])]:
    row = {a["threads"]: a[f"{k}_ns_per_pair"] for a in A if a.get("bench") == "threads" and f"{k}_ns_per_pair" in a}
    if not row:
        continue
    print(f"| {name} | " + " | ".join(f"{row[t]:.0f}" if t in row else "" for t in ts) + " |")

if J:
    print("\n### Julia: `CuArray{UInt8}(undef, 4096)` + `unsafe_free!`, GC-freed, and the gpt2 replay through CuArrays\n")
    print("| pool | pair with `unsafe_free!` (ns) | freed by the GC (ns per allocation) | gpt2_train replay, warm (ns/event) |")
    print("|---|---:|---:|---:|")
    for pool in POOLS:
        g = {j["bench"]: j for j in J if j["pool"] == pool}
        if not g:
            continue
        print(f"| `{pool}` | {g['julia_pair']['ns_per_pair']:.0f} | {g['julia_gc_pair']['ns_per_alloc']:.0f} | {g['julia_replay']['ns_per_event_warm']:.0f} |")
    py = [a for a in A if a.get("bench") == "python_pair" and a["bytes"] == 4096]
    if py:
        print(f"| Python `torch.empty` + `del` / `cupy.empty` + `del` (measured in run A, with the tables above) | "
              f"{py[0]['torch_empty_ns']:.0f} / {py[0]['cupy_empty_ns']:.0f} | | |")

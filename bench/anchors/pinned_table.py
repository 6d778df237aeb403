#!/usr/bin/env python3
"""The pinned-memory table: bench/julia/pinned_bench.jl's JSON lines beside
bench/anchors/pinned_anchor.py's, as markdown.

    python3 bench/anchors/pinned_table.py cumem.jsonl anchor.jsonl

Bandwidth rows give CuMem's figure as a share of PyTorch's of the same kind (pinned:
torch_pinned, the copy_ with non_blocking=True; pageable: torch_pageable); the target is
>= 95 % for pinned. The pair rows give the pinned host pool's pair against the device
pool's (target: within 2x).
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


cumem, anchor = load(sys.argv[1]), load(sys.argv[2])
get = lambda rows, bench, impl, key: next((r[key] for r in rows if r["bench"] == bench and r["impl"] == impl), None)

print("| copy, %d MiB | CuMem GB/s | PyTorch GB/s | CuMem / PyTorch |" % (cumem[0]["bytes"] >> 20))
print("|---|---:|---:|---:|")
for bench in ("htod", "dtoh"):
    for impl, ref in (("cumem_pinned", "torch_pinned"), ("cumem_registered", "torch_pinned"),
                      ("cumem_pageable", "torch_pageable")):
        c, t = get(cumem, bench, impl, "gbps"), get(anchor, bench, ref, "gbps")
        ratio = "%.1f %%" % (100 * c / t) if c and t else "-"
        print(f"| {bench} {impl.replace('cumem_', '')} (vs {ref}) | {c} | {t} | {ratio} |")
t = get(anchor, "htod", "torch_pinned_cuda", "gbps")
print(f"| htod pinned, p.cuda(non_blocking=True) | | {t} | |")
print()
print("| alloc+free pair, 4 KiB | ns |")
print("|---|---:|")
for impl in ("cumem_host_c", "cumem_device_c", "cumem_pinned_array", "cumem_cuarray"):
    print(f"| {impl} | {get(cumem, 'pair', impl, 'ns')} |")
print(f"| torch_pinned_empty (Python) | {get(anchor, 'pair', 'torch_pinned_empty', 'ns')} |")
h, d = get(cumem, "pair", "cumem_host_c", "ns"), get(cumem, "pair", "cumem_device_c", "ns")
if h and d:
    print(f"\npinned pool pair / device pool pair (C ABI): {h / d:.2f}x")
h, d = get(cumem, "pair", "cumem_pinned_array", "ns"), get(cumem, "pair", "cumem_cuarray", "ns")
if h and d:
    print(f"CuMem.pinned pair / CuArray pair (Julia): {h / d:.2f}x")

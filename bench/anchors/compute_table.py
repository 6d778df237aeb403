#!/usr/bin/env python3
"""Markdown table of bench/julia/compute_bench.jl's and bench/anchors/compute_anchor.py's JSON lines,
with issue targets (ratio to the PyTorch figure measured in the same run).

    python3 bench/anchors/compute_table.py cumem.jsonl anchor.jsonl
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


cumem = {r["bench"]: r for r in load(sys.argv[1])}
anchor = {}
for r in load(sys.argv[2]):
    anchor[(r["bench"], r["impl"])] = r

# (bench, key, unit, better, the PyTorch impl the target compares with, target ratio)
ROWS = [
    ("axpy", "gbps", "GB/s", "higher", "torch_expr", 0.90),
    ("copy", "gbps", "GB/s", "higher", "torch", None),
    ("sum", "gbps", "GB/s", "higher", "torch", 0.80),
    ("matmul", "tflops", "TFLOPS", "higher", "torch", 0.95),
    ("latency", "us", "µs", "lower", "torch_expr", None),
    ("mlp_step", "ms", "ms", "lower", "torch_manual", 1.0),
]

print("| benchmark | CuMem | PyTorch (same run) | others | CuMem / PyTorch | target |")
print("|---|---|---|---|---|---|")
for bench, key, unit, better, ref, target in ROWS:
    c = cumem.get(bench)
    a = anchor.get((bench, ref))
    others = ", ".join(f"{impl} {r[key]:.4g}" for (b, impl), r in anchor.items() if b == bench and impl != ref)
    if c is None:
        print(f"| {bench} | – | | {others} | | |")
        continue
    cv = c[key]
    extra = f" (sync: {c['us_sync']:.3g})" if bench == "latency" else ""
    if a is None:
        print(f"| {bench} ({unit}) | {cv:.4g}{extra} | – | {others} | | |")
        continue
    av = a[key]
    ratio = cv / av if better == "higher" else av / cv   # > 1: CuMem better
    goal = "≤ 8 µs" if bench == "latency" else (f"≥ {target:.2f}" if target else "")
    ok = ""
    if bench == "latency":
        ok = " ✓" if cv <= 8 else " ✗"
    elif target:
        ok = " ✓" if ratio >= target else " ✗"
    print(f"| {bench} ({unit}) | {cv:.4g}{extra} | {av:.4g} ({ref}) | {others} | {ratio:.3f} | {goal}{ok} |")
print()
print("CuMem / PyTorch: speed ratio (> 1: CuMem faster). Device:", next(iter(cumem.values()))["device"])

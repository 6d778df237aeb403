#!/usr/bin/env python3
"""Tables of the smallops suite's JSON lines (`bench/gpu/run.sh smallops`, issue 26), as Markdown
for docs/performance.md.

    python3 bench/anchors/smallops_table.py DIR      # reads DIR/{launch,cumem,anchor,first,host}.jsonl
"""
import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/smallops"
launch, cumem, anchor, first, host = (load(os.path.join(d, f + ".jsonl"))
                                      for f in ("launch", "cumem", "anchor", "first", "host"))
device = next((r.get("device") for r in cumem + launch if r.get("device")), "?")


def small_table(rows, title):
    rows = [r for r in rows if r.get("bench") == "small" and "us" in r]
    if not rows:
        return
    builds = []
    for r in rows:
        key = r["build"] if r["impl"] == "CuMem" else r["impl"]
        if key not in builds:
            builds.append(key)
    names = []
    for r in rows:
        if r["row"] not in names:
            names.append(r["row"])
    val = {}
    for r in rows:
        key = r["build"] if r["impl"] == "CuMem" else r["impl"]
        if r["impl"] == "Base":
            key = "Base (" + r["build"] + " process)"
            if key not in builds:
                builds.append(key)
        val[(r["row"], key)] = r["us"]
    builds = [b for b in builds if any((n, b) in val for n in names)]
    print(f"\n{title}\n")
    print("| operation (µs per call) | " + " | ".join("CuMem " + b if b in ("before", "after") else b for b in builds) + " |")
    print("|---|" + "---:|" * len(builds))
    for n in names:
        print(f"| `{n}` | " + " | ".join(f"{val[(n, b)]:.2f}" if (n, b) in val else "" for b in builds) + " |")


if launch:
    print(f"\nThe launch limit below Julia ({device}; {launch[0].get('n')} calls, one synchronize):\n")
    print("| call | µs per call |")
    print("|---|---:|")
    for r in launch:
        print(f"| {r['row']} | {r['us_per_call']:.2f} |")

small_table(cumem + anchor, f"1-element Float32 arrays on {device} (20 000 calls, one synchronize):")

bw = [r for r in cumem + anchor if r.get("bench") == "bandwidth"]
if bw:
    print(f"\nBandwidth on 2^28 Float32 ({device}), GB/s (fraction of the copy's in the same process):\n")
    keys = []
    for r in bw:
        k = r["build"] if r["impl"] == "CuMem" else r["impl"]
        if k not in keys:
            keys.append(k)
    names = []
    for r in bw:
        if r["row"] not in names:
            names.append(r["row"])
    val = {((r["row"]), r["build"] if r["impl"] == "CuMem" else r["impl"]): r for r in bw}
    print("| operation | " + " | ".join("CuMem " + k if k in ("before", "after") else k for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for n in names:
        cells = []
        for k in keys:
            r = val.get((n, k))
            cells.append(f"{r['gbps']:.0f} ({r['of_copy']:.2f})" if r else "")
        print(f"| `{n}` | " + " | ".join(cells) + " |")

mlp = [r for r in cumem if r.get("bench") == "mlp_step"]
if mlp:
    print(f"\nThe demo's MLP step ({device}, batch 64): " +
          ", ".join(f"{r['build']} {r['ms']:.3f} ms" for r in mlp))

if first:
    print(f"\nA fresh process's first broadcast and sum ({device}), seconds after `using CuMem`:\n")
    print("| build | kernel cache | `using CuMem` | first `x .+ y` | first `sum(x)` | disk hits/misses |")
    print("|---|---|---:|---:|---:|---|")
    for r in first:
        hm = f"{r['disk_hits']}/{r['disk_misses']}" if "disk_hits" in r else "(no disk cache)"
        print(f"| {r['build']} | {r['cache']} | {r['using_s']:.2f} | {r['first_broadcast_s']:.3f} | "
              f"{r['first_sum_s']:.3f} | {hm} |")

small_table(host, "Host device (no GPU), against Base on `Array`s in the same process:")

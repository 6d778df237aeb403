#!/usr/bin/env python3
"""Pinned host memory, PyTorch's side (the anchor of bench/julia/pinned_bench.jl): upload and
download bandwidth of a 256 MiB float32 tensor from pinned memory (pin_memory(), copies
with non_blocking=True) and from pageable memory, and the pair of PyTorch's caching host
allocator.

    python3 bench/anchors/pinned_anchor.py [--quick]

One JSON object per line:
  {"bench":"htod","impl":"torch_pinned"}    g.copy_(p, non_blocking=True)   (p.cuda(non_blocking=True) without the allocation)
  {"bench":"htod","impl":"torch_pinned_cuda"} p.cuda(non_blocking=True)      (a new device tensor each time, from the cache)
  {"bench":"htod","impl":"torch_pageable"}  g.copy_(h)
  {"bench":"dtoh","impl":"torch_pinned"}    p.copy_(g, non_blocking=True)
  {"bench":"dtoh","impl":"torch_pageable"}  h.copy_(g)
  {"bench":"pair","impl":"torch_pinned_empty"} torch.empty(4096, uint8, pin_memory=True) + del (Python included)
Each bandwidth is the median over REPS samples of one copy followed by
torch.cuda.synchronize(), in 1e9 bytes/s, as on the Julia side.
"""
import argparse
import json
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--quick", action="store_true")
args = p.parse_args()
BYTES = (1 << 20) if args.quick else (256 << 20)
REPS = 3 if args.quick else 11


def out(**kw):
    print(json.dumps(kw, separators=(",", ":")), flush=True)


def bandwidth(f):
    f()
    f()
    torch.cuda.synchronize()
    samples = []
    for _ in range(REPS):
        t = time.perf_counter_ns()
        f()
        torch.cuda.synchronize()
        samples.append(BYTES / (time.perf_counter_ns() - t))
    return round(statistics.median(samples), 3)


n = BYTES // 4
g = torch.empty(n, dtype=torch.float32, device="cuda")
h = torch.rand(n, dtype=torch.float32)
pinned = h.pin_memory()
assert pinned.is_pinned() and not h.is_pinned()
dev = torch.cuda.get_device_name()

out(bench="htod", impl="torch_pinned", device=dev, bytes=BYTES,
    gbps=bandwidth(lambda: g.copy_(pinned, non_blocking=True)))
out(bench="htod", impl="torch_pinned_cuda", device=dev, bytes=BYTES,
    gbps=bandwidth(lambda: pinned.cuda(non_blocking=True)))
out(bench="htod", impl="torch_pageable", device=dev, bytes=BYTES, gbps=bandwidth(lambda: g.copy_(h)))
out(bench="dtoh", impl="torch_pinned", device=dev, bytes=BYTES,
    gbps=bandwidth(lambda: pinned.copy_(g, non_blocking=True)))
out(bench="dtoh", impl="torch_pageable", device=dev, bytes=BYTES, gbps=bandwidth(lambda: h.copy_(g)))


def pinned_pairs(k):
    for _ in range(k):
        t = torch.empty(4096, dtype=torch.uint8, pin_memory=True)
        del t


pinned_pairs(1000)
k = 2000 if args.quick else 200_000
samples = []
for _ in range(REPS):
    t = time.perf_counter_ns()
    pinned_pairs(k)
    samples.append((time.perf_counter_ns() - t) / k)
out(bench="pair", impl="torch_pinned_empty", device=dev, bytes=4096, ns=round(statistics.median(samples), 1))

#!/usr/bin/env python3
"""Small operations at the launch limit (issue 26): bench/julia/smallops_bench.jl's rows in
PyTorch eager and CuPy, same sizes and method, one JSON object per line.

    python3 bench/anchors/smallops_anchor.py [--calls N] [--reps R] [--bandwidth]

Rows ("bench":"small"): 1-element float32 tensors, each operation called N times (default
20 000) with one synchronize at the end, µs per call (median of R repetitions, default 5):
a + b; torch.add(a, b, out=r) / cupy.add(a, b, out=r); r.fill_(1) / r.fill(1); r.copy_(a)
/ cupy.copyto(r, a); a.sum().item() (and max, dot, norm, any, all); A.sum(0) on 4x4;
torch.empty_like + del; CuPy's empty RawKernel launch.
--bandwidth ("bench":"bandwidth"): 2^28 float32, y.copy_(x), y.add_(x, alpha=a), the
unfused z = x * 2 + y / 3 (torch.add(x * 2, y / 3, out=z)), torch.add(x, y, out=z),
z.fill_(1.5), x.sum(), torch.dot(x, y) (not read back), then float64 axpy and an int64 add on
2^27 elements: GB/s counting the
bytes as the Julia side does, and each as a fraction of the copy's.
"""
import argparse
import json
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--calls", type=int, default=20000)
p.add_argument("--reps", type=int, default=5)
p.add_argument("--bandwidth", action="store_true")
args = p.parse_args()
CALLS, REPS = args.calls, args.reps
dev = torch.device("cuda")
DEVICE = torch.cuda.get_device_name(0)


def us_per_call(f, sync, n=CALLS):
    for _ in range(min(n, 200)):
        f()
    sync()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        sync()
        times.append((time.perf_counter() - t0) * 1e6 / n)
    return statistics.median(times)


def row(impl, name, us):
    print(json.dumps({"bench": "small", "impl": impl, "build": impl, "row": name, "us": round(us, 3),
                      "calls": CALLS, "device": DEVICE}), flush=True)


tsync = torch.cuda.synchronize
a = torch.ones(1, device=dev)
b = torch.full((1,), 2.0, device=dev)
r = torch.empty(1, device=dev)
A = torch.ones(4, 4, device=dev)
bb = a > 0
impl = "PyTorch " + torch.__version__
for name, f in [
    ("s1 .+ s2, allocating (GC frees)", lambda: a + b),
    ("r .= s1 .+ s2, in place", lambda: torch.add(a, b, out=r)),
    ("fill!(r, 1f0)", lambda: r.fill_(1.0)),
    ("fill!(r, 0f0)", lambda: r.zero_()),
    ("copyto!(r, s1), device to device", lambda: r.copy_(a)),
    ("sum(s1) returned to the host", lambda: a.sum().item()),
    ("maximum(s1)", lambda: a.max().item()),
    ("dot(s1, s2)", lambda: torch.dot(a, b).item()),
    ("norm(s1)", lambda: torch.linalg.vector_norm(a).item()),
    ("any(b)", lambda: bb.any().item()),
    ("all(b)", lambda: bb.all().item()),
    ("sum(A; dims = 1), 4x4", lambda: A.sum(0)),
    ("similar(s1) + unsafe_free!", lambda: torch.empty_like(a)),
]:
    row(impl, name, us_per_call(f, tsync))

try:
    import cupy as cp

    csync = cp.cuda.Device().synchronize
    ca = cp.ones(1, dtype=cp.float32)
    cb = cp.full(1, 2.0, dtype=cp.float32)
    cr = cp.empty(1, dtype=cp.float32)
    cA = cp.ones((4, 4), dtype=cp.float32)
    cbb = ca > 0
    empty = cp.RawKernel(r'extern "C" __global__ void cumem_empty() {}', "cumem_empty")
    cimpl = "CuPy " + cp.__version__
    for name, f in [
        ("s1 .+ s2, allocating (GC frees)", lambda: ca + cb),
        ("r .= s1 .+ s2, in place", lambda: cp.add(ca, cb, out=cr)),
        ("fill!(r, 1f0)", lambda: cr.fill(1.0)),
        ("fill!(r, 0f0)", lambda: cr.fill(0.0)),
        ("copyto!(r, s1), device to device", lambda: cp.copyto(cr, ca)),
        ("sum(s1) returned to the host", lambda: ca.sum().item()),
        ("maximum(s1)", lambda: ca.max().item()),
        ("dot(s1, s2)", lambda: cp.dot(ca, cb).item()),
        ("norm(s1)", lambda: cp.linalg.norm(ca).item()),
        ("any(b)", lambda: cbb.any().item()),
        ("all(b)", lambda: cbb.all().item()),
        ("sum(A; dims = 1), 4x4", lambda: cA.sum(0)),
        ("similar(s1) + unsafe_free!", lambda: cp.empty_like(ca)),
        ("an empty kernel through CuMem.launch", lambda: empty((1,), (1,), ())),
    ]:
        row(cimpl, name, us_per_call(f, csync))
except ImportError as e:
    print(json.dumps({"bench": "small", "impl": "CuPy", "skipped": str(e)}), flush=True)

if args.bandwidth:
    n = 2**28
    x = torch.ones(n, device=dev)
    y = torch.full((n,), 2.0, device=dev)
    z = torch.zeros(n, device=dev)
    per = lambda f: us_per_call(f, tsync, 50) / 1e6
    tc = per(lambda: y.copy_(x))
    copy_gbps = 8 * n / tc / 1e9
    for name, f, nb in [
        ("copy (copyto!)", lambda: y.copy_(x), 8),
        ("axpy y .= a .* x .+ y", lambda: y.add_(x, alpha=0.5), 12),
        ("fused z .= x .* 2f0 .+ y ./ 3f0", lambda: torch.add(x * 2, y / 3, out=z), 12),
        ("map!(+, z, x, y)", lambda: torch.add(x, y, out=z), 12),
        ("fill!(z, 1.5f0)", lambda: z.fill_(1.5), 4),
        ("sum(x)", lambda: x.sum(), 4),
        ("dot(x, y)", lambda: torch.dot(x, y), 8),
    ]:
        gbps = nb * n / per(f) / 1e9
        print(json.dumps({"bench": "bandwidth", "impl": impl, "build": impl, "row": name, "n": n,
                          "gbps": round(gbps, 1), "of_copy": round(gbps / copy_gbps, 3), "device": DEVICE}),
              flush=True)
    # the same bytes in 8-byte elements (2^27): float64 axpy, int64 sum of two tensors
    m = n // 2
    xd, yd = torch.ones(m, device=dev, dtype=torch.float64), torch.full((m,), 2.0, device=dev, dtype=torch.float64)
    xi, yi = torch.ones(m, device=dev, dtype=torch.int64), torch.full((m,), 2, device=dev, dtype=torch.int64)
    zi = torch.zeros(m, device=dev, dtype=torch.int64)
    for name, f in [("Float64 axpy yd .= 0.5 .* xd .+ yd (2^27)", lambda: yd.add_(xd, alpha=0.5)),
                    ("Int64 zi .= xi .+ yi (2^27)", lambda: torch.add(xi, yi, out=zi))]:
        gbps = 24 * m / per(f) / 1e9
        print(json.dumps({"bench": "bandwidth", "impl": impl, "build": impl, "row": name, "n": m,
                          "gbps": round(gbps, 1), "of_copy": round(gbps / copy_gbps, 3), "device": DEVICE}),
              flush=True)

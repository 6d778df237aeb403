#!/usr/bin/env python3
"""The compute benchmarks' anchors: bench/julia/compute_bench.jl's measurements in PyTorch eager
(and CuPy where it imports), same sizes, one JSON object per line.

    python3 bench/anchors/compute_anchor.py [--quick] [--reps N] [--batch B]

    {"bench":"axpy","impl":"torch_expr"}     y = a * x + y          (eager: two kernels)
    {"bench":"axpy","impl":"torch_inplace"}  y.add_(x, alpha=a)     (one kernel)
    {"bench":"axpy","impl":"cupy_elementwise"} an ElementwiseKernel y = a * x + y
    {"bench":"copy","impl":"torch"}          y.copy_(x)
    {"bench":"sum","impl":"torch"|"cupy"}    torch.sum(x) / cupy.sum(x)
    {"bench":"matmul","impl":"torch"}        torch.matmul(A, B), allow_tf32 = False
    {"bench":"latency","impl":"torch_expr"|"torch_inplace"}  1-element tensors, µs per call
    {"bench":"mlp_step","impl":"torch_manual"|"torch_autograd"}  the demo's model and step

Bandwidths count the same bytes as the Julia side (axpy 3·4n, copy 2·4n, sum 4n).
Each figure is the median of `reps` repetitions of a loop calibrated to about 50 ms
between two torch.cuda.synchronize() calls.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--quick", action="store_true")
p.add_argument("--reps", type=int, default=None)
p.add_argument("--batch", type=int, default=64)
args = p.parse_args()

QUICK = args.quick
REPS = args.reps or (3 if QUICK else 10)
N = 2**12 if QUICK else 2**28
NMAT = 64 if QUICK else 8192
TARGET_S = 0.002 if QUICK else 0.05

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
DEVICE = torch.cuda.get_device_name(0)


def sync():
    torch.cuda.synchronize()


def per_call(f, sync_each=False):
    f()
    sync()
    t0 = time.perf_counter()
    f()
    sync()
    t = time.perf_counter() - t0
    iters = max(1, min(100_000, round(TARGET_S / max(t, 1e-7))))
    times = []
    for _ in range(REPS):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
            if sync_each:
                sync()
        sync()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times), iters


def out(**kw):
    kw["device"] = DEVICE
    kw["torch"] = torch.__version__
    print(json.dumps(kw), flush=True)


a = 0.5
x = torch.full((N,), 1.0, device=dev, dtype=torch.float32)
y = torch.full((N,), 2.0, device=dev, dtype=torch.float32)


def axpy_expr():
    global y
    y = a * x + y


t, it = per_call(axpy_expr)
out(bench="axpy", impl="torch_expr", n=N, s=t, gbps=3 * 4 * N / t / 1e9, iters=it)
t, it = per_call(lambda: y.add_(x, alpha=a))
out(bench="axpy", impl="torch_inplace", n=N, s=t, gbps=3 * 4 * N / t / 1e9, iters=it)
t, it = per_call(lambda: y.copy_(x))
out(bench="copy", impl="torch", n=N, s=t, gbps=2 * 4 * N / t / 1e9, iters=it)
t, it = per_call(lambda: torch.sum(x))
out(bench="sum", impl="torch", n=N, s=t, gbps=4 * N / t / 1e9, iters=it)

try:
    import cupy as cp

    cx = cp.full((N,), 1.0, dtype=cp.float32)
    cy = cp.full((N,), 2.0, dtype=cp.float32)
    axpy_k = cp.ElementwiseKernel("float32 a, float32 x", "float32 y", "y = a * x + y", "cumem_axpy")
    t, it = per_call(lambda: axpy_k(cp.float32(a), cx, cy))
    out(bench="axpy", impl="cupy_elementwise", n=N, s=t, gbps=3 * 4 * N / t / 1e9, iters=it,
        cupy=cp.__version__)
    t, it = per_call(lambda: cp.sum(cx))
    out(bench="sum", impl="cupy", n=N, s=t, gbps=4 * N / t / 1e9, iters=it, cupy=cp.__version__)
    del cx, cy
except ImportError:
    pass

del x, y
torch.cuda.empty_cache()

g = torch.Generator(device="cpu").manual_seed(1)
A = torch.rand(NMAT, NMAT, generator=g).to(dev)
B = torch.rand(NMAT, NMAT, generator=g).to(dev)
C = torch.empty(NMAT, NMAT, device=dev)
t, it = per_call(lambda: torch.matmul(A, B, out=C))
out(bench="matmul", impl="torch", n=NMAT, s=t, tflops=2 * NMAT**3 / t / 1e12, iters=it,
    allow_tf32=torch.backends.cuda.matmul.allow_tf32)
del A, B, C
torch.cuda.empty_cache()

# per-op overhead on one element
x1 = torch.ones(1, device=dev)
y1 = torch.full((1,), 2.0, device=dev)


def lat_expr():
    global y1
    y1 = a * x1 + y1


for impl, f in (("torch_expr", lat_expr), ("torch_inplace", lambda: y1.add_(x1, alpha=a))):
    t, it = per_call(f)
    ts, _ = per_call(f, sync_each=True)
    out(bench="latency", impl=impl, us=t * 1e6, us_sync=ts * 1e6, iters=it)

# the demo's MLP (64-128-10, ReLU, softmax cross-entropy, SGD) on a fixed batch of the digits
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "digits.csv.gz")
with gzip.open(path, "rt") as f:
    rows = [list(map(int, l.split(","))) for l in f.read().strip().split("\n")]
nb = args.batch
X = torch.tensor([r[:64] for r in rows[:nb]], dtype=torch.float32, device=dev).T / 16  # 64×B
lab = torch.tensor([r[64] for r in rows[:nb]], device=dev)
Y = torch.nn.functional.one_hot(lab, 10).T.float()                                    # 10×B
gen = torch.Generator(device="cpu").manual_seed(42)
W1 = (torch.randn(128, 64, generator=gen) * math.sqrt(2 / 64)).to(dev)
b1 = torch.zeros(128, 1, device=dev)
W2 = (torch.randn(10, 128, generator=gen) * math.sqrt(1 / 128)).to(dev)
b2 = torch.zeros(10, 1, device=dev)
lr = 0.01


def step_manual():
    # the same operations as demo/mlp.jl's train_step!
    B = X.shape[1]
    h = torch.clamp_min(W1 @ X + b1, 0.0)
    z2 = torch.addmm(b2, W2, h)              # mul!(z2 .= b2, W2, h, 1, 1)
    zmax = z2.max(dim=0, keepdim=True).values
    e = torch.exp(z2 - zmax)
    s = e.sum(dim=0, keepdim=True)
    loss = (Y * (torch.log(s) + zmax - z2)).sum() / B
    dz2 = (e / s - Y) / B
    db2 = dz2.sum(dim=1, keepdim=True)
    dh = W2.T @ dz2
    W2.addmm_(dz2, h.T, alpha=-lr)           # mul!(W2, dz2, h', -lr, 1)
    dz1 = torch.where(h > 0, dh, torch.zeros((), device=dev))
    db1 = dz1.sum(dim=1, keepdim=True)
    W1.addmm_(dz1, X.T, alpha=-lr)
    b1.sub_(lr * db1)
    b2.sub_(lr * db2)
    return loss.item()


t, it = per_call(step_manual)
out(bench="mlp_step", impl="torch_manual", batch=nb, model="64-128-10", ms=t * 1e3, iters=it)

model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=lr)
Xr, labr = X.T.contiguous(), lab


def step_autograd():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(Xr), labr)
    loss.backward()
    opt.step()
    return loss.item()


t, it = per_call(step_autograd)
out(bench="mlp_step", impl="torch_autograd", batch=nb, model="64-128-10", ms=t * 1e3, iters=it)

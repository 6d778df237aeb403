"""The demo's MLP step (64 -> 128 -> 10, batch 64, SGD) in PyTorch: eager (autograd) and
replayed from a CUDA graph (torch.cuda.graph, whole-network capture of forward, backward
and optimizer step, as PyTorch's documentation shows), beside bench/julia/graph_bench.jl.
Every step is timed alone with torch.cuda.synchronize() before the clock stops. One JSON
line per mode: {"impl":"torch","mode":"eager"|"graph","us":median µs,"steps":n,...}.

    python3 bench/anchors/graph_anchor.py [--steps N]
"""
import json, statistics, sys, time

import torch

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 2000
dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
lossf = torch.nn.CrossEntropyLoss()
xs = [torch.rand(64, 64, device=dev) for _ in range(8)]
ys = [torch.randint(0, 10, (64,), device=dev) for _ in range(8)]


def step(x, y):
    opt.zero_grad(set_to_none=False)
    loss = lossf(model(x), y)
    loss.backward()
    opt.step()
    return loss


def timed(f, n):
    ts = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        f(i)
        torch.cuda.synchronize()
        ts.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(ts)


name = torch.cuda.get_device_name()
for i in range(20):
    step(xs[i % 8], ys[i % 8])
torch.cuda.synchronize()
us = timed(lambda i: step(xs[i % 8], ys[i % 8]), steps)
print(json.dumps({"impl": "torch", "mode": "eager", "us": round(us, 2), "steps": steps, "device": name,
                  "torch": torch.__version__}))

# capture: warm-up on a side stream, then the whole step into one graph over static inputs
sx, sy = xs[0].clone(), ys[0].clone()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        step(sx, sy)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_loss = step(sx, sy)


def replay(i):
    sx.copy_(xs[i % 8])
    sy.copy_(ys[i % 8])
    g.replay()


us = timed(replay, steps)
us_launch = timed(lambda i: g.replay(), steps)
print(json.dumps({"impl": "torch", "mode": "graph", "us": round(us, 2), "us_launch_only": round(us_launch, 2),
                  "steps": steps, "device": name, "torch": torch.__version__}))

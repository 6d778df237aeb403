# PyTorch's (CUB's) side of bench/julia/scan_probe.jl: torch.cumsum(x, 0, out=dst) of n Float32
# with the input prepared three ways (same / fresh / refill, as there) and back to back ("burst",
# 100 calls between two events, ms a call), median ms between CUDA
# events of REPS calls (default 15), JSON lines {"op", "impl": "torch", "prep", "n", "ms_events"}.
#   python3 bench/anchors/scan_probe.py [n]
import json, os, statistics, sys
import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("SCAN_PROBE_N", 10**8))
reps = int(os.environ.get("REPS", "15"))
src = torch.rand(n, device="cuda")
dst = torch.empty_like(src)
refill = torch.empty_like(src)
ops = {"cumsum": lambda x: torch.cumsum(x, 0, out=dst), "copy": lambda x: dst.copy_(x), "sum": lambda x: x.sum()}

def prep(kind):
    if kind == "same":
        return src
    if kind == "refill":
        refill.copy_(src)
        return refill
    return src.clone()

# "burst": 100 calls on src back to back between two events, ms a call
for name, f in ops.items():
    f(src); torch.cuda.synchronize()
    ts = []
    for k in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); a.record()
        for _ in range(100):
            f(src)
        b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) / 100)
    print(json.dumps({"op": name, "impl": "torch", "prep": "burst", "n": n, "ms_events": round(statistics.median(ts), 4)}), flush=True)

for kind in ("same", "fresh", "refill"):
    for name, f in ops.items():
        ts = []
        for k in range(reps + 1):
            x = prep(kind)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); f(x); b.record(); b.synchronize()
            if k > 0:
                ts.append(a.elapsed_time(b))
            del x
        print(json.dumps({"op": name, "impl": "torch", "prep": kind, "n": n, "ms_events": round(statistics.median(ts), 4)}), flush=True)

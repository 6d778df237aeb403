"""Copy bandwidth between two GPUs through PyTorch, to compare with bench/julia/peer_copy.jl:
`x.to("cuda:1")` of a 256 MiB uint8 tensor on cuda:0 (a new tensor each time, from the
caching allocator), `y.copy_(x)` into a preallocated tensor on cuda:1, the reverse
direction, and a copy within cuda:0. Each copy is followed by synchronising both devices
and timed with perf_counter; medians of REPS after a warm-up. One JSON line per
measurement.

    python3 bench/anchors/peer_copy_torch.py [MiB] [reps]
"""
import json
import statistics
import sys
import time

import torch

MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 256
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
assert torch.cuda.device_count() >= 2, "needs two GPUs"
n = MIB << 20
d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
x = torch.full((n,), 0x5A, dtype=torch.uint8, device=d0)
y = torch.empty(n, dtype=torch.uint8, device=d1)
z = torch.empty(n, dtype=torch.uint8, device=d0)


def sync():
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)


def timed(f):
    f(); f(); sync()
    ts = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


peer = torch.cuda.can_device_access_peer(1, 0)
rows = [
    (f'x.to("cuda:1") (peer access {"yes" if peer else "no"})', timed(lambda: x.to(d1))),
    ("y.copy_(x) cuda:0->cuda:1", timed(lambda: y.copy_(x))),
    ("x.copy_(y) cuda:1->cuda:0", timed(lambda: x.copy_(y))),
    ("z.copy_(x) within cuda:0", timed(lambda: z.copy_(x))),
]
assert int(y[0]) == 0x5A
for what, t in rows:
    print(json.dumps({"bench": "peer_copy", "impl": "torch", "what": what, "bytes": n, "median_s": round(t, 6),
                      "GBps": round(n / t / 1e9, 2), "device": torch.cuda.get_device_name(0),
                      "torch": torch.__version__}))

"""torch.sort / torch.argsort / torch.cumsum and CuPy's sort / argsort / cumsum (CUB) and a device copy at the
sizes of bench/julia/sort_bench.jl, as JSON lines {"op", "impl", "n", "ms"} (median of 15 timed runs
after one warm-up, CUDA events). python3 bench/anchors/sort_anchor.py [n ...]"""
import json, statistics, sys
import torch

sizes = [int(s) for s in sys.argv[1:]] or [10**6, 10**8]

def timed(f, setup):
    ts = []
    for k in range(16):
        x = setup()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(x); b.record(); b.synchronize()
        if k: ts.append(a.elapsed_time(b))
        del x
    return statistics.median(ts)

def emit(op, impl, n, ms):
    row = {"op": op, "impl": impl, "n": n, "ms": round(ms, 3)}
    if op in ("cumsum_f32", "copy_f32"):
        row["gbps"] = round(8 * n / ms / 1e6, 1)
    print(json.dumps(row), flush=True)

types = {"sort_f32": torch.float32, "sort_i64": torch.int64, "sort_u32": torch.int32}
for n in sizes:
    for op, dt in types.items():
        src = torch.rand(n, device="cuda") if dt == torch.float32 else torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=dt)
        emit(op, "torch", n, timed(lambda x: torch.sort(x), lambda: src.clone()))
    src = torch.rand(n, device="cuda")
    emit("sortperm_f32", "torch", n, timed(lambda x: torch.argsort(x, stable=True), lambda: src.clone()))
    emit("cumsum_f32", "torch", n, timed(lambda x: torch.cumsum(x, 0), lambda: src.clone()))
    dst = torch.empty_like(src)
    emit("copy_f32", "torch", n, timed(lambda x: dst.copy_(x), lambda: src.clone()))
    del dst
    del src
try:
    import cupy as cp
    for n in sizes:
        for op, dt in (("sort_f32", cp.float32), ("sort_i64", cp.int64), ("sort_u32", cp.uint32)):
            src = cp.random.random(n).astype(dt) if dt == cp.float32 else cp.random.randint(0, 2**31 - 1, n).astype(dt)
            emit(op, "cupy", n, timed(lambda x: x.sort(), lambda: src.copy()))
        src = cp.random.random(n).astype(cp.float32)
        emit("sortperm_f32", "cupy", n, timed(lambda x: cp.argsort(x), lambda: src.copy()))
        emit("cumsum_f32", "cupy", n, timed(lambda x: cp.cumsum(x), lambda: src.copy()))
        dst = cp.empty_like(src)
        emit("copy_f32", "cupy", n, timed(lambda x: dst.__setitem__(slice(None), x), lambda: src.copy()))
        del dst
        del src
except ImportError as e:
    print(f"# CuPy not available: {e}", file=sys.stderr)

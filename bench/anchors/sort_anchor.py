"""torch.sort / torch.argsort / torch.cumsum and CuPy's sort / argsort / cumsum (CUB) and a device copy at the
sizes of bench/julia/sort_bench.jl, as JSON lines {"op", "impl", "n", "ms"} (median of 15 timed runs
after one warm-up, CUDA events). python3 bench/anchors/sort_anchor.py [n ...]

The keys are those of sort_bench.jl: Float32 uniform in [0, 1), Int64 and 32-bit integers over
their whole range (every 8-bit digit random; CUB sorts every digit), and "sort_i64_31bit": Int64
in [0, 2^31), whose four high digits are zero in every key (CUB's onesweep copies a tile whose
keys share their digit without ranking it; CuMem skips a digit equal over all keys)."""
import json, os, statistics, sys
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
    if op.split("@")[0] in ("cumsum_f32", "cumsum!_f32", "copy_f32"):
        row["gbps"] = round(8 * n / ms / 1e6, 1)
    print(json.dumps(row), flush=True)

def torch_keys(op, n):
    if op == "sort_f32":
        return torch.rand(n, device="cuda")
    r32 = lambda: torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=torch.int64)
    if op == "sort_u32":      # (torch sorts no uint32: int32 over its whole range)
        return r32().to(torch.int32)
    if op == "sort_i64":      # (the whole range: two random 32-bit halves)
        return (r32() << 32) | (r32() & 0xFFFFFFFF)
    return torch.randint(0, 2**31 - 1, (n,), device="cuda", dtype=torch.int64)    # sort_i64_31bit

def cupy_keys(op, n):
    if op == "sort_f32":
        return cp.random.random(n).astype(cp.float32)
    if op == "sort_u32":
        return cp.random.randint(0, 2**32, n, dtype=cp.int64).astype(cp.uint32)
    if op == "sort_i64":
        r32 = lambda: cp.random.randint(-2**31, 2**31 - 1, n, dtype=cp.int64)
        return (r32() << 32) | (r32() & 0xFFFFFFFF)
    return cp.random.randint(0, 2**31 - 1, n, dtype=cp.int64)                           # sort_i64_31bit

OPS = ("sort_f32", "sort_i64", "sort_u32", "sort_i64_31bit")
for n in sizes:
    for op in OPS:
        src = torch_keys(op, n)
        emit(op, "torch", n, timed(lambda x: torch.sort(x), lambda: src.clone()))
    src = torch.rand(n, device="cuda")
    emit("sortperm_f32", "torch", n, timed(lambda x: torch.argsort(x, stable=True), lambda: src.clone()))
    emit("cumsum_f32", "torch", n, timed(lambda x: torch.cumsum(x, 0), lambda: src.clone()))
    dst = torch.empty_like(src)
    emit("copy_f32", "torch", n, timed(lambda x: dst.copy_(x), lambda: src.clone()))
    del dst
    del src
# SORT_BURST=1: the scan and the copy at the largest size, 20 calls back to back between two
# events (no synchronize between them: the GPU never idles), ms per call ("<op>@burst")
def burst(f, reps=20):
    ts = []
    for k in range(6):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            f()
        b.record(); b.synchronize()
        if k: ts.append(a.elapsed_time(b) / reps)
    return statistics.median(ts)

if os.environ.get("SORT_BURST") == "1":
    n = max(sizes)
    src = torch.rand(n, device="cuda"); dst = torch.empty_like(src)
    emit("cumsum!_f32@burst", "torch", n, burst(lambda: torch.cumsum(src, 0, out=dst)))
    emit("copy_f32@burst", "torch", n, burst(lambda: dst.copy_(src)))
    emit("cumsum!_f32@samein", "torch", n, burst(lambda: torch.cumsum(src, 0, out=dst), reps=1))
    del src, dst
try:
    import cupy as cp
    for n in sizes:
        for op in OPS:
            src = cupy_keys(op, n)
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

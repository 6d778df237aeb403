# Where a scan on a freshly written input loses its time (issue 33): `cumsum!` of 10^8 Float32
# costs about 0.3 ms more when its input was written just before the call (session 14: 0.72-0.76
# ms against 0.445 on the same input each time; PyTorch's CUB scan pays about 0.01 ms for the
# same), while a copy or a `sum` over the same fresh input does not. Each row is one way of
# preparing the input before the clock starts, timed three ways (medians of REPS, default 15):
#   "ms"          the host clock from the call to a synchronize after it (as sort_bench.jl's rows)
#   "ms_enqueue"  the host clock until the call returns (no synchronize): the host's share
#   "ms_events"   between two timing events on the task's stream around the call (GPU time,
#                 queueing gaps included)
# Preparations ("prep"):
#   same        the one input `src`, nothing written before the call
#   fresh       x = copy(src) (a new array from the pool, written by a device copy)
#   refill      one array x allocated once, `copyto!(x, src)` before each call (written, not new)
#   fresh2      x = copy(src), then the operation once untimed, then the timed call (new, read once)
#   flush       x = copy(src), then 1.6 GB of other copies (L2 and TLB hold other data)
#   fresh_nofree x = copy(src), never freed during the loop (each a different block)
#   burst       (no preparation) 100 calls on `src` back to back between two timing events:
#               "ms_events" a call
# Operations: cumsum! into a preallocated dst; copyto!(dst, x); sum(x).
# JSON lines {"op", "prep", "n", "ms", "ms_enqueue", "ms_events"}. Run on a GPU:
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/scan_probe.jl [n]     (or SCAN_PROBE_N=n; default 10^8)
# Under Nsight Compute, SCAN_PROBE_ONLY=<op>:<prep> runs that row's timed calls alone (5 of them).
using CuMem, Statistics, Printf
CuMem.allowscalar(false)

n = parse(Int, isempty(ARGS) ? get(ENV, "SCAN_PROBE_N", "100000000") : ARGS[1])
reps = parse(Int, get(ENV, "REPS", "15"))
src = CuMem.rand(Float32, n)
dst = similar(src)
other = [CuMem.rand(Float32, n) for _ in 1:2]     # 2 x 400 MB for the flush
ops = (cumsum = x -> cumsum!(dst, x), copy = x -> copyto!(dst, x), sum = x -> sum(x))
refill = similar(src)
kept = CuArray{Float32,1}[]

function prep(kind)
    kind === :same && return src
    kind === :refill && (copyto!(refill, src); return refill)
    x = copy(src)
    kind === :fresh2 && return x
    if kind === :flush
        for k in 1:2; copyto!(other[3 - k], other[k]); end
    end
    kind === :fresh_nofree && push!(kept, x)
    return x
end
release(kind, x) = (kind in (:fresh, :fresh2, :flush)) && CuMem.unsafe_free!(x)

function row(opname, f, kind)
    th, te, tv = Float64[], Float64[], Float64[]
    s = CuMem.stream()
    for k in 0:reps
        x = prep(kind)
        kind === :fresh2 && f(x)
        CuMem.synchronize()
        t0 = time_ns()
        f(x)
        t1 = time_ns()
        CuMem.synchronize()
        t2 = time_ns()
        x2 = kind === :same || kind === :refill ? x : (release(kind, x); prep(kind))
        kind === :fresh2 && f(x2)
        CuMem.synchronize()
        ev = CuMem.@elapsed s f(x2)
        release(kind, x2)
        if k > 0
            push!(th, (t2 - t0) / 1e6); push!(te, (t1 - t0) / 1e6); push!(tv, ev * 1e3)
        end
    end
    foreach(CuMem.unsafe_free!, kept); empty!(kept)
    @printf("{\"op\": \"%s\", \"prep\": \"%s\", \"n\": %d, \"ms\": %.4f, \"ms_enqueue\": %.4f, \"ms_events\": %.4f}\n",
            opname, kind, n, median(th), median(te), median(tv))
    flush(stdout)
end

# "burst": 100 calls on the same input back to back between two timing events, ms a call
# (the host queues ahead unless its own share is the larger: then that share)
function burst_row(opname, f)
    s = CuMem.stream()
    f(src); CuMem.synchronize()
    ts = Float64[]
    for k in 1:5
        CuMem.synchronize()
        push!(ts, CuMem.@elapsed(s, (for _ in 1:100; f(src); end)) * 1e3 / 100)
    end
    @printf("{\"op\": \"%s\", \"prep\": \"burst\", \"n\": %d, \"ms_events\": %.4f}\n", opname, n, median(ts))
    flush(stdout)
end

only = get(ENV, "SCAN_PROBE_ONLY", "")
if isempty(only)
    for (name, f) in pairs(ops); burst_row(string(name), f); end
    for kind in (:same, :fresh, :refill, :fresh2, :flush, :fresh_nofree), (name, f) in pairs(ops)
        kind === :fresh_nofree && name !== :cumsum && continue
        row(string(name), f, kind)
    end
else
    name, kind = Symbol.(split(only, ':'))
    f = ops[name]
    for k in 1:3; x = prep(kind); f(x); CuMem.synchronize(); release(kind, x); end   # (compiled, warm)
    for k in 1:5
        x = prep(kind); kind === :fresh2 && f(x); CuMem.synchronize()
        f(x); CuMem.synchronize(); release(kind, x)
    end
end

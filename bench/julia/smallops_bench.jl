# Small operations at the launch limit (issue 26), CuMem side: one JSON object per line.
#
#   CUMEM_DEVICE=cuda BUILD=after julia --project=. bench/julia/smallops_bench.jl [--calls N] [--reps R] [--bandwidth] [--mlp]
#
# Rows ("bench":"small"): each operation on 1-element Float32 arrays (sum(A; dims=1) on a
# 4×4 one) called N times (default 20 000) in a row with one synchronize() at the end;
# "us" is µs per call, the median of R repetitions (default 5) after a warm-up. The same
# operations with Base on `Array`s in the same process are the rows of "impl":"Base"
# (the host device's in-place broadcast against Base's).
# --bandwidth ("bench":"bandwidth"): on 2^28 Float32, copyto! between CuArrays, axpy
# `y .= a .* x .+ y`, a fused `z .= x .* 2f0 .+ y ./ 3f0`, map!(+, z, x, y), fill!(z, 1.5f0),
# sum(x) and dot(x, y) (each returned to the host; PyTorch's rows are not), then Float64 axpy
# and an Int64 sum of two arrays on 2^27 elements (the same bytes): GB/s counting each
# array read or written once, and each as a fraction of the copy's bandwidth.
# --mlp ("bench":"mlp_step"): one SGD step of demo/mlp.jl's model on a 64-image batch.
# It uses only the API that main had before issue 26, so the same file measures both
# builds (BUILD names the build in every line; --project picks the package tree and
# CUMEM_LIBRARY its engine). bench/anchors/smallops_anchor.py measures PyTorch and CuPy the same
# way; `bench/gpu/run.sh smallops` runs all of it in one call.

using CuMem, LinearAlgebra, Printf, Random

const BUILD = get(ENV, "BUILD", "after")
function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : parse(typeof(default), ARGS[i+1])
end
const CALLS = option("--calls", 20_000)
const REPS = option("--reps", 5)

median_of(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n+1)÷2] : (s[n÷2] + s[n÷2+1]) / 2)
json(pairs...) = println("{", join(("\"$k\":" * (v isa AbstractString ? repr(v) : string(v)) for (k, v) in pairs), ","), "}")

const DEVICE = CuMem.device_name()
const SYNC = Ref{Any}(CuMem.synchronize)

# µs per call: `n` calls of f, then one synchronisation, the median of REPS repetitions.
function us_per_call(f, n = CALLS; sync = SYNC[])
    for _ in 1:min(n, 200)
        f()
    end
    sync()
    GC.gc()
    times = map(1:REPS) do _
        t0 = time_ns()
        for _ in 1:n
            f()
        end
        sync()
        (time_ns() - t0) / 1e3 / n
    end
    return median_of(times)
end

row(impl, name, us) = json("bench" => "small", "impl" => impl, "build" => BUILD, "row" => name,
                           "us" => round(us; digits = 3), "calls" => CALLS, "device" => DEVICE,
                           "julia" => string(VERSION))

CuMem.allowscalar(false)
s1, s2 = CuMem.fill(1f0, 1), CuMem.fill(2f0, 1)
r = similar(s1)
A = CuMem.fill(1f0, 4, 4)
b = s1 .> 0f0
empty = CuMem.on_host() ? nothing :
        CuMem.load_kernel("extern \"C\" __global__ void cumem_empty() {}", "cumem_empty")

rows = Any[
    ("s1 .+ s2, allocating (GC frees)", () -> (s1 .+ s2; nothing)),
    ("s1 .+ s2, allocating + unsafe_free!", () -> unsafe_free!(s1 .+ s2)),
    ("r .= s1 .+ s2, in place", () -> (r .= s1 .+ s2; nothing)),
    ("fill!(r, 1f0)", () -> (fill!(r, 1f0); nothing)),
    ("fill!(r, 0f0)", () -> (fill!(r, 0f0); nothing)),
    ("copyto!(r, s1), device to device", () -> (copyto!(r, s1); nothing)),
    ("sum(s1) returned to the host", () -> (sum(s1); nothing)),
    ("maximum(s1)", () -> (maximum(s1); nothing)),
    ("dot(s1, s2)", () -> (dot(s1, s2); nothing)),
    ("norm(s1)", () -> (norm(s1); nothing)),
    ("any(b)", () -> (any(b); nothing)),
    ("all(b)", () -> (all(b); nothing)),
    ("sum(A; dims = 1), 4x4", () -> (sum(A; dims = 1); nothing)),
    ("similar(s1) + unsafe_free!", () -> unsafe_free!(similar(s1))),
]
empty === nothing ||
    push!(rows, ("an empty kernel through CuMem.launch", () -> CuMem.launch(empty; blocks = 1, threads = 1)))
for (name, f) in rows
    row("CuMem", name, us_per_call(f))
end

# Base on Arrays, in the same process
h1, h2 = fill(1f0, 1), fill(2f0, 1)
hr = similar(h1)
hA = fill(1f0, 4, 4)
SYNC[] = () -> nothing
for (name, f) in (("s1 .+ s2, allocating (GC frees)", () -> (h1 .+ h2; nothing)),
                  ("r .= s1 .+ s2, in place", () -> (hr .= h1 .+ h2; nothing)),
                  ("fill!(r, 1f0)", () -> (fill!(hr, 1f0); nothing)),
                  ("copyto!(r, s1), device to device", () -> (copyto!(hr, h1); nothing)),
                  ("sum(s1) returned to the host", () -> (sum(h1); nothing)),
                  ("sum(A; dims = 1), 4x4", () -> (sum(hA; dims = 1); nothing)))
    row("Base", name, us_per_call(f))
end
SYNC[] = CuMem.synchronize

if "--bandwidth" in ARGS
    n = CuMem.on_host() ? 2^20 : 2^28
    x, y, z = CuMem.fill(1f0, n), CuMem.fill(2f0, n), CuMem.fill(0f0, n)
    a = 0.5f0
    per(f) = us_per_call(f, CuMem.on_host() ? 20 : 50) / 1e6     # seconds per call
    tc = per(() -> (copyto!(y, x); nothing))
    copy_gbps = 2 * 4 * n / tc / 1e9
    # one JSON line: `bytes` moved per element, GB/s and the fraction of the copy's
    function bandwidth_row(name, f, bytes, m = n)
        gbps = bytes * m / per(f) / 1e9
        json("bench" => "bandwidth", "impl" => "CuMem", "build" => BUILD, "row" => name, "n" => m,
             "gbps" => round(gbps; digits = 1), "of_copy" => round(gbps / copy_gbps; digits = 3),
             "device" => DEVICE)
    end
    for (name, f, bytes) in (("copy (copyto!)", () -> (copyto!(y, x); nothing), 8),
                             ("axpy y .= a .* x .+ y", () -> (y .= a .* x .+ y; nothing), 12),
                             ("fused z .= x .* 2f0 .+ y ./ 3f0", () -> (z .= x .* 2f0 .+ y ./ 3f0; nothing), 12),
                             ("map!(+, z, x, y)", () -> (map!(+, z, x, y); nothing), 12),
                             ("fill!(z, 1.5f0)", () -> (fill!(z, 1.5f0); nothing), 4),
                             ("sum(x)", () -> (sum(x); nothing), 4),
                             ("dot(x, y)", () -> (dot(x, y); nothing), 8))
        bandwidth_row(name, f, bytes)
    end
    # the same bytes in 8-byte elements (2^27 of them): Float64 axpy, Int64 sum of two arrays
    let m = n ÷ 2, xd = CuMem.fill(1.0, m), yd = CuMem.fill(2.0, m), xi = CuMem.fill(1, m), yi = CuMem.fill(2, m), zi = CuMem.fill(0, m)
        bandwidth_row("Float64 axpy yd .= 0.5 .* xd .+ yd (2^27)", () -> (yd .= 0.5 .* xd .+ yd; nothing), 24, m)
        bandwidth_row("Int64 zi .= xi .+ yi (2^27)", () -> (zi .= xi .+ yi; nothing), 24, m)
        foreach(unsafe_free!, (xd, yd, xi, yi, zi))
    end
    # the broadcast kernels' 4x unrolled loop (CuMem.BCAST_UNROLL, off by default since the
    # compiler branch's host-side review) in the same process, where the build has the switch
    if isdefined(CuMem, :BCAST_UNROLL)
        CuMem.BCAST_UNROLL[] = true
        CuMem.FAST_TABLE[] = IdDict{Any,Any}()          # the typed slots hold the plain kernels
        for (name, f, bytes) in (("axpy y .= a .* x .+ y, 4x unrolled loop", () -> (y .= a .* x .+ y; nothing), 12),
                                 ("fused z .= x .* 2f0 .+ y ./ 3f0, 4x unrolled loop", () -> (z .= x .* 2f0 .+ y ./ 3f0; nothing), 12))
            bandwidth_row(name, f, bytes)
        end
        CuMem.BCAST_UNROLL[] = false
        CuMem.FAST_TABLE[] = IdDict{Any,Any}()
    end
    foreach(unsafe_free!, (x, y, z))
end

if "--mlp" in ARGS
    include(joinpath(dirname(Base.active_project()), "demo", "mlp.jl"))
    X, labels = load_digits()
    Xtr, Ytr, _, _ = split_data(X, labels)
    nb = min(64, size(Xtr, 2))
    xb, yb = CuArray(Xtr[:, 1:nb]), CuArray(Ytr[:, 1:nb])
    model = MLP(MersenneTwister(42))
    t = us_per_call(() -> (train_step!(model, xb, yb, 0.01f0); nothing), 500)
    json("bench" => "mlp_step", "impl" => "CuMem", "build" => BUILD, "batch" => nb, "model" => "64-128-10",
         "ms" => round(t / 1e3; digits = 4), "device" => DEVICE)
end

# Pinned host memory, CuMem's side: upload (HtoD) and download (DtoH) bandwidth of a
# 256 MiB Float32 array from pinned (`CuMem.pinned`), registered (`CuMem.pin`) and
# pageable (`Array`) host memory, and the cache-hit alloc+free pair of the pinned host
# pool beside the device pool's. bench/anchors/pinned_anchor.py measures PyTorch's
# pin_memory() + .cuda(non_blocking=True) the same way; `bench/gpu/run.sh bandwidth` runs both.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/pinned_bench.jl [--quick]
#
# One JSON object per line:
#   {"bench":"htod"|"dtoh","impl":"cumem_pinned"|"cumem_registered"|"cumem_pageable","bytes":B,"gbps":G}
#     median over REPS of one copyto! of B bytes followed by synchronize(), in 1e9 bytes/s
#   {"bench":"pair","impl":"cumem_host_c"|"cumem_device_c","bytes":4096,"ns":N}
#     cumem_host_alloc + cumem_host_free (resp. cumem_alloc + cumem_free) through the C ABI,
#     a cache hit each, median ns per pair
#   {"bench":"pair","impl":"cumem_pinned_array"|"cumem_cuarray","bytes":4096,"ns":N}
#     CuMem.pinned(UInt8, 4096) + unsafe_free! (resp. CuArray{UInt8}(undef, 4096) +
#     unsafe_free!), median ns per pair
# `--quick` uses 1 MiB and 3 repetitions (a smoke test, also on the host device).

using CuMem

const QUICK = "--quick" in ARGS
const BYTES = QUICK ? 1 << 20 : 256 << 20
const REPS = QUICK ? 3 : 11
const DEVICE = CuMem.is_host_device() ? "host" : "cuda"

median(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

json(pairs...) = println("{", join((string('"', k, "\":", v isa AbstractString ? string('"', v, '"') : v) for (k, v) in pairs), ","), "}")

# Median bandwidth of `f()` (one copy of BYTES), each sample ending with synchronize() so
# that a copy the driver returned from early (pageable HtoD is staged) is counted whole.
function bandwidth(f)
    f(); f(); synchronize()
    samples = Float64[]
    for _ in 1:REPS
        t = time_ns()
        f()
        synchronize()
        push!(samples, BYTES / (time_ns() - t))      # bytes per ns = GB/s
    end
    return round(median(samples), digits = 3)
end

function copies()
    n = BYTES ÷ sizeof(Float32)
    x = CuArray{Float32}(undef, n)
    pageable = rand(Float32, n)                      # (pages touched)
    pinned = CuMem.pinned(Float32, n)
    pinned .= pageable
    registered = copy(pageable)
    CuMem.pin(registered)
    @assert CuMem.is_pinned(pinned) && CuMem.is_pinned(registered) && !CuMem.is_pinned(pageable)
    for (impl, h) in (("cumem_pinned", pinned), ("cumem_registered", registered), ("cumem_pageable", pageable))
        json("bench" => "htod", "impl" => impl, "device" => DEVICE, "bytes" => BYTES,
             "gbps" => bandwidth(() -> copyto!(x, h)))
        json("bench" => "dtoh", "impl" => impl, "device" => DEVICE, "bytes" => BYTES,
             "gbps" => bandwidth(() -> copyto!(h, x)))
    end
    @assert pinned == Array(x)
    unsafe_free!(pinned)
    unsafe_free!(x)
    return nothing
end

function c_host_pairs(n)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    for _ in 1:n
        CuMem.c_host_alloc(UInt64(4096), out)
        CuMem.c_host_free(out[])
    end
end

function c_device_pairs(n)
    out = Ref{UInt64}(0)
    for _ in 1:n
        CuMem.c_alloc(UInt64(4096), out)
        CuMem.c_free(out[])
    end
end

function pinned_pairs(n)
    for _ in 1:n
        a = CuMem.pinned(UInt8, 4096)
        unsafe_free!(a)
    end
end

function cuarray_pairs(n)
    for _ in 1:n
        x = CuArray{UInt8}(undef, 4096)
        unsafe_free!(x)
    end
end

# Median ns per iteration of `f(n)`, `n` calibrated to about 50 ms per repetition (as
# bench/julia/julia_bench.jl).
function per_op(f, nmax)
    f(1000)
    t = time_ns(); f(1000)
    n = clamp(round(Int, 50e6 / max((time_ns() - t) / 1000, 1)), 100, nmax)
    GC.gc(true)
    samples = Float64[]
    for _ in 1:REPS
        t = time_ns()
        f(n)
        push!(samples, (time_ns() - t) / n)
    end
    GC.gc(true)
    return round(median(samples), digits = 1)
end

function pairs()
    nmax = QUICK ? 10_000 : 10_000_000
    for (impl, f) in (("cumem_host_c", c_host_pairs), ("cumem_device_c", c_device_pairs),
                      ("cumem_pinned_array", pinned_pairs), ("cumem_cuarray", cuarray_pairs))
        json("bench" => "pair", "impl" => impl, "device" => DEVICE, "bytes" => 4096, "ns" => per_op(f, nmax))
    end
end

copies()
pairs()

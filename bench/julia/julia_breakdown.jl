# Where the time of the Julia hot path goes: each piece of `CuArray{UInt8}(undef, 4096)` +
# `unsafe_free!` timed alone, in a loop, for the pool and device the environment selects
# (JULIA_CUDA_MEMORY_POOL, CUMEM_DEVICE). docs/design.md ("The Julia hot path") gives the
# figures of this machine.
#
#   julia --project=. bench/julia/julia_breakdown.jl [ROUNDS]
#
# Prints one JSON object per piece: the CPU time of the thread (CLOCK_THREAD_CPUTIME_ID,
# so that other processes on a shared machine do not inflate it) per iteration, in ns,
# over ROUNDS (default 6) rounds, each timing every piece once in turn over 500 000
# iterations followed by `GC.gc(false)`: `cpu_ns`, the total over all rounds divided by
# the iterations, and `median_ns`, the median of the rounds. The collection at the end of
# each timed loop makes every piece pay for the garbage and the finalizers it leaves (a
# piece that registers finalizers would otherwise leave their cost to whichever piece
# runs when Julia next collects); it adds ~0.5 ns per iteration of its own.
#
#   ccall_pair    cumem_alloc_ex + cumem_free through ccall: the engine pair and the C ABI
#   ccall_burst   the same, 16 384 allocations then their 16 384 frees (the GC-freed
#                 loop's pattern: a collection frees what was allocated since the last)
#   charge_pair   charge! + uncharge! (the GC pressure's atomics)
#   charge_burst  16 384 charge! then 16 384 uncharge! (each of these lowers the low mark)
#   stream        live_handle(stream()) (the task-local stream lookup)
#   object        allocating a 48-byte mutable object (the array's size class), dropped
#   finalizer     allocating it and registering a C-pointer finalizer (run by the GC later)
#   finalizer_gc16k  the same with GC.gc(false) every 16 384 objects (the GC pressure's
#                 rate for 4 KiB arrays: 64 MiB of growth)
#   pair_nofin    the pair's work without the finalizer: charge!, cumem_alloc_ex, a 48-byte
#                 object holding the address, uncharge!, cumem_free
#   pair          CuArray{UInt8}(undef, 4096) + unsafe_free!: the whole thing
#   gc_pair       CuArray{UInt8}(undef, 4096) left to the GC (its finalizer frees it)
# The GC cost of `object` and `finalizer` (collecting, calling the finalizer) is included.

using CuMem

const ROUNDS = isempty(ARGS) ? 6 : parse(Int, ARGS[1])
const N = 500_000

struct Timespec
    sec::Int
    nsec::Int
end
function cpu_ns()
    r = Ref{Timespec}()
    ccall(:clock_gettime, Cint, (Cint, Ptr{Timespec}), 3, r)
    return r[].sec * 1_000_000_000 + r[].nsec
end
median(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

mutable struct Obj48            # a CuVector's layout: 4 words (48-byte size class)
    a::UInt64
    b::Int
    c::Bool
    d::Any
    e::Int
end
const SINK = Ref{Any}(nothing)
noop_finalizer(o::Obj48) = nothing
const NOOP = Ref(C_NULL)

function ccall_pair(n)
    out = Ref{UInt64}(0)
    for _ in 1:n
        CuMem.c_alloc_noreclaim(UInt64(4096), out)
        CuMem.c_free(out[])
    end
end
const BURST = Vector{UInt64}(undef, 16384)
function ccall_burst(n)
    out = Ref{UInt64}(0)
    k = length(BURST)
    for _ in 1:cld(n, k)
        for i in 1:k
            CuMem.c_alloc_noreclaim(UInt64(4096), out)
            @inbounds BURST[i] = out[]
        end
        for i in 1:k
            CuMem.c_free(@inbounds BURST[i])
        end
    end
end
function uncharge_burst(n)
    k = 16384
    for _ in 1:cld(n, k)
        for i in 1:k
            CuMem.charge!(4096)
        end
        for i in 1:k
            CuMem.uncharge!(4096)
        end
    end
end
function charge_pair(n)
    for _ in 1:n
        CuMem.charge!(4096)
        CuMem.uncharge!(4096)
    end
end
function stream_lookup(n)
    h = UInt64(0)
    for _ in 1:n
        h += CuMem.live_handle(CuMem.stream())
    end
    return h
end
function object(n)
    for i in 1:n
        SINK[] = Obj48(UInt64(i), i, false, nothing, 0)
    end
    SINK[] = nothing
end
function with_finalizer(n)
    f = NOOP[]
    for i in 1:n
        o = Obj48(UInt64(i), i, false, nothing, 0)
        finalizer(f, o)
        SINK[] = o
    end
    SINK[] = nothing
end
function with_finalizer_collect(n)
    f = NOOP[]
    for i in 1:n
        o = Obj48(UInt64(i), i, false, nothing, 0)
        finalizer(f, o)
        SINK[] = o
        i % 16384 == 0 && GC.gc(false)
    end
    SINK[] = nothing
end
function gc_pair(n)
    for _ in 1:n
        x = CuArray{UInt8}(undef, 4096)
        SINK[] = x
    end
    SINK[] = nothing
end
function pair_nofin(n)
    out = Ref{UInt64}(0)
    for _ in 1:n
        CuMem.charge!(4096)
        CuMem.c_alloc_noreclaim(UInt64(4096), out)
        SINK[] = Obj48(out[], 4096, false, nothing, 0)
        CuMem.uncharge!(4096)
        CuMem.c_free(out[])
    end
    SINK[] = nothing
end
function pair(n)
    for _ in 1:n
        unsafe_free!(CuArray{UInt8}(undef, 4096))
    end
end

const PIECES = [("ccall_pair", ccall_pair), ("ccall_burst", ccall_burst), ("charge_pair", charge_pair), ("charge_burst", uncharge_burst),
                ("stream", stream_lookup), ("object", object), ("finalizer", with_finalizer),
                ("finalizer_gc16k", with_finalizer_collect), ("pair_nofin", pair_nofin), ("pair", pair),
                ("gc_pair", gc_pair)]

function main()
    NOOP[] = @cfunction(noop_finalizer, Cvoid, (Ref{Obj48},))
    for (_, f) in PIECES
        f(1000)
    end
    GC.gc(true)
    samples = Dict(name => Float64[] for (name, _) in PIECES)
    for _ in 1:ROUNDS
        for (name, f) in PIECES
            t = cpu_ns()
            f(N)
            GC.gc(false)
            push!(samples[name], (cpu_ns() - t) / N)
        end
    end
    pool = CuMem.pool_name()
    for (name, _) in PIECES
        println("{\"bench\":\"julia_breakdown\",\"pool\":\"", pool, "\",\"julia\":\"", VERSION,
                "\",\"piece\":\"", name,
                "\",\"cpu_ns\":", round(sum(samples[name]) / ROUNDS, digits = 1),
                ",\"median_ns\":", round(median(samples[name]), digits = 1), "}")
    end
end
main()

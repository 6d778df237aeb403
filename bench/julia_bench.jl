# Julia-level benchmark of CuMem, for the pool and device the environment selects
# (JULIA_CUDA_MEMORY_POOL, CUMEM_DEVICE, read when CuMem loads). `bench/julia_bench.sh`
# runs it once per pool.
#
#   julia --project=. bench/julia_bench.jl [--quick] [TRACE]
#
# Prints one JSON object per line:
#   {"bench":"julia_pair", ...}     CuArray{UInt8}(undef, 4096) + unsafe_free!, median ns per pair
#   {"bench":"julia_gc_pair", ...}  the same with freeing left to the GC (finalizers), ns per allocation
#                                   including the collections it causes
#   {"bench":"julia_replay", ...}   the trace replayed through CuArrays (demo/trace.jl), warm ns per event
# Medians over repetitions; each repetition times a whole loop with time_ns().

using CuMem

include(joinpath(@__DIR__, "trace.jl"))

const QUICK = "--quick" in ARGS
const TRACE = let i = findfirst(a -> !startswith(a, "--"), ARGS)
    i === nothing ? joinpath(@__DIR__, "..", "data", "gpt2_train.trace") : ARGS[i]
end
const REPS = QUICK ? 3 : 9
const POOL = CuMem.pool_name()
const DEVICE = occursin("no GPU", CuMem.device_name()) ? "host" : "cuda"

median(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

json(pairs...) = println("{", join((string('"', k, "\":", v isa AbstractString ? string('"', v, '"') : v) for (k, v) in pairs), ","), "}")

function pairs_explicit(n)
    for _ in 1:n
        x = CuArray{UInt8}(undef, 4096)
        unsafe_free!(x)
    end
end

function pairs_gc(n)
    for _ in 1:n
        x = CuArray{UInt8}(undef, 4096)
        x = nothing
    end
end

# Times `f(n)` REPS times and returns the median ns per iteration; `n` is chosen so that
# one repetition takes about 50 ms (at most `nmax`), so slow pools (`none` on a GPU: one
# cuMemAlloc per pair) finish in seconds too.
function per_op(f, nmax)
    f(1000)                                  # compile and warm the pool
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
    return median(samples)
end

n = QUICK ? 20_000 : 1_000_000                  # at most
json("bench" => "julia_pair", "pool" => POOL, "device" => DEVICE, "size" => 4096,
     "ns_per_pair" => round(per_op(pairs_explicit, n), digits = 1))
json("bench" => "julia_gc_pair", "pool" => POOL, "device" => DEVICE, "size" => 4096,
     "ns_per_alloc" => round(per_op(pairs_gc, n), digits = 1))

tr = read_trace(TRACE)
if QUICK && length(tr.alloc) > 2000             # a prefix, with its own live blocks freed after each pass
    k = 2000
    tr = Trace(tr.name, tr.alloc[1:k], tr.id[1:k], tr.bytes[1:k], tr.nblocks, tr.peak_live, tr.events_at_peak)
end
live = Slot[nothing for _ in 1:tr.nblocks]
replay!(live, tr); free_all!(live)              # cold pass: compiles and fills the pool
samples = Float64[]
for _ in 1:(QUICK ? 2 : 5)
    GC.gc(true)
    t = time_ns()
    replay!(live, tr)
    push!(samples, (time_ns() - t) / length(tr.alloc))
    free_all!(live)
end
json("bench" => "julia_replay", "pool" => POOL, "device" => DEVICE, "trace" => tr.name,
     "events" => length(tr.alloc), "ns_per_event_warm" => round(median(samples), digits = 1))

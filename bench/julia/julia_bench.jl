# Julia-level benchmark of CuMem, for the pool and device the environment selects
# (JULIA_CUDA_MEMORY_POOL, CUMEM_DEVICE, read when CuMem loads). `bench/julia/julia_bench.sh`
# runs it once per pool.
#
#   julia --project=. bench/julia/julia_bench.jl [--quick] [TRACE]
#
# Prints one JSON object per line:
#   {"bench":"julia_pair", ...}     CuArray{UInt8}(undef, 4096) + unsafe_free!, median ns per pair
#   {"bench":"julia_gc_pair", ...}  the same with freeing left to the GC (finalizers), ns per allocation
#                                   including the collections it causes
#   {"bench":"julia_replay", ...}   the trace replayed through CuArrays (bench/julia/trace.jl), warm ns per event
# Medians over repetitions; each repetition times a whole loop, in wall-clock time
# (`ns_per_pair`, `ns_per_alloc`) and in the CPU time of the thread (`cpu_ns_per_pair`,
# `cpu_ns_per_alloc`; Linux), which other processes on a shared machine do not inflate
# (Julia 1.5 collects and runs finalizers on the allocating thread, so it includes them).
# Both loops are measured warm: after enough iterations that the GC-freed loop has gone
# through several collections, so that neither includes the cold growth of the pool.
# Each repetition of the GC-freed loop spans at least three of the collections that
# CuMem's GC pressure makes (one per `gc_pressure().min_growth` bytes of dropped arrays,
# 16 384 arrays of 4 KiB on a large device), so that a median over repetitions cannot
# leave the collections out (with `--quick` it used to: 76 ns "per GC-freed allocation").
# Every line names the Julia version (`julia`): the GC and the finalizer machinery differ
# between releases. After each timed repetition the benchmark runs `GC.gc(false)` and
# reports its CPU time per iteration apart (`collect_cpu_ns_per_pair`,
# `collect_cpu_ns_per_alloc`): the cost of collecting what the repetition left, which for
# the explicit pair is the finalizer that every array keeps after `unsafe_free!`
# (design.md, "Where a pair's time goes"). A loop of pairs pays it at Julia's own
# collections, about one per 10^6 arrays, which a median over repetitions would leave out;
# the pair's full cost is the sum of the two figures.
# The GC line also gives the pool's device allocations and cache hits per allocation and
# the collections started by CuMem's GC pressure (`CuMem.gc_pressure`) during the timed
# repetitions.

using CuMem

include(joinpath(@__DIR__, "trace.jl"))

const QUICK = "--quick" in ARGS
const TRACE = let i = findfirst(a -> !startswith(a, "--"), ARGS)
    i === nothing ? joinpath(@__DIR__, "..", "..", "data", "gpt2_train.trace") : ARGS[i]
end
const REPS = QUICK ? 3 : 9
const POOL = CuMem.pool_name()
const DEVICE = occursin("no GPU", CuMem.device_name()) ? "host" : "cuda"

median(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

json(pairs...) = println("{", join((string('"', k, "\":", v isa AbstractString ? string('"', v, '"') : v) for (k, v) in pairs), ","), "}")

# The CPU time of this thread in ns (CLOCK_THREAD_CPUTIME_ID), NaN off Linux.
struct Timespec
    sec::Int
    nsec::Int
end
function cpu_ns()
    Sys.islinux() || return NaN
    r = Ref{Timespec}()
    ccall(:clock_gettime, Cint, (Cint, Ptr{Timespec}), 3, r)
    return Float64(r[].sec * 1_000_000_000 + r[].nsec)
end

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

pressure_collections() = isdefined(CuMem, :gc_pressure) ? CuMem.gc_pressure().collections : -1

# Times `f(n)` REPS times and returns (median wall ns, median CPU ns) per iteration and
# what the repetitions did to the pool. After compiling, `f` runs for at least 0.2 s (and
# 50 000 iterations) to reach its steady state; `n` is chosen from that warm rate so that
# one repetition takes about 50 ms (at most `nmax`), so slow pools (`none` on a GPU: one
# cuMemAlloc per pair) finish in seconds too.
function per_op(f, nmax, nmin = 100)
    f(1000)                                  # compile
    done, t0 = 0, time_ns()
    while done < (QUICK ? 20_000 : 50_000) || time_ns() - t0 < (QUICK ? 0.05e9 : 0.2e9)
        f(1000)
        done += 1000
    end
    warm_ns = (time_ns() - t0) / done
    n = max(clamp(round(Int, 50e6 / max(warm_ns, 1)), 100, nmax), nmin)
    walls, cpus, collects = Float64[], Float64[], Float64[]
    s0 = memory_stats()
    c0 = pressure_collections()
    for _ in 1:REPS
        t, c = time_ns(), cpu_ns()
        f(n)
        c1, t1 = cpu_ns(), time_ns()
        GC.gc(false)                         # what this repetition left (see the header)
        push!(cpus, (c1 - c) / n)
        push!(walls, (t1 - t) / n)
        push!(collects, (cpu_ns() - c1) / n)
    end
    s1 = memory_stats()
    total = REPS * n
    stats = (device_allocs = round((s1.num_device_allocations - s0.num_device_allocations) / total, digits = 4),
             hit_rate = round((s1.num_cache_hits - s0.num_cache_hits) / total, digits = 4),
             collections = pressure_collections() - c0, n = n, collect = median(collects))
    GC.gc(true)
    return median(walls), median(cpus), stats
end

n = QUICK ? 20_000 : 1_000_000                  # at most
w, c, st = per_op(pairs_explicit, n)
json("bench" => "julia_pair", "pool" => POOL, "device" => DEVICE, "julia" => string(VERSION), "size" => 4096,
     "ns_per_pair" => round(w, digits = 1), "cpu_ns_per_pair" => round(c, digits = 1),
     "collect_cpu_ns_per_pair" => round(st.collect, digits = 1), "n" => st.n)
per_collection = isdefined(CuMem, :gc_pressure) ? CuMem.gc_pressure().min_growth ÷ 4096 : 0
w, c, st = per_op(pairs_gc, n, 3 * per_collection)
json("bench" => "julia_gc_pair", "pool" => POOL, "device" => DEVICE, "julia" => string(VERSION), "size" => 4096,
     "ns_per_alloc" => round(w, digits = 1), "cpu_ns_per_alloc" => round(c, digits = 1),
     "collect_cpu_ns_per_alloc" => round(st.collect, digits = 1),
     "device_allocs_per_alloc" => st.device_allocs, "cache_hit_rate" => st.hit_rate,
     "gc_pressure_collections" => st.collections, "n" => st.n)

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

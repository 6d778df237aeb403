# Memory status, statistics and reclaim (CUDA.jl's memory_status/reclaim, PyTorch's
# memory_stats/memory_summary/reset_peak_memory_stats).

const STAT_FIELDS = fieldnames(CStats)

"""
    memory_stats() -> NamedTuple
    memory_stats(:host) -> NamedTuple

A snapshot of the current task's device's statistics (`memory_stats(dev)` for device
`dev`; each device has its own pool and statistics), one field per field of `cumem_stats_t`
(`cumem_stats_t` in include/cumem.h): byte counts and counters as `Int`, `cache_hit_rate` and
`fragmentation_ratio` as `Float64`.

| field | meaning |
|:--|:--|
| `requested_bytes` | sum of the sizes asked for, live |
| `allocated_bytes` | sum of the block sizes handed out (after rounding), live |
| `cached_bytes` | bytes held by the pool, free for reuse |
| `reserved_bytes` | bytes obtained from the device |
| `inactive_split_bytes` | free bytes inside partly used segments (split pool) |
| `peak_requested_bytes` … `peak_reserved_bytes` | high-water marks since the last [`reset_memory_stats!`] |
| `num_allocations`, `num_frees` | successful allocations / frees |
| `num_cache_hits`, `num_cache_misses` | allocations served from the cache / by the device |
| `num_device_allocations`, `num_device_frees` | device calls |
| `device_alloc_ns`, `device_free_ns` | time spent in them |
| `num_alloc_retries`, `num_ooms` | retries after releasing the cache; out-of-memory errors raised (one per `OutOfGPUMemoryError`, as PyTorch counts) |
| `limit_bytes` | `JULIA_CUDA_MEMORY_LIMIT` in bytes, 0 when none |
| `cache_hit_rate` | hits / (hits + misses) |
| `fragmentation_ratio` | (reserved − allocated) / reserved |
| `num_device_free_errors` | device frees that reported an error (the memory counts as released) |
| `num_gc_retries` | allocations retried after the out-of-memory ladder ran `GC.gc` |
| `num_reclaim_retries` | allocations retried in the ladder's last rung (the engine releases its cache and retries; once per ladder) |
| `num_graph_pools` | graph-private pools alive ([`CuMem.capture`](@ref), [`CuMem.graph_pool`](@ref)) |
| `graph_pool_reserved_bytes` | device memory those pools hold (live blocks and their caches), part of `reserved_bytes` |
| `graph_pool_allocated_bytes` | their live blocks' bytes, part of `allocated_bytes` |

The last two answer "why is my loop slow?": each GC retry is a garbage collection forced
by device memory running out (keep fewer arrays alive, or free them with `unsafe_free!`).

`memory_stats(:host)` gives the same fields for the pinned host pool (page-locked host
memory of [`CuMem.pinned`](@ref); "device" calls are `cuMemHostAlloc`/`cuMemFreeHost`,
`limit_bytes` is `CUMEM_PINNED_LIMIT`'s), as PyTorch's `torch.cuda.host_memory_stats()`;
`memory_stats(:device)` is `memory_stats()` (the graph-pool fields are 0 for the host pool).
Other symbols are an `ArgumentError`.
"""
function memory_stats(which::Symbol = :device)
    r = Ref{CStats}()
    if which === :device
        check(c_get_stats(r))
    elseif which === :host
        check(c_host_get_stats(r))
    else
        throw(ArgumentError("memory_stats: which memory, :device or :host? Got :$which"))
    end
    s = r[]
    vals = ntuple(i -> (v = getfield(s, i); v isa UInt64 ? v % Int : v), fieldcount(CStats))
    n, res, alloc = which === :device ? graph_pool_totals() : (0, 0, 0)
    return NamedTuple{(STAT_FIELDS..., :num_graph_pools, :graph_pool_reserved_bytes, :graph_pool_allocated_bytes)}(
        (vals..., n, res, alloc))
end

# The device's graph pools alive: (count, reserved bytes, allocated bytes) over all of them.
function graph_pool_totals()
    n = Ref{UInt64}(0)
    check(c_graph_pools(CGraphPool[], n))
    n[] == 0 && return (0, 0, 0)
    buf = Vector{CGraphPool}(undef, n[] + 4)
    check(c_graph_pools(buf, n))
    ps = buf[1:min(n[], length(buf))]
    return (length(ps), Int(sum(p -> p.reserved_bytes, ps)), Int(sum(p -> p.allocated_bytes, ps)))
end

"""
    reset_memory_stats!()
    reset_memory_stats!(:host)

Resets the counters of [`memory_stats`] to 0 and the peaks to the current values
(PyTorch's `reset_peak_memory_stats` and `reset_accumulated_memory_stats` together).
Current values (`requested_bytes`, `allocated_bytes`, `cached_bytes`, `reserved_bytes`)
are not changed. Counters then count events since the reset: freeing an array allocated
before it counts in `num_frees` but not in `num_allocations`. With `:host`, the pinned
host pool's statistics (`memory_stats(:host)`) instead of the device's.
"""
function reset_memory_stats!(which::Symbol = :device)
    if which === :device
        c_reset_stats()
    elseif which === :host
        c_host_reset_stats()
    else
        throw(ArgumentError("reset_memory_stats!: which memory, :device or :host? Got :$which"))
    end
    return nothing
end

"""
    reclaim([bytes]) -> Int
    reclaim(:host[, bytes]) -> Int

Returns cached memory to the device until at least `bytes` bytes were released or
nothing is cached (default: everything), and returns the number of bytes released. Only
whole free blocks/segments can be released; memory in use never is. With `:host`, the
pinned host pool's cache is unlocked and freed instead (`cuMemFreeHost`).
"""
reclaim(bytes::Integer = typemax(Int)) = reclaim(:device, bytes)
function reclaim(which::Symbol, bytes::Integer = typemax(Int))
    bytes < 0 && throw(ArgumentError("reclaim: bytes must be non-negative, got $bytes"))
    which in (:device, :host) ||
        throw(ArgumentError("reclaim: which memory, :device or :host? Got :$which"))
    b = bytes >= typemax(Int) ? typemax(UInt64) : UInt64(bytes)
    released = (which === :host ? c_host_reclaim(b) : c_reclaim(b)) % Int
    flush_engine_log()
    return released
end

"""
    CuMem.device_memory() -> (free, total)

Free and total bytes of the device (`cuMemGetInfo`; for the host device, its capacity
minus what the engine holds, and its capacity).
"""
function device_memory()
    f = Ref{UInt64}(0)
    t = Ref{UInt64}(0)
    check(c_device_memory(f, t))
    return (f[] % Int, t[] % Int)
end

"""
    CuMem.available_memory() -> Int

Free bytes of the device.
"""
available_memory() = device_memory()[1]

"""
    CuMem.total_memory() -> Int

Total bytes of the device.
"""
total_memory() = device_memory()[2]

is_host_device() = c_device_is_host() == 1


"""
    memory_status([io=stdout])

Prints how much device memory is used, as CUDA.jl does:

```
Effective GPU memory usage: 10.52% (1.656 GiB/15.744 GiB)
CUDA GPU memory usage: 8.000 KiB
BinnedPool usage: 8.000 KiB (8.000 KiB allocated, 0 bytes cached)
```

The first line is the device's own view (`cuMemGetInfo`: every process and context), the
second what CuMem obtained from it (on the host device it reads `Host memory (no GPU)
usage: …`), the third how the pool (`BinnedPool`, `SplitPool`, `ExpandablePool`, `SimplePool` or `NoPool`)
splits that between live allocations and cache. `Memory limit: …` follows when
`JULIA_CUDA_MEMORY_LIMIT` is set. Once several devices are open (see [`device!`](@ref)),
these lines come once per open device, each under a `Device i (name):` line;
`memory_status(io, dev)` prints one device's. Once the pinned host pool is in use ([`CuMem.pinned`](@ref),
[`CuMem.pin`](@ref)) its lines follow: `Pinned host memory usage: … (… allocated, …
cached)`, `Pinned host memory limit: …` when `CUMEM_PINNED_LIMIT` is set, and
`Registered host memory: … in N ranges` while arrays are registered.

Under `julia -g2` (or with `CUMEM_DEBUG=2`) every outstanding allocation follows, each as
`Outstanding memory allocation of N bytes at 0x…` and the Julia stack trace of the
allocation, CuMem's own frames removed.
"""
function memory_status(io::IO = stdout)
    flush_engine_log()
    # The engine writes the summary (src/report.rs); the rest only Julia knows.
    if MULTI[] && length(open_ordinals()) > 1
        for d in open_ordinals()
            with_task_device(d) do
                println(io, "Device ", d, " (", device_name(), "):")
                print(io, engine_memory_status(CUMEM_STATUS_NO_ALLOCATIONS))
            end
        end
    else
        print(io, engine_memory_status(CUMEM_STATUS_NO_ALLOCATIONS))
    end
    nerr, eptr, ecode = free_errors()
    if nerr > 0
        println(io, "Failed frees in finalizers: ", nerr, " (last: 0x", string(eptr, base = 16),
                ", ", code_name(ecode), ")")
    end
    if TRACK[]
        # (as `outstanding_allocations()`, with each frame printed once per process)
        for (ptr, bytes, trace) in tracked_live()
            println(io, "Outstanding memory allocation of ", bytes, " bytes at 0x",
                    string(ptr, base = 16, pad = 12))
            for (i, fr) in enumerate(user_frames(trace.bt))
                println(io, " [", i, "] ", fr[3])
            end
        end
    end
    return nothing
end

"""
    memory_summary([io=stdout])

Prints [`memory_stats`] as a table, in the manner of PyTorch's
`torch.cuda.memory_summary()`, followed by the pinned host pool's rows
(`memory_stats(:host)`). `memory_summary(p::MemoryProfile)` prints the table of a
profile's window (without the pinned rows).
"""
memory_summary(io::IO = stdout) = print_summary(io, memory_stats(), "")

# The table of `memory_summary`, for the statistics `s` (the fields of `memory_stats()`;
# a profile passes those of its window) and an optional subtitle.
function print_summary(io::IO, s, subtitle::AbstractString)
    fb = Base.format_bytes
    W = 75
    rule(c) = println(io, "|", c^(W - 2), "|")
    center(t) = (p = W - 2 - length(t); println(io, "|", " "^(p ÷ 2), t, " "^(p - p ÷ 2), "|"))
    row(a, b, c) = @printf(io, "| %-27s | %19s | %19s |\n", a, b, c)
    row2(a, b) = @printf(io, "| %-27s | %41s |\n", a, b)
    rule("=")
    center("CuMem memory summary")
    center(string(pool_type_name(), " on ", device_name()))
    isempty(subtitle) || center(subtitle)
    rule("-")
    row("Metric", "Current", "Peak")
    rule("-")
    row("Requested memory", fb(s.requested_bytes), fb(s.peak_requested_bytes))
    row("Allocated memory", fb(s.allocated_bytes), fb(s.peak_allocated_bytes))
    row("Cached memory", fb(s.cached_bytes), fb(s.peak_cached_bytes))
    row("Reserved memory", fb(s.reserved_bytes), fb(s.peak_reserved_bytes))
    row("Inactive split memory", fb(s.inactive_split_bytes), "-")
    rule("-")
    row2("Allocations / frees", string(s.num_allocations, " / ", s.num_frees))
    row2("Cache hits / misses", @sprintf("%d / %d (hit rate %.1f%%)", s.num_cache_hits,
                                         s.num_cache_misses, 100 * s.cache_hit_rate))
    row2("Device allocations / frees", string(s.num_device_allocations, " / ", s.num_device_frees))
    avg(ns, n) = n == 0 ? "-" : @sprintf("%.1f µs", ns / n / 1000)
    row2("Device alloc time", @sprintf("%.3f ms (avg %s)", s.device_alloc_ns / 1e6,
                                       avg(s.device_alloc_ns, s.num_device_allocations)))
    row2("Device free time", @sprintf("%.3f ms (avg %s)", s.device_free_ns / 1e6,
                                      avg(s.device_free_ns, s.num_device_frees)))
    row2("Alloc retries / OOMs", string(s.num_alloc_retries, " / ", s.num_ooms))
    row2("GC / reclaim retries", string(s.num_gc_retries, " / ", s.num_reclaim_retries))
    row2("Fragmentation", @sprintf("%.1f%% of reserved not allocated", 100 * s.fragmentation_ratio))
    row2("Memory limit", s.limit_bytes == 0 ? "none" : fb(s.limit_bytes))
    isempty(subtitle) || (rule("="); return nothing)   # a profile's window: device rows only
    h = memory_stats(:host)
    rule("-")
    center("Pinned host memory (BinnedPool)")
    rule("-")
    row("Allocated pinned memory", fb(h.allocated_bytes), fb(h.peak_allocated_bytes))
    row("Reserved pinned memory", fb(h.reserved_bytes), fb(h.peak_reserved_bytes))
    row2("Pinned allocations / frees", string(h.num_allocations, " / ", h.num_frees))
    row2("Pinned cache hits / misses", @sprintf("%d / %d (hit rate %.1f%%)", h.num_cache_hits,
                                                h.num_cache_misses, 100 * h.cache_hit_rate))
    row2("Pinned memory limit", h.limit_bytes == 0 ? "none" : fb(h.limit_bytes))
    rule("=")
    return nothing
end

"""
    CuMem.@time ex

Runs `ex` and prints, as `CUDA.@time` does, the elapsed time, the CPU (Julia heap)
allocations and the share of time spent in garbage collection, then what `ex` did to
device memory: allocations (and the bytes they asked for), frees, cache hits, device
allocations, and the bytes live afterwards. Returns the value of `ex`. For example:

```
  0.000093 seconds (5 CPU allocations: 240 bytes, 0.00% gc time) (1 GPU allocation: 100 bytes, 1 free, 1 cache hit, 0 device allocations; 0 bytes live)
```
"""
macro time(ex)
    quote
        local before = memory_stats()
        local m = begin_alloc_measure()
        local r = try
            Base.@timed $(esc(ex))
        finally
            m = end_alloc_measure(m)
        end
        local after = memory_stats()
        # @timed: (value, seconds, bytes, gc seconds, gc counters) on every Julia version
        print_time_report(r[2], r[3], r[4], cpu_alloc_count(r[5]), before, after, m)
        r[1]
    end
end

# Bytes asked for by CuArray allocations while a measurement (@time, @timed, @allocated)
# runs: the allocation path adds to ALLOC_BYTES only while ALLOC_MEASURING > 0, so that
# without a measurement it costs one load. Counts every task's allocations on this
# process, as Base.@allocated counts every task's Julia allocations.
const ALLOC_MEASURING = Threads.Atomic{Int}(0)
const ALLOC_BYTES = Threads.Atomic{Int}(0)
begin_alloc_measure() = (Threads.atomic_add!(ALLOC_MEASURING, 1); ALLOC_BYTES[])
end_alloc_measure(start::Int) = (Threads.atomic_sub!(ALLOC_MEASURING, 1); ALLOC_BYTES[] - start)
@inline count_alloc_bytes(bytes::Int) =
    (ALLOC_MEASURING[] > 0 && Threads.atomic_add!(ALLOC_BYTES, bytes); nothing)

"""
    CuMem.@allocated ex -> Int

The bytes of device memory that CuArray allocations asked for while `ex` ran (the sizes
requested, before the pool's rounding), as `CUDA.@allocated`: `CuMem.@allocated
CuArray{Int32}(undef, 1)` is 4. Allocations of other tasks running meanwhile count too.
"""
macro allocated(ex)
    quote
        local m = begin_alloc_measure()
        try
            $(esc(ex))
        finally
            m = end_alloc_measure(m)
        end
        m
    end
end

"""
    CuMem.@timed ex -> NamedTuple

Runs `ex` and returns, as `CUDA.@timed`, `(value, time, cpu_bytes, cpu_gctime,
cpu_gcstats, gpu_bytes, gpu_allocations, gpu_frees)`: the value, seconds, Julia heap
bytes, GC seconds and counters (`Base.@timed`'s), the device bytes asked for (see
[`CuMem.@allocated`](@ref)), and the pool's allocation and free counts.
"""
macro timed(ex)
    quote
        local before = memory_stats()
        local m = begin_alloc_measure()
        local r = try
            Base.@timed $(esc(ex))
        finally
            m = end_alloc_measure(m)
        end
        local after = memory_stats()
        (value = r[1], time = r[2], cpu_bytes = r[3], cpu_gctime = r[4], cpu_gcstats = r[5],
         gpu_bytes = m, gpu_allocations = after.num_allocations - before.num_allocations,
         gpu_frees = after.num_frees - before.num_frees)
    end
end

# The number of Julia heap allocations in @timed's GC counters (what Base.@time prints).
cpu_alloc_count(diff) = isdefined(Base, :gc_alloc_count) ? Int(Base.gc_alloc_count(diff)) : -1

plural(n, what) = string(n, " ", what, n == 1 ? "" : "s")
# "1 GPU allocation: 4 bytes", as CUDA.@time; without allocations just the count.
gpu_allocs(n, bytes) = n == 0 ? plural(n, "GPU allocation") :
    string(plural(n, "GPU allocation"), ": ", Base.format_bytes(bytes))

function print_time_report(seconds, bytes, gcseconds, nalloc, a, b, gpubytes)
    d(f) = getfield(b, f) - getfield(a, f)
    cpu = nalloc < 0 ? string("CPU allocations: ", Base.format_bytes(bytes)) :
          string(plural(nalloc, "CPU allocation"), ": ", Base.format_bytes(bytes))
    gcpct = seconds > 0 ? 100 * gcseconds / seconds : 0.0
    @printf("  %.6f seconds (%s, %.2f%% gc time) (%s, %s, %s, %s; %s live)\n",
            seconds, cpu, gcpct, gpu_allocs(d(:num_allocations), gpubytes),
            plural(d(:num_frees), "free"), plural(d(:num_cache_hits), "cache hit"),
            plural(d(:num_device_allocations), "device allocation"),
            Base.format_bytes(b.requested_bytes))
end

"""
    CuMem.@retry_reclaim isfailed ex

Evaluates `ex`; while `isfailed(result)` is true, frees memory in growing steps and
evaluates `ex` again: a young-generation `GC.gc(false)`, a full `GC.gc(true)`, then
[`reclaim`](@ref) (the pool's cache back to the device), after which the last result is
returned whatever it is. As CUDA.jl 2.x's `CUDA.@retry_reclaim`, for code that calls an
allocating library function that reports failure by its result (CuMem's own allocations
go through this ladder already).
"""
macro retry_reclaim(isfailed, ex)
    quote
        ret = $(esc(ex))
        if $(esc(isfailed))(ret)
            for phase in 1:3
                phase == 1 ? GC.gc(false) : phase == 2 ? GC.gc(true) : reclaim()
                ret = $(esc(ex))
                $(esc(isfailed))(ret) || break
            end
        end
        ret
    end
end

# Answers to "where did my memory go?": the allocation history (PyTorch's
# `_record_memory_history`), the snapshot of segments and blocks (`memory_snapshot`),
# leak checks and checkpoints, run-time limits and compaction. The engine does the work
# (src/engine/tools.rs, C ABI in src/ffi/tools.rs); this file converts, and joins the
# Julia stacks of `-g2` tracking to the engine's records.

## history

"""
    record_memory_history(enabled::Bool = true; max_entries = 100_000)

Starts (or, with `false`, stops) recording every allocation, free, device allocation,
device free and out-of-memory failure of the engine, as PyTorch's
`torch.cuda.memory._record_memory_history`. Recording is off at start. Each engine shard
keeps the latest `max_entries` events in a ring buffer (80 bytes each); starting drops
the events of an earlier recording, stopping keeps them for [`memory_events`].

Under `julia -g2` (or `CUMEM_DEBUG=2`) each allocation event carries the Julia stack of
the allocation, and its free event the same one. Off, recording costs nothing measurable;
on, a few tens of ns per event (docs/performance.md). Errors: `ArgumentError` for
`max_entries` outside 1:2^24 (nothing changes).
"""
function record_memory_history(enabled::Bool = true; max_entries::Integer = 100_000)
    (enabled && !(1 <= max_entries <= 2^24)) &&
        throw(ArgumentError("max_entries must be in 1:$(2^24), got $max_entries"))
    check(c_record_memory_history(enabled, max(max_entries, 0) % UInt64))
    RECORDING[] = enabled
    return nothing
end

"""
    MemoryEvent

One entry of the allocation history ([`memory_events`]). Fields:

| field | meaning |
|:--|:--|
| `time_ns::UInt64` | when the call started, ns since the engine started |
| `kind::Symbol` | `:alloc`, `:free`, `:device_alloc`, `:device_free` or `:oom` |
| `addr::UInt64` | the block's (alloc/free) or device segment's address; 0 for `:oom` |
| `requested_bytes::Int` | bytes asked for (alloc, free, oom); 0 for device events |
| `size_bytes::Int` | block or segment size |
| `duration_ns::Int` | how long the call took |
| `lifetime_ns::Int` | for a free: ns since the block's allocation (0 if that was not recorded) |
| `hit::Bool` | an allocation served from the cache |
| `thread::Int` | the engine's index of the calling thread |
| `stream::UInt64`, `device::Int` | the stream handle the block belongs to (0: the default stream) and the device's ordinal |
| `origin` | the allocation's stack as text under `-g2`/`CUMEM_DEBUG=2`, else `nothing` |
"""
struct MemoryEvent
    time_ns::UInt64
    kind::Symbol
    addr::UInt64
    requested_bytes::Int
    size_bytes::Int
    duration_ns::Int
    lifetime_ns::Int
    hit::Bool
    thread::Int
    stream::UInt64
    device::Int
    origin::Union{Nothing,String}
end

function Base.show(io::IO, e::MemoryEvent)
    print(io, "MemoryEvent(", e.kind, " ", Base.format_bytes(e.size_bytes), " at 0x",
          string(e.addr, base = 16), ", t=", e.time_ns, " ns, ", e.duration_ns, " ns",
          e.kind === :alloc ? (e.hit ? ", hit" : ", miss") : "",
          e.kind === :free ? string(", lived ", e.lifetime_ns, " ns") : "", ")")
end

"""
    CuMem.raw_memory_events() -> Vector{CEvent}

The recorded events as the engine's `cumem_event_t` records (`CuMem.CEvent`), in time
order; [`memory_events`] converts them.
"""
function raw_memory_events()
    n = c_memory_events(C_NULL, UInt64(0))
    while true
        buf = Vector{CEvent}(undef, n)
        m = c_memory_events(buf, n)
        m <= n && return resize!(buf, m)
        n = m   # more were recorded between the calls
    end
end

"""
    memory_events() -> Vector{MemoryEvent}

The events recorded since [`record_memory_history`] was last turned on, in time order:
the latest `max_entries` of all threads. Empty if recording never started.
"""
function memory_events()
    raw = raw_memory_events()
    texts = Dict{UInt64,Union{Nothing,String}}()
    return [MemoryEvent(e.time_ns, EVENT_KINDS[e.kind + 1], e.addr, e.requested_bytes % Int,
                        e.size_bytes % Int, e.duration_ns % Int, e.lifetime_ns % Int, e.hit != 0,
                        Int(e.thread), e.stream, Int(e.device),
                        e.origin == 0 ? nothing : get!(() -> origin_text(e.origin), texts, e.origin))
            for e in raw]
end

## snapshot

"""
    MemoryBlock

A block of a [`MemorySegment`]: `addr::UInt64`, `size::Int`, `requested::Int` (bytes
asked for; 0 unless active), `state::Symbol` (`:active` a live allocation, `:cached` free
and releasable, `:inactive_split` free inside a segment that also holds live memory) and
`origin` (the allocation's stack under `-g2`/`CUMEM_DEBUG=2`, else `nothing`).
"""
struct MemoryBlock
    addr::UInt64
    size::Int
    requested::Int
    state::Symbol
    origin::Union{Nothing,String}
end

"""
    MemorySegment

A segment of [`memory_snapshot`]: `addr::UInt64`, `size::Int` (all reserved), `pool::Symbol`
(the pool holding it: `:binned`, `:split`, `:expandable`, `:simple` or `:none`, or
`:graph` for a graph-private pool of [`CuMem.capture`](@ref)),
`stream::UInt64` (the stream whose pool holds it, 0 for the default stream; for a graph
pool the pool's id, as [`CuMem.graph_pools`](@ref) lists it) and `device::Int` (the device's ordinal), `shard::Int` (the engine shard owning it) and
`blocks::Vector{MemoryBlock}`, tiling the segment in address order. For the expandable pool
a segment is a run of mapped granules.
"""
struct MemorySegment
    addr::UInt64
    size::Int
    pool::Symbol
    stream::UInt64
    device::Int
    shard::Int
    blocks::Vector{MemoryBlock}
end

function c_snapshot()
    ns, nb = Ref{UInt64}(0), Ref{UInt64}(0)
    check(c_memory_snapshot(C_NULL, 0, C_NULL, 0, ns, nb))
    while true
        segs = Vector{CSegment}(undef, ns[])
        blocks = Vector{CBlock}(undef, nb[])
        cs, cb = length(segs), length(blocks)
        check(c_memory_snapshot(segs, cs, blocks, cb, ns, nb))
        ns[] <= cs && nb[] <= cb && return resize!(segs, ns[]), resize!(blocks, nb[])
    end
end

"""
    memory_snapshot() -> Vector{MemorySegment}

Every segment the engine holds and every block in it, by address (PyTorch's
`torch.cuda.memory_snapshot()`). The sums equal [`memory_stats`] when no other thread
allocates: segment sizes `reserved_bytes`; `:active` block sizes `allocated_bytes` and
their `requested` `requested_bytes`; `:inactive_split` blocks `inactive_split_bytes`;
`:cached` plus `:inactive_split` blocks `cached_bytes`.
"""
function memory_snapshot()
    segs, blocks = c_snapshot()
    pool = Symbol(pool_name())
    gp = Set(p.id for p in graph_pools())
    return [MemorySegment(s.addr, s.size % Int, s.stream in gp ? :graph : pool, s.stream, Int(s.device), Int(s.shard),
                          [MemoryBlock(b.addr, b.size % Int, b.requested % Int, BLOCK_STATES[b.state + 1],
                                       b.state == 0 ? block_origin(b.addr, b.origin) : nothing)
                           for b in blocks[s.first_block+1:s.first_block+s.num_blocks]])
            for s in segs]
end

block_origin(addr, id) = (o = tracked_origin(addr); o === nothing ? origin_text(id) : o)

## leaks and checkpoints

"""
    MemoryLeak

An outstanding allocation of [`check_memory_leaks`]: `addr::UInt64`, `bytes::Int`
(asked for), `size::Int` (block size), `origin` (the allocation's Julia stack under
`-g2`, the native one under `CUMEM_DEBUG=2`, else `nothing`) and `graph_pool::UInt64`
(the id of the graph-private pool holding it, as [`CuMem.graph_pools`](@ref) lists it:
an array a capture made; 0 for other memory).
"""
struct MemoryLeak
    addr::UInt64
    bytes::Int
    size::Int
    origin::Union{Nothing,String}
    graph_pool::UInt64
end
MemoryLeak(addr, bytes, size, origin) = MemoryLeak(addr, bytes, size, origin, UInt64(0))

graph_pool_note(l::MemoryLeak) = l.graph_pool == 0 ? "" : " in graph pool $(l.graph_pool)"

function Base.show(io::IO, l::MemoryLeak)
    print(io, "MemoryLeak(", l.bytes, " bytes at 0x", string(l.addr, base = 16), graph_pool_note(l), ")")
end

# The graph pool (alive) holding the live block at `addr`, or 0.
function graph_pool_of_block(addr::UInt64, pools)
    isempty(pools) && return UInt64(0)
    s = Ref{UInt64}(0)
    return c_block_stream(addr, s) == CUMEM_SUCCESS && s[] in pools ? s[] : UInt64(0)
end

function c_leaks(f)
    n = Ref{UInt64}(0)
    check(f(Ptr{CLeak}(C_NULL), UInt64(0), n))
    while true
        buf = Vector{CLeak}(undef, n[])
        cap = length(buf)
        check(f(pointer(buf), UInt64(cap), n))
        if n[] <= cap
            gp = Set(p.id for p in graph_pools())
            return [MemoryLeak(l.addr, l.requested_bytes % Int, l.size_bytes % Int, block_origin(l.addr, l.origin),
                               graph_pool_of_block(l.addr, gp)) for l in resize!(buf, n[])]
        end
    end
end

leaks_since(mark::UInt64) = c_leaks((p, c, n) -> c_leaks_since(mark, p, c, n))

"""
    check_memory_leaks() -> Vector{MemoryLeak}

The allocations made since the last [`memory_checkpoint`] (or since the start) that are
still live, by address, with their stacks under `-g2` (Julia) or `CUMEM_DEBUG=2`
(native). Allocations of every thread count. Nothing is collected first: call `GC.gc()`
before to leave out unreachable arrays ([`CuMem.@check_leaks`] does).
"""
check_memory_leaks() = c_leaks(c_check_memory_leaks)

"""
    MemoryLeakError(leaks)

Thrown by [`CuMem.@check_leaks`]: `leaks::Vector{MemoryLeak}` are still live.
"""
struct MemoryLeakError <: Exception
    leaks::Vector{MemoryLeak}
end

function Base.showerror(io::IO, e::MemoryLeakError)
    n = length(e.leaks)
    print(io, "MemoryLeakError: ", n, " allocation", n == 1 ? "" : "s", " (",
          Base.format_bytes(mapreduce(l -> l.bytes, +, e.leaks; init = 0)), ") still live")
    for l in e.leaks
        print(io, "\n  ", l.bytes, " bytes at 0x", string(l.addr, base = 16), graph_pool_note(l))
        l.origin === nothing || print(io, "\n    ", replace(l.origin, "\n" => "\n    "))
    end
end

"""
    CuMem.@check_leaks expr

Runs `expr`, discards its value, collects garbage (so unreachable arrays are freed by
their finalizers) and throws a [`MemoryLeakError`] listing every allocation `expr` made
that is still live, with its stack under `-g2`. Returns `nothing`. Allocations other
threads make meanwhile count too. Does not move the checkpoint of
[`check_memory_leaks`].
"""
macro check_leaks(ex)
    quote
        local mark = c_leak_mark()
        $(esc(ex))
        collect_garbage()
        local leaks = leaks_since(mark)
        isempty(leaks) || throw(MemoryLeakError(leaks))
        nothing
    end
end

function collect_garbage()
    GC.gc(true)
    GC.gc(true)   # finalizers queued by the first run
    return nothing
end

"""
    memory_checkpoint(name = ""; io = stdout) -> NamedTuple

Sets a checkpoint (later [`check_memory_leaks`] calls list the allocations made after it),
prints the change in allocated and reserved bytes since the previous checkpoint (or the
start) and returns it as `(allocated = Δ, reserved = Δ)` in bytes (`Int`, may be negative).
"""
function memory_checkpoint(name::AbstractString = ""; io::IO = stdout)
    da, dr = Ref{Int64}(0), Ref{Int64}(0)
    check(c_memory_checkpoint(da, dr))
    s = memory_stats()
    fb(d) = (d < 0 ? "-" : "+") * Base.format_bytes(abs(d))
    println(io, "memory checkpoint", isempty(name) ? "" : " $name", ": allocated ", fb(da[]),
            " (now ", Base.format_bytes(s.allocated_bytes), "), reserved ", fb(dr[]), " (now ",
            Base.format_bytes(s.reserved_bytes), ")")
    return (allocated = Int(da[]), reserved = Int(dr[]))
end

## run-time control

"""
    set_memory_limit!(limit)

Changes the cap on reserved device memory while running, as `JULIA_CUDA_MEMORY_LIMIT`
sets it at start: a number of bytes, a string such as `"4GiB"`, `"512MiB"` or `"80%"` (of
the device's memory), or `nothing` for no cap. Lowering it below what is reserved first
returns cached memory to the device; memory in partly used segments stays reserved until
freed, and no more is obtained meanwhile. Errors: `CuMemError` when live memory
(`allocated_bytes`) exceeds the new cap, or for text that is no amount; nothing changes.
"""
set_memory_limit!(::Nothing) = (check(c_set_memory_limit(UInt64(0))); nothing)
function set_memory_limit!(bytes::Integer)
    bytes > 0 || throw(ArgumentError("memory limit must be positive (use `nothing` for none), got $bytes"))
    check(c_set_memory_limit(UInt64(bytes)))
    return nothing
end
function set_memory_limit!(amount::AbstractString)
    check(c_set_memory_limit_str(amount))
    return nothing
end

"""
    set_memory_fraction!(fraction)

Caps reserved device memory at `fraction` (in (0, 1]) of the device's total memory, as
PyTorch's `set_per_process_memory_fraction`; see [`set_memory_limit!`].
"""
function set_memory_fraction!(fraction::Real)
    0 < fraction <= 1 || throw(ArgumentError("memory fraction must be in (0, 1], got $fraction"))
    check(c_set_memory_fraction(Float64(fraction)))
    return nothing
end

"""
    set_cache_limit!(bytes)

Caps cached (reserved but unused) device memory at `bytes`, or removes the cap with
`nothing`: a free that leaves more cached returns whole free segments to the device
(RMM's limiting of a pool; PyTorch has no equivalent). Applies at once. Cache inside
partly used segments cannot go back and may stay above the cap.
"""
function set_cache_limit!(bytes::Union{Integer,Nothing})
    b = bytes === nothing ? typemax(UInt64) : UInt64(bytes)
    check(c_set_cache_limit(b))
    return nothing
end

"""
    CuMem.cache_limit() -> Union{Int,Nothing}

The cap set by [`set_cache_limit!`], or `nothing`.
"""
function cache_limit()
    c = c_get_cache_limit()
    return c == typemax(UInt64) ? nothing : c % Int
end

"""
    memory_pressure() -> Float64

Reserved bytes ÷ the memory limit ([`set_memory_limit!`], `JULIA_CUDA_MEMORY_LIMIT`), or
÷ the device's total memory when there is none: how close the engine is to out of memory.
"""
function memory_pressure()
    p = c_memory_pressure()
    p < 0 && throw(CuMemError(CUMEM_ERROR_INTERNAL, last_error()))
    return p
end

"""
    compact!() -> NamedTuple

Merges the pool's deferred frees, returns every whole free segment (for the expandable
pool, every idle granule) to the device and returns
`(released_bytes, fragmentation_before, fragmentation_after)`, fragmentation being
`memory_stats().fragmentation_ratio` ((reserved − allocated) ÷ reserved). What remains
cached afterwards lies in partly used segments.
"""
function compact!()
    r = Ref{CCompact}()
    check(c_compact(r))
    flush_engine_log()
    c = r[]
    return (released_bytes = c.released_bytes % Int, fragmentation_before = c.fragmentation_before,
            fragmentation_after = c.fragmentation_after)
end

# Memory profiles of a piece of code (`@profile_memory`, `profile_memory`) and memory
# timeline pictures (`save_memory_timeline`) of the allocation history or of a profile.
# The engine draws the pictures (src/timeline.rs, `cumem_save_memory_timeline`); this
# file picks the events and passes the Julia origins of `-g2` as labels.

"""
    MemoryProfile

What [`profile_memory`] and [`@profile_memory`] return: the device-memory activity of one
piece of code. Query it with [`peak_memory`], `memory_summary(p)`, `memory_events(p)`
and `save_memory_timeline(path, p)`; `show` prints a short
report (allocations, frees, peak, cache hit rate, the largest allocations with their
origin). Fields:

| field | meaning |
|:--|:--|
| `value` | what the code returned |
| `events::Vector{MemoryEvent}` | the allocation history of the window, in time order |
| `before`, `after` | [`memory_stats`] at its start and end |
| `elapsed_ns::Int` | wall-clock time of the code, ns |
| `peak_allocated_bytes`, `peak_reserved_bytes`, `peak_requested_bytes` | highest totals during the window (bytes, engine-wide: what was live before counts) |
| `truncated::Bool` | the history's ring dropped events of the window (raise `max_entries`) |

The counters of the window (allocations, cache hits, device calls, ...) are `after`
minus `before`, so they count every thread's activity during the window, as PyTorch's
`torch.cuda.memory_stats` deltas do.
"""
struct MemoryProfile
    value::Any
    events::Vector{MemoryEvent}
    before::NamedTuple
    after::NamedTuple
    elapsed_ns::Int
    peak_allocated_bytes::Int
    peak_reserved_bytes::Int
    peak_requested_bytes::Int
    truncated::Bool
end

"""
    profile_memory(f; max_entries = 1_000_000) -> MemoryProfile

Runs `f()` and returns a [`MemoryProfile`] of the device memory it used: only the
events between its start and its end. The allocation history is switched on for the call
when it is off ([`record_memory_history`] with `max_entries` events per engine shard; off
again afterwards, its events left readable), and left alone when it is on (the window is
then the events recorded after the last one before the call). Under `julia -g2` each
allocation carries its Julia stack, which the report and the pictures show as its origin.
The value of `f()` is the profile's `value` field; an exception from `f` propagates
(history restored). Errors: `ArgumentError` for `max_entries` outside 1:2^24.

```julia
p = profile_memory(() -> train_epoch!(model, data))
peak_memory(p)                         # bytes
save_memory_timeline("epoch.html", p)  # hover an allocation to see its origin
```
"""
function profile_memory(f; max_entries::Integer = 1_000_000)
    was_on = RECORDING[]
    nbefore, marker = 0, nothing
    if was_on
        raw = raw_memory_events()
        nbefore = length(raw)
        nbefore > 0 && (marker = raw[end])
    else
        record_memory_history(true; max_entries = max_entries)
    end
    before = memory_stats()
    t0 = time_ns()
    local value, after, events, elapsed
    try
        value = f()
    finally
        elapsed = Int(time_ns() - t0)
        after = memory_stats()
        events = memory_events()
        was_on || record_memory_history(false)
    end
    truncated = false
    if marker !== nothing
        # The window is what follows the last event before the call, found where it was
        # (times are not compared: the engine converts ticks to ns anew at each read).
        same(e) = e.kind === EVENT_KINDS[marker.kind + 1] && e.addr == marker.addr &&
                  e.size_bytes == marker.size_bytes % Int && e.thread == marker.thread
        # (at its index; earlier when the ring dropped old events since)
        j = findlast(same, view(events, 1:min(nbefore, length(events))))
        if j !== nothing
            events = events[j+1:end]
        else
            # The marker itself was dropped: the window's events may have been too.
            truncated = true
            events = filter(e -> e.time_ns > marker.time_ns, events)
        end
    end
    # More allocations counted than recorded: the ring wrapped during the window.
    nalloc = count(e -> e.kind === :alloc, events)
    truncated |= nalloc < after.num_allocations - before.num_allocations
    return MemoryProfile(value, events, before, after, elapsed, window_peaks(events, before)..., truncated)
end

# Highest allocated, reserved and requested totals over the window's events, from the
# totals at its start (the engine-wide peaks: what was live before counts).
function window_peaks(events, before)
    a, r, q = before.allocated_bytes, before.reserved_bytes, before.requested_bytes
    pa, pr, pq = a, r, q
    for e in events
        if e.kind === :alloc
            a += e.size_bytes
            q += e.requested_bytes
        elseif e.kind === :free
            a -= e.size_bytes
            q -= e.requested_bytes
        elseif e.kind === :device_alloc
            r += e.size_bytes
        elseif e.kind === :device_free
            r -= e.size_bytes
        end
        pa, pr, pq = max(pa, a), max(pr, r), max(pq, q)
    end
    return pa, pr, pq
end

"""
    @profile_memory expr -> MemoryProfile

Runs `expr` and returns a [`MemoryProfile`] of the device memory it used (see
[`profile_memory`]; `expr` runs inside a closure, so assignments in it stay local: take
results from the profile's `value`).

```julia
p = @profile_memory begin
    x = CuArray{Float32}(undef, 1024, 1024)
    y = x .+ 1f0
    sum(y)
end
p.value          # the sum
peak_memory(p)   # bytes
```
"""
macro profile_memory(ex)
    return :(profile_memory(() -> $(esc(ex))))
end

"""
    peak_memory(p::MemoryProfile) -> Int

The highest number of bytes allocated (block sizes, live) while the profiled code ran,
engine-wide as PyTorch's `torch.cuda.max_memory_allocated()` after a reset at the
profile's start: what was live before the window counts (`p.before.allocated_bytes`).
"""
peak_memory(p::MemoryProfile) = p.peak_allocated_bytes

"""
    memory_events(p::MemoryProfile) -> Vector{MemoryEvent}

The allocation history of the profile's window, in time order.
"""
memory_events(p::MemoryProfile) = p.events

# The statistics of a profile's window, with the fields of `memory_stats()`: current
# values at its end, peaks of the window, counters during it.
function window_stats(p::MemoryProfile)
    b, a = p.before, p.after
    d(f) = getfield(a, f) - getfield(b, f)
    hits, misses = d(:num_cache_hits), d(:num_cache_misses)
    local peak_cached
    let al = b.allocated_bytes, r = b.reserved_bytes
        peak_cached = r - al
        for e in p.events
            e.kind === :alloc && (al += e.size_bytes)
            e.kind === :free && (al -= e.size_bytes)
            e.kind === :device_alloc && (r += e.size_bytes)
            e.kind === :device_free && (r -= e.size_bytes)
            peak_cached = max(peak_cached, r - al)
        end
    end
    counters = (num_allocations = d(:num_allocations), num_frees = d(:num_frees),
                num_cache_hits = hits, num_cache_misses = misses,
                num_device_allocations = d(:num_device_allocations),
                num_device_frees = d(:num_device_frees),
                device_alloc_ns = d(:device_alloc_ns), device_free_ns = d(:device_free_ns),
                num_alloc_retries = d(:num_alloc_retries), num_ooms = d(:num_ooms),
                num_device_free_errors = d(:num_device_free_errors),
                num_gc_retries = d(:num_gc_retries), num_reclaim_retries = d(:num_reclaim_retries),
                cache_hit_rate = hits + misses == 0 ? 0.0 : hits / (hits + misses))
    peaks = (peak_requested_bytes = p.peak_requested_bytes, peak_allocated_bytes = p.peak_allocated_bytes,
             peak_cached_bytes = max(peak_cached, 0), peak_reserved_bytes = p.peak_reserved_bytes)
    return merge(a, counters, peaks)
end

"""
    memory_summary([io=stdout,] p::MemoryProfile)

The [`memory_summary`] table for a profile's window: current values at its end, peaks
during it, and the counters (allocations, cache hits, device calls, retries) of the
window alone.
"""
memory_summary(p::MemoryProfile) = memory_summary(stdout, p)
memory_summary(io::IO, p::MemoryProfile) =
    print_summary(io, window_stats(p), @sprintf("profile of %.3f s", p.elapsed_ns / 1e9))

Base.show(io::IO, p::MemoryProfile) =
    print(io, "MemoryProfile(", count(e -> e.kind === :alloc, p.events), " allocations, peak ",
          Base.format_bytes(p.peak_allocated_bytes), ")")

function Base.show(io::IO, ::MIME"text/plain", p::MemoryProfile)
    s = window_stats(p)
    fb = Base.format_bytes
    allocs = filter(e -> e.kind === :alloc, p.events)
    frees = count(e -> e.kind === :free, p.events)
    abytes = isempty(allocs) ? 0 : sum(e -> e.size_bytes, allocs)
    @printf(io, "MemoryProfile of %.3f s (%s pool on %s):\n", p.elapsed_ns / 1e9, pool_name(), device_name())
    @printf(io, "  %s (%s), %s, cache hit rate %.1f %%\n", plural(length(allocs), "allocation"), fb(abytes),
            plural(frees, "free"), 100 * s.cache_hit_rate)
    println(io, "  peak allocated ", fb(p.peak_allocated_bytes), " (", fb(p.before.allocated_bytes),
            " at the start, ", fb(p.after.allocated_bytes), " at the end), peak reserved ",
            fb(p.peak_reserved_bytes))
    devbytes = mapreduce(e -> e.kind === :device_alloc ? e.size_bytes : 0, +, p.events; init = 0)
    print(io, "  ", plural(s.num_device_allocations, "device allocation"), " (", fb(devbytes), "), ",
          plural(s.num_device_frees, "device free"), ", ", plural(s.num_ooms, "out-of-memory failure"))
    p.truncated && print(io, "\n  (the history dropped events of this window: raise max_entries)")
    isempty(allocs) && return
    # The largest allocations, the same size from the same place counted together.
    groups = Dict{Tuple{Int,String},Int}()
    for e in allocs
        k = (e.size_bytes, origin_line(e.origin))
        groups[k] = get(groups, k, 0) + 1
    end
    top = sort!(collect(groups); by = kv -> (-kv[1][1], -kv[2], kv[1][2]))
    print(io, "\n  largest allocations:")
    for ((sz, where), n) in top[1:min(5, end)]
        @printf(io, "\n    %12s × %-5d %s", fb(sz), n, where)
    end
    if all(e -> e.origin === nothing, allocs)
        print(io, "\n  (origins: start Julia with -g2, or CUMEM_DEBUG=2 for native stacks)")
    end
end

# The first frame of an origin, shortened for one line.
function origin_line(o)
    o === nothing && return "origin unknown"
    lines = filter(!isempty, strip.(split(o, '\n')))
    isempty(lines) && return "origin unknown"
    l = String(lines[1])
    return length(l) > 100 ? string(first(l, 99), "…") : l
end

# `cumem_event_t` of a MemoryEvent; the origin travels as a label (its text) instead.
function cevent(e::MemoryEvent)
    k = findfirst(==(e.kind), EVENT_KINDS)
    k === nothing && throw(ArgumentError("unknown event kind $(e.kind)"))
    return CEvent(e.time_ns, UInt64(e.duration_ns), e.addr, UInt64(e.requested_bytes),
                  UInt64(e.size_bytes), UInt64(e.lifetime_ns), UInt64(0), e.stream,
                  UInt32(k - 1), UInt32(e.thread), UInt32(e.device), UInt32(e.hit))
end

function timeline_format(path::AbstractString, format)
    if format === nothing
        p = lowercase(path)
        endswith(p, ".trace.json") || endswith(p, ".chrome.json") ? :chrome :
        endswith(p, ".json") ? :json : endswith(p, ".svg") ? :svg :
        endswith(p, ".html") || endswith(p, ".htm") ? :html :
        throw(ArgumentError("save_memory_timeline: cannot tell the format of $(repr(path)); " *
                            "pass format = :svg, :html, :json or :chrome, or end the name in " *
                            ".svg, .html, .json or .trace.json"))
    else
        format in keys(TIMELINE_FORMATS) ||
            throw(ArgumentError("save_memory_timeline: format must be :svg, :html, :json or :chrome, got $(repr(format))"))
        format
    end
end

"""
    save_memory_timeline(path[, p::MemoryProfile]; format = nothing) -> path
    save_memory_timeline(path, events::AbstractVector{MemoryEvent}; format = nothing) -> path

Writes a picture of device memory over time, from the allocation history
(`memory_events()`, recorded after [`record_memory_history`]), from a profile's
window, or from any events: live bytes stacked by allocation, each allocation a band as
tall as its block, with the allocated and reserved totals as lines (PyTorch memory_viz's
"active memory timeline"). `format` (default: from the file's extension):

- `:svg` (`.svg`) the picture;
- `:html` (`.html`) the picture in a page that shows an allocation's size, lifetime and
  origin (its Julia stack under `-g2`) under the pointer;
- `:json` (`.json`) the data: totals after each event, every allocation with its
  lifetime and origin;
- `:chrome` (`.trace.json`) Chrome trace-event JSON for <https://ui.perfetto.dev> or
  `chrome://tracing`: counters for the totals, an async slice per allocation.

The x axis counts events (allocations and frees), with times beneath. The 10 000 largest
blocks get bands of their own, the rest one grey band; long histories are sampled per
pixel column at each column's highest allocated total (src/timeline.rs). Errors:
`ArgumentError` for an unknown format; `CuMemError` when the file cannot be written.
"""
save_memory_timeline(path::AbstractString; format = nothing) =
    save_memory_timeline(path, memory_events(); format = format)
save_memory_timeline(path::AbstractString, p::MemoryProfile; format = nothing) =
    save_memory_timeline(path, p.events; format = format)

function save_memory_timeline(path::AbstractString, events::AbstractVector{MemoryEvent}; format = nothing)
    code = TIMELINE_FORMATS[timeline_format(path, format)]
    raw = CEvent[cevent(e) for e in events]
    labels = Union{Nothing,String}[e.origin === nothing ? nothing : replace(e.origin, '\0' => '?') for e in events]
    ptrs = Ptr{UInt8}[l === nothing ? Ptr{UInt8}(0) : pointer(l) for l in labels]
    GC.@preserve raw labels ptrs begin
        check(c_save_memory_timeline(raw, length(raw), ptrs, path, code))
    end
    return path
end

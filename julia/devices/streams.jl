# Streams and events as objects (CUDA.jl's CuStream/CuEvent API): making, switching,
# synchronising, timing. The CuStream type and the task's current stream are state.jl's;
# what streams do with arrays (record_stream, asynchronous copies) is array/copies.jl's.
# The engine side is src/device/{host_stream,cuda}.rs and the stream-ordered pools of
# src/engine/streams.rs.

## streams

"""
    CuMem.STREAM_DEFAULT, CuMem.STREAM_NON_BLOCKING

CUDA's stream flags (`CU_STREAM_DEFAULT` = 0: ordered with the default stream;
`CU_STREAM_NON_BLOCKING` = 1) for `CuStream(; flags)`, as CUDA.jl's constants.
"""
const STREAM_DEFAULT = 0
const STREAM_NON_BLOCKING = 1

"""
    CuStream(; flags, priority = nothing)

CUDA.jl's form of [`CuStream`](@ref): `flags` is `STREAM_DEFAULT` (ordered with the
default stream: `blocking = true`, CUDA.jl's default) or `STREAM_NON_BLOCKING`. The engine
makes streams of one priority, so `priority` must be `nothing` or in
[`priority_range`](@ref) (`0:0`); otherwise, and for other flags, `ArgumentError`.
"""
function CuStream(; blocking::Union{Nothing,Bool} = nothing, flags::Union{Nothing,Integer} = nothing,
                  priority::Union{Nothing,Integer} = nothing)
    if flags !== nothing
        flags in (STREAM_DEFAULT, STREAM_NON_BLOCKING) ||
            throw(ArgumentError("CuStream: flags must be STREAM_DEFAULT (0) or STREAM_NON_BLOCKING (1), not $flags"))
        blocking === nothing || blocking == (flags == STREAM_DEFAULT) ||
            throw(ArgumentError("CuStream: blocking = $blocking contradicts flags = $flags"))
        blocking = flags == STREAM_DEFAULT
    end
    priority === nothing || priority in priority_range() ||
        throw(ArgumentError("CuStream: priority $priority is out of range $(priority_range())"))
    blocking = something(blocking, false)
    dev = task_device()                      # made on the task's device (c_stream_create switches to it)
    out = Ref{UInt64}(0)
    check(c_stream_create(blocking ? CUMEM_STREAM_BLOCKING : UInt32(0), out))
    return CuStream(out[], blocking, dev; own = true)
end

"""
    priority_range() -> StepRange{Int32}

The stream priorities one may ask for, least to greatest, as CUDA.jl's: `0:0`, since the
engine makes every stream with the default priority.
"""
priority_range() = Int32(0):Int32(1):Int32(0)

"""
    priority(s::CuStream) -> Int32

The stream's priority, as CUDA.jl's: 0 (the engine's streams have the default priority).
"""
priority(s::CuStream) = (s === DEFAULT_STREAM || live_handle(s); Int32(0))

"""
    CuDefaultStream() -> CuStream

The default stream, [`CuMem.default_stream()`](@ref), by CUDA.jl's name.
"""
CuDefaultStream() = default_stream()


"""
    stream!(s::CuStream)
    stream!(f, s::CuStream)

Makes `s` the current task's stream, for good or (with `f`) while `f()` runs, and
returns what `f` returns (CUDA.jl's `stream!`, PyTorch's `with torch.cuda.stream(s)`).
Throws `ArgumentError` (and changes nothing) when `s` belongs to another device than
the task's: switch with `device!` first.
"""
function stream!(s::CuStream)
    check_stream_device(s)
    STREAMS_SET[] = true
    task_streams()[task_device()] = s
    return s
end

function stream!(f, s::CuStream)
    check_stream_device(s)
    STREAMS_SET[] = true
    d, k = task_streams(), task_device()
    old = get(d, k, nothing)
    d[k] = s
    try
        return f()
    finally
        old === nothing ? delete!(d, k) : (d[k] = old)
    end
end

function check_stream_device(s::CuStream)
    d = task_device()
    s.dev < 0 || s.dev == d ||
        throw(ArgumentError("$s belongs to device $(s.dev), and the task's device is $d: call device!($(s.dev)) first"))
    return nothing
end

"""
    synchronize(s::CuStream)

Waits until the work queued on `s` is done (`cuStreamSynchronize`). A fault of a kernel
queued on it is reported here as a `CuMemError`.
"""
function synchronize(s::CuStream)
    CAPTURES[] == 0 || refuse_in_capture("synchronize(stream)")
    check(c_stream_synchronize(live_handle(s)))
    check_kernel_errors()
end

"""
    CuMem.isdone(s::CuStream) -> Bool
    CuMem.isdone(e::CuEvent) -> Bool

Whether the work queued on `s` is done (`cuStreamQuery`), or `e` has completed
(`cuEventQuery`; an event never recorded has); does not wait.
"""
function isdone(s::CuStream)
    r = Ref{Int32}(0)
    check(c_stream_query(live_handle(s), r))
    return r[] == 1
end

"""
    CuMem.unsafe_destroy!(s::CuStream)
    CuMem.unsafe_destroy!(e::CuEvent)

Destroys `s` after its queued work is done (its pool's cache goes back to the device;
arrays allocated on it stay valid), or `e`, now instead of when garbage-collected. Later
use throws `ArgumentError`. The default stream cannot be destroyed.
"""
function unsafe_destroy!(s::CuStream)
    s === DEFAULT_STREAM && throw(ArgumentError("the default stream cannot be destroyed"))
    h = s.handle
    h == 0 && return nothing
    s.handle = 0
    check(c_stream_destroy(h))
    return nothing
end

## events

"""
    CuEvent(; timing = true)

A marker in a stream's work: [`record`](@ref) places it, [`isdone`](@ref) tells whether
the work before it is done, `synchronize(e)` waits for it on the host, `wait(e, s)`
makes stream `s` wait for it without blocking the host, and [`elapsed`](@ref) times
the work between two events (`timing = false` makes cheaper events that cannot be
timed). As CUDA.jl's `CuEvent`.
"""
mutable struct CuEvent
    handle::UInt64
    timing::Bool
    function CuEvent(; timing::Bool = true)
        out = Ref{UInt64}(0)
        check(c_event_create(timing ? UInt32(0) : CUMEM_EVENT_DISABLE_TIMING, out))
        e = new(out[], timing)
        finalizer(e -> e.handle == 0 || (c_event_destroy(e.handle); e.handle = 0), e)
        return e
    end
end

"""
    CuMem.EVENT_DEFAULT, CuMem.EVENT_BLOCKING_SYNC, CuMem.EVENT_DISABLE_TIMING

CUDA's event flags (0, 1, 2, combined with `|`) for `CuEvent(flags)`, as CUDA.jl's.
"""
const EVENT_DEFAULT = 0
const EVENT_BLOCKING_SYNC = 1
const EVENT_DISABLE_TIMING = 2

"""
    CuEvent(flags::Integer)

CUDA.jl's form of [`CuEvent`](@ref): `EVENT_DISABLE_TIMING` makes an event without
timing; `EVENT_BLOCKING_SYNC` is accepted (how the host waits in `synchronize(e)` is the
engine's choice); other bits are an `ArgumentError`.
"""
function CuEvent(flags::Integer)
    flags & ~(EVENT_BLOCKING_SYNC | EVENT_DISABLE_TIMING) == 0 ||
        throw(ArgumentError("CuEvent: flags must combine EVENT_BLOCKING_SYNC (1) and EVENT_DISABLE_TIMING (2), not $flags"))
    return CuEvent(; timing = flags & EVENT_DISABLE_TIMING == 0)
end

Base.show(io::IO, e::CuEvent) = print(io, "CuEvent(", e.handle == 0 ? "destroyed" : e.handle, ")")

@inline live_handle(e::CuEvent) = (e.handle == 0 && throw_destroyed(e); e.handle)

"""
    record(e::CuEvent, s::CuStream = stream()) -> e

Records `e` on `s` (`cuEventRecord`): it completes once the work queued on `s` so far
is done.
"""
record(e::CuEvent, s::CuStream = stream()) = (check(c_event_record(live_handle(e), live_handle(s))); e)

"""
    wait(e::CuEvent, s::CuStream = stream())

Makes the work queued on `s` from now on wait until `e` (as last recorded) has
completed (`cuStreamWaitEvent`, CUDA.jl's `wait(::CuEvent)`); the calling task does not
wait (use `synchronize(e)` for that). On the host device, `s` being the default stream,
the calling thread waits (the default stream's work runs there).
"""
Base.wait(e::CuEvent, s::CuStream = stream()) = check(c_stream_wait_event(live_handle(s), live_handle(e)))

"""
    synchronize(e::CuEvent)

Waits on the host until `e` has completed (`cuEventSynchronize`).
"""
synchronize(e::CuEvent) = (CAPTURES[] == 0 || refuse_in_capture("synchronize(event)"); check(c_event_synchronize(live_handle(e))))

function isdone(e::CuEvent)
    r = Ref{Int32}(0)
    check(c_event_query(live_handle(e), r))
    return r[] == 1
end

"""
    elapsed(start::CuEvent, stop::CuEvent) -> Float64

Seconds between two recorded, completed timing events (`cuEventElapsedTime`, about
0.5 us resolution on a GPU), as CUDA.jl's `elapsed`. Throws `CuMemError`
(`CUMEM_ERROR_INVALID_VALUE`) for an event without timing, never recorded or not yet
completed.
"""
function elapsed(start::CuEvent, stop::CuEvent)
    ms = Ref{Float32}(0)
    check(c_event_elapsed(live_handle(start), live_handle(stop), ms))
    return Float64(ms[]) / 1000
end

function unsafe_destroy!(e::CuEvent)
    h = e.handle
    h == 0 && return nothing
    e.handle = 0
    check(c_event_destroy(h))
    return nothing
end

"""
    CuMem.sleep_on(s::CuStream, seconds::Real)

Queues on `s` an operation that takes `seconds` and touches no memory: a
deliberately slow kernel for tests and benchmarks of overlap and ordering (a one-thread
kernel spinning on the GPU's timer; on the host device, a sleep on the stream's worker
thread, or of the calling thread for the default stream). A negative, infinite or NaN
time, or one beyond the engine's 64-bit count of nanoseconds (about 584 years), is an
`ArgumentError`, as for Base's `sleep`.
"""
function sleep_on(s::CuStream, seconds::Real)
    # As Base's `sleep`: a negative time is an ArgumentError; so is one that is not finite
    # or does not fit the engine's 64-bit count of nanoseconds (about 584 years).
    ns = Float64(seconds) * 1e9
    (isfinite(ns) && 0 <= ns < 2.0^64) ||
        throw(ArgumentError("CuMem.sleep_on: cannot sleep for $seconds seconds (from 0 to about 584 years)"))
    return check(c_stream_sleep(live_handle(s), round(UInt64, ns)))
end

"""
    CuMem.query(s::CuStream) -> Bool
    CuMem.query(e::CuEvent) -> Bool

Whether the work queued on `s` (before `e`) is done, without waiting: CUDA.jl's name for
[`CuMem.isdone`](@ref).
"""
query(s::CuStream) = isdone(s)
query(e::CuEvent) = isdone(e)

"""
    CuMem.@elapsed [stream] ex -> Float64

Seconds the work `ex` queues on `stream` (default: the default stream) takes on the
device: two timing events recorded on `stream` around `ex`, the second waited for, as
CUDA.jl's `CUDA.@elapsed`. Work `ex` queues on other streams is not timed; host time
spent in `ex` is, on the host device, where work runs as it is queued.
"""
macro elapsed(stream, ex)
    quote
        t0, t1 = CuEvent(), CuEvent()
        record(t0, $(esc(stream)))
        $(esc(ex))
        record(t1, $(esc(stream)))
        synchronize(t1)
        elapsed(t0, t1)
    end
end
macro elapsed(ex)
    :(@elapsed(default_stream(), $(esc(ex))))
end

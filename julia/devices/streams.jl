# Streams and events (CUDA.jl's CuStream/CuEvent names, PyTorch's record_stream), the
# task-local current stream, and asynchronous copies. The engine side is
# src/device/{host_stream,cuda}.rs and the stream-ordered pools of src/engine.rs.

## the C ABI

const CUMEM_STREAM_BLOCKING = UInt32(1)
const CUMEM_EVENT_DISABLE_TIMING = UInt32(1)

c_stream_create(flags, out) = ccall((:cumem_stream_create, libcumem), Int32, (UInt32, Ptr{UInt64}), flags, out)
c_stream_destroy(s) = ccall((:cumem_stream_destroy, libcumem), Int32, (UInt64,), s)
c_stream_synchronize(s) = ccall((:cumem_stream_synchronize, libcumem), Int32, (UInt64,), s)
c_stream_query(s, out) = ccall((:cumem_stream_query, libcumem), Int32, (UInt64, Ptr{Int32}), s, out)
c_stream_wait_event(s, e) = ccall((:cumem_stream_wait_event, libcumem), Int32, (UInt64, UInt64), s, e)
c_stream_sleep(s, ns) = ccall((:cumem_stream_sleep, libcumem), Int32, (UInt64, UInt64), s, ns)
c_event_create(flags, out) = ccall((:cumem_event_create, libcumem), Int32, (UInt32, Ptr{UInt64}), flags, out)
c_event_destroy(e) = ccall((:cumem_event_destroy, libcumem), Int32, (UInt64,), e)
c_event_record(e, s) = ccall((:cumem_event_record, libcumem), Int32, (UInt64, UInt64), e, s)
c_event_query(e, out) = ccall((:cumem_event_query, libcumem), Int32, (UInt64, Ptr{Int32}), e, out)
c_event_synchronize(e) = ccall((:cumem_event_synchronize, libcumem), Int32, (UInt64,), e)
c_event_elapsed(a, b, out) = ccall((:cumem_event_elapsed, libcumem), Int32, (UInt64, UInt64, Ptr{Float32}), a, b, out)
@inline c_alloc_async(bytes::UInt64, s::UInt64, out, flags::UInt32) =
    ccall((:cumem_alloc_async, libcumem), Int32, (UInt64, UInt64, Ptr{UInt64}, UInt32), bytes, s, out, flags)
c_record_stream(p, s) = ccall((:cumem_record_stream, libcumem), Int32, (UInt64, UInt64), p, s)
c_block_stream(p, out) = ccall((:cumem_block_stream, libcumem), Int32, (UInt64, Ptr{UInt64}), p, out)
c_copy_htod_async(dst, src, bytes, s) =
    ccall((:cumem_copy_htod_async, libcumem), Int32, (UInt64, Ptr{Cvoid}, UInt64, UInt64), dst, src, bytes, s)
c_copy_dtoh_async(dst, src, bytes, s) =
    ccall((:cumem_copy_dtoh_async, libcumem), Int32, (Ptr{Cvoid}, UInt64, UInt64, UInt64), dst, src, bytes, s)

## streams

"""
    CuStream(; blocking = false)

A queue of device work: kernels, cuBLAS calls and copies queued on one stream run in
order; work on different streams may overlap. Non-blocking by default
(`CU_STREAM_NON_BLOCKING`, as PyTorch's streams), so its work also overlaps the default
stream's; `blocking = true` gives CUDA's default flags (ordered with the default
stream). Work is queued on the task's current stream, [`stream()`](@ref); switch it
with [`stream!`](@ref).

Memory allocated while a stream is current belongs to it: once freed, it is reused at
once by that stream (whose work is ordered) and by no other; use on another stream must
be declared with [`record_stream`](@ref) (PyTorch's caching allocator). The stream is
destroyed, after its queued work is done, when it is garbage-collected or by
`unsafe_destroy!(s)`. On the host device a stream is a worker thread with a FIFO queue,
with the same ordering.

A stream belongs to the task's device when it is made ([`device`](@ref)): it becomes
the current stream only while that device is the task's (see [`stream`](@ref)).
"""
mutable struct CuStream
    handle::UInt64
    blocking::Bool
    dev::Int                       # the device's ordinal; -1 for the default stream (every device's)
    function CuStream(handle::UInt64, blocking::Bool, dev::Int; own::Bool = false)
        s = new(handle, blocking, dev)
        # The engine finds the stream's device by its handle, whatever device is current
        # on the thread that finalizes it.
        own && finalizer(s -> s.handle == 0 || (c_stream_destroy(s.handle); s.handle = 0), s)
        return s
    end
end

function CuStream(; blocking::Bool = false)
    dev = MULTI[] ? activate_device() : 0    # made on the task's device
    out = Ref{UInt64}(0)
    check(c_stream_create(blocking ? CUMEM_STREAM_BLOCKING : UInt32(0), out))
    return CuStream(out[], blocking, dev; own = true)
end

const DEFAULT_STREAM = CuStream(UInt64(0), true, -1)

Base.show(io::IO, s::CuStream) =
    print(io, s.handle == 0 ? "CuStream(default)" : "CuStream($(s.handle)$(s.blocking ? ", blocking" : ""))")

"""
    CuMem.default_stream() -> CuStream

CUDA's legacy default stream (handle 0), the engine's stream: every synchronous copy,
`memset` and device free is ordered on it, and the current stream of every task that
did not choose another. It waits for blocking streams' work and they for its; it is
never destroyed.
"""
default_stream() = DEFAULT_STREAM

"""
    stream() -> CuStream

The current task's stream (task-local, as CUDA.jl's `stream()`): where kernels,
`gemm!` and `copyto!(...; async = true)` are queued and on whose pool CuArrays are
allocated. [`CuMem.default_stream()`](@ref) unless set with [`stream!`](@ref), and
while the task's device is another than the stream's (after `device!`), as CUDA.jl
keeps a current stream per device: switching back makes it current again.
"""
@inline stream() = STREAMS_SET[] ? task_stream() : DEFAULT_STREAM

# Set by the first `stream!` of any task; never cleared. Until then every task's stream
# is the default one, and `stream()` on the allocation path is one load of a Bool instead
# of a look-up in the task's storage (`current_task().storage`, then an IdDict), as
# `MULTI` does for devices (devices.jl). The store is plain: the task that calls
# `stream!` sees it in program order, and a task that did not call it needs nothing.
const STREAMS_SET = Ref(false)

# The task's streams by device ordinal (task-local, made by the first `stream!`), as
# CUDA.jl keeps a current stream per device.
function task_stream()
    st = current_task().storage
    st === nothing && return DEFAULT_STREAM
    d = get(st::IdDict{Any,Any}, :CuMemStream, nothing)
    d === nothing && return DEFAULT_STREAM
    return get(d::Dict{Int,CuStream}, task_device(), DEFAULT_STREAM)
end

function task_streams()
    d = get!(() -> Dict{Int,CuStream}(), task_local_storage(), :CuMemStream)
    return d::Dict{Int,CuStream}
end

# The handle of the current task's stream for the engine (0: the default stream, which
# is never destroyed); `ArgumentError` if the task's stream was destroyed.
@inline current_handle() = STREAMS_SET[] ? live_handle(task_stream()) : UInt64(0)

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

# Waits for the current stream unless it is the default one; a status code, never throws
# (the synchronous copies of library.jl call it).
@inline function sync_current()
    STREAMS_SET[] || return Int32(0)
    s = task_stream()
    s.handle == 0 && return Int32(0)
    return c_stream_synchronize(s.handle)
end

@noinline throw_destroyed(s) = throw(ArgumentError("$s was destroyed"))
@inline live_handle(s::CuStream) = (s.handle == 0 && s !== DEFAULT_STREAM && throw_destroyed(s); s.handle)

"""
    synchronize(s::CuStream)

Waits until the work queued on `s` is done (`cuStreamSynchronize`). A fault of a kernel
queued on it is reported here as a `CuMemError`.
"""
synchronize(s::CuStream) = check(c_stream_synchronize(live_handle(s)))

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

Base.show(io::IO, e::CuEvent) = print(io, "CuEvent(", e.handle, ")")

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
synchronize(e::CuEvent) = check(c_event_synchronize(live_handle(e)))

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

## memory and streams

"""
    record_stream(a::CuArray, s::CuStream = stream())

Declares that work queued on `s` uses `a`'s memory (PyTorch's `Tensor.record_stream`):
when `a` is freed, the memory is reused only after the work queued on `s` before the
free is done (an event recorded at the free, polled on later allocations). Needed when
an array allocated on one stream is used by kernels on another; asynchronous copies
record their use by themselves. Use on `a`'s own stream needs nothing.
"""
function record_stream(a::CuArray, s::CuStream = stream())
    p = devaddr(a)
    p == 0 && return nothing
    check(c_record_stream(p, live_handle(s)))
    return nothing
end

"""
    CuMem.array_stream(a::CuArray) -> UInt64

The handle of the stream `a`'s memory belongs to (0: the default stream).
"""
function array_stream(a::CuArray)
    p = devaddr(a)
    p == 0 && return UInt64(0)
    out = Ref{UInt64}(0)
    check(c_block_stream(p, out))
    return out[]
end

"""
    CuMem.sleep_on(s::CuStream, seconds::Real)

Queues on `s` an operation that takes `seconds` and touches no memory: a
deliberately slow kernel for tests and benchmarks of overlap and ordering (a one-thread
kernel spinning on the GPU's timer; on the host device, a sleep on the stream's worker
thread, or of the calling thread for the default stream).
"""
sleep_on(s::CuStream, seconds::Real) =
    check(c_stream_sleep(live_handle(s), round(UInt64, max(0, seconds) * 1e9)))

## asynchronous copies

# Whether host array `x` is page-locked (pinned.jl: `CuMem.pinned`, `CuMem.pin`), so an
# asynchronous copy from or to it can run after the call returns.
host_pinned(x::Array) = is_pinned(x)

# Queues the upload of `src` (host memory the caller keeps alive until the copy has run)
# into `dest` on `s`: the engine's cuMemcpyHtoDAsync, whatever kind of host memory.
function upload_async!(dest::CuArray{T}, src::Array{T}, s::CuStream) where {T}
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    n == 0 && return dest
    check(c_copy_htod_async(devaddr(dest), convert(Ptr{Cvoid}, pointer(src)), nbytes(T, n), live_handle(s)))
    return dest
end

function download_async!(dest::Array{T}, src::CuArray{T}, s::CuStream) where {T}
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    n == 0 && return dest
    check(c_copy_dtoh_async(convert(Ptr{Cvoid}, pointer(dest)), devaddr(src), nbytes(T, n), live_handle(s)))
    return dest
end

# copyto!(dest, src; async = true): from or to page-locked host memory, queued on the
# current stream; otherwise PyTorch's `non_blocking` fallback: wait for the stream, then
# a synchronous copy.
function copy_maybe_async!(dest, src, async::Bool)
    async || return copy_all!(dest, src)
    s = stream()
    if dest isa CuArray && src isa Array && eltype(dest) == eltype(src) && host_pinned(src)
        return upload_async!(dest, src, s)
    elseif dest isa Array && src isa CuArray && eltype(dest) == eltype(src) && host_pinned(dest)
        return download_async!(dest, src, s)
    end
    synchronize(s)
    return copy_all!(dest, src)
end

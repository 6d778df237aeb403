# The task's state that the engine's calls depend on (CUDA.jl's src/state.jl): the
# CuStream type and each task's current stream, per device. The task's current device
# is lib/libcumem.jl's (`task_device`), since its wrappers push it to the engine.

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
    capturer::Union{Nothing,Task}  # the task capturing the stream into a graph, if any
    function CuStream(handle::UInt64, blocking::Bool, dev::Int; own::Bool = false)
        s = new(handle, blocking, dev, nothing)
        # The engine finds the stream's device by its handle, whatever device is current
        # on the thread that finalizes it.
        own && finalizer(s -> s.handle == 0 || (c_stream_destroy(s.handle); s.handle = 0), s)
        return s
    end
end

const DEFAULT_STREAM = CuStream(UInt64(0), true, -1)

Base.show(io::IO, s::CuStream) =
    print(io, s === DEFAULT_STREAM ? "CuStream(default)" : s.handle == 0 ? "CuStream(destroyed)" :
              "CuStream($(s.handle)$(s.blocking ? ", blocking" : ""))")

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

# Waits for the current stream unless it is the default one; a status code (the
# `ordered_*` copies below call it). Inside a capture it throws `CaptureError`: a wait
# would invalidate the capture.
@inline function sync_current()
    STREAMS_SET[] || return Int32(0)
    CAPTURES[] == 0 || refuse_in_capture("a synchronous copy or memset (it waits for the stream)")
    s = task_stream()
    s.handle == 0 && return Int32(0)
    return c_stream_synchronize(s.handle)
end

@noinline throw_destroyed(s) = throw(ArgumentError("this $(nameof(typeof(s))) was destroyed (unsafe_destroy! or its finalizer)"))
@inline function live_handle(s::CuStream)
    s.handle == 0 && s !== DEFAULT_STREAM && throw_destroyed(s)
    s.capturer === nothing || s.capturer === current_task() || throw_captured_elsewhere(s)
    return s.handle
end


# The synchronous copies and memset, ordered after the task's current stream: they run
# on the legacy default stream, so with another current stream they first wait for its
# work, as CUDA.jl's copies on the task's stream are ordered with it. Status codes.
@inline ordered_copy_htod(dst::UInt64, src::Ptr{Cvoid}, bytes::UInt64) =
    (code = sync_current(); code == 0 ? c_copy_htod(dst, src, bytes) : code)
@inline ordered_copy_dtoh(dst::Ptr{Cvoid}, src::UInt64, bytes::UInt64) =
    (code = sync_current(); code == 0 ? c_copy_dtoh(dst, src, bytes) : code)
@inline ordered_copy_dtod(dst::UInt64, src::UInt64, bytes::UInt64) =
    (code = sync_current(); code == 0 ? c_copy_dtod(dst, src, bytes) : code)
@inline ordered_memset(dst::UInt64, value::UInt8, bytes::UInt64) =
    (code = sync_current(); code == 0 ? c_memset(dst, value, bytes) : code)

## stream capture (compute/runtime/graphs.jl has the API: capture, instantiate, launch)

"""
    CuMem.CaptureError(msg)

Thrown, before anything is queued or changed, for what a stream capture
([`CuMem.capture`](@ref)) cannot record: a synchronization, a scalar read-back, a copy
between the device and pageable host memory, a `CuIterator` upload, a nested capture, or
work queued on the capturing stream by another task.
"""
struct CaptureError <: Exception
    msg::String
end
Base.showerror(io::IO, e::CaptureError) = print(io, "CaptureError: ", e.msg)

# One operation of a capture whose edges follow its data (compute/runtime/capture_edges.jl):
# its id, the byte ranges [lo, hi) it reads and writes, its last nodes (GPU: the driver's
# nodes; host device: the id itself) and the operations it follows.
struct CapturedOp
    id::Int
    reads::Vector{NTuple{2,UInt64}}
    writes::Vector{NTuple{2,UInt64}}
    tail::Vector{UInt64}
    anc::BitSet          # the ids of the operations it follows, directly or not
end

# The capture under way in a task: its stream, its graph pool, on the host device the
# operations recorded (closures, run in the order of `groups` at each replay), and the
# bookkeeping that gives operations edges from the memory they read and write
# (capture_edges.jl): `open` > 0 while an operation runs (its allocations are added to
# its writes), `recs` the operations since the last one of unknown access (a barrier),
# `leaves` those no later one depends on, `frontier` the nodes set on the stream after the
# last operation, `seen` the host closures grouped so far, `groups` (host device) each
# operation's closures and the ids it depends on.
mutable struct CaptureState
    stream::CuStream
    pool::UInt64
    ops::Vector{Any}
    open::Int
    writes::Vector{NTuple{2,UInt64}}
    nops::Int
    recs::Vector{CapturedOp}
    leaves::Vector{CapturedOp}
    frontier::Vector{UInt64}
    seen::Int
    groups::Vector{Tuple{UnitRange{Int},Vector{Int}}}
end
CaptureState(s::CuStream, pool::UInt64, ops::Vector{Any}) =
    CaptureState(s, pool, ops, 0, NTuple{2,UInt64}[], 0, CapturedOp[], CapturedOp[], UInt64[], 0,
                 Tuple{UnitRange{Int},Vector{Int}}[])

# An allocation during a capture: written by the operation under way (a temporary it
# frees may go to a later operation of the capture, which must then wait for it).
@noinline function note_capture_alloc(ptr::UInt64, bytes::Int)
    st = capture_state()
    st === nothing || st.open <= 0 || push!(st.writes, (ptr, ptr + UInt64(bytes)))
    return nothing
end

# Captures under way in the process: while 0, `capture_state()` is one load.
const CAPTURES = Threads.Atomic{Int}(0)

# The current task's capture, or nothing.
@inline function capture_state()
    CAPTURES[] == 0 && return nothing
    st = current_task().storage
    st === nothing && return nothing
    return get(st::IdDict{Any,Any}, :CuMemCapture, nothing)::Union{Nothing,CaptureState}
end

"""
    CuMem.is_capturing() -> Bool

Whether the current task is inside [`CuMem.capture`](@ref) (CUDA.jl's `is_capturing`).
"""
is_capturing() = capture_state() !== nothing

@noinline refuse_in_capture(what) =
    capture_state() === nothing ? nothing :
    throw(CaptureError("$what cannot be recorded in a graph capture; do it before or after CuMem.capture"))

@noinline throw_captured_elsewhere(s) =
    throw(CaptureError("$s is being captured into a graph by another task; work from other tasks " *
                       "cannot go on a stream under capture (use a stream of your own)"))

# Host-device compute: `f()` now, or, inside a capture on the host device, `f` recorded to
# run at each replay (the GPU records its kernels itself). `f` must hold what it needs
# (host views made at the call, not CuArrays that may be freed before a replay).
@inline function host_run(f)
    st = capture_state()
    st === nothing && return f()
    push!(st.ops, f)
    return nothing
end

# The records behind the leak report and the allocation history's Julia origins: the
# Buffer of shared or tracked memory, the -g2 allocation traces (the Julia stack of every
# live allocation), the origin ids that the history carries, and the count of frees
# refused on the finalizer path. memory/status.jl prints them; memory/allocator.jl and
# array/ fill them; tools/memtools.jl joins them to the engine's records.

# One device allocation shared by several CuArrays (`reshape`/`vec`), wrapped memory
# (`unsafe_wrap`) or a tracked allocation. `refs` counts the arrays that still hold it;
# the last release returns the memory.
mutable struct Buffer
    ptr::UInt64                    # device address; 0 for an allocation of 0 bytes
    bytes::Int                     # the size asked for
    refs::Threads.Atomic{Int}
    freed::Bool                    # set (only) by the last release, before cumem_free
    trace::Any                     # an AllocTrace when tracking (-g2), else nothing
    owned::Bool                    # false for `unsafe_wrap(...; own = false)`: never freed here
    dev::Int                       # the device's ordinal (0 unless several are used)
end

struct AllocTrace
    seq::Int                       # allocation order, to list outstanding ones in order
    bt::Vector                     # backtrace() at allocation
end

# Failed frees seen on the finalizer path, where nothing may throw: counted here, shown
# by memory_status and `CuMem.free_errors()`.
const FREE_ERRORS = Threads.Atomic{Int}(0)
const LAST_FREE_ERROR_PTR = Threads.Atomic{UInt64}(0)
const LAST_FREE_ERROR_CODE = Threads.Atomic{Int32}(0)

"""
    CuMem.free_errors() -> (count, last_ptr, last_code)

Frees that the engine refused on paths that may not throw (GC finalizers), with the last
one's device address and status code. Always `(0, 0, 0)` unless something is badly wrong.
"""
free_errors() = (FREE_ERRORS[], LAST_FREE_ERROR_PTR[], LAST_FREE_ERROR_CODE[])

## -g2 allocation traces
#
# With `julia -g2` or CUMEM_DEBUG=2 each allocation records `backtrace()` and is entered
# in TRACKED, keyed by device address. Finalizers never touch TRACKED (a finalizer can
# interrupt any code on its thread, including code holding the lock, so a lock there
# could deadlock and a lock-free write could corrupt the Dict): the last release only
# sets `buf.freed`, and ordinary code drops freed entries when it next holds the lock.
# Ordinary code holds TRACK_LOCK (a non-reentrant spin lock) with the GC disabled, so no
# finalizer can run on its thread inside the critical section.

const TRACK = Ref(false)
const TRACKED = Dict{UInt64,Buffer}()
const TRACK_LOCK = Threads.SpinLock()
const TRACK_SEQ = Ref(0)
const TRACK_PRUNE_AT = Ref(64)

function init_tracking()
    TRACK[] = Base.JLOptions().debug_level >= 2 || strip(get(ENV, "CUMEM_DEBUG", "")) == "2"
    return nothing
end

"""
    CuMem.tracking() -> Bool

Whether allocations record Julia backtraces for the leak report of [`memory_status`]:
true under `julia -g2` or with `CUMEM_DEBUG=2` when the package was loaded.
"""
tracking() = TRACK[]

function with_track_lock(f)
    gc_was_on = GC.enable(false)
    lock(TRACK_LOCK)
    try
        return f()
    finally
        unlock(TRACK_LOCK)
        gc_was_on && GC.enable(true)
    end
end

function prune_tracked!()
    filter!(kv -> !kv.second.freed, TRACKED)
    TRACK_PRUNE_AT[] = max(64, 2 * length(TRACKED))
    return nothing
end

@noinline function track!(buf::Buffer, bt = backtrace())
    with_track_lock() do
        TRACK_SEQ[] += 1
        buf.trace = AllocTrace(TRACK_SEQ[], bt)
        TRACKED[buf.ptr] = buf
        length(TRACKED) >= TRACK_PRUNE_AT[] && prune_tracked!()
    end
    return nothing
end

const JULIA_SOURCE_DIR = normpath(joinpath(@__DIR__, ".."))

is_cumem_frame(fr::Base.StackFrame) = startswith(normpath(string(fr.file)), JULIA_SOURCE_DIR)

# Base, Core and standard-library frames (Base's files are recorded without a directory,
# e.g. `abstractarray.jl` or `./abstractarray.jl`; stdlib files lie under Sys.STDLIB).
function is_julia_frame(fr::Base.StackFrame)
    fr.func === :backtrace && return true
    file = string(fr.file)
    (isempty(file) || file == "none" || startswith(file, "REPL[")) && return false
    dirname(file) in ("", ".") && return true
    nf = normpath(file)
    return occursin("/share/julia/base/", nf) || occursin("/share/julia/stdlib/", nf) ||
           startswith(nf, normpath(Sys.STDLIB))
end

# One symbolized frame: the frame, whether it is CuMem's own (bit 1) or Base's/a
# standard library's (bit 2), and its printed form.
const CachedFrame = Tuple{Base.StackFrame,UInt8,String}

# Symbolized frames by instruction pointer. Live arrays come from a few call sites, so
# the backtraces of a leak report share almost all their pointers; looking each up,
# classifying and printing it once makes the report cost microseconds per array instead
# of the ~0.1 s that `stacktrace` spends on every backtrace.
const FRAME_CACHE = Dict{Any,Vector{CachedFrame}}()
const FRAME_CACHE_LOCK = ReentrantLock()

function lookup_frames(ip)
    frames = CachedFrame[]
    for fr in Base.StackTraces.lookup(ip)
        fr.from_c && continue       # as `stacktrace(bt)`: Julia frames only
        kind = UInt8(is_cumem_frame(fr)) | UInt8(is_julia_frame(fr)) << 1
        push!(frames, (fr, kind, sprint(print, fr)))
    end
    return frames
end

# The frames of `bt` that belong to the caller: CuMem's own frames and the Base frames
# that led into them (e.g. `backtrace`, `similar(a)` → CuMem's `similar`) are removed,
# so the first frame is the user's code.
function user_frames(bt)
    frames = CachedFrame[]
    lock(FRAME_CACHE_LOCK) do
        for ip in bt
            append!(frames, get!(() -> lookup_frames(ip), FRAME_CACHE, ip))
        end
    end
    i = 1
    n = length(frames)
    while i <= n && frames[i][2] != 0
        i += 1
    end
    if i > n   # nothing but Julia/CuMem frames: drop only the leading allocator frames
        i = 1
        while i <= n && (frames[i][2] & 1 != 0 || frames[i][1].func === :backtrace)
            i += 1
        end
    end
    return frames[i:end]
end

# The live tracked buffers as (ptr, bytes, trace), oldest first.
function tracked_live()
    live = with_track_lock() do
        prune_tracked!()
        [(b.ptr, b.bytes, b.trace::AllocTrace) for b in values(TRACKED)]
    end
    return sort!(live, by = x -> x[3].seq)
end

"""
    CuMem.outstanding_allocations() -> Vector

The live allocations recorded while [`CuMem.tracking`](@ref) is on, oldest first, as
named tuples `(ptr, bytes, frames)` where `frames` is the stack trace of the allocation
(CuMem's own frames removed). Empty when tracking is off.
"""
function outstanding_allocations()
    TRACK[] || return NamedTuple{(:ptr, :bytes, :frames),Tuple{UInt64,Int,Vector{Base.StackFrame}}}[]
    return [(ptr = p, bytes = n, frames = Base.StackFrame[f[1] for f in user_frames(t.bt)])
            for (p, n, t) in tracked_live()]
end

## origins

# Julia stacks of allocations made while recording under -g2, by id (the engine carries
# `id | CUMEM_ORIGIN_CALLER` in their events). Each distinct stack is stored once.
const ORIGIN_IDS = Dict{Vector{Any},Int}()
const ORIGIN_BTS = Vector{Any}[]
const RECORDING = Ref(false)

# The id of the stack `bt` (called from `alloc_buffer` under -g2 while recording).
function origin_id(bt)
    key = convert(Vector{Any}, bt)
    return with_track_lock() do
        get!(ORIGIN_IDS, key) do
            push!(ORIGIN_BTS, key)
            length(ORIGIN_BTS)
        end
    end
end

frames_text(bt) = join((f[3] for f in user_frames(bt)), "\n")

# The text of an engine origin id: a Julia stack (caller bit) or the engine's native one.
function origin_text(id::UInt64)
    id == 0 && return nothing
    if id & CUMEM_ORIGIN_CALLER != 0
        k = Int(id & ~CUMEM_ORIGIN_CALLER)
        bt = with_track_lock(() -> 1 <= k <= length(ORIGIN_BTS) ? ORIGIN_BTS[k] : nothing)
        return bt === nothing ? nothing : frames_text(bt)
    end
    n = c_origin_text(id, C_NULL, 0)
    n == 0 && return nothing
    buf = Vector{UInt8}(undef, n + 1)
    m = c_origin_text(id, buf, length(buf))
    return String(resize!(buf, min(m, n)))
end

# The Julia stack of the live tracked buffer at `ptr` (-g2), if any.
function tracked_origin(ptr::UInt64)
    TRACK[] || return nothing
    buf = with_track_lock(() -> get(TRACKED, ptr, nothing))
    (buf === nothing || buf.freed || buf.trace === nothing) && return nothing
    return frames_text(buf.trace.bt)
end

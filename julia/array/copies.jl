# Copies of CuArrays in every direction: copyto! between host and device and within a
# device (ordered after the task's current stream, state.jl), between devices (peer or
# staged), asynchronous copies on a stream from and to page-locked memory, and what
# streams record about an array's memory (record_stream, PyTorch's caching allocator).

## copies
#
# copyto!(dest, doffs, src, soffs, n) in every direction; offsets are linear indices.


function check_copy(dest, doffs::Integer, src, soffs::Integer, n::Integer)
    n < 0 && throw(ArgumentError(string("tried to copy n=", n, " elements, but n should be nonnegative")))
    n == 0 && return nothing
    di, si = LinearIndices(dest), LinearIndices(src)
    (checkbounds(Bool, di, doffs) && checkbounds(Bool, di, doffs + n - 1)) ||
        throw(BoundsError(dest, doffs:doffs+n-1))
    (checkbounds(Bool, si, soffs) && checkbounds(Bool, si, soffs + n - 1)) ||
        throw(BoundsError(src, soffs:soffs+n-1))
    return nothing
end

# host → device
function Base.copyto!(dest::CuArray{T}, doffs::Integer, src::Array{T}, soffs::Integer,
                      n::Integer) where {T}
    check_alive(dest)
    check_copy(dest, doffs, src, soffs, n)
    n == 0 && return dest
    CAPTURES[] == 0 || refuse_in_capture("a copy from host memory (Array) to the device")
    GC.@preserve src check(ordered_copy_htod(offset_addr(dest, doffs),
                                       convert(Ptr{Cvoid}, pointer(src, soffs)), nbytes(T, n)))
    return dest
end

# device → host
function Base.copyto!(dest::Array{T}, doffs::Integer, src::CuArray{T}, soffs::Integer,
                      n::Integer) where {T}
    check_alive(src)
    check_copy(dest, doffs, src, soffs, n)
    n == 0 && return dest
    CAPTURES[] == 0 || refuse_in_capture("a copy from the device to host memory (Array)")
    check_thrown_before_read()
    GC.@preserve dest check(ordered_copy_dtoh(convert(Ptr{Cvoid}, pointer(dest, doffs)),
                                        offset_addr(src, soffs), nbytes(T, n)))
    check_kernel_errors()
    return dest
end

# device → device (overlapping ranges of one array are allowed)
function Base.copyto!(dest::CuArray{T}, doffs::Integer, src::CuArray{T}, soffs::Integer,
                      n::Integer) where {T}
    check_alive(dest)
    check_alive(src)
    if dest.dev != src.dev                  # two devices: a peer copy (devices.jl)
        copy_between!(dest, doffs, src, soffs, n, false)
        return dest
    end
    check_copy(dest, doffs, src, soffs, n)
    n == 0 && return dest
    if dest.dev == task_device()
        # Queued on the task's stream (cuMemcpyDtoDAsync), ordered with its kernels.
        d, sa, nb = offset_addr(dest, doffs), offset_addr(src, soffs), nbytes(T, n)
        if on_host() && CAPTURES[] != 0 && capture_state() !== nothing
            host_run(() -> check(c_copy_dtod_async(d, sa, nb, UInt64(0))))   # replayed in order
        else
            check(c_copy_dtod_async(d, sa, nb, current_handle()))
        end
    else
        check(ordered_copy_dtod(offset_addr(dest, doffs), offset_addr(src, soffs), nbytes(T, n)))
    end
    return dest
end

# Other element types or host array types: staged through a host Vector.
function Base.copyto!(dest::CuArray{T}, doffs::Integer, src::AbstractArray, soffs::Integer,
                      n::Integer) where {T}
    check_alive(dest)
    check_copy(dest, doffs, src, soffs, n)
    n == 0 && return dest
    tmp = Vector{T}(undef, n)
    copyto!(tmp, 1, src isa CuArray ? download(src, soffs, n) : src, src isa CuArray ? 1 : soffs, n)
    return copyto!(dest, doffs, tmp, 1, n)
end

function Base.copyto!(dest::AbstractArray, doffs::Integer, src::CuArray, soffs::Integer,
                      n::Integer)
    check_alive(src)
    check_copy(dest, doffs, src, soffs, n)
    n == 0 && return dest
    return copyto!(dest, doffs, download(src, soffs, n), 1, n)
end

Base.copyto!(dest::CuArray, doffs::Integer, src::CuArray, soffs::Integer, n::Integer) =
    invoke(copyto!, Tuple{CuArray,Integer,AbstractArray,Integer,Integer}, dest, doffs, src, soffs, n)

# Elements soffs:soffs+n-1 of `src` as a host Vector.
download(src::CuArray{T}, soffs::Integer, n::Integer) where {T} =
    copyto!(Vector{T}(undef, n), 1, src, soffs, n)

# The 2-argument methods cover the host array types that are stored densely; a catch-all
# `copyto!(::CuArray, ::AbstractArray)` would be ambiguous with methods of other packages
# (SparseArrays, PermutedDimsArray, ...). Other sources: `copyto!(dest, 1, src, 1, n)`, or
# `collect` them first.
const HostDense = Union{Array,AbstractRange,SubArray{<:Any,<:Any,<:Array},
                        Base.ReshapedArray{<:Any,<:Any,<:Array}}
# (a destination too short is a BoundsError, as Base's copyto! of two Arrays and CUDA.jl's)
function Base.copyto!(dest::CuArray, src::CuArray)
    n = length(src)
    n > length(dest) && throw(BoundsError(dest, n))
    return copyto!(dest, 1, src, 1, n)
end

"""
    copyto!(dest::CuArray, src::Array; async = false)
    copyto!(dest::Array, src::CuArray; async = false)

Copies all of `src` into the start of `dest`. With `async = true` and page-locked host
memory (`CuMem.pinned`) of the same element type, the copy is queued on the current
[`stream()`](@ref) and the call returns at once (`cuMemcpyHtoDAsync`/`DtoHAsync`): the
host array must stay untouched until the stream has done it (`synchronize`, or an event
recorded after it). It is kept alive meanwhile: the array stays reachable, and a pinned
block freed early (`unsafe_free!`, its finalizer) is neither reused nor released before
the copy has run (an event on the stream, as PyTorch's `CachingHostAllocator`). With
pageable host memory, or other types, `async = true` behaves as PyTorch's
`non_blocking = True` does: the stream is synchronised, then the copy is done before
returning.
"""
Base.copyto!(dest::CuArray, src::HostDense; async::Bool = false) = copy_maybe_async!(dest, src, async)
Base.copyto!(dest::HostDense, src::CuArray; async::Bool = false) = copy_maybe_async!(dest, src, async)

## to host

Base.Array{T,N}(a::CuArray{S,N}) where {T,S,N} = copy_all!(Array{T,N}(undef, size(a)), a)
Base.Array{T}(a::CuArray{S,N}) where {T,S,N} = Array{T,N}(a)
Base.Array(a::CuArray{T,N}) where {T,N} = Array{T,N}(a)
Base.collect(a::CuArray) = Array(a)

## between devices

"""
    CuMem.copy_peer!(dest::CuArray, src::CuArray; staged = false) -> Symbol

Copies all of `src` into the start of `dest` (same element type; they may be on two
devices) and returns the path taken: `:same` (one device), `:peer` (direct, see
[`peer_access`](@ref)) or `:host` (staged through host memory; `staged = true` forces
it, to compare the two). `copyto!(dest, src)` does the same without the keyword; it
logs the path at debug level. Synchronous.
"""
function copy_peer!(dest::CuArray{T}, src::CuArray{T}; staged::Bool = false) where {T}
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    return copy_between!(dest, 1, src, 1, n, staged)
end

function copy_between!(dest::CuArray{T}, doffs::Integer, src::CuArray{T}, soffs::Integer, n::Integer,
                       staged::Bool) where {T}
    check_alive(dest)
    check_alive(src)
    check_copy(dest, doffs, src, soffs, n)
    path = Ref{Int32}(0)
    n == 0 && return array_device(dest) == array_device(src) ? :same : :peer
    check(c_copy_peer(offset_addr(dest, doffs), offset_addr(src, soffs), nbytes(T, n),
                      staged ? CUMEM_COPY_STAGED : UInt32(0), path))
    p = COPY_PATHS[path[] + 1]
    @debug "CuMem: copy of $(nbytes(T, n)) bytes from device $(array_device(src)) to device $(array_device(dest)): $p"
    return p
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

## asynchronous copies

# Whether host array `x` is page-locked (pinned.jl: `CuMem.pinned`, `CuMem.pin`), so an
# asynchronous copy from or to it can run after the call returns.
host_pinned(x::Array) = is_pinned(x)

# Host arrays of queued asynchronous copies whose memory is Julia's (registered with
# `CuMem.pin`), each with an event recorded on the copy's stream after it: kept reachable
# until the copy has run, so that the GC neither frees nor unregisters memory that a copy
# still reads or writes. Entries whose event completed are dropped on the next such copy.
# Arrays of `CuMem.pinned` are not held: the engine keeps their block from reuse and
# release until the copy has run (cumem_copy_htod_async), whatever happens to the array.
const ASYNC_HELD = Tuple{Array,CuEvent}[]
const ASYNC_HELD_LOCK = ReentrantLock()

function hold_until_done(x::Array, s::CuStream)
    p = convert(Ptr{Cvoid}, pointer(x))
    blk = with_pinned_lock(() -> get(PINNED_ARRAYS, p, nothing))
    blk !== nothing && blk.id == objectid(x) && return nothing   # CuMem.pinned: the engine keeps it
    e = try
        ev = CuEvent(timing = false)
        record(ev, s)
        ev
    catch
        # No event (a device error): wait for the copy instead; if even that fails, the
        # copy's state is unknown and the caller gets the error.
        synchronize(s)
        return nothing
    end
    lock(ASYNC_HELD_LOCK) do
        filter!(p -> !(try isdone(p[2]) catch; false end), ASYNC_HELD)   # kept while unsure
        push!(ASYNC_HELD, (x, e))
    end
    return nothing
end

# Queues the upload of `src` into `dest` on `s`: the engine's cuMemcpyHtoDAsync,
# whatever kind of host memory; `src` is kept reachable until the copy has run.
function upload_async!(dest::CuArray{T}, src::Array{T}, s::CuStream) where {T}
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    n == 0 && return dest
    GC.@preserve src check(c_copy_htod_async(devaddr(dest), convert(Ptr{Cvoid}, pointer(src)),
                                             nbytes(T, n), live_handle(s)))
    hold_until_done(src, s)
    return dest
end

function download_async!(dest::Array{T}, src::CuArray{T}, s::CuStream) where {T}
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    n == 0 && return dest
    GC.@preserve dest check(c_copy_dtoh_async(convert(Ptr{Cvoid}, pointer(dest)), devaddr(src),
                                              nbytes(T, n), live_handle(s)))
    hold_until_done(dest, s)
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

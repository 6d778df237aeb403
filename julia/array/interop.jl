# CuArrays meeting generic Julia code: deepcopy, serialization, and wrapping a device
# address that came from elsewhere.

"""
    deepcopy(x)

A `CuArray` inside `x` is copied on the device, as in CUDA.jl: the copy has memory of
its own, so freeing the original (or the copy) never affects the other. As for other
objects, an array reached twice is copied once, and arrays sharing memory (made by
`reshape`/`vec`) share one copy. Throws `AssertionError("Use of freed memory")` for a
freed array.
"""
function Base.deepcopy_internal(x::CuArray{T,N}, dict::IdDict) where {T,N}
    haskey(dict, x) && return dict[x]::CuArray{T,N}
    check_alive(x)
    src = x.shared
    if src !== nothing && haskey(dict, src)     # another array on the same memory was copied
        # (the copy covers the whole buffer; x may start inside it: a contiguous view)
        y0 = dict[src]::CuArray
        y = CuArray{T,N}(share!(y0), size(x); ptr = y0.ptr + (x.ptr - src.ptr))
    elseif src !== nothing && (x.ptr != src.ptr || sizeof(x) != src.bytes)
        # a view of part of the buffer: a copy of its own (arrays on the whole buffer,
        # copied later, do not share it)
        y = CuArray{T,N}(undef, size(x))
        sizeof(x) > 0 && check(ordered_copy_dtod(y.ptr, x.ptr, sizeof(x) % UInt64))
    else
        y = CuArray{T,N}(undef, size(x))
        try
            sizeof(x) > 0 && check(ordered_copy_dtod(y.ptr, x.ptr, sizeof(x) % UInt64))
        catch
            unsafe_free!(y)
            rethrow()
        end
        src === nothing || (dict[src] = y)
    end
    dict[x] = y
    return y
end

"""
    serialize(s, x::CuArray)
    deserialize(s) -> CuArray

A `CuArray` is serialized (also by Distributed, between processes) as its elements,
downloaded into a host `Array`; deserializing uploads them into a new allocation of the
receiving process. Arrays that share memory (`reshape`) are serialized as separate arrays.
Serializing a freed array throws `AssertionError("Use of freed memory")` before writing
anything.
"""
function Serialization.serialize(s::Serialization.AbstractSerializer, x::CuArray{T,N}) where {T,N}
    host = Array(x)                    # first: a freed array throws before anything is written
    Serialization.writetag(s.io, Serialization.OBJECT_TAG)
    Serialization.serialize(s, typeof(x))
    Serialization.serialize(s, host)
    return nothing
end

function Serialization.deserialize(s::Serialization.AbstractSerializer, ::Type{CuArray{T,N}}) where {T,N}
    host = Serialization.deserialize(s)::Array{T,N}
    return CuArray{T,N}(host)
end

"""
    unsafe_wrap(CuArray, ptr::CuPtr{T}, dims; own = false) -> CuArray{T}

A `CuArray` of `dims` (an integer or a tuple) over the device memory at `ptr`, without
copying, as CUDA.jl's `unsafe_wrap`. The range `prod(dims) * sizeof(T)` bytes from `ptr`
must lie inside one live allocation of this engine (e.g. `pointer(x)` of a live CuArray,
or an address from the C ABI's `cumem_alloc`); otherwise `ArgumentError`.

With `own = false` the array never frees the memory: the caller keeps it alive for as
long as the array is used, and `unsafe_free!` only marks the array freed. With
`own = true` the array takes the allocation over and returns it to the pool when it is
finalized or `unsafe_free!`d: `ptr` must then be the start of an allocation that nothing
else frees.
"""
function Base.unsafe_wrap(::Union{Type{CuArray},Type{CuArray{T}},Type{CuArray{T,N}}},
                          ptr::CuPtr{T}, dims::NTuple{N,Integer}; own::Bool = false) where {T,N}
    check_eltype(T)
    d = convert(Dims{N}, dims)
    bytes = checked_bytes(T, d)
    if bytes > 0
        # A copy of the range onto itself is refused unless the range lies inside one live
        # allocation, and otherwise makes no device call (nothing read, nothing to order
        # after the task's stream, so no wait for it and none inside a capture).
        code = c_copy_dtod(ptr.addr, ptr.addr, bytes % UInt64)
        code == CUMEM_SUCCESS ||
            throw(ArgumentError("unsafe_wrap: $bytes bytes at $ptr are not inside one live " *
                                "allocation of the CuMem engine: " * last_error()))
    end
    own && charge!(bytes)               # released (and uncharged) as an allocation of ours
    buf = Buffer(ptr.addr, bytes, Threads.Atomic{Int}(1), false, nothing, own, task_device())
    return CuArray{T,N}(buf, d; own = own)
end
Base.unsafe_wrap(A::Union{Type{CuArray},Type{CuArray{T}},Type{CuArray{T,1}}}, ptr::CuPtr{T},
                 len::Integer; own::Bool = false) where {T} = unsafe_wrap(A, ptr, (len,); own = own)

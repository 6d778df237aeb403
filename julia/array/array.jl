# CuArray: an N-dimensional array of isbits elements in device memory.

"""
    CuPtr{T}

A device address: the value of `pointer(x::CuArray{T})`. Not a host `Ptr` (on a GPU it
cannot be dereferenced by the CPU). `UInt64(p)` is the address; `p + n` offsets by `n`
bytes, as for `Ptr`.
"""
struct CuPtr{T}
    addr::UInt64
end

Base.UInt64(p::CuPtr) = p.addr
Base.convert(::Type{UInt64}, p::CuPtr) = p.addr
Base.:(+)(p::CuPtr{T}, n::Integer) where {T} = CuPtr{T}(p.addr + (n % UInt64))
Base.:(-)(p::CuPtr{T}, n::Integer) where {T} = CuPtr{T}(p.addr - (n % UInt64))
Base.:(-)(p::CuPtr, q::CuPtr) = (p.addr - q.addr) % Int
Base.isless(p::CuPtr, q::CuPtr) = isless(p.addr, q.addr)
Base.show(io::IO, p::CuPtr{T}) where {T} = print(io, "CuPtr{", T, "}(0x", string(p.addr, base = 16, pad = 12), ")")
# As CUDA.jl's CuPtr: its element type, `n + p`, `Int(p)`, conversions between CuPtr types
# and from integers, `reinterpret` to and from `Ptr` (the same bits), and no `convert` to a
# host `Ptr` (the CPU cannot read the address).
Base.eltype(::Type{CuPtr{T}}) where {T} = T
Base.:(+)(n::Integer, p::CuPtr) = p + n
Base.Int(p::CuPtr) = p.addr % Int
Base.convert(::Type{CuPtr{T}}, p::CuPtr) where {T} = CuPtr{T}(p.addr)
Base.convert(::Type{CuPtr{T}}, x::Integer) where {T} = CuPtr{T}(x % UInt64)
Base.convert(::Type{Ptr{T}}, p::CuPtr) where {T} =
    throw(ArgumentError("cannot convert a device pointer ($p) to a host Ptr{$T}: the CPU cannot read it; reinterpret(Ptr{$T}, p) gives the same bits"))
Base.reinterpret(::Type{Ptr{T}}, p::CuPtr) where {T} = Ptr{T}(p.addr)
Base.reinterpret(::Type{CuPtr{T}}, p::Union{Ptr,CuPtr}) where {T} = CuPtr{T}(UInt64(p))

"""
    CU_NULL

The null device pointer, `CuPtr{Cvoid}(0)` (CUDA.jl's `CU_NULL`).
"""
const CU_NULL = CuPtr{Cvoid}(0)

# A CuArray passed to `ccall` for an argument declared `CuPtr{T}` (a C `uint64_t`) becomes
# its device address; ccall keeps the array rooted for the duration of the call.
Base.cconvert(::Type{<:CuPtr}, x) = x

"""
    CuArray{T,N}(undef, dims...)
    CuArray{T}(undef, dims...)
    CuArray(A::AbstractArray)
    CuArray{T}(A::AbstractArray)

An `N`-dimensional array of `T` (an `isbitstype`) in device memory. The memory returns to
the pool when the array is garbage-collected, or at once with [`unsafe_free!`](@ref).
Arrays made by `reshape`/`vec` share the memory; it is returned when the last of them is
freed. Any use of a freed array throws `AssertionError("Use of freed memory")`; its
size and type remain readable.
"""
mutable struct CuArray{T,N} <: AbstractArray{T,N}
    ptr::UInt64                    # device address of the first element; 0 for 0 bytes
    dims::Dims{N}
    freed::Bool                    # this array's hold on the memory was released
    shared::Union{Nothing,Buffer}  # nothing: the array alone owns `ptr` (see below)
    dev::Int                       # the device's ordinal (0 unless several are used)

    # A fresh array: one object, no Buffer, unless -g2 tracking records the allocation.
    function CuArray{T,N}(::UndefInitializer, dims::Dims{N}) where {T,N}
        check_eltype(T)
        bytes = checked_bytes(T, dims)
        dev = task_device()                      # the allocation wrappers make it the thread's
        ptr = alloc_array_memory(bytes)
        a = new{T,N}(ptr, dims, false, nothing, dev)
        TRACK[] && ptr != 0 && (a.shared = new_buffer(ptr, bytes, dev))
        finalizer(finalizer_ptr(CuArray{T,N}), a)
        return a
    end

    # Shares `buf`, which the caller has retained for this array, from address `ptr`
    # (inside `buf`: a contiguous view starts after the buffer's start). `own = false`:
    # the memory is not the engine's to free (`unsafe_wrap(CuArray, ptr, dims)`), so no
    # finalizer.
    function CuArray{T,N}(buf::Buffer, dims::Dims{N}; own::Bool = true, ptr::UInt64 = buf.ptr) where {T,N}
        a = new{T,N}(ptr, dims, false, buf, buf.dev)
        own && finalizer(finalizer_ptr(CuArray{T,N}), a)
        return a
    end
end

# The layout, and what to keep in mind when adding a field (a device, a stream):
#
# - `shared === nothing` (every array from the constructor while -g2 tracking is off):
#   the array alone owns `ptr` and `sizeof(a)` bytes at it; its release frees them. Its
#   only heap object is the array itself (test/memory/hotpath_tests.jl checks this).
# - `shared` a Buffer: the memory is the Buffer's, reference-counted over every array
#   that holds it; the array's release drops one reference. `share!` turns an array of
#   the first kind into one of the second, the first time it is reshaped.
#
# State that a free needs (the device an allocation belongs to, its stream) goes in the
# array and, for the second kind, in Buffer too: `share!` copies it from the array, and
# `free_memory` receives it from either.

# The Buffer through which `a`'s memory is shared, with one reference more for the
# caller: made the first time the array is reshaped. The Buffer is made before taking
# the lock (nothing inside allocates, so no collection can run there), and the lock
# serializes the first sharing by two threads at once.
const SHARE_LOCK = Threads.SpinLock()

function share!(a::CuArray)
    check_alive(a)
    s = a.shared
    s === nothing || return retain(s)
    buf = Buffer(a.ptr, sizeof(a), Threads.Atomic{Int}(2), false, nothing, true, a.dev)
    lock(SHARE_LOCK)
    s = a.shared
    if s === nothing
        a.shared = buf
        s = buf
    else
        retain(s)
    end
    unlock(SHARE_LOCK)
    return s
end

"""
    CuVector{T} = CuArray{T,1}
    CuMatrix{T} = CuArray{T,2}
    CuVecOrMat{T} = Union{CuVector{T},CuMatrix{T}}

One- and two-dimensional [`CuArray`](@ref)s, as `Vector`, `Matrix` and `VecOrMat`.
`CuVector{T}(undef, n)`, `CuMatrix{T}(undef, m, n)`; a wrong number of dimensions is a
`MethodError`, as for `Vector`.
"""
const CuVector{T} = CuArray{T,1}
const CuMatrix{T} = CuArray{T,2}
const CuVecOrMat{T} = Union{CuVector{T},CuMatrix{T}}
@doc (@doc CuVector) CuMatrix
@doc (@doc CuVector) CuVecOrMat

function check_eltype(::Type{T}) where {T}
    isbitstype(T) || throw(ArgumentError("CuArray only supports element types that are " *
                                         "isbitstype; $T is not"))
    return nothing
end

# Releases `a`'s hold on its memory: frees it, or drops a reference to its Buffer. The
# caller has set `a.freed`. Safe in a finalizer (see `free_memory`).
@inline function release_array(a::CuArray, throwerr::Bool)
    s = a.shared
    if s === nothing
        free_memory(a.ptr, sizeof(a), throwerr)
    else
        release(s, throwerr)
    end
    return nothing
end

# The finalizer: returns the memory and never throws, prints or takes a lock.
finalize_array(a::CuArray) = (a.freed || (a.freed = true; release_array(a, false)); nothing)

# It is registered as a C function pointer (Base's `finalizer(f::Ptr{Cvoid}, x)`, on
# Julia 1.5 as today): the GC then calls it directly, where a Julia function would be
# called through `jl_apply_generic` inside a `try` (a `setjmp`) for every array; that
# cost about 130 ns per finalized array on the machine of docs/performance.md. Such a
# finalizer must not throw (nothing would catch it), which `finalize_array` never does.
# One pointer per concrete array type, a constant in the compiled code.
@inline finalizer_ptr(::Type{CuArray{T,N}}) where {T,N} =
    @cfunction(finalize_array, Cvoid, (Ref{CuArray{T,N}},))

"""
    unsafe_free!(x::CuArray)

Releases `x`'s reference to its device memory now instead of when `x` is
garbage-collected; the memory returns to the pool once no array (see `reshape`) uses it.
Calling it again does nothing. Any later use of `x` throws
`AssertionError("Use of freed memory")`. For other values it does nothing.
"""
function unsafe_free!(a::CuArray)
    a.freed && return nothing
    claim_free!(a) || return nothing
    release_array(a, true)
    return nothing
end

unsafe_free!(x) = nothing

"""
    CuMem.isfreed(x::CuArray) -> Bool

Whether `unsafe_free!(x)` was called (or its finalizer ran).
"""
isfreed(a::CuArray) = a.freed

"""
    ArrayState: ARRAY_MANAGED, ARRAY_FREED (and ARRAY_UNMANAGED)

`x.state` of a CuArray, as CUDA.jl 2.x's field: `ARRAY_FREED` once `unsafe_free!(x)` was
called (by the caller, its finalizer or a `CuIterator` advancing), `ARRAY_MANAGED` before.
CuMem does not record whether an `unsafe_wrap`ped array owns its memory, so
`ARRAY_UNMANAGED` is never reported.
"""
@enum ArrayState ARRAY_UNMANAGED ARRAY_MANAGED ARRAY_FREED

@inline Base.getproperty(a::CuArray, s::Symbol) =
    s === :state ? (getfield(a, :freed) ? ARRAY_FREED : ARRAY_MANAGED) : getfield(a, s)
Base.propertynames(::CuArray, private::Bool = false) =
    private ? (:state, fieldnames(CuArray)...) : (:state,)

# Whether `a` and `b` are the same memory (one made from the other by `reshape`/`vec`,
# or wrapping the same address).
same_memory(a::CuArray, b::CuArray) = a === b || (a.ptr == b.ptr && a.ptr != 0)

@noinline throw_freed() = throw(AssertionError("Use of freed memory"))

# The device address of `a`'s first element, checking that `a` is alive.
@inline devaddr(a::CuArray) = (a.freed && throw_freed(); a.ptr)
@inline check_alive(a::CuArray) = (a.freed && throw_freed(); nothing)

## the device

array_device(a::CuArray) = a.dev

"""
    device(a::CuArray) -> CuDevice

The device holding `a`'s memory (where it was allocated), as CUDA.jl's `device(x)`; also
for views, transposes and reshapes of a CuArray. `ArgumentError` for other arrays.
"""
device(a::CuArray) = CuDevice(a.dev)
function device(a::AbstractArray)
    d = array_device(a)
    d === nothing && throw(ArgumentError("device: a $(typeof(a)) is not stored on a device"))
    return CuDevice(d)
end

## sizes and addresses

@inline nbytes(::Type{T}, n::Integer) where {T} = (n * sizeof(T)) % UInt64
@inline offset_addr(a::CuArray{T}, i::Integer) where {T} = devaddr(a) + nbytes(T, i - 1)

# copyto!(dest, src): all of src into the start of dest.
function copy_all!(dest, src)
    n = length(src)
    n > length(dest) && throw(ArgumentError("destination has fewer elements than required"))
    return copyto!(dest, firstindex(dest), src, firstindex(src), n)
end

## construction

# As for Array, the number of dimensions must match N; other counts are a MethodError
# (`CuVector{Float32}(undef, 2, 2)`), never a conversion loop.
CuArray{T,N}(::UndefInitializer, dims::Vararg{Integer,N}) where {T,N} =
    CuArray{T,N}(undef, convert(Dims{N}, dims))
CuArray{T,N}(::UndefInitializer, dims::NTuple{N,Integer}) where {T,N} =
    CuArray{T,N}(undef, convert(Dims{N}, dims))
CuArray{T}(::UndefInitializer, dims::Dims{N}) where {T,N} = CuArray{T,N}(undef, dims)
CuArray{T}(::UndefInitializer, dims::Integer...) where {T} =
    CuArray{T}(undef, convert(Tuple{Vararg{Int}}, dims))
CuArray{T}(::UndefInitializer, dims::Tuple{Vararg{Integer}}) where {T} =
    CuArray{T}(undef, convert(Tuple{Vararg{Int}}, dims))
# An empty vector, as `Vector{T}()`.
CuArray{T,1}() where {T} = CuArray{T,1}(undef, 0)

function CuArray{T,N}(A::AbstractArray{S,N}) where {T,N,S}
    a = CuArray{T,N}(undef, size(A))
    copy_all!(a, A)
    return a
end
CuArray{T}(A::AbstractArray{S,N}) where {T,N,S} = CuArray{T,N}(A)
CuArray(A::AbstractArray{T,N}) where {T,N} = CuArray{T,N}(A)

Base.convert(::Type{T}, A::AbstractArray) where {T<:CuArray} = A isa T ? A : T(A)

## the AbstractArray interface

Base.size(a::CuArray) = a.dims
Base.length(a::CuArray) = prod(a.dims)
Base.sizeof(a::CuArray{T}) where {T} = length(a) * sizeof(T)
Base.elsize(::Type{<:CuArray{T}}) where {T} = sizeof(T)
Base.IndexStyle(::Type{<:CuArray}) = IndexLinear()

"""
    pointer(x::CuArray{T}, i=1) -> CuPtr{T}

The device address of element `i` (see [`CuPtr`](@ref)).
"""
Base.pointer(a::CuArray{T}) where {T} = CuPtr{T}(devaddr(a))
Base.unsafe_convert(::Type{CuPtr{T}}, a::CuArray{T}) where {T} = pointer(a)
Base.unsafe_convert(::Type{CuPtr{Cvoid}}, a::CuArray) = CuPtr{Cvoid}(devaddr(a))
# A host pointer to device memory: CUDA.jl's message, and the ways out.
Base.unsafe_convert(::Type{Ptr{T}}, a::CuArray) where {T} =
    throw(ArgumentError("cannot take the CPU address of a $(typeof(a)): its memory is on the device; use pointer(a) (a CuPtr) for device code, or Array(a) for a host copy"))
Base.pointer(a::CuArray{T}, i::Integer) where {T} = CuPtr{T}(devaddr(a) + ((i - 1) * sizeof(T)) % UInt64)

Base.similar(a::CuArray, ::Type{T}, dims::Dims{N}) where {T,N} = CuArray{T,N}(undef, dims)

# copy and the range getindex make their result on the task's device: an array of another
# device is the device rule's ArgumentError, as for broadcasts (copyto! crosses devices).
function Base.copy(a::CuArray{T,N}) where {T,N}
    check_devices("copy", a)
    b = CuArray{T,N}(undef, size(a))
    copyto!(b, a)
    return b
end

"""
    reshape(x::CuArray, dims) / vec(x::CuArray)

A CuArray of the new shape sharing `x`'s memory (no copy): writes through one are seen
through the other. The memory is returned when every array sharing it is freed.
"""
function Base.reshape(a::CuArray{T,M}, dims::Dims{N}) where {T,N,M}
    check_alive(a)
    if prod(dims) != length(a)
        throw(DimensionMismatch("new dimensions $dims must be consistent with array size $(length(a))"))
    end
    return CuArray{T,N}(share!(a), dims; ptr = a.ptr)
end

"""
    reinterpret(T, x::CuArray{S}) -> CuArray{T}

A CuArray with element type `T` sharing `x`'s memory (no copy), as CUDA.jl: the same
dimensions when `sizeof(T) == sizeof(S)`, else the first dimension scaled by
`sizeof(S) / sizeof(T)`. Errors as Base's `reinterpret`: `ArgumentError` when `T` is not a
bits type or when the first dimension's bytes are not a multiple of `sizeof(T)`.
"""
function Base.reinterpret(::Type{T}, a::CuArray{S,N}) where {T,S,N}
    check_alive(a)
    isbitstype(T) || throw(ArgumentError("cannot reinterpret `$S` as `$T`, type `$T` is not a bits type"))
    T === S && return a
    dims = size(a)
    if sizeof(T) != sizeof(S)
        (N == 0 || sizeof(T) == 0) &&
            throw(ArgumentError("cannot reinterpret a zero-dimensional `$S` array to `$T` which is of a different size"))
        n1 = size(a, 1) * sizeof(S)
        n1 % sizeof(T) == 0 ||
            throw(ArgumentError("cannot reinterpret an `$S` array to `$T` whose first dimension has size " *
                                "`$(size(a, 1))`. The resulting array would have non-integral first dimension."))
        dims = (n1 ÷ sizeof(T), Base.tail(dims)...)
    end
    return CuArray{T,N}(share!(a), dims; ptr = a.ptr)
end

# reshape(a, 2, :) and friends: one dimension inferred.
Base.reshape(a::CuArray, dims::Tuple{Vararg{Union{Int,Colon}}}) = reshape(a, uncolon(a, dims))

function uncolon(a::CuArray, dims::Tuple)
    known = 1
    ncolon = 0
    for d in dims
        d isa Colon ? (ncolon += 1) : (known *= d)
    end
    ncolon > 1 && throw(DimensionMismatch("new dimensions $dims may have at most one omitted dimension specified by Colon()"))
    if known == 0 || length(a) % known != 0
        throw(DimensionMismatch("array size $(length(a)) must be divisible by the product of the new dimensions $dims"))
    end
    return map(d -> d isa Colon ? length(a) ÷ known : d, dims)
end

## fill

"""
    fill!(x::CuArray, v)

Sets every element to `convert(eltype(x), v)`, queued on the current [`stream()`](@ref)
and returning without waiting, as a kernel: one `cuMemsetD8Async`/`D16Async`/`D32Async`
when the value's bytes repeat with a period of 1, 2 or 4 bytes (every 1-, 2- and 4-byte
element type; zeros, `-1`, `ComplexF32(1, 1)`, ...), else a kernel; element types no
kernel handles get an upload of up to 4096 elements and device copies doubling the
filled prefix.
"""
function Base.fill!(a::CuArray{T}, x) where {T}
    v = convert(T, x)
    check_alive(a)
    check_devices("fill!", a)
    n = length(a)
    (n == 0 || sizeof(T) == 0) && return a
    ptr = devaddr(a)
    pattern, elsize = memset_pattern(v)
    if elsize != 0
        count = (n * (sizeof(T) ÷ elsize)) % UInt64
        if on_host() && CAPTURES[] != 0 && capture_state() !== nothing
            host_run(() -> check(c_memset_async(ptr, pattern, UInt32(elsize), count, UInt64(0))))   # replayed
        else
            check(c_memset_async(ptr, pattern, UInt32(elsize), count, current_handle()))
        end
    elseif fill_kernel!(a, v) === nothing
        chunk = min(n, 4096)
        copyto!(a, 1, Base.fill(v, chunk), 1, chunk)
        filled = chunk
        while filled < n
            k = min(filled, n - filled)
            check(ordered_copy_dtod(ptr + nbytes(T, filled), ptr, nbytes(T, k)))
            filled += k
        end
    end
    return a
end

# A fill by a kernel, for the element types that compute/ generates kernels for; nothing
# otherwise (compute/broadcast/broadcast.jl adds the CuArray method).
fill_kernel!(a::AbstractArray, v) = nothing

# (pattern, elsize) such that `v`'s bytes are `sizeof(v) ÷ elsize` copies of the low
# `elsize` bytes of `pattern`, with elsize 1, 2 or 4 (the smallest); (0, 0) when none is.
# Read through a Ref, without allocating.
@inline function memset_pattern(v::T) where {T}
    sizeof(T) % 4 == 0 || sizeof(T) in (1, 2) || return (UInt32(0), 0)
    r = Ref(v)
    GC.@preserve r begin
        p = Base.unsafe_convert(Ptr{T}, r)
        if sizeof(T) == 1
            return (UInt32(unsafe_load(Ptr{UInt8}(p))), 1)
        elseif sizeof(T) == 2
            w = unsafe_load(Ptr{UInt16}(p))
            return (w >> 8) == (w & 0xff) ? (UInt32(w & 0xff), 1) : (UInt32(w), 2)
        end
        w = unsafe_load(Ptr{UInt32}(p))
        for i in 2:(sizeof(T) ÷ 4)
            unsafe_load(Ptr{UInt32}(p), i) == w || return (UInt32(0), 0)
        end
        b = w & 0xff
        w == b * 0x01010101 && return (b, 1)
        h = w & 0xffff
        w == h * 0x00010001 && return (h, 2)
        return (w, 4)
    end
end

const FILL_DOC = """
    CuMem.zeros([T=Float32], dims...)
    CuMem.ones([T=Float32], dims...)
    CuMem.fill(v, dims...)

CuArrays filled with `zero(T)`, `one(T)` or `v` (element type `typeof(v)`), as in
CUDA.jl. Not exported: they would clash with `Base.zeros` and friends.
"""

zeros(T::Type, dims::Integer...) = fill!(CuArray{T}(undef, dims...), zero(T))
zeros(T::Type, dims::Dims) = zeros(T, dims...)
zeros(dims::Integer...) = zeros(Float32, dims...)
zeros(dims::Dims) = zeros(Float32, dims...)
ones(T::Type, dims::Integer...) = fill!(CuArray{T}(undef, dims...), one(T))
ones(T::Type, dims::Dims) = ones(T, dims...)
ones(dims::Integer...) = ones(Float32, dims...)
ones(dims::Dims) = ones(Float32, dims...)
fill(v, dims::Integer...) = fill!(CuArray{typeof(v)}(undef, dims...), v)
fill(v, dims::Dims) = fill(v, dims...)
@doc FILL_DOC zeros
@doc FILL_DOC ones
@doc FILL_DOC fill

## comparison

Base.:(==)(a::CuArray, b::CuArray) = size(a) == size(b) && Array(a) == Array(b)
Base.:(==)(a::CuArray, b::AbstractArray) = size(a) == size(b) && Array(a) == b
Base.:(==)(a::AbstractArray, b::CuArray) = size(a) == size(b) && a == Array(b)
Base.isequal(a::CuArray, b::CuArray) = size(a) == size(b) && isequal(Array(a), Array(b))

## indexing beyond scalars (device copies, no scalar warnings)

function Base.getindex(a::CuArray{T}, r::UnitRange{Int}) where {T}
    check_alive(a)
    check_devices("getindex", a)
    checkbounds(a, r)
    b = CuArray{T,1}(undef, (length(r),))
    return copyto!(b, 1, a, first(r), length(r))
end
function Base.getindex(a::CuArray{T}, ::Colon) where {T}
    check_alive(a)
    check_devices("getindex", a)
    b = CuArray{T,1}(undef, (length(a),))
    return copyto!(b, 1, a, 1, length(a))
end

## display (downloads to print; nothing is printed element by element)

Base.print_array(io::IO, a::CuArray) = Base.print_array(io, Array(a))
Base.show(io::IO, a::CuArray) = show(io, Array(a))
function Base.show(io::IO, mime::MIME"text/plain", a::CuArray)
    check_alive(a)
    invoke(show, Tuple{IO,MIME"text/plain",AbstractArray}, io, mime, a)
end

# CuArrays inside element functions: `f.(idx, Ref(A))` with `f(i, A) = A[i] * 2`,
# `getindex.(Ref(A), idx)`, `cpy.(1:n, Ref(a), Ref(b))` with `cpy(i, a, b) = (a[i] = b[i])`,
# and a tuple of CuArrays broadcast as a collection. The array travels into the kernel as
# a `CuDeviceArray` (its device address and size, isbits); its `getindex`/`setindex!` are
# Base's AbstractArray methods (bounds-checked: a BoundsError site) over two primitives the
# kernel compiler turns into C pointer accesses (compute/compiler/devmem.jl). On the host
# device Base computes on the arrays' host memory (the broadcast's `Ref`s are adapted to
# host views, compute/broadcast/broadcast.jl), the same as these primitives read there.

"""
    CuMem.CuDeviceArray{T,N}

What a kernel sees of a `CuArray{T,N}`: an argument of `@cuda` (see `cudaconvert`), a
shared-memory array (`CuStaticSharedArray`), or an array passed into a broadcast through
`Ref` (`f.(x, Ref(A))`) or in a tuple: the array's device address and size (CUDA.jl's
name). Indexing it (`A[i]`, `A[i, j]`, `A[I::CartesianIndex]`, `A[i] = v`, `first(A)`,
`length(A)`, `eachindex(A)`) reads and writes the memory from inside the kernel,
bounds-checked as Base (a `BoundsError`) unless `@inbounds`; `pointer(A, i)` is element
`i`'s address. Only valid while the kernel runs.
"""
struct CuDeviceArray{T,N} <: AbstractArray{T,N}
    addr::UInt64
    dims::NTuple{N,Int}
end
CuDeviceArray(a::CuArray{T,N}) where {T,N} = (check_alive(a); CuDeviceArray{T,N}(devaddr(a), size(a)))
Base.size(a::CuDeviceArray) = a.dims
Base.IndexStyle(::Type{<:CuDeviceArray}) = IndexLinear()
Base.@propagate_inbounds function Base.getindex(a::CuDeviceArray{T}, i::Int) where {T}
    @boundscheck checkbounds(a, i)
    return dev_load(T, a.addr, i)
end
Base.@propagate_inbounds function Base.setindex!(a::CuDeviceArray{T}, v, i::Int) where {T}
    @boundscheck checkbounds(a, i)
    dev_store!(a.addr, convert(T, v), i)
    return a
end
# (never shows elements: on a GPU the address is not host memory)
Base.show(io::IO, a::CuDeviceArray) = print(io, summary(a))
Base.show(io::IO, ::MIME"text/plain", a::CuDeviceArray) = print(io, summary(a))

# The primitives `dev_load` and `dev_store!`: compute/compiler/devmem.jl.

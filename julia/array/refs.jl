# Device references for `ccall` and kernels, as CUDA.jl's: `CuRef{T}` (a `T*` into device
# memory as a ccall argument type), `CuRefArray` (the object behind it: an element of a
# device array), `RefOrCuRef{T}` (a host or a device reference) and `PtrOrCuPtr{T}` (a host
# or a device pointer). CUDA.jl defines the three argument types as primitive 64-bit types;
# CuMem's, like its `CuPtr`, are structs of the 64-bit address (the same bits in a ccall).

"""
    CuRef{T}

A `ccall` argument type for a device address of one `T` (C: a `T*` into device memory), as
CUDA.jl's `CuRef`. `ccall(f, R, (CuRef{T},), x)` passes
- for a [`CuRefArray`](@ref CuMem.CuRefArray) or a `CuArray{T}`: the address of its element (the first of an array),
- for a `CuPtr{T}`: that address,
- for any other `x`: a new one-element device array holding `convert(T, x)` (alive during the call).

`CuRef(x)`, `CuRef{T}(x)` and `CuRef{T}()` (undefined contents) make that device element:
a [`CuMem.CuRefArray`](@ref) over a new one-element `CuArray`. Its value is read with `r[]` and
written with `r[] = v` (one copy each way); `@cuda` passes it to a kernel as a reference
to the same device element (`r[]` and `r[] = v` in the kernel). `UInt64(p)` of a `CuRef` is the address.
"""
struct CuRef{T}
    addr::UInt64
    # (`CuRef{T}(x)` makes a device element, as in CUDA.jl: this is the address form)
    CuRef{T}(::Val{:addr}, addr::UInt64) where {T} = new{T}(addr)
end
cu_ref_at(::Type{T}, addr::UInt64) where {T} = CuRef{T}(Val(:addr), addr)

"""
    CuMem.CuRefArray{T,A}(x::A, i::Int = 1)

Element `i` of the device array `x` as a `Ref{T}`: what `CuRef(v)` makes and what a
`ccall` argument of type [`CuRef{T}`](@ref CuRef) or `RefOrCuRef{T}` holds for a
`CuArray`. `r[]` reads the element (a copy to the host; in a kernel a device load),
`r[] = v` writes it. As CUDA.jl's `CuRefArray` (CuMem adds the reads and writes).
"""
struct CuRefArray{T,A<:AbstractArray{T}} <: Ref{T}
    x::A
    i::Int
    CuRefArray{T,A}(x, i) where {T,A<:AbstractArray{T}} = new(x, i)
end
CuRefArray{T}(x::AbstractArray{T}, i::Int = 1) where {T} = CuRefArray{T,typeof(x)}(x, i)
CuRefArray(x::AbstractArray{T}, i::Int = 1) where {T} = CuRefArray{T}(x, i)

CuRef(x) = CuRefArray(CuArray([x]))
CuRef{T}(x) where {T} = CuRefArray{T}(CuArray(T[x]))
CuRef{T}() where {T} = CuRefArray(CuArray{T}(undef, 1))

Base.eltype(::Type{<:CuRef{T}}) where {T} = T
Base.UInt64(r::CuRef) = r.addr
Base.show(io::IO, r::CuRef{T}) where {T} = print(io, "CuRef{", T, "}(0x", string(r.addr, base = 16, pad = 12), ")")

# the device element's value, one copy each way (in kernels the array is a CuDeviceArray,
# indexed directly)
function Base.getindex(r::CuRefArray{T,<:CuArray}) where {T}
    checkbounds(r.x, r.i)
    return copyto!(Vector{T}(undef, 1), 1, r.x, r.i, 1)[1]
end
function Base.setindex!(r::CuRefArray{T,<:CuArray}, v) where {T}
    checkbounds(r.x, r.i)
    copyto!(r.x, r.i, T[convert(T, v)], 1, 1)
    return r
end
Base.getindex(r::CuRefArray) = @inbounds r.x[r.i]
Base.setindex!(r::CuRefArray{T}, v) where {T} = (@inbounds r.x[r.i] = convert(T, v); r)

Base.pointer(r::CuRefArray{T,<:CuArray}) where {T} = (checkbounds(r.x, r.i); pointer(r.x, r.i))
Base.unsafe_convert(::Type{CuPtr{T}}, r::CuRefArray{T,<:CuArray}) where {T} = pointer(r)
Base.unsafe_convert(::Type{CuPtr{Cvoid}}, r::CuRefArray{T,<:CuArray}) where {T} = CuPtr{Cvoid}(UInt64(pointer(r)))

# ccall: cconvert keeps the object alive, unsafe_convert gives the address
Base.cconvert(::Type{CuRef{T}}, r::CuRefArray{T}) where {T} = r
Base.cconvert(::Type{CuRef{T}}, p::CuPtr{T}) where {T} = p
Base.cconvert(::Type{CuRef{T}}, a::CuArray{T}) where {T} = CuRefArray(a, 1)
Base.cconvert(::Type{CuRef{T}}, x) where {T} = CuRef{T}(x)
Base.unsafe_convert(::Type{CuRef{T}}, r::CuRef{T}) where {T} = r
Base.unsafe_convert(::Type{CuRef{T}}, p::CuPtr{T}) where {T} = cu_ref_at(T, UInt64(p))
Base.unsafe_convert(::Type{CuRef{T}}, r::CuRefArray{T,<:CuArray}) where {T} = cu_ref_at(T, UInt64(pointer(r)))
Base.convert(::Type{CuRef{T}}, p::CuPtr{T}) where {T} = cu_ref_at(T, UInt64(p))

"""
    RefOrCuRef{T}

A `ccall` argument type for a host or a device reference to one `T`, as CUDA.jl's (the
scalars of cuBLAS and cuSOLVER calls, which may live on either side): a `Ref`, `Ptr`,
host `Array` or plain value is passed as a host address (a value in a new `Ref{T}`), a
[`CuRef`](@ref)'s `CuRefArray`, `CuPtr` or `CuArray` as a device address.
"""
struct RefOrCuRef{T}
    addr::UInt64
end
Base.eltype(::Type{<:RefOrCuRef{T}}) where {T} = T
Base.UInt64(r::RefOrCuRef) = r.addr
Base.cconvert(::Type{RefOrCuRef{T}}, x::Union{Ref{T},Ptr{T},CuPtr{T},RefOrCuRef{T}}) where {T} = x
Base.cconvert(::Type{RefOrCuRef{T}}, a::Array{T}) where {T} = Base.cconvert(Ref{T}, a)
Base.cconvert(::Type{RefOrCuRef{T}}, a::CuArray{T}) where {T} = CuRefArray(a, 1)
Base.cconvert(::Type{RefOrCuRef{T}}, x) where {T} = Ref{T}(x)
Base.unsafe_convert(::Type{RefOrCuRef{T}}, r::RefOrCuRef{T}) where {T} = r
Base.unsafe_convert(::Type{RefOrCuRef{T}}, p::Ptr{T}) where {T} = RefOrCuRef{T}(UInt64(p))
Base.unsafe_convert(::Type{RefOrCuRef{T}}, p::CuPtr{T}) where {T} = RefOrCuRef{T}(UInt64(p))
Base.unsafe_convert(::Type{RefOrCuRef{T}}, r::CuRefArray{T,<:CuArray}) where {T} = RefOrCuRef{T}(UInt64(pointer(r)))
Base.unsafe_convert(::Type{RefOrCuRef{T}}, r::Ref{T}) where {T} = RefOrCuRef{T}(UInt64(Base.unsafe_convert(Ptr{T}, r)))

"""
    PtrOrCuPtr{T}

A `ccall` argument type for a host or a device array of `T`, as CUDA.jl's: a `CuArray` (or
`CuPtr`) is passed as its device address, a host array (or `Ptr`) as its host address.
"""
struct PtrOrCuPtr{T}
    addr::UInt64
end
Base.eltype(::Type{<:PtrOrCuPtr{T}}) where {T} = T
Base.UInt64(p::PtrOrCuPtr) = p.addr
Base.cconvert(::Type{PtrOrCuPtr{T}}, x) where {T} = x
Base.unsafe_convert(::Type{PtrOrCuPtr{T}}, p::PtrOrCuPtr{T}) where {T} = p
Base.unsafe_convert(::Type{PtrOrCuPtr{T}}, p::CuPtr) where {T} = PtrOrCuPtr{T}(UInt64(p))
Base.unsafe_convert(::Type{PtrOrCuPtr{T}}, a::CuArray) where {T} = PtrOrCuPtr{T}(UInt64(Base.unsafe_convert(CuPtr{T}, a)))
Base.unsafe_convert(::Type{PtrOrCuPtr{T}}, x) where {T} = PtrOrCuPtr{T}(UInt64(Base.unsafe_convert(Ptr{T}, x)))

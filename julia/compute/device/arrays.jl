# Kernel arguments: `cudaconvert` turns what the host passes to `@cuda` into what the
# kernel sees (CuArray -> CuDeviceArray, Ref -> CuRefValue, views and reshapes of CuArrays,
# tuples, NamedTuples and `adapt_structure`d structs of them), and the kernel-side array
# API beyond devarray.jl: `pointer`, `reshape`, `view`s of contiguous ranges.

"""
    CuMem.CuRefValue{T}

What a kernel sees of a `Ref(x)` passed to `@cuda` (x isbits): `r[]` is `x`. As CUDA.jl.
"""
struct CuRefValue{T} <: Ref{T}
    x::T
end
Base.getindex(r::CuRefValue) = r.x

"""
    CuMem.KernelAdaptor

The `adapt` target of [`cudaconvert`](@ref): CuArrays become CuDeviceArrays.
"""
struct KernelAdaptor end

"""
    CuMem.Adaptor

CUDA.jl's name of the `adapt` target of `cudaconvert`: [`CuMem.KernelAdaptor`](@ref)
(extend `CuMem.adapt_storage(::CuMem.Adaptor, x)` for your own argument types).
"""
const Adaptor = KernelAdaptor

adapt_storage(::KernelAdaptor, a::CuArray{T,N}) where {T,N} = CuDeviceArray(a)
adapt_structure(to::KernelAdaptor, r::Base.RefValue) = CuRefValue(adapt(to, r[]))
# CuRef(x): the same device element, read and written in the kernel with r[]
adapt_structure(to::KernelAdaptor, r::CuRefArray{T,<:CuArray}) where {T} = (a = adapt(to, r.x); CuRefArray{T,typeof(a)}(a, r.i))
function adapt_structure(to::KernelAdaptor, v::Base.FastContiguousSubArray{T,N,<:CuArray}) where {T,N}
    p = parent(v)
    check_alive(p)
    return CuDeviceArray{T,N}(devaddr(p) + UInt64(v.offset1 * sizeof(T)), size(v))
end
function adapt_structure(to::KernelAdaptor, r::Base.ReshapedArray{T,N,<:CuArray}) where {T,N}
    p = parent(r)
    check_alive(p)
    return CuDeviceArray{T,N}(devaddr(p), size(r))
end

# Closures passed to @cuda (as the kernel or as an argument) that capture CuArrays: their
# captured values converted, as Adapt.jl does for closures. A closure's type has one
# parameter per captured variable (its type), so the converted closure is the same
# function with the converted values' types; other callables stay as they are.
@inline function adapt_structure(to::KernelAdaptor, f::F) where {F<:Function}
    fieldcount(F) == 0 && return f
    dv_is_closure(F) || return f
    return dv_new_closure(F, map(x -> adapt(to, x), ntuple(i -> getfield(f, i), Val(fieldcount(F)))))
end
dv_is_closure(@nospecialize(F)) = F isa DataType && startswith(string(F.name.name), "#") &&
    length(F.parameters) == fieldcount(F) && all(i -> F.parameters[i] === fieldtype(F, i), 1:fieldcount(F))
@generated function dv_new_closure(::Type{F}, fields::Tuple) where {F}
    T = F.name.wrapper{fields.parameters...}
    return Expr(:new, T, [:(fields[$i]) for i in 1:length(fields.parameters)]...)
end

"""
    cudaconvert(x)

The value a kernel receives for the host value `x` (`@cuda` calls it on each argument and
on the function): a `CuArray` (any dimensions) becomes a [`CuDeviceArray`](@ref CuMem.CuDeviceArray)
(its address and size), a contiguous view or reshape of one a CuDeviceArray of its
elements, other views a `SubArray` of one, `Ref(x)` a [`CuMem.CuRefValue`](@ref),
tuples and NamedTuples element by element (structs through `CuMem.adapt_structure`),
closures their captured values; isbits values stay as they are. As CUDA.jl's `cudaconvert` (through Adapt).
"""
cudaconvert(x) = adapt(KernelAdaptor(), x)

## the kernel-side array API

"""
    pointer(A::CuDeviceArray{T}, i = 1) -> Ptr{T}

The address of element `i` of a kernel's array (global or shared memory), for the
`CuMem.atomic_*!` functions and `unsafe_load`/`unsafe_store!` in kernels.
"""
@inline Base.pointer(a::CuDeviceArray{T}, i::Integer = 1) where {T} =
    Ptr{T}(a.addr + UInt64((Int(i) - 1) * sizeof(T)))
Base.unsafe_convert(::Type{Ptr{T}}, a::CuDeviceArray{T}) where {T} = Ptr{T}(a.addr)
@inline Base.reshape(a::CuDeviceArray{T}, dims::Dims{N}) where {T,N} =
    (prod(dims) == length(a) || dv_reshape_error(size(a), dims); CuDeviceArray{T,N}(a.addr, dims))
@noinline dv_reshape_error(a, b) = throw(DimensionMismatch("cannot reshape an array of size $a to $b"))
Base.elsize(::Type{<:CuDeviceArray{T}}) where {T} = sizeof(T)

## device pointers: CUDA.jl passes a `CuPtr{T}` argument as `Core.LLVMPtr{T,1}` (global memory)

adapt_storage(::KernelAdaptor, p::CuPtr{T}) where {T} = reinterpret(Core.LLVMPtr{T,1}, p.addr)
# loads and stores through such a pointer in a kernel (as LLVM.jl's methods for it, which
# CUDA.jl's kernels use; LLVM.jl is not a dependency)
Base.unsafe_load(p::Core.LLVMPtr{T}, i::Integer = 1) where {T} = unsafe_load(reinterpret(Ptr{T}, p), i)
Base.unsafe_store!(p::Core.LLVMPtr{T}, x, i::Integer = 1) where {T} = unsafe_store!(reinterpret(Ptr{T}, p), x, i)

"""
    CuDeviceVector{T} = CuDeviceArray{T,1}
    CuDeviceMatrix{T} = CuDeviceArray{T,2}

A kernel's vectors and matrices (CUDA.jl's aliases).
"""
const CuDeviceVector{T} = CuDeviceArray{T,1}
const CuDeviceMatrix{T} = CuDeviceArray{T,2}
@doc (@doc CuDeviceVector) CuDeviceMatrix

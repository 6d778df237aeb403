# The sets of "a CuArray or a wrapper of one", defined once (CUDA.jl's DenseCuArray,
# StridedCuArray and AnyCuArray, array.jl of CUDA.jl 2.x), for dispatch everywhere in
# compute/: what is contiguous, what is a strided view of device memory (copies,
# indexing, show download it in one piece), and what kernels read and write in place.

"""
    DenseCuArray{T,N}, DenseCuVector{T}, DenseCuMatrix{T}

CuArrays stored contiguously, as CUDA.jl's `DenseCuArray`: a `CuArray`, or a contiguous
view of one (`view(a, :, 1, 2)`, `view(a, :, :, 1)`, `view(a, 2:5)`, `view(a, 1, 1, 1)`:
Base's `FastContiguousSubArray`: leading colons, then at most one unit range, then
integers). The memory of either is one block of `length(a) * sizeof(T)` bytes at
`pointer(a)`. As in CUDA.jl 2.x, `view` of a CuArray with such indices is itself a
`CuArray` sharing the memory (`view(a, :, 1, 2) isa CuVector`); a `SubArray` of this kind
(made by `SubArray(...)` or `Base.unsafe_view`) is taken in place by every operation too.
"""
const DenseCuArray{T,N} = Union{CuArray{T,N},Base.FastContiguousSubArray{T,N,<:CuArray}}
# A contiguous view's device address: its first element's in the parent.
Base.pointer(V::Base.FastContiguousSubArray{T,<:Any,<:CuArray}) where {T} = pointer(parent(V), V.offset1 + 1)
Base.pointer(V::Base.FastContiguousSubArray{T,<:Any,<:CuArray}, i::Int) where {T} =   # (Int: as Base's, no ambiguity)
    pointer(parent(V), V.offset1 + i)
Base.unsafe_convert(::Type{CuPtr{T}}, V::Base.FastContiguousSubArray{T,<:Any,<:CuArray}) where {T} = pointer(V)

## contiguous views are CuArrays

# CUDA.jl 2.x's rule (its src/array.jl, `CuIndexStyle`) on the indices as given: leading
# colons, then one unit range or integer, then integers only, is contiguous memory. Bool
# indices are masks, not positions; ranges with offset axes stay SubArrays.
@inline is_scalar_index(i) = i isa Integer && !(i isa Bool)
@inline cu_contiguous(::Tuple{}) = true
@inline function cu_contiguous(I::Tuple)
    i, rest = I[1], Base.tail(I)
    i isa Colon && return cu_contiguous(rest)
    all(is_scalar_index, rest) || return false
    return is_scalar_index(i) || i isa Union{UnitRange{<:Integer},Base.OneTo}
end

"""
    view(a::CuArray, I...) -> CuArray or SubArray

As CUDA.jl 2.x: when the indices select one contiguous block of `a`'s memory (leading
colons, then at most one unit range or integer, then integers: `view(a, :, 1, 2)`,
`view(a, :, :, 1)`, `view(a, 2:5)`, `view(a, :)`, `view(a, 1, 1, 1)`), a `CuArray` of the
indexed dimensions that shares `a`'s memory (writes through either are seen by the
other; the memory is returned once both are freed, as for `reshape`); otherwise Base's
`SubArray`. Bounds are checked as Base's (`BoundsError`).
"""
@inline function Base.view(a::CuArray{T,N}, I::Vararg{Any,M}) where {T,N,M}
    cu_contiguous(I) || return invoke(view, Tuple{AbstractArray,Vararg{Any,M}}, a, I...)
    J = to_indices(a, I)
    @boundscheck checkbounds(a, J...)
    return contiguous_view(a, J)
end

# The size `a` is indexed with by `n` indices (Base's reshape of the parent for linear or
# partial indexing: the trailing dimensions merged, or 1s appended).
function indexed_size(a::CuArray, n::Int)
    sz = size(a)
    n == length(sz) && return sz
    n > length(sz) && return (sz..., ntuple(_ -> 1, n - length(sz))...)
    n == 0 && return ()
    return (sz[1:n-1]..., prod(sz[n:end]))
end

function contiguous_view(a::CuArray{T}, J::Tuple) where {T}
    psz = indexed_size(a, length(J))
    off, stride = 0, 1
    for k in 1:length(J)
        j = J[k]
        off += (first(j) - 1) * stride
        stride *= psz[k]
    end
    dims = map(length, filter(j -> !(j isa Integer), J))
    # an empty view reads nothing: its address stays inside the allocation
    p = prod(dims) == 0 ? a.ptr : a.ptr + UInt64(off * sizeof(T))
    return CuArray{T,length(dims)}(share!(a), Dims(dims); ptr = p)
end

# Aliasing as CUDA.jl's (its src/array.jl): arrays on one allocation share its data id (the
# allocation's address), and two CuArrays might alias when their byte ranges overlap.
Base.dataids(a::CuArray) = (UInt(a.shared === nothing ? a.ptr : a.shared.ptr),)
Base.unaliascopy(a::CuArray) = copy(a)
function Base.mightalias(a::CuArray, b::CuArray)
    ra, rb = (a.ptr, a.ptr + UInt64(sizeof(a))), (b.ptr, b.ptr + UInt64(sizeof(b)))
    return ra[1] <= rb[1] < ra[2] || rb[1] <= ra[1] < rb[2]
end

const DenseCuVector{T} = DenseCuArray{T,1}
const DenseCuMatrix{T} = DenseCuArray{T,2}
@doc (@doc DenseCuArray) DenseCuVector
@doc (@doc DenseCuArray) DenseCuMatrix

# The wrappers whose elements are a strided operand over a CuArray's memory.
const CuViewOrArray{T} = Union{CuArray{T},SubArray{T,<:Any,<:CuArray}}
const CuStridedWrapper{T,N} = Union{
    SubArray{T,N,<:CuArray},
    SubArray{T,N,<:Union{Adjoint{T,<:CuArray},Transpose{T,<:CuArray},
                         PermutedDimsArray{T,<:Any,<:Any,<:Any,<:CuArray}}},
    Adjoint{T,<:CuViewOrArray{T}}, Transpose{T,<:CuViewOrArray{T}},
    PermutedDimsArray{T,N,<:Any,<:Any,<:CuViewOrArray{T}},
    Base.ReshapedArray{T,N,<:SubArray{T,<:Any,<:CuArray}}}

"""
    StridedCuArray{T,N}, StridedCuVector{T}, StridedCuMatrix{T}

A CuArray or a wrapper of one whose elements lie at strided offsets in its memory
(CUDA.jl's `StridedCuArray`): views with integer, range and colon indices, `Adjoint`,
`Transpose` and `PermutedDimsArray` of a CuArray or of such a view, views of those, and
`reshape`s of views. Copies, `copyto!`, indexing, `cat`, `reverse`, `Array(x)` and
`show` handle every one in one device copy or download.
"""
const StridedCuArray{T,N} = Union{CuArray{T,N},CuStridedWrapper{T,N}}
const StridedCuVector{T} = StridedCuArray{T,1}
const StridedCuMatrix{T} = StridedCuArray{T,2}
@doc (@doc StridedCuArray) StridedCuVector
@doc (@doc StridedCuArray) StridedCuMatrix
const CuStrided{T,N} = StridedCuArray{T,N}     # the name compute/ used before

# The wrappers that broadcast kernels read and write in place, one and two levels deep.
const CuWrap1{T,N} = Union{SubArray{T,N,<:CuArray}, Adjoint{T,<:CuArray{<:Real}},
                           Transpose{T,<:CuArray}, PermutedDimsArray{T,N,<:Any,<:Any,<:CuArray}}
const CuWrap2{T,N} = Union{SubArray{T,N,<:CuWrap1}, Adjoint{T,<:CuWrap1{<:Real}},
                           Transpose{T,<:CuWrap1}, PermutedDimsArray{T,N,<:Any,<:Any,<:CuWrap1}}

"""
    AnyCuArray{T,N}

A `CuArray` or a wrapper of one that broadcasts, `map`, reductions and scans read and
write in place (CUDA.jl's `AnyCuArray`; here the wrappers kernels index directly):
`view`s with integer, range and colon indices, `Adjoint`/`Transpose` (real element types
for `Adjoint`), `PermutedDimsArray`, and these wrappers of each other (two levels). A
`reshape` of a view is a `StridedCuArray` but not an `AnyCuArray`: broadcasts and
reductions read it in place where its elements are equally spaced in memory (e.g.
`reshape(view(A, :, 2:3), :)`), through a copy otherwise.
"""
const AnyCuArray{T,N} = Union{CuArray{T,N}, CuWrap1{T,N}, CuWrap2{T,N}}

# `reshape`s of those wrappers (`reshape(view(A, :, 2:3), :)`, `vec(A')`). Broadcasts and
# reductions read (and broadcasts write) one in place where its layout is strided (a
# reshape of a contiguous run: `CuMem.layout`), else through a copy (compute/algorithms/masks.jl).
const CuReshaped{T,N} = Base.ReshapedArray{T,N,<:AnyCuArray}

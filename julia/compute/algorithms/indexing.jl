# Non-scalar indexing, copies of views and wrappers, cat, reverse, permutedims: each is
# one strided copy (compute/broadcast/strided.jl), never the scalar path. Scalar `A[i, j]` stays the
# scalar path (array/scalar.jl).

## bounds errors that summarise masks

"""
    CuMem.MaskSummary

Stands for a Bool mask in a `BoundsError` (`A[mask]` with a mask of the wrong shape): it
prints the mask's size and count instead of every selected index.
"""
struct MaskSummary
    dims::Tuple
    count::Int
end
Base.show(io::IO, m::MaskSummary) =
    print(io, "<Bool mask of size ", join(m.dims, "×"), " selecting ", m.count, ">")

summarize_index(i::AbstractArray{Bool}) = MaskSummary(size(i), count(i))
summarize_index(i::Base.LogicalIndex) = summarize_index(i.mask)
summarize_index(i) = i

# A BoundsError for `A[I...]` (I as the caller gave them, device arrays downloaded).
@noinline throw_index_error(A, I) = throw(BoundsError(A, map(summarize_index, I)))

## indices

# Indices as Base's `to_indices` makes them, after moving device index arrays to the host
# (a CuArray index is read once, never element by element).
host_index(i::CuArray{Bool}) = Array(i)
host_index(i::CuArray) = Array(i)
host_index(i::Vector{Any}) = isempty(i) ? Int[] : i    # `A[[]]`: an empty index of unknown type
host_index(i) = i

# Bool masks become the vector of the positions they select.
plain_index(i::Base.LogicalIndex) = collect(Int, i)
plain_index(i) = i

function cu_indices(A, @nospecialize(I::Tuple))
    H = map(host_index, I)
    J = to_indices(A, H)
    # masks are checked against A's shape before they become positions (a short mask
    # selects valid positions too); the error summarises masks (masks.jl)
    checkbounds(Bool, A, J...) || throw_index_error(A, H)
    return map(plain_index, J)
end

# The shape Base gives `A[I...]`: the shapes of the non-scalar indices, concatenated.
index_shape(I::Tuple) = _index_shape((), I...)
_index_shape(acc) = acc
_index_shape(acc, i::Integer, rest...) = _index_shape(acc, rest...)
_index_shape(acc, i::AbstractArray, rest...) = _index_shape((acc..., size(i)...), rest...)

const NonScalarIndex = Union{Integer,AbstractArray,Colon}

## getindex

# A[I...] where some index is not a scalar: one strided copy into a new CuArray.
function Base.getindex(A::CuArray{T}, I::NonScalarIndex...) where {T}
    check_alive(A)
    check_devices("getindex", A, I...)      # an index vector on another device too
    if all(i -> i isa Integer, I)     # A[i, j]: the scalar path
        checkbounds(A, I...)
        return A[LinearIndices(A)[I...]]
    end
    J = cu_indices(A, I)
    dest = CuArray{T}(undef, index_shape(J))
    src = index_operand(StridedOperand(A), J)
    strided_copy!(reshape_operand(StridedOperand(dest), src.dims), src)
    return dest
end

## setindex! of blocks

# A[I...] = X for an array X: a strided copy (host arrays are uploaded first).
function Base.setindex!(A::CuArray{T}, X::AbstractArray, I::NonScalarIndex...) where {T}
    check_alive(A)
    check_devices("setindex!", A, X, I...)
    J = cu_indices(A, I)
    Base.setindex_shape_check(X, map(length, J)...)
    dst = index_operand(StridedOperand(A), J)
    src, keep = source_operand(T, X)
    GC.@preserve keep strided_copy!(dst, reshape_operand(src, dst.dims))
    return A
end
# (one Int and an array value: Base's scalar setindex!, which fails on the conversion)
Base.setindex!(A::CuArray, X::AbstractArray, i::Int) =
    invoke(setindex!, Tuple{CuArray,Any,Int}, A, X, i)

# The strided operand holding X's elements as T on the device, and what keeps it alive.
function source_operand(::Type{T}, X::CuStrided{T}) where {T}
    op = strided_operand(X)
    contiguous_or_copy(op, X)
end
function source_operand(::Type{T}, X::AbstractArray) where {T}
    c = device_copy(T, X)
    return StridedOperand(c), c
end

# A reshape_operand-able operand: views that are not one contiguous run are copied first
# (the destination's shape may differ from X's, e.g. a vector into a 1×n block).
function contiguous_or_copy(op::StridedOperand, X)
    q = merge_dims!(drop_unit_dims!(copy(op)))
    if length(q.dims) <= 1 && all(i -> i === nothing, q.idx) && !q.conj &&
       (isempty(q.strides) || q.strides[1] == 1)
        return op, X
    end
    c = materialize(X)
    return StridedOperand(c), c
end

# X as a CuArray{T} of the same shape: device copies for device arrays of T, an upload
# (converting on the host) for anything else.
device_copy(::Type{T}, X::CuStrided{T}) where {T} = materialize(X)
device_copy(::Type{T}, X::CuArray{T}) where {T} = X
device_copy(::Type{T}, X::Union{CuArray,CuStridedWrapper}) where {T} = CuArray{T}(host_array(X))
device_copy(::Type{T}, X::AbstractArray) where {T} = CuArray{T}(collect(X))

## materialising views and wrappers

# CuMem.materialize(x) -> CuArray
#
# A new CuArray with the elements of `x` (a view, transpose, adjoint, permuted-dims or
# reshaped view of a CuArray), made by one strided copy on the device.
function materialize(x::CuStrided{T}) where {T}
    # made on x's own device, whatever the task's (show and Array of another device's view)
    MULTI[] && (dev = array_device(x); dev !== nothing && dev != task_device()) &&
        return device!(() -> materialize(x), dev)
    dest = CuArray{T}(undef, size(x))
    copy_into!(dest, x)
    return dest
end

# dest (a CuArray or strided view) = src, elementwise in column-major order.
function copy_into!(dest, src)
    d = strided_operand(dest)
    s = strided_operand(src)
    if d.dims != s.dims
        length(dest) == length(src) || throw(DimensionMismatch("copy of $(size(src)) into $(size(dest))"))
        if dest isa CuArray
            d = reshape_operand(d, s.dims)
        else
            s, keep = contiguous_or_copy(s, src)
            GC.@preserve keep strided_copy!(d, reshape_operand(s, d.dims))
            return dest
        end
    end
    strided_copy!(d, s)
    return dest
end

# A reshaped view: the view's elements, reshaped (works for any view layout).
materialize(x::Base.ReshapedArray{T,N,<:SubArray{T,<:Any,<:CuArray}}) where {T,N} =
    reshape(materialize(parent(x)), size(x))

# The elements of a device array or wrapper on the host, downloaded once.
host_array(x::CuArray) = Array(x)
host_array(x::CuStridedWrapper) = Array(materialize(x))

Base.copy(x::CuStridedWrapper) = materialize(x)
Base.collect(x::CuStridedWrapper) = host_array(x)
Base.Array(x::CuStridedWrapper{T,N}) where {T,N} = host_array(x)
Base.Array{T}(x::CuStridedWrapper{S,N}) where {T,S,N} = convert(Array{T,N}, host_array(x))
Base.Array{T,N}(x::CuStridedWrapper{S,N}) where {T,S,N} = convert(Array{T,N}, host_array(x))

CuArray{T,N}(x::CuStridedWrapper{T,N}) where {T,N} = materialize(x)
CuArray{T,N}(x::CuStridedWrapper{S,N}) where {T,S,N} = CuArray{T,N}(host_array(x))
CuArray{T}(x::CuStridedWrapper{S,N}) where {T,S,N} = CuArray{T,N}(x)
CuArray(x::CuStridedWrapper{T,N}) where {T,N} = materialize(x)

# copyto! between device arrays and views of them (Base's linear-order semantics: the
# destination's first length(src) elements)
function Base.copyto!(dest::CuStridedWrapper{T}, src::CuStrided{T}) where {T}
    length(src) > length(dest) && throw(BoundsError(dest, LinearIndices(src)))
    length(src) == length(dest) && return copy_into!(dest, src)
    return copy_into!(view(dest, 1:length(src)), src)
end
function Base.copyto!(dest::CuArray{T}, src::CuStridedWrapper{T}) where {T}
    length(src) > length(dest) && throw(BoundsError(dest, LinearIndices(src)))
    length(src) == length(dest) && return copy_into!(dest, src)
    # a shorter source of another shape: its elements in order, then one linear copy
    t = materialize(src)
    copyto!(dest, 1, t, 1, length(t))
    unsafe_free!(t)
    return dest
end
# host arrays into device views (uploaded once), device views into host arrays
function Base.copyto!(dest::CuStridedWrapper{T}, src::HostDense) where {T}
    length(src) > length(dest) && throw(BoundsError(dest, LinearIndices(src)))
    return copyto!(dest, CuArray{T}(collect(src)))
end
function Base.copyto!(dest::HostDense, src::CuStridedWrapper)
    length(src) > length(dest) && throw(BoundsError(dest, LinearIndices(src)))
    return copyto!(dest, host_array(src))
end

## cat

# The size of cat(xs...; dims) (dims: the concatenated dimensions), as Base computes it.
function cat_size(catdims::Tuple{Vararg{Int}}, xs)
    N = max(maximum(ndims, xs), maximum(catdims))
    out = Base.zeros(Int, N)
    for d in 1:N
        if d in catdims
            out[d] = sum(x -> size(x, d), xs)
        else
            out[d] = size(xs[1], d)
            for x in xs
                size(x, d) == out[d] ||
                    throw(DimensionMismatch("mismatch in dimension $d (expected $(out[d]) got $(size(x, d)))"))
            end
        end
    end
    return Tuple(out)
end

function cu_cat(catdims::Tuple{Vararg{Int}}, xs::CuStrided...)
    T = promote_type(map(eltype, xs)...)
    shape = cat_size(catdims, xs)
    dest = CuArray{T}(undef, shape)
    # block-diagonal cats (several dims) leave zeros off the diagonal blocks
    length(catdims) > 1 && fill!(dest, zero(T))
    offset = Base.zeros(Int, length(shape))
    for x in xs
        length(x) == 0 && (for d in catdims; offset[d] += size(x, d); end; continue)
        ranges = ntuple(d -> offset[d] .+ (1:size(x, d)), length(shape))
        block = view(dest, ranges...)
        if eltype(x) == T
            copy_into!(block, x)
        else
            copy_into!(block, CuArray{T}(host_array(x)))
        end
        for d in catdims
            offset[d] += size(x, d)
        end
    end
    return dest
end

catdims(d::Integer) = (Int(d),)
catdims(::Val{d}) where {d} = catdims(d)
catdims(d::Tuple) = map(Int, d)

Base.vcat(x::CuStrided, xs::CuStrided...) = cu_cat((1,), x, xs...)
Base.hcat(x::CuStrided, xs::CuStrided...) = cu_cat((2,), x, xs...)
Base.cat(x::CuStrided, xs::CuStrided...; dims) = cu_cat(catdims(dims), x, xs...)

## reverse

# x with the dimensions in `ds` read backwards: a view-like operand with negative strides.
function reversed_operand(x::CuStrided, ds)
    p = strided_operand(x)
    for d in ds
        1 <= d <= length(p.dims) || throw(ArgumentError("dimension $d is not 1 ≤ $d ≤ $(length(p.dims))"))
        p.dims[d] == 0 && continue
        if p.idx[d] === nothing
            p.addr += ((p.dims[d] - 1) * p.strides[d] * p.elsize) % UInt64
            p.strides[d] = -p.strides[d]
        else
            p.idx[d] = reverse(p.idx[d])
        end
    end
    return p
end

function cu_reverse(x::CuStrided{T}, ds) where {T}
    dest = CuArray{T}(undef, size(x))
    GC.@preserve x strided_copy!(StridedOperand(dest), reversed_operand(x, ds))
    return dest
end

reverse_dims(A, ::Colon) = 1:ndims(A)
reverse_dims(A, d::Integer) = (Int(d),)
reverse_dims(A, d) = map(Int, d)

Base.reverse(A::CuArray; dims = :) = cu_reverse(A, reverse_dims(A, dims))
function Base.reverse(v::CuVector, start::Integer, stop::Integer = length(v))
    (1 <= start && stop <= length(v)) || start > stop || throw(BoundsError(v, start:stop))
    dest = copy(v)
    start < stop && copy_into!(view(dest, start:stop), view(v, stop:-1:start))
    return dest
end
Base.reverse(v::CuVector) = cu_reverse(v, (1,))
function Base.reverse!(v::CuVector, start::Integer = 1, stop::Integer = length(v))
    (1 <= start && stop <= length(v)) || start > stop || throw(BoundsError(v, start:stop))
    start < stop && copy_into!(view(v, start:stop), view(v, stop:-1:start))  # overlap: via a temporary
    return v
end

## permutedims

function Base.permutedims(A::CuArray{T,N}, perm) where {T,N}
    (length(perm) == N && isperm(perm)) || throw(ArgumentError("no valid permutation of dimensions"))
    return materialize(PermutedDimsArray(A, Tuple(perm)))
end
# A view (strided or through index arrays) or another wrapper: copied (gathered) first.
Base.permutedims(A::Union{CuStridedWrapper{T,N},SubArray{T,N,<:AnyCuArray}}, perm) where {T,N} =
    permutedims(copy(A), perm)
Base.permutedims(A::CuMatrix) = permutedims(A, (2, 1))
Base.permutedims(v::CuVector) = reshape(copy(v), 1, length(v))
function Base.permutedims!(dest::CuArray{T,N}, src::CuArray{T,N}, perm) where {T,N}
    P = PermutedDimsArray(src, Tuple(perm))
    size(dest) == size(P) || throw(DimensionMismatch("destination has size $(size(dest)), expected $(size(P))"))
    copy_into!(dest, P)
    return dest
end

# transpose!/adjoint! into a CuMatrix
function LinearAlgebra.transpose!(B::CuMatrix{T}, A::CuMatrix{T}) where {T}
    size(B) == reverse(size(A)) || throw(DimensionMismatch("transpose"))
    copy_into!(B, transpose(A)); return B
end
function LinearAlgebra.adjoint!(B::CuMatrix{T}, A::CuMatrix{T}) where {T}
    size(B) == reverse(size(A)) || throw(DimensionMismatch("adjoint"))
    copy_into!(B, adjoint(A)); return B
end

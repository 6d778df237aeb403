# Indexing by masks and index arrays, on top of indexing.jl's strided copies:
#
# - `A[mask]`, `A[mask] = X`, `A[mask] .= v`, `view(A, mask)` with a `CuArray{Bool}` mask,
#   bounds-checked against A's shape as Base does (a short or long mask is a BoundsError
#   whose message summarises the mask instead of listing every index);
# - index vectors on the device (`A[CuArray([1, 3])]`, `view(x, idx)`) and on the host
#   (uploaded), CartesianIndex arrays, in getindex, setindex!, views and broadcasts:
#   a view indexed by arrays is gathered into a temporary when read by a broadcast, and a
#   broadcast into one is computed into a temporary and scattered;
# - `fill!`, `copyto!` and `copy!` on every strided wrapper; `vcat`/`hcat` with numbers.

# CartesianIndex arrays as indices: to_indices keeps them; strided copies take integer
# vectors per dimension, so A[I] with an array of CartesianIndex{N} is handled as linear.
cartesian_linear(A, I::AbstractArray{<:CartesianIndex}) = (L = LinearIndices(A); map(c -> L[c], I))

## getindex

function mask_getindex(A::CuArray{T}, mask::AnyCuArray{Bool}) where {T}
    ok = ndims(mask) == 1 ? length(mask) == length(A) : axes(mask) == axes(A)
    ok || throw_index_error(A, (mask,))
    pos = findall(vec(copy_if_wrapper(mask)))     # linear indices, on the device
    r = CuArray{T}(undef, length(pos))
    gather!(r, A, pos)
    unsafe_free!(pos)
    return r
end

function vector_getindex(A::CuArray{T}, idx::AnyCuArray{<:Integer}) where {T}
    i64 = eltype(idx) === Int64 && idx isa CuArray ? idx : Int64.(idx)
    r = CuArray{T}(undef, size(idx))
    gather!(r, A, i64)
    i64 === idx || unsafe_free!(i64)
    return r
end

# (Methods more specific than indexing.jl's getindex(A::CuArray, I::NonScalarIndex...).)
Base.getindex(A::CuArray, mask::CuArray{Bool}) = mask_getindex(A, mask)
Base.getindex(A::CuArray, mask::SubArray{Bool,<:Any,<:CuArray}) = mask_getindex(A, mask)
Base.getindex(A::CuArray, idx::CuArray{<:Integer}) = vector_getindex(A, idx)
Base.getindex(A::CuArray, I::AbstractArray{<:CartesianIndex}) = A[CuArray(cartesian_linear(A, I))]
Base.getindex(A::CuArray, I::CuArray{<:CartesianIndex}) = A[CuArray(cartesian_linear(A, Array(I)))]

# Views and wrappers: materialised (one strided copy), then indexed.
Base.getindex(A::CuStridedWrapper, mask::AnyCuArray{Bool}) = copy(A)[mask isa CuArray ? mask : copy(mask)]
Base.getindex(A::CuStridedWrapper, idx::CuArray{<:Integer}) = copy(A)[idx]

## setindex!

function mask_setindex!(A::CuArray{T}, X, mask::AnyCuArray{Bool}) where {T}
    ok = ndims(mask) == 1 ? length(mask) == length(A) : axes(mask) == axes(A)
    ok || throw_index_error(A, (mask,))
    pos = findall(vec(copy_if_wrapper(mask)))
    indexed_assign!(A, X, pos)
    unsafe_free!(pos)
    return A
end

# A[pos] = X for 1-based Int64 linear positions on the device: X an array of length(pos)
# elements, or a number (every position).
function indexed_assign!(A::CuArray{T}, X, pos::CuArray{Int64}) where {T}
    n = length(pos)
    if X isa AbstractArray
        length(X) == n || throw(DimensionMismatch("tried to assign $(length(X)) elements to $n destinations"))
        src = X isa CuArray{T} ? X : X isa AnyCuArray ? CuArray{T}(copy(X)) : CuArray{T}(collect(X))
        stride = 1
    else
        src = CuArray{T}([convert(T, X)])
        stride = 0
    end
    check_index_bounds(A, pos)
    kern = search_kernel("cumem_scatter")
    if n > 0
        if on_host()
            GC.@preserve A src pos begin
                h, s, p = host_view(A), host_view(src), host_view(pos)
                for k in 1:n; @inbounds h[p[k]] = s[stride == 0 ? 1 : k]; end
            end
        else
            blocks, threads = grid_for(n)
            GC.@preserve A src pos launch(kern, devaddr(src), devaddr(pos), devaddr(A), Int64(n), Int32(sizeof(T)),
                                          Int64(stride); blocks = blocks, threads = threads)
        end
    end
    return A
end

Base.setindex!(A::CuArray, X::AbstractArray, mask::CuArray{Bool}) = mask_setindex!(A, X, mask)
Base.setindex!(A::CuArray, x, mask::CuArray{Bool}) = mask_setindex!(A, x, mask)
function Base.setindex!(A::CuArray{T}, X::AbstractArray, idx::CuArray{<:Integer}) where {T}
    i64 = eltype(idx) === Int64 ? idx : Int64.(idx)
    length(X) == length(idx) || throw(DimensionMismatch("tried to assign $(length(X)) elements to $(length(idx)) destinations"))
    indexed_assign!(A, X, vec(i64))
    return A
end
Base.setindex!(A::CuArray, X::AbstractArray, I::AbstractArray{<:CartesianIndex}) =
    setindex!(A, X, CuArray(vec(cartesian_linear(A, I))))

## views indexed by arrays, in broadcasts

# Whether a view reads through an index array (not a strided layout a kernel can read).
is_index_view(@nospecialize(a)) = a isa SubArray &&
    (any(i -> !(i isa Union{Integer,AbstractRange,Base.Slice}), a.indices) || is_index_view(parent(a)))

# The parent indices of an index view with device index arrays read on the host.
function host_indices_view(v::SubArray)
    p = parent(v)
    p = p isa SubArray ? host_indices_view(p) : p
    I = map(host_index_value, v.indices)
    # one array of CartesianIndex (an n-d mask's positions): linear positions of the vector
    if length(I) == 1 && I[1] isa AbstractArray{<:CartesianIndex} && p isa CuArray
        return view(vec(p), cartesian_linear(p, I[1]))
    end
    return view(p, I...)
end

"""
    CuMem.CuIndexedStyle

The `BroadcastStyle` of views of CuArrays through index arrays (`view(x, [1, 3])`,
`view(x, mask)`, `x[mask] .= v`), which kernels cannot read as strided layouts: it wins
over `CuArrayStyle`, and such a broadcast gathers those views into temporaries, computes
as usual, and scatters the result when the destination is such a view.
"""
struct CuIndexedStyle <: Broadcast.BroadcastStyle end
Base.BroadcastStyle(a::CuIndexedStyle, ::CuArrayStyle) = a
Base.BroadcastStyle(a::CuIndexedStyle, ::Broadcast.DefaultArrayStyle) = a

# whether the index types of a view type (and of the views it wraps) are strided
strided_index_types(::Type{<:SubArray{<:Any,<:Any,P,I}}) where {P,I} =
    all(t -> t <: Union{Integer,AbstractRange}, I.parameters) && (!(P <: SubArray) || strided_index_types(P))
Base.BroadcastStyle(::Type{S}) where {N,S<:SubArray{<:Any,N,<:CuArray}} =
    strided_index_types(S) ? CuArrayStyle{N}() : CuIndexedStyle()
Base.BroadcastStyle(::Type{S}) where {N,S<:SubArray{<:Any,N,<:SubArray{<:Any,<:Any,<:CuArray}}} =
    strided_index_types(S) ? CuArrayStyle{N}() : CuIndexedStyle()

# dest .= bc with views through index arrays among the arguments or as the destination
function indexed_broadcast!(dest, bc::Broadcast.Broadcasted)
    bc2 = gather_index_views(bc)
    if is_index_view(dest)
        tmp = CuArray{eltype(dest)}(undef, size(dest))
        gpu_broadcast!(tmp, bc2)
        copy_into!(host_indices_view(dest), tmp)
        unsafe_free!(tmp)
    else
        gpu_broadcast!(dest, bc2)
    end
    return dest
end
Base.copyto!(dest::AnyCuArray, bc::Broadcast.Broadcasted{CuIndexedStyle}) = indexed_broadcast!(dest, bc)
# `dest .= bc` with dest a view through index arrays (Base keeps bc's own style for copyto!)
Broadcast.materialize!(::CuIndexedStyle, dest, bc::Broadcast.Broadcasted) =
    indexed_broadcast!(dest, Broadcast.instantiate(Broadcast.Broadcasted{Nothing}(bc.f, bc.args, axes(dest))))
function Base.copy(bc::Broadcast.Broadcasted{CuIndexedStyle})
    bc2 = gather_index_views(Broadcast.instantiate(bc))
    N = length(axes(bc2))
    return copy(Broadcast.Broadcasted{CuArrayStyle{N}}(bc2.f, bc2.args, bc2.axes))
end

# The arguments' index views (and reshaped wrappers) replaced by gathered copies (a
# Broadcasted{Nothing}).
gather_index_views(bc::Broadcast.Broadcasted) =
    Broadcast.Broadcasted{Nothing}(bc.f, map(gather_index_views, bc.args), bc.axes)
gather_index_views(x) = is_index_view(x) ? materialize(host_indices_view(x)) : x
gather_index_views(x::CuReshaped) = reads_in_place(x) ? x : reshape(copy(parent(x)), size(x))

# Whether kernels index a reshaped wrapper in place: its parent's elements are one run of
# equally spaced elements (merged, as `reshape_operand` needs), not through index vectors.
function reads_in_place(x::CuReshaped)
    is_index_view(parent(x)) && return false
    q = merge_dims!(drop_unit_dims!(strided_operand(parent(x))))
    return !q.conj && length(q.dims) <= 1 && all(i -> i === nothing, q.idx)
end

# Reshaped wrappers (`reshape(view(A, :, 1:4), 12, 2)`, `vec(A')`) read by kernels: in
# place when their layout is strided (`reads_in_place`), else copied into a CuArray of
# their shape first (one strided copy); through CuIndexedStyle in broadcasts.
Base.BroadcastStyle(::Type{<:CuReshaped}) = CuIndexedStyle()
Base.mapreduce(f, op, A::CuReshaped; dims = :, init = NOINIT) =
    reads_in_place(A) ? Base.invokelatest(gpu_mapreduce, f, op, A, dims, init) :
    mapreduce(f, op, gather_index_views(A); dims = dims, init = init)
Base.Array(x::Base.ReshapedArray{T,N,<:Union{Adjoint{T,<:CuArray},Transpose{T,<:CuArray}}}) where {T,N} =
    reshape(Array(parent(x)), size(x))

## fill!, copyto!, copy! on wrappers

"""
    fill!(A, x) for views, transposes, adjoints and permutations of CuArrays

Every element of the wrapper (and so of the parent at those places) set to `x`: one
broadcast kernel (views through index arrays: a scatter).
"""
function Base.fill!(A::CuStridedWrapper{T}, x) where {T}
    v = convert(T, x)
    A .= v      # (views through index arrays: CuIndexedStyle's scatter)
    return A
end
# An adjoint (or transpose) of a complex array is no kernel operand (its elements are
# conjugates): its parent is filled with `adjoint(x)` (`transpose(x)`), as Base's
# `fill!(A', x)` leaves `A' == fill(x, size(A'))`.
# `A' .= bc` of a complex `A`: computed into a temporary, copied back conjugated.
Base.fill!(A::Adjoint{T,<:CuViewOrArray{T}}, x) where {T} = (fill!(parent(A), adjoint(convert(T, x))); A)
Base.fill!(A::Transpose{T,<:CuViewOrArray{T}}, x) where {T} = (fill!(parent(A), transpose(convert(T, x))); A)
function adjoint_broadcast!(dest, bc)
    tmp = CuArray{eltype(dest)}(undef, size(dest))
    broadcast_into!(tmp, bc)
    copyto!(parent(dest), adjoint(tmp))
    unsafe_free!(tmp)
    return dest
end
Base.copyto!(dest::Adjoint{T,<:CuViewOrArray{T}}, bc::Broadcast.Broadcasted{<:CuArrayStyle}) where {T<:Complex} =
    adjoint_broadcast!(dest, bc)
Base.copyto!(dest::Adjoint{T,<:CuViewOrArray{T}}, bc::Broadcast.Broadcasted{CuArrayStyle{0}}) where {T<:Complex} =
    adjoint_broadcast!(dest, bc)

"""
    copy!(dst::CuArray, src) / copy!(dst, src::CuArray)

`dst` made equal to `src`, as Base: same axes required for arrays of two or more
dimensions; vectors must have the same length (CuVectors do not resize).
"""
Base.copy!(dst::AnyCuArray, src::AbstractArray) = cu_copy!(dst, src)
Base.copy!(dst::AnyCuArray{<:Any,1}, src::AbstractVector) = cu_copy!(dst, src)   # (Base's copy! of vectors)
function cu_copy!(dst, src)
    if ndims(dst) == 1 && ndims(src) == 1
        length(dst) == length(src) ||
            throw(ArgumentError("copy! into a CuVector of length $(length(dst)) from $(length(src)) elements: CuVectors do not resize"))
    else
        axes(dst) == axes(src) || throw(ArgumentError("arrays must have the same axes for copy! (consider using `copyto!`)"))
    end
    return copyto!(dst, src)
end
Base.copy!(dst::Vector, src::AnyCuArray{<:Any,1}) = copyto!(resize!(dst, length(src)), src)
Base.copy!(dst::Array, src::AnyCuArray) =
    (axes(dst) == axes(src) || throw(ArgumentError("arrays must have the same axes for copy! (consider using `copyto!`)"));
     copyto!(dst, src))

## vcat/hcat with numbers

as_block(x::Number, ::Val{1}) = CuArray([x])
as_block(x::Number, ::Val{2}) = CuArray(reshape([x], 1, 1))
as_block(x, _) = x
Base.vcat(x::CuStrided, y::Number, rest::Union{Number,CuStrided}...) = vcat(map(a -> as_block(a, Val(1)), (x, y, rest...))...)
Base.vcat(y::Number, x::CuStrided, rest::Union{Number,CuStrided}...) = vcat(map(a -> as_block(a, Val(1)), (y, x, rest...))...)
Base.vcat(x::CuStrided, z::CuStrided, y::Number, rest::Union{Number,CuStrided}...) =
    vcat(map(a -> as_block(a, Val(1)), (x, z, y, rest...))...)
Base.hcat(x::CuStrided, y::Number, rest::Union{Number,CuStrided}...) = hcat(map(a -> as_block(a, Val(2)), (x, y, rest...))...)
Base.hcat(y::Number, x::CuStrided, rest::Union{Number,CuStrided}...) = hcat(map(a -> as_block(a, Val(2)), (y, x, rest...))...)
Base.hcat(x::CuStrided, z::CuStrided, y::Number, rest::Union{Number,CuStrided}...) =
    hcat(map(a -> as_block(a, Val(2)), (x, z, y, rest...))...)

## views through device index arrays and masks

# Base turns a mask in a view into the vector of its positions (collecting it element by
# element); for device masks the positions come from device compaction (and stay there).
findall_index(li::Base.LogicalIndex{Int}) = findall(vec(copy_if_wrapper(li.mask)))
findall_index(li::Base.LogicalIndex) = findall(copy_if_wrapper(li.mask))
@inline Base.ensure_indexable(I::Tuple{Base.LogicalIndex{<:Any,<:AnyCuArray},Vararg{Any}}) =
    (findall_index(I[1]), Base.ensure_indexable(Base.tail(I))...)

# Bounds of a device index array: two reductions (Base's checkindex iterates it).
Base.checkindex(::Type{Bool}, inds::AbstractUnitRange, I::AnyCuArray{<:Integer}) =
    isempty(I) || (minimum(I) >= first(inds) && maximum(I) <= last(inds))

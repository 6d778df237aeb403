# The one strided description of a CuArray and its wrappers (views, transposes,
# adjoints, permuted-dims and reshaped views, nested): `strided_operand(x)`, a base address
# plus, per dimension, a length, a stride in elements and optionally an integer vector of
# coordinates. Strided copies and indexing (compute/broadcast/strided.jl) plan from it; kernels
# (broadcast leaves, reduction plans, scans) read it through `layout(x)`, which refuses
# what they cannot index in place.

# StridedOperand
#
# One side of a strided copy: `addr` is the device address of the element at coordinates
# (1, 1, ...); along dimension `d` there are `dims[d]` elements `strides[d]` elements apart,
# or, when `idx[d]` is a vector, the coordinates `idx[d]` (1-based) along that dimension.
# `conj` conjugates (source side only). `roots` keeps the arrays behind `addr` alive.
mutable struct StridedOperand
    addr::UInt64
    elsize::Int
    dims::Vector{Int}
    strides::Vector{Int}
    idx::Vector{Union{Nothing,Vector{Int}}}
    conj::Bool
    roots::Vector{Any}
end

contiguous_strides(dims) = (s = Vector{Int}(undef, length(dims)); acc = 1;
                            for d in 1:length(dims); s[d] = acc; acc *= dims[d]; end; s)

function StridedOperand(a::CuArray{T}) where {T}
    return StridedOperand(devaddr(a), sizeof(T), collect(Int, size(a)), contiguous_strides(size(a)),
                          Union{Nothing,Vector{Int}}[nothing for _ in 1:ndims(a)], false, Any[a])
end

Base.copy(op::StridedOperand) =
    StridedOperand(op.addr, op.elsize, copy(op.dims), copy(op.strides), copy(op.idx), op.conj, op.roots)


# Index arrays of views as index_operand takes them: device index arrays read on the
# host once (masks: their positions).

# Device index arrays, read on the host once (a Bool mask via device compaction).
host_index_value(i::CuArray{Bool}) = Array(i)
host_index_value(i::CuArray) = Array(i)
host_index_value(i::SubArray{<:Any,<:Any,<:CuArray}) = Array(i)
host_index_value(i::Base.LogicalIndex{<:Any,<:AnyCuArray}) = Base.LogicalIndex(Array(i.mask))
host_index_value(i) = i


# CuMem.strided_operand(x) -> StridedOperand
#
# The strided description of `x` (a CuArray, a view, transpose, adjoint, permuted-dims or
# reshaped view of one). Throws `ArgumentError` for an index or layout it cannot describe.
strided_operand(a::CuArray) = StridedOperand(a)

function strided_operand(a::Union{Adjoint,Transpose})
    p = strided_operand(parent(a))
    if length(p.dims) == 1        # a vector's transpose is a 1×n matrix
        pushfirst!(p.dims, 1); pushfirst!(p.strides, 0); pushfirst!(p.idx, nothing)
    else
        reverse!(p.dims); reverse!(p.strides); reverse!(p.idx)
    end
    a isa Adjoint && eltype(a) <: Complex && (p.conj = !p.conj)
    a isa Adjoint && !(eltype(a) <: Number) && throw(ArgumentError("adjoint of $(eltype(a)) elements is not supported"))
    return p
end

function strided_operand(a::PermutedDimsArray{T,N,perm}) where {T,N,perm}
    p = strided_operand(parent(a))
    return StridedOperand(p.addr, p.elsize, p.dims[collect(perm)], p.strides[collect(perm)],
                          p.idx[collect(perm)], p.conj, p.roots)
end

function strided_operand(a::SubArray)
    p = strided_operand(parent(a))
    # device index arrays and masks are read on the host once (masks.jl)
    return index_operand(p, map(host_index_value, parentindices(a)))
end

function strided_operand(a::Base.ReshapedArray)
    p = strided_operand(parent(a))
    return reshape_operand(p, size(a)) ::StridedOperand
end

# `p` viewed with shape `dims` in column-major order, or `nothing` where that is not a
# strided layout (only merges of dimensions contiguous with each other, and splits).
function reshape_operand(p::StridedOperand, dims)
    q = merge_dims!(drop_unit_dims!(copy(p)))   # at most one (dim, stride) per run
    any(i -> i !== nothing, q.idx) && !isempty(q.dims) &&
        throw(ArgumentError("cannot reshape an index-vector view without copying it first"))
    length(q.dims) <= 1 ||
        throw(ArgumentError("cannot reshape a non-contiguous view to $dims without copying it first"))
    s = isempty(q.strides) ? 1 : q.strides[1]
    strides = Int[]
    acc = s
    for d in dims
        push!(strides, acc)
        acc *= d
    end
    return StridedOperand(q.addr, q.elsize, collect(Int, dims), strides,
                          Union{Nothing,Vector{Int}}[nothing for _ in dims], q.conj, q.roots)
end

# Applies indices (after `to_indices`: Integers, AbstractArrays of Int) to `p`.
function index_operand(p::StridedOperand, @nospecialize(I::Tuple))
    n = length(I)
    if n < length(p.dims)        # linear indexing over the trailing dimensions
        p = reshape_split(p, n)
    elseif n > length(p.dims)    # trailing indices of singleton dimensions
        p = copy(p)
        for _ in length(p.dims)+1:n
            push!(p.dims, 1); push!(p.strides, 0); push!(p.idx, nothing)
        end
    end
    addr = p.addr
    dims = Int[]; strides = Int[]; idx = Union{Nothing,Vector{Int}}[]
    for (d, i) in enumerate(I)
        coords = p.idx[d]
        if i isa Integer
            c = coords === nothing ? Int(i) : coords[i]
            addr += ((c - 1) * p.strides[d] * p.elsize) % UInt64
        elseif i isa AbstractRange{<:Integer} && coords === nothing
            # ranges (including colons, Base.Slice) keep a stride
            if isempty(i)
                push!(dims, 0); push!(strides, p.strides[d]); push!(idx, nothing)
            else
                addr += ((first(i) - 1) * p.strides[d] * p.elsize) % UInt64
                push!(dims, length(i)); push!(strides, step(i) * p.strides[d]); push!(idx, nothing)
            end
        elseif i isa AbstractArray{<:Integer}
            # integer vectors (and arrays of any shape, flattened): a gather
            v = coords === nothing ? collect(Int, vec(i)) : coords[vec(collect(i))]
            push!(dims, length(v)); push!(strides, p.strides[d]); push!(idx, v)
        else
            throw(ArgumentError("CuArray indexing with $(typeof(i)) is not supported; use integers, ranges, colons, integer vectors or Bool masks"))
        end
    end
    return StridedOperand(addr, p.elsize, dims, strides, idx, p.conj, p.roots)
end

# `p` with its dimensions n, n+1, ... merged into one (linear indexing), which needs them
# to be contiguous with each other.
function reshape_split(p::StridedOperand, n::Int)
    dims = p.dims[1:n-1]; strides = p.strides[1:n-1]; idx = p.idx[1:n-1]
    rest = p.dims[n:end]
    any(i -> i !== nothing, p.idx[n:end]) &&
        throw(ArgumentError("linear indexing of an index-vector view is not supported"))
    len = prod(rest)
    stride = p.strides[n]
    acc = stride
    for k in n:length(p.dims)
        p.dims[k] == 1 && continue
        p.strides[k] == acc || len == 0 ||
            throw(ArgumentError("linear indexing over non-contiguous dimensions is not supported; copy the view first"))
        acc *= p.dims[k]
    end
    firststride = something(findfirst(k -> p.dims[k] != 1, n:length(p.dims)), 0)
    firststride == 0 || (stride = p.strides[n - 1 + firststride])
    push!(dims, len); push!(strides, stride); push!(idx, nothing)
    return StridedOperand(p.addr, p.elsize, dims, strides, idx, p.conj, p.roots)
end

## planning

# Removes dimensions of length 1 (they never move the address).
function drop_unit_dims!(p::StridedOperand)
    keep = findall(!=(1), p.dims)
    for d in 1:length(p.dims)
        if p.dims[d] == 1 && p.idx[d] !== nothing   # a one-element gather: fold into addr
            p.addr += ((p.idx[d][1] - 1) * p.strides[d] * p.elsize) % UInt64
        end
    end
    p.dims = p.dims[keep]; p.strides = p.strides[keep]; p.idx = p.idx[keep]
    return p
end

# Merges neighbouring dimensions that are contiguous with each other (single operand).
merge_dims!(p::StridedOperand) = (merge_dims!((p,)); p)

# Merges dimension d+1 into d where every operand has stride[d+1] == stride[d]*dims[d] and
# no index vector in either; the operands share `dims`.
function merge_dims!(ops::Tuple)
    d = 1
    dims = ops[1].dims
    while d < length(dims)
        if all(p -> p.idx[d] === nothing && p.idx[d+1] === nothing &&
                    p.strides[d+1] == p.strides[d] * p.dims[d], ops)
            for p in ops
                p.dims[d] *= p.dims[d+1]
                deleteat!(p.dims, d + 1); deleteat!(p.strides, d + 1); deleteat!(p.idx, d + 1)
            end
        else
            d += 1
        end
    end
    return ops
end

# Drops the dimensions of length 1 of two operands of the same shape.
function drop_unit_dims!(dst::StridedOperand, src::StridedOperand)
    for d in length(dst.dims):-1:1
        dst.dims[d] == 1 || continue
        for p in (dst, src)
            if p.idx[d] !== nothing
                p.addr += ((p.idx[d][1] - 1) * p.strides[d] * p.elsize) % UInt64
            end
            deleteat!(p.dims, d); deleteat!(p.strides, d); deleteat!(p.idx, d)
        end
    end
    return dst, src
end

## strided layouts

# CuMem.layout(a) -> (base CuArray, element offset of the first element, sizes, strides)
#
# What a kernel (broadcast leaf, reduction plan, scan) indexes: `a`'s strided description
# (`strided_operand`, the one the copies use) in elements of its base
# array. Refuses, with an ArgumentError, what such kernels cannot read in place: dimensions
# indexed by integer vectors or masks, and the conjugation of an adjoint of complex numbers.
layout(@nospecialize(a)) = operand_layout(strided_operand(a))

function operand_layout(p::StridedOperand)
    for i in p.idx
        i === nothing ||
            throw(ArgumentError("GPU kernels read views indexed by integers, ranges and colons; not by integer vectors or masks (copy the view first)"))
    end
    p.conj && throw(ArgumentError("GPU kernels cannot read an adjoint of complex numbers in place; use conj.(transpose(x)) or copy it first"))
    base = p.roots[1]::CuArray
    off = div(signed(p.addr - devaddr(base)), p.elsize)
    return (base, off, p.dims, p.strides)
end

# Strides of a leaf relative to the output's N dimensions (0 where extruded) and whether
# the leaf can be indexed by the output's linear index.
function leaf_strides(sz::Vector{Int}, st::Vector{Int}, dsz::Dims{N}) where {N}
    out = Base.zeros(Int, N)
    for d in 1:length(sz)
        if d <= N
            if sz[d] == dsz[d]
                out[d] = dsz[d] == 1 ? 0 : st[d]
            elseif sz[d] != 1
                throw(DimensionMismatch("array of size $(Tuple(sz)) cannot broadcast to $dsz"))
            end
        elseif sz[d] != 1
            throw(DimensionMismatch("array of size $(Tuple(sz)) cannot broadcast to $dsz"))
        end
    end
    linear = true
    s = 1
    for d in 1:N
        dsz[d] == 1 && continue
        (out[d] == s) || (linear = false)
        s *= dsz[d]
    end
    return out, linear
end

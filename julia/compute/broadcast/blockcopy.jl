# Block copies between CuArrays and host arrays: `copyto!(dest, Rdest::CartesianIndices,
# src, Rsrc::CartesianIndices)` and `copyto!(dest, rdest::AbstractRange, src,
# rsrc::AbstractRange)`. Base's and LinearAlgebra's methods copy element by element (or
# only between Arrays); here each is one strided copy between views (masks.jl's copyto! of
# wrappers), a download or an upload, with Base's checks and errors.

# Base's checks (multidimensional.jl): sizes, then the corners of both blocks.
function check_block_copy(dest, Rdest::CartesianIndices, src, Rsrc::CartesianIndices)
    size(Rdest) == size(Rsrc) ||
        throw(ArgumentError("source and destination must have same size (got $(size(Rsrc)) and $(size(Rdest)))"))
    checkbounds(dest, first(Rdest))
    checkbounds(dest, last(Rdest))
    checkbounds(src, first(Rsrc))
    checkbounds(src, last(Rsrc))
    return nothing
end

function block_copy!(dest, Rdest::CartesianIndices, src, Rsrc::CartesianIndices)
    isempty(Rdest) && return dest
    check_block_copy(dest, Rdest, src, Rsrc)
    d = view(dest, Rdest.indices...)
    s = view(src, Rsrc.indices...)
    if src isa AnyCuArray || src isa StridedCuArray
        s = Base.mightalias(dest, src) ? copy(s) : s
        if dest isa AnyCuArray || dest isa StridedCuArray
            copyto!(d, s)
        else
            copyto!(d, Array(s))          # download the block once
        end
    else
        copyto!(d, CuArray(s))            # upload the block once
    end
    return dest
end

"""
    copyto!(dest, Rdest::CartesianIndices, src, Rsrc::CartesianIndices) -> dest

Copies the block `src[Rsrc]` into `dest[Rdest]` where either array is a CuArray (or a
wrapper of one) and the other a CuArray or a host array: one device copy, download or
upload. As Base: `ArgumentError` when the blocks' sizes differ, `BoundsError` when a block
is out of its array's bounds; nothing is copied then.
"""
Base.copyto!(dest::AnyCuArray{T1,N}, Rdest::CartesianIndices{N},
             src::AnyCuArray{T2,N}, Rsrc::CartesianIndices{N}) where {T1,T2,N} =
    block_copy!(dest, Rdest, src, Rsrc)
Base.copyto!(dest::AbstractArray{T1,N}, Rdest::CartesianIndices{N},
             src::AnyCuArray{T2,N}, Rsrc::CartesianIndices{N}) where {T1,T2,N} =
    block_copy!(dest, Rdest, src, Rsrc)
Base.copyto!(dest::AnyCuArray{T1,N}, Rdest::CartesianIndices{N},
             src::AbstractArray{T2,N}, Rsrc::CartesianIndices{N}) where {T1,T2,N} =
    block_copy!(dest, Rdest, src, Rsrc)

# LinearAlgebra's range copy (blas.jl, Arrays only): linear indices, its checks and errors.
function range_copy!(dest, rdest::AbstractRange{<:Integer}, src, rsrc::AbstractRange{<:Integer})
    if !isempty(rdest) && (minimum(rdest) < 1 || maximum(rdest) > length(dest))
        throw(ArgumentError("range out of bounds for dest, of length $(length(dest))"))
    end
    if !isempty(rsrc) && (minimum(rsrc) < 1 || maximum(rsrc) > length(src))
        throw(ArgumentError("range out of bounds for src, of length $(length(src))"))
    end
    length(rdest) == length(rsrc) || throw(DimensionMismatch("ranges must be of the same length"))
    isempty(rdest) && return dest
    return block_copy!(vec_of(dest), CartesianIndices((rdest,)), vec_of(src), CartesianIndices((rsrc,)))
end
vec_of(a::AbstractVector) = a
vec_of(a::CuArray) = vec(a)
vec_of(a::Array) = vec(a)
vec_of(a::AbstractArray) = throw(ArgumentError("copyto! with ranges needs a vector or a contiguous array, not a $(typeof(a))"))

"""
    copyto!(dest, rdest::AbstractRange, src, rsrc::AbstractRange) -> dest

`dest[rdest] = src[rsrc]` by linear index, where either array is a CuArray (or a vector
view of one) and the other a CuArray or a host array (LinearAlgebra's method, which takes
Arrays only). `ArgumentError` for a range out of bounds, `DimensionMismatch` for ranges
of different lengths.
"""
Base.copyto!(dest::AnyCuArray, rdest::AbstractRange{<:Integer}, src::AnyCuArray, rsrc::AbstractRange{<:Integer}) =
    range_copy!(dest, rdest, src, rsrc)
Base.copyto!(dest::AbstractArray, rdest::AbstractRange{<:Integer}, src::AnyCuArray, rsrc::AbstractRange{<:Integer}) =
    range_copy!(dest, rdest, src, rsrc)
Base.copyto!(dest::AnyCuArray, rdest::AbstractRange{<:Integer}, src::AbstractArray, rsrc::AbstractRange{<:Integer}) =
    range_copy!(dest, rdest, src, rsrc)

# Searching and rearranging on the device: findall (stream compaction), findfirst/findlast/
# findnext/findprev, extrema, gathers by device index vectors, circshift, rotl90/rotr90/
# rot180, mapslices, and foldl/foldr (refused: their order is sequential).
#
# Compaction is the scan-then-scatter of CUB's DeviceSelect (and CuPy's nonzero): the
# inclusive count of selected elements (scan.jl) gives each one its output slot. findfirst
# and findlast are one pass with an atomic minimum/maximum of the matching index.

## the fixed kernels

const SEARCH_SOURCE = cuda_source("search.cuh")     # prelude.cuh, common.cuh, the kernels

# Blocks and threads for a grid-stride loop over n items (256 threads).
grid_for(n) = (max(1, min(cld(n, 256), 32 * sm_count())), 256)

# x itself when it is a CuArray, else a new CuArray with its elements.
copy_if_wrapper(x::CuArray) = x
copy_if_wrapper(x) = copy(x)

const SEARCH_NAMES = ("cumem_compact", "cumem_findone", "cumem_gather", "cumem_scatter")
search_kernel(name) = (e = kernel_entry(() -> (SEARCH_SOURCE, SEARCH_NAMES, nothing), (:search,));
                       on_host() ? nothing : entry_kernel(e, name))

## findall

# The contiguous Bool mask of `f.(A)` (A itself when it is a contiguous Bool array).
as_mask(A::CuArray{Bool}) = A
as_mask(A::AnyCuArray{Bool}) = copy(A)
as_mask(A) = throw(ArgumentError("findall needs Bool elements, got $(eltype(A)) (use findall(f, A))"))

"""
    findall(A::AnyCuArray{Bool}) / findall(f, A::AnyCuArray)

The indices of the `true` elements of `A` (of `f.(A)`) in order, as Base: a CuVector of
`Int`s for vectors, of `CartesianIndex`es otherwise. Stream compaction on the device: a scan
of the mask and one scatter kernel; one scalar (the count) is downloaded.
"""
function Base.findall(A::AnyCuArray{Bool})
    m = as_mask(A)
    n = length(m)
    N = ndims(A)
    N <= 7 || throw(ArgumentError("findall on the device handles up to 7 dimensions"))
    kern = search_kernel("cumem_compact")
    incl = CuArray{Int64}(undef, n)
    gpu_accumulate!(Base.add_sum, incl, m, nothing, NOINIT)     # in linear order
    on_host() && return host_findall(Base.inferencebarrier(m), incl, N)   # (compiled on the host device only)
    total = n == 0 ? 0 : Int(Array(view(incl, n:n))[1])
    E = N == 1 ? Int : CartesianIndex{N}
    out = CuArray{E}(undef, total)
    if total > 0
        sz = ntuple(d -> d <= N ? Int64(size(A, d)) : Int64(1), 7)
        blocks, threads = grid_for(n)
        GC.@preserve m incl out launch(kern, devaddr(m), devaddr(incl), devaddr(out), Int64(n), Int32(N), sz...;
                                       blocks = blocks, threads = threads)
    end
    unsafe_free!(incl)
    return out
end
function host_findall(m::CuArray{Bool}, incl, N::Int)
    GC.@preserve m r = findall(host_view(m))
    unsafe_free!(incl)
    return CuArray(N == 1 ? r : reshape(r, length(r)))
end
Base.findall(f::Function, A::AnyCuArray) = findall(map_mask(f, A))
# `findall(in(collection), A)`: membership in a host collection, tested on the host (one download)
Base.findall(pred::Base.Fix2{typeof(in)}, A::AnyCuArray) = CuArray(findall(pred, Array(A)))
map_mask(f, A) = (m = map(f, A); eltype(m) === Bool ? m :
                  throw(ArgumentError("the predicate gives $(eltype(m)), not Bool")))

## findfirst, findlast, findnext, findprev

# The 0-based position of the first (last) true of a contiguous mask, or nothing.
function find_one(m::CuArray{Bool}, first::Bool)
    n = length(m)
    kern = search_kernel("cumem_findone")
    n == 0 && return nothing
    if on_host()
        GC.@preserve m (h = vec(host_view(m)); i = first ? findfirst(h) : findlast(h))
        return i === nothing ? nothing : i - 1
    end
    res = CuArray{UInt64}([first ? typemax(UInt64) : UInt64(0)])
    blocks, threads = grid_for(n)
    GC.@preserve m res launch(kern, devaddr(m), Int64(n), devaddr(res), Int32(first); blocks = blocks, threads = threads)
    r = Array(res)[1]
    unsafe_free!(res)
    first && return r == typemax(UInt64) ? nothing : Int(r)
    return r == 0 ? nothing : Int(r) - 1
end

# keys(A)[k + 1]: an Int for vectors, a CartesianIndex otherwise (as Base).
key_at(A, k) = k === nothing ? nothing : (ndims(A) == 1 ? k + first(axes(A, 1)) : CartesianIndices(A)[k + 1])

"""
    findfirst(A::AnyCuArray{Bool}) / findfirst(f, A) / findlast(...)
    findnext(f, A, i) / findprev(f, A, i)

The first (last) index where `A` is true (`f` holds), or `nothing`, as Base (an `Int` for
vectors, a `CartesianIndex` otherwise). One broadcast for `f` and one kernel with an atomic
minimum (maximum); one scalar is downloaded.
"""
Base.findfirst(A::AnyCuArray{Bool}) = key_at(A, find_one(as_mask(A), true))
Base.findlast(A::AnyCuArray{Bool}) = key_at(A, find_one(as_mask(A), false))
Base.findfirst(f::Function, A::AnyCuArray) = key_at(A, find_one(map_mask(f, A), true))
Base.findlast(f::Function, A::AnyCuArray) = key_at(A, find_one(map_mask(f, A), false))

function Base.findnext(f::Function, A::AnyCuArray, i)
    k = LinearIndices(A)[i]
    k > length(A) && return nothing
    v = vec_view(A)
    j = find_one(map_mask(f, view(v, k:length(v))), true)
    return key_at(A, j === nothing ? nothing : j + k - 1)
end
function Base.findprev(f::Function, A::AnyCuArray, i)
    k = LinearIndices(A)[i]
    k < 1 && return nothing
    v = vec_view(A)
    return key_at(A, find_one(map_mask(f, view(v, 1:k)), false))
end
Base.findnext(A::AnyCuArray{Bool}, i) = findnext(identity, A, i)
Base.findprev(A::AnyCuArray{Bool}, i) = findprev(identity, A, i)

vec_view(A::CuArray) = vec(A)
vec_view(A) = vec(copy(A))

## extrema

"""
    extrema(A::AnyCuArray; dims=:) / extrema(f, A; dims=:)

`(minimum, maximum)` as Base: a tuple for the whole array, a CuArray of tuples along
`dims`. Two reductions.
"""
function Base.extrema(f, A::AnyCuArray; dims = :)
    isempty(A) && return extrema(f, Array{eltype(A),ndims(A)}(undef, size(A)); dims = dims)
    lo = minimum(f, A; dims = dims)
    hi = maximum(f, A; dims = dims)
    dims === (:) && return (lo, hi)
    return CuArray(map(tuple, Array(lo), Array(hi)))
end
Base.extrema(A::AnyCuArray; dims = :) = extrema(identity, A; dims = dims)

## gathers and scatters by device index vectors

# dst[i] = src[idx[i]] (src, dst contiguous; idx 1-based Int64s), bounds-checked against src.
function gather!(dst::CuArray{T}, src::CuArray{T}, idx::CuArray{Int64}) where {T}
    length(dst) == length(idx) || throw(DimensionMismatch("gather of $(length(idx)) into $(length(dst)) elements"))
    check_index_bounds(src, idx)
    kern = search_kernel("cumem_gather")
    n = length(idx)
    n == 0 && return dst
    if on_host()
        GC.@preserve dst src idx begin
            h, s = host_view(dst), host_view(src)
            for (k, j) in enumerate(host_view(idx)); @inbounds h[k] = s[j]; end
        end
        return dst
    end
    blocks, threads = grid_for(n)
    GC.@preserve dst src idx launch(kern, devaddr(src), devaddr(idx), devaddr(dst), Int64(n), Int32(sizeof(T));
                                    blocks = blocks, threads = threads)
    return dst
end

# BoundsError when an index of `idx` is outside 1:length(A) (two reductions, one download).
function check_index_bounds(A, idx::CuArray{<:Integer})
    isempty(idx) && return nothing
    lo, hi = minimum(idx), maximum(idx)
    (lo < 1 || hi > length(A)) && throw(BoundsError(A, (lo < 1 ? lo : hi,)))
    return nothing
end

## circshift, rot90

"""
    circshift(A::AnyCuArray, shifts) / circshift!(dest, src, shifts)

`A` shifted circularly, as Base: at most two strided copies per dimension block (each
dimension's two pieces are copied to their places).
"""
function Base.circshift!(dest::CuArray{T,N}, src::AnyCuArray{T,N}, shifts::Base.DimsInteger) where {T,N}
    size(dest) == size(src) || throw(DimensionMismatch("circshift!: sizes $(size(dest)) and $(size(src))"))
    same_memory(dest, layout(src)[1]) && throw(ArgumentError("dest and src must be separate arrays"))
    sh = ntuple(d -> d <= length(shifts) ? mod(Int(shifts[d]), max(size(src, d), 1)) : 0, N)
    # each of the 2^N blocks: source range -> destination range per dimension
    for corner in CartesianIndices(ntuple(_ -> 2, N))
        sr = ntuple(N) do d
            n, s = size(src, d), sh[d]
            corner[d] == 1 ? (1:n-s) : (n-s+1:n)
        end
        any(isempty, sr) && continue
        dr = ntuple(N) do d
            n, s = size(src, d), sh[d]
            corner[d] == 1 ? (s+1:n) : (1:s)
        end
        copy_into!(view(dest, dr...), view(src, sr...))
    end
    return dest
end
Base.circshift!(dest::CuArray{T,N}, src::AnyCuArray{T,N}, shifts::Integer) where {T,N} = circshift!(dest, src, (shifts,))
Base.circshift(A::AnyCuArray, shifts::Integer) = circshift(A, (shifts,))
Base.circshift(A::AnyCuArray, shifts::Base.DimsInteger) = circshift!(CuArray{eltype(A)}(undef, size(A)), A, shifts)

"""
    rotl90(A::AnyCuMatrix[, k]) / rotr90 / rot180

The matrix rotated, as Base: a transpose or permutation with reversed dimensions, one
strided copy.
"""
Base.rotl90(A::AnyCuArray{T,2}) where {T} = cu_reverse(transpose_copy(A), (1,))
Base.rotr90(A::AnyCuArray{T,2}) where {T} = cu_reverse(transpose_copy(A), (2,))
Base.rot180(A::AnyCuArray{T,2}) where {T} = cu_reverse(copy_if_wrapper(A), (1, 2))
function Base.rotl90(A::AnyCuArray{T,2}, k::Integer) where {T}
    k = mod(k, 4)
    return k == 0 ? copy(A) : k == 1 ? rotl90(A) : k == 2 ? rot180(A) : rotr90(A)
end
Base.rotr90(A::AnyCuArray{T,2}, k::Integer) where {T} = rotl90(A, -k)
Base.rot180(A::AnyCuArray{T,2}, k::Integer) where {T} = iseven(k) ? copy(A) : rot180(A)
transpose_copy(A) = permutedims(copy_if_wrapper(A), (2, 1))

## mapslices

"""
    mapslices(f, A::AnyCuArray; dims)

`f` applied to each slice of `A` along `dims`, as Base: the slices are CuArrays (views
copied), so `f` may be any function of CuArrays (`sum`, `sort`, a broadcast...); one call
of `f` per slice from the host, results concatenated on the device.
"""
function Base.mapslices(f, A::AnyCuArray; dims)
    ds = normalize_dims(dims, ndims(A))
    isempty(ds) && return map(f, A)
    other = [d for d in 1:ndims(A) if !(d in ds)]
    itr = CartesianIndices(Tuple(size(A, d) for d in other))
    results = Any[]
    for c in itr
        idx = Vector{Any}(undef, ndims(A))
        for d in ds; idx[d] = Colon(); end
        for (k, d) in enumerate(other); idx[d] = c[k]; end
        r = f(copy(view(A, idx...)))
        push!(results, r isa AbstractArray ? r : CuArray(fill(r)))
    end
    r1 = results[1]
    # the output: the slice's result shape in the dims of `ds`, A's sizes elsewhere
    rsz = size(r1)
    osz = [size(A, d) for d in 1:ndims(A)]
    for (k, d) in enumerate(ds)
        osz[d] = k <= length(rsz) ? rsz[k] : 1
    end
    length(rsz) > length(ds) && prod(rsz[length(ds)+1:end]) != 1 &&
        throw(DimensionMismatch("mapslices: the result of f has more dimensions than dims"))
    out = CuArray{eltype(r1)}(undef, Tuple(osz))
    for (j, c) in enumerate(itr)
        idx = Vector{Any}(undef, ndims(A))
        for d in ds; idx[d] = Colon(); end
        for (k, d) in enumerate(other); idx[d] = c[k]:c[k]; end
        dst = view(out, idx...)
        length(results[j]) == length(dst) || throw(DimensionMismatch("mapslices: f gives results of different sizes"))
        copy_into!(dst, reshape(copy_if_wrapper(results[j]), size(dst)))
    end
    return out
end

## foldl, foldr

fold_error(name) = throw(ArgumentError("$name on GPU arrays is not supported: it applies the operator in a fixed " *
                                       "sequential order, which a GPU cannot parallelise. Use reduce or mapreduce " *
                                       "(an associative operator, any grouping), or download the array (`Array(x)`) first."))
Base.foldl(op, A::AnyCuArray; kw...) = fold_error("foldl")
Base.foldr(op, A::AnyCuArray; kw...) = fold_error("foldr")
Base.mapfoldl(f, op, A::AnyCuArray; kw...) = fold_error("mapfoldl")
Base.mapfoldr(f, op, A::AnyCuArray; kw...) = fold_error("mapfoldr")

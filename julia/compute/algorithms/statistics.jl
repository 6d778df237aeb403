# Statistics on CuArrays: mean, var, std, cov, cor, median (and mean!, varm, stdm, middle),
# with `dims`, `corrected` and `mean(f, A)`. Each is a few broadcasts and reductions
# (mapreduce.jl), so the element work runs in kernels and only scalars are downloaded;
# median goes through the device sort (sorting.jl). GPUArrays.jl overrides the same
# functions (src/host/statistics.jl) for the same reason: Statistics' generic methods
# iterate element by element. Results and element types are Statistics' own.


# Number of elements a reduction over `dims` combines.
reduced_count(A, ::Colon) = length(A)
reduced_count(A, dims) = foldl((acc, d) -> acc * size(A, d), normalize_dims(dims, ndims(A)); init = 1)

# Statistics' answer (or error) for an empty array of A's shape and type: empty inputs
# have no device work, and their results (NaN, empty arrays, ArgumentError) are Base's.
# (`f` behind an inference barrier: Statistics' methods on host arrays compiled only when an
# empty array comes, not with every first call)
empty_answer(f, A, kw...) = empty_answer_run(Base.inferencebarrier(f), Array{eltype(A),ndims(A)}(undef, size(A)), kw...)
empty_answer_run(f, h, kw...) = (r = f(h; kw...); r isa AbstractArray ? CuArray(r) : r)

"""
    mean(A::AnyCuArray; dims=:) / mean(f, A::AnyCuArray; dims=:)

The mean of `A` (or of `f.(A)`) as Statistics computes it: the sum (one reduction kernel)
divided by the number of elements, over everything (a scalar) or along `dims` (a CuArray
whose reduced dimensions have size 1). Integers give `Float64`, as Statistics.
"""
Statistics.mean(A::AnyCuArray; dims = :) = Statistics.mean(identity, A; dims = dims)
function Statistics.mean(f, A::AnyCuArray; dims = :)
    isempty(A) && return empty_answer(a -> Statistics.mean(f, a; dims = dims), A)
    n = reduced_count(A, dims)
    if dims === (:)
        return sum(f, A) / n
    end
    s = sum(f, A; dims = dims)
    return s ./ n
end

"""
    mean!(r::CuArray, A::AnyCuArray) -> r

The means of `A` over the dimensions where `r` has size 1, written into `r`.
"""
function Statistics.mean!(r::CuArray, A::AnyCuArray)
    rdims = Tuple(d for d in 1:ndims(A) if size(r, d) == 1 && size(A, d) != 1)
    for d in 1:max(ndims(A), ndims(r))
        size(r, d) == 1 || size(r, d) == size(A, d) ||
            throw(DimensionMismatch("cannot compute the means of an array of size $(size(A)) into $(size(r))"))
    end
    s = isempty(rdims) ? copy(A) : sum(A; dims = rdims)
    r .= s ./ reduced_count(A, rdims)
    return r
end

# sum(abs2(x - m)) over dims (m a scalar or an array broadcast against A).
centered_sumabs2(A, m::Number, ::Colon) = sum(x -> abs2(x - m), A)
centered_sumabs2(A, m::Number, dims) = sum(x -> abs2(x - m), A; dims = dims)
centered_sumabs2(A, m::AbstractArray, ::Colon) = sum(abs2.(A .- m))
centered_sumabs2(A, m::AbstractArray, dims) = sum(abs2.(A .- m); dims = dims)

"""
    var(A::AnyCuArray; corrected=true, mean=nothing, dims=:)
    varm(A::AnyCuArray, m; corrected=true, dims=:)

The variance as Statistics: the sum of `abs2(x - mean)` divided by `n - 1` (`corrected`)
or `n`; `mean` may be given (a number, or an array of the reduced shape with `dims`).
"""
function Statistics.var(A::AnyCuArray; corrected::Bool = true, mean = nothing, dims = :)
    isempty(A) && return empty_answer(a -> Statistics.var(a; corrected = corrected, mean = mean, dims = dims), A)
    m = mean === nothing ? Statistics.mean(A; dims = dims) : mean
    return Statistics.varm(A, m; corrected = corrected, dims = dims)
end
Statistics.varm(A::AnyCuArray, m::AbstractArray; corrected::Bool = true, dims = :) = cu_varm(A, m, corrected, dims)
Statistics.varm(A::AnyCuArray, m; corrected::Bool = true, dims = :) = cu_varm(A, m, corrected, dims)
function cu_varm(A, m, corrected::Bool, dims)
    isempty(A) && return empty_answer(a -> Statistics.varm(a, m isa CuArray ? Array(m) : m; corrected = corrected, dims = dims), A)
    n = reduced_count(A, dims)
    if dims === (:)
        m isa AbstractArray && (m = Array(m)[1])
        return centered_sumabs2(A, m, :) / (n - Int(corrected))
    end
    m isa Number && throw(ArgumentError("varm with dims needs the means as an array of the reduced shape"))
    return centered_sumabs2(A, m, dims) ./ (n - Int(corrected))
end

"""
    std(A::AnyCuArray; corrected=true, mean=nothing, dims=:)
    stdm(A::AnyCuArray, m; corrected=true, dims=:)

The square root of [`var`](@ref) (elementwise along `dims`).
"""
function Statistics.std(A::AnyCuArray; corrected::Bool = true, mean = nothing, dims = :)
    v = Statistics.var(A; corrected = corrected, mean = mean, dims = dims)
    return v isa AbstractArray ? sqrt.(v) : sqrt(v)
end
function Statistics.stdm(A::AnyCuArray, m; corrected::Bool = true, dims = :)
    v = Statistics.varm(A, m; corrected = corrected, dims = dims)
    return v isa AbstractArray ? sqrt.(v) : sqrt(v)
end

## cov, cor

# x minus its mean along the observations (vardim).
centered(x::AnyCuArray{<:Any,1}) = x .- Statistics.mean(x)
centered(x::AnyCuArray{<:Any,2}, vardim::Int) = x .- Statistics.mean(x; dims = vardim)

check_vardim(vardim) = vardim in (1, 2) || throw(ArgumentError("dims must be 1 or 2, got $vardim"))

# The unscaled covariance of centred data, as Statistics.unscaled_covzm: conj(x'x) for
# observations in rows (a cuBLAS product), x * x' for observations in columns.
function unscaled_cov(xc::CuMatrix, vardim::Int)
    C = vardim == 1 ? xc' * xc : xc * xc'
    return eltype(C) <: Complex && vardim == 1 ? conj.(C) : C
end

"""
    cov(x::AnyCuArray{<:Any,1}; corrected=true)
    cov(X::AnyCuArray{<:Any,2}; dims=1, corrected=true)
    cov(x::AnyCuArray{<:Any,1}, y::AnyCuArray{<:Any,1}; corrected=true)

Covariances as Statistics: of a vector, a number; of a matrix with observations along
`dims`, the covariance matrix (a CuMatrix, through one cuBLAS product of the centred data);
of two vectors, `sum((x .- mean(x)) .* conj.(y .- mean(y))) / (n - corrected)`.
"""
function Statistics.cov(x::AnyCuArray{<:Any,1}; corrected::Bool = true)
    xc = centered(x)
    return sum(abs2, xc) / (length(x) - Int(corrected))
end
function Statistics.cov(X::AnyCuArray{<:Any,2}; dims::Int = 1, corrected::Bool = true)
    check_vardim(dims)
    C = unscaled_cov(copy_if_wrapper(centered(X, dims)), dims)
    T = promote_type(typeof(one(eltype(C)) / 1), eltype(C))
    C = eltype(C) === T ? C : T.(C)
    C ./= (size(X, dims) - Int(corrected))
    return C
end
function Statistics.cov(x::AnyCuArray{<:Any,1}, y::AnyCuArray{<:Any,1}; corrected::Bool = true)
    length(x) == length(y) || throw(DimensionMismatch("x has $(length(x)) elements and y has $(length(y))"))
    xc, yc = centered(x), centered(y)
    return sum(xc .* cconj(yc)) / (length(x) - Int(corrected))
end

"""
    cor(x::AnyCuArray{<:Any,1})
    cor(X::AnyCuArray{<:Any,2}; dims=1)
    cor(x::AnyCuArray{<:Any,1}, y::AnyCuArray{<:Any,1})

Pearson correlations as Statistics: `one(real(T))` for one vector; the correlation matrix
(covariances over the outer product of the standard deviations, clamped to [-1, 1] for
real data, ones on the diagonal) for a matrix; a number for two vectors.
"""
Statistics.cor(x::AnyCuArray{<:Any,1}) = one(real(eltype(x)))
function Statistics.cor(X::AnyCuArray{<:Any,2}; dims::Int = 1)
    check_vardim(dims)
    C = unscaled_cov(copy_if_wrapper(centered(X, dims)), dims)
    n = size(C, 1)
    d = copy(view(vec(C), 1:n+1:n*n))
    d = sqrt.(eltype(d) <: Complex ? real.(d) : d)
    R = C ./ (d .* transpose(d))
    eltype(R) <: Real && (R .= clamp.(R, -1, 1))
    view(vec(R), 1:n+1:n*n) .= one(eltype(R))
    return R
end
function Statistics.cor(x::AnyCuArray{<:Any,1}, y::AnyCuArray{<:Any,1})
    length(x) == length(y) || throw(DimensionMismatch("x has $(length(x)) elements and y has $(length(y))"))
    xc, yc = centered(x), centered(y)
    r = sum(xc .* cconj(yc)) / (sqrt(sum(abs2, xc)) * sqrt(sum(abs2, yc)))
    return r isa Real ? clamp(r, -1, 1) : r
end

cconj(x) = eltype(x) <: Complex ? conj.(x) : x     # (conj of reals is the identity)

## median

"""
    median(A::AnyCuArray; dims=:)
    median!(v::CuVector)

The median as Statistics: the middle element of the sorted data (the device sort, see
[`sort`](@ref)) or the mean of the two middle ones (`Float64` for integers); `NaN` when
there is one; along `dims`, a CuArray whose reduced dimension has size 1 (one dimension at
a time). An empty array is an `ArgumentError`, as Statistics.
"""
function Statistics.median(A::AnyCuArray; dims = :)
    isempty(A) && return empty_answer(a -> Statistics.median(a; dims = dims), A)
    if dims === (:)
        return Statistics.median!(vec(copy_if_wrapper(A)) |> copy)
    end
    dims isa Integer || (length(dims) == 1 ? (dims = first(dims)) :
                         throw(ArgumentError("median on GPU arrays reduces one dimension at a time, got dims = $dims")))
    1 <= dims || throw(ArgumentError("dimension must be ≥ 1, got $dims"))
    dims > ndims(A) && return float.(copy_if_wrapper(A))
    S = sort(copy_if_wrapper(A); dims = dims)
    n = size(A, dims)
    lo = selectdim_keep(S, dims, (n + 1) ÷ 2)
    hi = selectdim_keep(S, dims, n ÷ 2 + 1)
    # Statistics.middle: Float64 for integers, x/2 + y/2 for two
    M = isodd(n) ? float.(lo) : lo ./ 2 .+ hi ./ 2
    # a NaN anywhere along the dimension makes the median NaN (sorted last)
    if eltype(A) <: AbstractFloat
        last_ = selectdim_keep(S, dims, n)
        M .= ifelse.(isnan.(last_), last_, M)
    end
    return M
end

# S's slice i along d, keeping the dimension (size 1).
selectdim_keep(S, d, i) = view(S, ntuple(k -> k == d ? (i:i) : Colon(), ndims(S))...)

function Statistics.median!(v::CuVector)
    isempty(v) && throw(ArgumentError("median of an empty array is undefined, $(repr(Array(v)))"))
    if eltype(v) <: AbstractFloat && any(isnan, v)
        return convert(eltype(v), NaN)
    end
    sort!(v)
    n = length(v)
    mid = Array(view(v, (n + 1) ÷ 2:n ÷ 2 + 1))
    return isodd(n) ? Statistics.middle(mid[1]) : Statistics.middle(mid[1], mid[2])
end

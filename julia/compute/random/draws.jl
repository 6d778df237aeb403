# The rest of the random API of CUDA.jl (2.x's CURAND names, 3.x's `AbstractRNG`): every
# `rand`/`randn` form through `CuMem.default_rng()`, exponential, log-normal and Poisson
# fills, and device permutations (`randperm`, `shuffle`, `shuffle!`). All of them draw from
# the Philox generator of random.jl, so `CuMem.seed!` (or, before it, `Random.seed!`)
# fixes them.

const RNG_FLOATS = Union{Float16,Float32,Float64}

# Base's `rand(rng, T, dims)` and `randn(rng, T, dims)` with the device generator give
# CuArrays, as CUDA.jl 3's `rand(CUDA.default_rng(), T, dims)`; `rand(rng, dims)` is
# Base's `rand(rng, Float64, dims)`. A scalar draw (`rand(rng)`, `rand(rng, T)`) is one
# element drawn on the device and read back.
Random.rand(::RNG, ::Type{T}, dims::Dims) where {T} = rand(T, dims)
Random.rand(::RNG, ::Type{T}, d::Integer, dims::Integer...) where {T} = rand(T, convert(Dims, (d, dims...)))
Random.randn(::RNG, ::Type{T}, dims::Dims) where {T} = randn(T, dims)
Random.randn(::RNG, ::Type{T}, d::Integer, dims::Integer...) where {T} = randn(T, convert(Dims, (d, dims...)))
Random.rand(::RNG, ::Type{T}) where {T<:Number} = Array(rand(T, 1))[1]
Random.randn(::RNG, T::Union{Type{Float16},Type{Float32},Type{Float64}}) = Array(randn(T, 1))[1]
Random.rand(::RNG, r::AbstractRange, dims::Dims) = rand(r, dims)
Random.rand(::RNG, r::AbstractRange, d::Integer, dims::Integer...) = rand(r, convert(Dims, (d, dims...)))

"""
    CuMem.randexp([T=Float32], dims...) -> CuArray{T}
    Random.randexp!([rng::CuMem.RNG], A::AnyCuArray{<:AbstractFloat}) -> A

Exponentially distributed random numbers (rate 1, as `Random.randexp`): `-log(1 - u)` of
a uniform `u` in [0, 1) drawn on the device. Float16, Float32 and Float64.
"""
function randexp!(a::AnyCuArray{T}) where {T}
    T <: RNG_FLOATS || error("randexp! fills Float16, Float32 or Float64 arrays; not $T")
    random_fill!(a, false)
    a .= .-log1p.(.-a)
    return a
end
randexp(::Type{T}, dims::Dims) where {T} = randexp!(CuArray{T}(undef, dims))
randexp(::Type{T}, dims::Integer...) where {T} = randexp(T, convert(Dims, dims))
randexp(dims::Integer...) = randexp(Float32, convert(Dims, dims))
randexp(dims::Dims) = randexp(Float32, dims)
Random.randexp!(a::AnyCuArray) = randexp!(a)
Random.randexp!(::RNG, a::AnyCuArray) = randexp!(a)
Random.randexp(::RNG, ::Type{T}, dims::Dims) where {T} = randexp(T, dims)
Random.randexp(::RNG, ::Type{T}, d::Integer, dims::Integer...) where {T} = randexp(T, convert(Dims, (d, dims...)))

"""
    rand_logn!(A::AnyCuArray{<:AbstractFloat}; mean = 0, stddev = 1) -> A
    CuMem.rand_logn([T=Float32], dims...; mean = 0, stddev = 1) -> CuArray{T}

Log-normal random numbers: `exp(mean + stddev * z)` of standard normal `z` drawn on the
device (CUDA.jl's `rand_logn!`, cuRAND's `curandGenerateLogNormal`). Float16, Float32 and
Float64; an integer array is an `ErrorException`, as in CUDA.jl.
"""
function rand_logn!(a::AnyCuArray{T}; mean = 0, stddev = 1) where {T}
    T <: RNG_FLOATS || error("rand_logn! fills Float16, Float32 or Float64 arrays; not $T")
    random_fill!(a, true)
    m, s = convert(T, mean), convert(T, stddev)
    a .= exp.(m .+ s .* a)
    return a
end
rand_logn!(::RNG, a::AnyCuArray; kw...) = rand_logn!(a; kw...)
rand_logn(::Type{T}, dims::Dims; kw...) where {T} = rand_logn!(CuArray{T}(undef, dims); kw...)
rand_logn(::Type{T}, dims::Integer...; kw...) where {T} = rand_logn(T, convert(Dims, dims); kw...)
rand_logn(dims::Integer...; kw...) = rand_logn(Float32, convert(Dims, dims); kw...)
rand_logn(dims::Dims; kw...) = rand_logn(Float32, dims; kw...)

# One Poisson draw from a uniform `u` (and a normal `z` for large λ): inversion of the
# cumulative distribution for λ ≤ 64 (at most a few hundred terms), the normal
# approximation round(λ + √λ z) above (relative error of the moments below 1 %).
function poisson_draw(u::Float64, z::Float64, λ::Float64)
    λ > 64.0 && return max(0.0, floor(λ + sqrt(λ) * z + 0.5))
    p = exp(-λ)
    F = p
    k = 0.0
    while u > F && k < 1000.0
        k += 1.0
        p *= λ / k
        F += p
    end
    return k
end

"""
    rand_poisson!(A::AnyCuArray{<:Integer}; lambda = 1) -> A
    CuMem.rand_poisson([T=UInt32], dims...; lambda = 1) -> CuArray{T}

Poisson-distributed counts with mean `lambda` (CUDA.jl's `rand_poisson!`, cuRAND's
`curandGeneratePoisson`): exact inversion for `lambda ≤ 64`, the rounded normal
approximation above. Integer arrays only (a float array is an `ErrorException`, as in
CUDA.jl); `lambda` must be positive and finite (`ArgumentError`).
"""
function rand_poisson!(a::AnyCuArray{T}; lambda = 1) where {T}
    T <: Integer && T !== Bool || error("rand_poisson! fills integer arrays; not $T")
    λ = Float64(lambda)
    (isfinite(λ) && λ > 0) || throw(ArgumentError("rand_poisson!: lambda must be positive and finite, got $lambda"))
    u = rand(Float64, size(a))
    z = λ > 64 ? randn(Float64, size(a)) : fill!(CuArray{Float64}(undef, size(a)), 0.0)
    a .= unsafe_trunc.(T, poisson_draw.(u, z, λ))
    unsafe_free!(u); unsafe_free!(z)
    return a
end
rand_poisson!(::RNG, a::AnyCuArray; kw...) = rand_poisson!(a; kw...)
rand_poisson(::Type{T}, dims::Dims; kw...) where {T} = rand_poisson!(CuArray{T}(undef, dims); kw...)
rand_poisson(::Type{T}, dims::Integer...; kw...) where {T} = rand_poisson(T, convert(Dims, dims); kw...)
rand_poisson(dims::Integer...; kw...) = rand_poisson(UInt32, convert(Dims, dims); kw...)
rand_poisson(dims::Dims; kw...) = rand_poisson(UInt32, dims; kw...)

"""
    randperm(rng::CuMem.RNG, n::Integer) -> CuVector{Int}

A uniformly random permutation of `1:n` on the device: the order that sorts `n` random
64-bit keys (ties, of probability below `n^2 / 2^65`, keep index order).
"""
function Random.randperm(::RNG, n::Integer)
    n >= 0 || throw(ArgumentError("randperm: n must be non-negative, got $n"))
    keys = rand(UInt64, Int(n))
    p = sortperm(keys)
    unsafe_free!(keys)
    return p
end

"""
    shuffle!([rng::CuMem.RNG], v::CuVector) -> v
    shuffle([rng::CuMem.RNG], A::CuArray) -> CuArray

`v`'s elements in a random order on the device (a gather through [`randperm`](@ref));
`shuffle` permutes a copy, over all elements of an array of any shape, as Base.
"""
function Random.shuffle!(r::RNG, v::CuArray)
    p = Random.randperm(r, length(v))
    tmp = vec(v)[p]
    copyto!(v, tmp)
    unsafe_free!(tmp); unsafe_free!(p)
    return v
end
Random.shuffle!(v::CuArray) = Random.shuffle!(default_rng(), v)
Random.shuffle(r::RNG, a::CuArray) = Random.shuffle!(r, copy(a))
Random.shuffle(a::CuArray) = Random.shuffle(default_rng(), a)

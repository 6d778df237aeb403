# The random-number API around random.jl's Philox generator, as CUDA.jl names it:
# `CuMem.default_rng()` (an `AbstractRNG` that `Random.seed!` reaches), complex element
# types, `rand(range, dims)`, and `rand!`/`randn!` on views and wrappers. Every call still
# draws from its own counter range under the seed, so a seed fixes the whole sequence.

"""
    CuMem.RNG <: Random.AbstractRNG

CuMem's device generator (Philox4x32-10, see [`CuMem.seed!`](@ref)) as an `AbstractRNG`,
so that `Random.seed!(rng, seed)`, `rand!(rng, A)` and `randn!(rng, A)` work as with CUDA.jl's
`CUDA.default_rng()`. There is one generator per process: every `RNG` shares its state.
"""
struct RNG <: Random.AbstractRNG end

"""
    CuMem.default_rng() -> CuMem.RNG

The generator behind `CuMem.rand`, `randn`, `rand!` and `randn!` (CUDA.jl's `default_rng`).
"""
default_rng() = RNG()

Random.seed!(::RNG, seed::Integer) = (seed!(seed); RNG())
Random.seed!(::RNG) = (seed!(Random.rand(Random.RandomDevice(), UInt64)); RNG())
Base.copy(r::RNG) = r

# Complex arrays: the real and imaginary parts are one real array of twice the length.
as_real(a::CuArray{Complex{R}}) where {R} = unsafe_wrap(CuArray, CuPtr{R}(devaddr(a)), 2 * length(a); own = false)

# The contiguous array a random fill writes (a itself, or a temporary copied into a).
function random_fill!(a::AnyCuArray{T}, normal::Bool) where {T}
    if !(a isa CuArray)
        tmp = CuArray{T}(undef, size(a))
        random_fill!(tmp, normal)
        copy_into!(a, tmp)
        unsafe_free!(tmp)
        return a
    end
    if T <: Complex
        R = real(T)
        GC.@preserve a begin
            r = as_real(a)
            fill_random!(r, normal)
            # Base's randn(Complex) has variance 1: each part has variance 1/2
            normal && (r .*= convert(R, 1 / sqrt(2)))
        end
        return a
    end
    return fill_random!(a, normal)
end

"""
    rand!([rng::CuMem.RNG], A::AnyCuArray) / randn!([rng], A)

`A` (a CuArray, a view or another strided wrapper of one) filled with uniform (normal)
random numbers on the device; every kernel element type (`rand!`: Bool, integers, floats,
their `Complex`; `randn!`: Float16/32/64 and their `Complex`, variance 1 as Base).
"""
Random.rand!(a::CuStridedWrapper) = random_fill!(a, false)
Random.randn!(a::CuStridedWrapper) = random_fill!(a, true)
Random.rand!(a::CuArray{<:Complex}) = random_fill!(a, false)
Random.randn!(a::CuArray{<:Complex}) = random_fill!(a, true)
Random.rand!(::RNG, a::AnyCuArray) = random_fill!(a, false)
Random.randn!(::RNG, a::AnyCuArray) = random_fill!(a, true)

rand(::RNG, ::Type{T}, dims::Integer...) where {T} = rand(T, dims...)
randn(::RNG, ::Type{T}, dims::Integer...) where {T} = randn(T, dims...)
rand(::Type{T}, dims::Dims) where {T<:Complex} = random_fill!(CuArray{T}(undef, dims), false)
randn(::Type{T}, dims::Dims) where {T<:Complex} = random_fill!(CuArray{T}(undef, dims), true)

"""
    CuMem.rand(r::AbstractRange, dims...) -> CuArray

Elements drawn uniformly from the range `r` (integers, or any range with a step:
`first(r) + k * step(r)`), as `rand(r, dims)`: a uniform 64-bit draw per element reduced
modulo `length(r)` (a bias below `length(r) / 2^64`).
"""
function rand(r::AbstractRange, dims::Dims)
    isempty(r) && throw(ArgumentError("collection must be non-empty"))
    u = rand(UInt64, dims)
    len = UInt64(length(r))
    lo, st = first(r), step(r)
    if eltype(r) <: Integer
        T = eltype(r)
        out = CuArray{T}(undef, dims)
        out .= (lo .+ (u .% len) .* st) .% T
        unsafe_free!(u)
        return out
    end
    out = lo .+ Float64.(u .% len) .* st
    unsafe_free!(u)
    return eltype(r) === eltype(out) ? out : convert.(eltype(r), out)
end
rand(r::AbstractRange, dims::Integer...) = rand(r, convert(Dims, dims))

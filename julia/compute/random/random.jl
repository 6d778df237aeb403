# Random numbers on the GPU: the counter-based Philox4x32-10 generator (Salmon, Moraes,
# Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the generator of
# cuRAND's Philox and JAX. Each call draws from its own counter range under the seed's
# key, so a seed fixes every later call. The host device runs the same Philox in Julia:
# `rand` gives the same bits on both devices; `randn` the same numbers up to the last
# bits of `log`/`sinpi` (the GPU's math library and Julia's differ by an ulp or so).

const PHILOX_M0 = 0xD2511F53
const PHILOX_M1 = 0xCD9E8D57
const PHILOX_W0 = 0x9E3779B9
const PHILOX_W1 = 0xBB67AE85

mutable struct PhiloxState
    key::UInt64          # the seed
    counter::UInt64      # calls drawn so far (counter words 2 and 3)
    seeded::Bool
end
const RNG_STATE = PhiloxState(0, 0, false)
const RNG_LOCK = ReentrantLock()

"""
    CuMem.seed!(seed::Integer)

Seeds CuMem's GPU random number generator (Philox4x32-10): afterwards the sequence of
`CuMem.rand`/`randn`/`rand!`/`randn!` calls gives the same numbers on every run, and
`rand` the same bits on a GPU and on the host device. Without a seed the generator is
drawn from Julia's default generator (`Random.default_rng()`), one key per call, so that
`Random.seed!(n)` fixes CuMem's numbers too (as in CUDA.jl 3). `CuMem.seed!()` without an
argument reseeds from the operating system's entropy. Like `CUDA.seed!`.
"""
seed!() = seed!(Random.rand(Random.RandomDevice(), UInt64))
function seed!(seed::Integer)
    lock(RNG_LOCK) do
        RNG_STATE.key = seed % UInt64
        RNG_STATE.counter = 0
        RNG_STATE.seeded = true
    end
    return nothing
end

# The (key, counter) for one call.
function next_stream()
    lock(RNG_LOCK) do
        # unseeded: a key from Julia's generator, so that Random.seed!(n) reproduces
        RNG_STATE.seeded || return Random.rand(Random.default_rng(), UInt64), UInt64(0)
        c = RNG_STATE.counter
        RNG_STATE.counter += 1
        return RNG_STATE.key, c
    end
end

## Philox in Julia (the host device, and the reference the kernel must match)

@inline function mulhilo(a::UInt32, b::UInt32)
    p = UInt64(a) * UInt64(b)
    return (p >> 32) % UInt32, p % UInt32
end

@inline function philox4x32_10(c0::UInt32, c1::UInt32, c2::UInt32, c3::UInt32, k0::UInt32, k1::UInt32)
    for i in 1:10
        if i > 1
            k0 += PHILOX_W0
            k1 += PHILOX_W1
        end
        hi0, lo0 = mulhilo(PHILOX_M0, c0)
        hi1, lo1 = mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ⊻ c1 ⊻ k0, lo1, hi0 ⊻ c3 ⊻ k1, lo0
    end
    return (c0, c1, c2, c3)
end

# Elements per Philox call (4 words): 4 for types of ≤ 32 bits, 2 for 64-bit types.
per_group(::Type{T}) where {T} = sizeof(T) == 8 ? 2 : 4

# Element i (0-based within the group) of the uniform draw from the group's words.
@inline uniform_from(::Type{Float32}, w, i) = Float32(w[i+1] >> 8) * Float32(2.0^-24)
@inline uniform_from(::Type{Float16}, w, i) = Float16(Float32(w[i+1] >> 21) * Float32(2.0^-11))
@inline uniform_from(::Type{Float64}, w, i) = Float64((UInt64(w[2i+1]) | (UInt64(w[2i+2]) << 32)) >> 11) * 2.0^-53
@inline uniform_from(::Type{Bool}, w, i) = (w[i+1] & 0x1) == 0x1
@inline uniform_from(::Type{T}, w, i) where {T<:Union{Int64,UInt64}} = (UInt64(w[2i+1]) | (UInt64(w[2i+2]) << 32)) % T
@inline uniform_from(::Type{T}, w, i) where {T<:Integer} = w[i+1] % T

# Box-Muller: the pair of words (2p, 2p+1) (Float32, Float16) or of 64-bit words (Float64)
# gives two normals; element i takes the cosine (even) or sine (odd) one.
@inline function normal_from(::Type{Float64}, w, i)
    u1 = Float64(((UInt64(w[1]) | (UInt64(w[2]) << 32)) >> 11) + 1) * 2.0^-53
    u2 = Float64((UInt64(w[3]) | (UInt64(w[4]) << 32)) >> 11) * 2.0^-53
    r = sqrt(-2.0 * log(u1))
    return i == 0 ? r * cospi(2.0 * u2) : r * sinpi(2.0 * u2)
end
@inline function normal_from(::Type{T}, w, i) where {T<:Union{Float32,Float16}}
    p = i ÷ 2
    u1 = Float32((w[2p+1] >> 8) + 1) * Float32(2.0^-24)
    u2 = Float32(w[2p+2] >> 8) * Float32(2.0^-24)
    r = sqrt(-2f0 * log(u1))
    return T(i % 2 == 0 ? r * cospi(2f0 * u2) : r * sinpi(2f0 * u2))
end

function host_random!(dst::Array{T}, key::UInt64, ctr::UInt64, normal::Bool) where {T}
    k0, k1 = key % UInt32, (key >> 32) % UInt32
    c2, c3 = ctr % UInt32, (ctr >> 32) % UInt32
    G = per_group(T)
    n = length(dst)
    @inbounds for g in 0:cld(n, G)-1
        w = philox4x32_10(g % UInt32, (g >> 32) % UInt32, c2, c3, k0, k1)
        for i in 0:G-1
            e = g * G + i + 1
            e <= n || break
            dst[e] = normal ? normal_from(T, w, i) : uniform_from(T, w, i)
        end
    end
    return dst
end

## the kernel

# The kernel's source: random.cuh instantiated for T's C type and distribution.
function random_source(::Type{T}, normal::Bool) where {T}
    return string(RANDOM_CUH, "CUMEM_RANDOM_KERNEL(", c_type(T), ", ", random_distribution(T, normal), ")\n")
end
const RANDOM_CUH = cuda_source("random.cuh")

# The distribution struct of random.cuh that gives T's elements as uniform_from/normal_from.
function random_distribution(::Type{T}, normal::Bool) where {T}
    if normal
        T === Float64 && return "cumem_normal_f64"
        T === Float32 && return "cumem_normal_f32"
        T === Float16 && return "cumem_normal_f16"
    else
        T === Float64 && return "cumem_uniform_f64"
        T === Float32 && return "cumem_uniform_f32"
        T === Float16 && return "cumem_uniform_f16"
        T === Bool && return "cumem_uniform_bool"
        T <: Base.BitInteger && return sizeof(T) == 8 ? "cumem_uniform_bits64" : "cumem_uniform_bits32"
    end
    throw(ArgumentError("no random kernel for $T$(normal ? " (normal)" : "")"))
end

function fill_random!(a::CuArray{T}, normal::Bool) where {T}
    check_devices("rand!", a)
    check_alive(a)
    if normal
        # an ErrorException, as CUDA.jl's randn! of an integer array
        T in (Float16, Float32, Float64) || error("randn! fills Float16, Float32 or Float64 arrays (and their Complex); not $T: use rand! for $T")
    else
        T in KERNEL_ELTYPES || throw(ArgumentError("CuMem.rand fills arrays of $(join(KERNEL_ELTYPES, ", ")); not $T"))
    end
    entry = kernel_entry((:random, T, normal)) do
        (random_source(T, normal), "cumem_random", nothing)
    end
    key, ctr = next_stream()
    n = length(a)
    n == 0 && return a
    if on_host()
        GC.@preserve a host_random!(host_view(a), key, ctr, normal)
        return a
    end
    groups = cld(n, per_group(T))
    blocks, threads = launch_shape(groups)
    launch(entry_kernel(entry), devaddr(a), UInt64(n), key % UInt32, (key >> 32) % UInt32, ctr % UInt32, (ctr >> 32) % UInt32;
           blocks = blocks, threads = threads)
    return a
end

"""
    CuMem.rand([T=Float32], dims...) -> CuArray{T}
    Random.rand!(A::CuArray) -> A

Uniform random numbers made on the device by Philox4x32-10 (see [`CuMem.seed!`](@ref)):
floats in [0, 1) (24 random bits for Float32, 53 for Float64, 11 for Float16), integers
over their whole range, `Bool`s with probability 1/2. The default element type is
`Float32`, as in CUDA.jl. Not exported (it would clash with `Base.rand`).
"""
rand(::Type{T}, dims::Dims) where {T} = fill_random!(CuArray{T}(undef, dims), false)
rand(::Type{T}, dims::Integer...) where {T} = rand(T, convert(Dims, dims))
rand(dims::Dims) = rand(Float32, dims)
rand(dims::Integer...) = rand(Float32, convert(Dims, dims))

"""
    CuMem.randn([T=Float32], dims...) -> CuArray{T}
    Random.randn!(A::CuArray) -> A

Standard normal random numbers (Box-Muller on Philox4x32-10 uniforms; see
[`CuMem.seed!`](@ref)) for Float16, Float32 (default, as in CUDA.jl) and Float64.
"""
randn(::Type{T}, dims::Dims) where {T} = fill_random!(CuArray{T}(undef, dims), true)
randn(::Type{T}, dims::Integer...) where {T} = randn(T, convert(Dims, dims))
randn(dims::Dims) = randn(Float32, dims)
randn(dims::Integer...) = randn(Float32, convert(Dims, dims))

Random.rand!(a::CuArray) = fill_random!(a, false)
Random.randn!(a::CuArray) = fill_random!(a, true)

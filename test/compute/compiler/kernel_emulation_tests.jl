# The GPU path of broadcasting and random numbers, run on the host device: each generated
# CUDA C kernel is compiled by the host's C++ compiler with the few CUDA builtins it uses
# emulated, and launched as one thread (the kernels are grid-stride loops), with the
# arguments the GPU path marshals. This checks the generated C's semantics (types,
# wrapping, NaN rules, shifts, strides of views) and the argument lists against Base,
# without a GPU. Reductions (warp shuffles) are not emulated. Run by runtests.jl when g++
# (with _Float16) is found; this process pretends not to be on the host device.
using CuMem, Libdl, Test, Random, LinearAlgebra
CuMem.allowscalar(false)
# The typed fast path (julia/compute/broadcast/fastpath.jl) keeps a CuMem.Kernel per broadcast type and
# launches it directly: it cannot hold this file's stand-in kernels, so the emulation runs the
# general path, which every broadcast takes on its first call anyway.
CuMem.FAST_BROADCAST[] = false
isdefined(@__MODULE__, :gxx_library) || include(joinpath(@__DIR__, "..", "gxx.jl"))
const HDR = raw"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx = {0,0,0}, threadIdx = {0,0,0}, blockDim = {1,1,1}, gridDim = {1,1,1};
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { unsigned o = *p; if (o == c) *p = v; return o; }
static inline void __threadfence_system() {}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline float sinpif(float x) { return sinf((float)M_PI * x); }
static inline float cospif(float x) { return cosf((float)M_PI * x); }
static inline float sinpi(float x) { return sinf((float)M_PI * x); }
static inline float cospi(float x) { return cosf((float)M_PI * x); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
"""
function emu_compile(src)
    src = replace(src, r"static __device__ __forceinline__ float jl_h2f.*\n" => "static inline float jl_h2f(half_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_f2h.*\n" => "static inline half_t jl_f2h(float x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_d2h.*\n" => "static inline half_t jl_d2h(double x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    # the system's int64_t (long) replaces the prelude's (long long): the same 64 bits
    src = replace(src, "typedef long long int64_t; typedef unsigned long long uint64_t;" => "")
    return Libdl.dlopen(gxx_library(HDR, src, ["-O1", "-std=c++17"]))
end
struct EmuKernel
    f::Ptr{Cvoid}
end
@eval CuMem begin
    on_host() = false
    load_kernel(source::String, name::String) = Main.EmuKernel(Libdl.dlsym(Main.emu_compile(source), name))
end
# one caller per list of argument types (an `eval` per launch compiled a new ccall each time)
const CALLERS = Dict{Any,Function}()
function CuMem.launch(k::EmuKernel, args...; blocks, threads, shmem = 0)
    types = map(typeof, args)
    call = get!(CALLERS, types) do
        vs = [:(vs[$i]) for i in 1:length(types)]
        Core.eval(Main, :((f, vs) -> ccall(f, Cvoid, ($(types...),), $(vs...))))
    end
    Base.invokelatest(call, k.f, args)
    return nothing
end

function same(r, e)
    r = r isa CuArray ? Array(r) : r
    eltype(r) === eltype(e) || (println("eltype ", eltype(r), " vs ", eltype(e)); return false)
    size(r) == size(e) || return false
    eltype(e) <: AbstractFloat || return isequal(r, e) || (println(r, "\n", e); false)
    # Float16 is computed in Float32 and rounded after every operation, as Julia does, but
    # the last bits can differ (math functions, fma): results that cancel (terms of ~10
    # summing to ~0.1) then differ by a few Float16 ulps of the terms, hence the atol.
    h = eltype(e) === Float16
    ok = all(isapprox.(r, e; rtol = h ? 1e-2 : sqrt(eps(eltype(e))), atol = h ? 3e-2 : 1e-5, nans = true))
    ok || println(r, "\n", e)
    return ok
end
testvals(::Type{Bool}, dims...) = Base.rand(Bool, dims...)
testvals(::Type{T}, dims...) where {T<:Integer} = T.(Base.rand(1:9, dims...)) .* T.(Base.rand((1, 1, -1), dims...) .% T)
testvals(::Type{T}, dims...) where {T<:Unsigned} = T.(Base.rand(1:9, dims...))
testvals(::Type{T}, dims...) where {T<:AbstractFloat} = T.(Base.rand(Float32, dims...) .* 4 .- 2)

const ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, Float32, Float64)
@testset "emulated kernels" begin
    for T in ELTYPES
        x, y = testvals(T, 13), testvals(T, 13)
        a, b = CuArray(x), CuArray(y)
        # (f1-f4, g1-g3, a ./ b and the literal promotions are broadcast_cases.jl's, included below)
        if T <: Integer && T !== Bool
            @test same(a .<< CuArray([-70, -3, 0, 1, 5, 7, 8, 15, 16, 31, 63, 64, 200]), x .<< [-70, -3, 0, 1, 5, 7, 8, 15, 16, 31, 63, 64, 200])
            @test same(a .>>> 2, x .>>> 2)
            @test same(a .^ CuArray(collect(0:12)), x .^ collect(0:12))
        end
        if T <: AbstractFloat
            @test same(abs.(a) .^ b, abs.(x) .^ y)
            @test same(a .^ 3, x .^ 3)
            @test same(a .^ -1, x .^ -1)
            @test same(a .^ 5, x .^ 5)
            @test same(mod.(a, b), mod.(x, y))
            @test same(rem.(a, b), rem.(x, y))
            @test same(copysign.(a, b), copysign.(x, y))
            @test same(isless.(a, b), isless.(x, y))
        end
    end
    i8 = Int8[100, -100, 127, -128]
    @test same(CuArray(i8) .+ CuArray(i8), i8 .+ i8)
    @test same(CuArray(i8) .* CuArray(i8), i8 .* i8)
    @test same(-CuArray(i8), -i8)
    @test same(abs.(CuArray(i8)), abs.(i8))
    @test same(CuArray([true, false]) .+ CuArray([true, true]), [true, false] .+ [true, true])
    f = Float32[NaN, 1, -0.0, 0.0, NaN]
    g = Float32[1, NaN, 0.0, -0.0, NaN]
    @test same(max.(CuArray(f), CuArray(g)), max.(f, g))
    @test same(min.(CuArray(f), CuArray(g)), min.(f, g))
    n, d = [-7, 7, -7, 7], [2, 2, -2, -2]
    for op in (div, rem, mod, fld, cld, %)
        @test same(op.(CuArray(n), CuArray(d)), op.(n, d))
    end
    @test same(CuArray([-1, 2, 3]) .< CuArray(UInt[1, 1, 5]), [-1, 2, 3] .< UInt[1, 1, 5])
    @test same(CuArray([-1, 2, 3]) .== CuArray(UInt[typemax(UInt), 2, 5]), [-1, 2, 3] .== UInt[typemax(UInt), 2, 5])
    @test same(CuArray(Float16[1.5, 2.25]) .* Float16(3.1), Float16[1.5, 2.25] .* Float16(3.1))
    @test same(Float16.(CuArray([1.0001, 65519.0, 1e-8])), Float16.([1.0001, 65519.0, 1e-8]))
    m = [true, false, true]
    @test same(ifelse.(CuArray(m), CuArray([1, 2, 3]), 0), ifelse.(m, [1, 2, 3], 0))
    relu(v) = max(v, zero(v))
    x = testvals(Float32, 50); a = CuArray(x)
    scale(s) = v -> s * v + oftype(v, 1)
    @test same(map(scale(2f0), a), map(scale(2f0), x))
    @test same(map(scale(3f0), a), map(scale(3f0), x))
    @test same((exp ∘ sin).(a), (exp ∘ sin).(x))
    @test same(Base.Fix2(-, 1f0).(a), Base.Fix2(-, 1f0).(x))
    # shapes
    for (sa, sb) in (((3, 4), (3, 4)), ((3, 4), (1, 4)), ((3, 4), (3,)), ((3, 1, 2), (1, 5, 1)), ((2, 3), ()), ((), ()), ((5,), (1,)))
        x = sa == () ? fill(Base.rand(Float32)) : Base.rand(Float32, sa...)
        y = sb == () ? fill(Base.rand(Float32)) : Base.rand(Float32, sb...)
        @test same(CuArray(x) .- CuArray(y), x .- y)
        @test same(CuArray(x) .* 3 .+ Ref(2f0) .* CuArray(y), x .* 3 .+ Ref(2f0) .* y)
    end
    A = Base.rand(Float32, 6, 5); B = Base.rand(Float32, 5, 6); v = Base.rand(Float32, 5)
    dA, dB, dv = CuArray(A), CuArray(B), CuArray(v)
    @test same(view(dA, 2:4, :) .+ 1, view(A, 2:4, :) .+ 1)
    @test same(view(dA, :, 3) .* view(dA, :, 1), view(A, :, 3) .* view(A, :, 1))
    @test same(view(dA, 6:-2:1, 2:2:5) .- 1, view(A, 6:-2:1, 2:2:5) .- 1)
    @test same(dA .+ dB', A .+ B')
    @test same(dv' .* dA, v' .* A)
    @test same(PermutedDimsArray(dA, (2, 1)) .- dB, PermutedDimsArray(A, (2, 1)) .- B)
    @test same(view(dB', 2:3, :) .+ 0, view(B', 2:3, :) .+ 0)
    dC, C = copy(dA), copy(A)
    view(dC, :, 2) .= 7f0; view(C, :, 2) .= 7f0
    @test same(dC, C)
    view(dC, 1:2:5, :) .= view(dC, 2:2:6, :) .* 2; view(C, 1:2:5, :) .= view(C, 2:2:6, :) .* 2
    @test same(dC, C)
    dD, D = CuArray(copy(B')), copy(B')
    dD' .= dB .+ 1; D' .= B .+ 1
    @test same(dD, D)
    S = Base.rand(Float32, 4, 4); dS = CuArray(S)
    dS .= dS .+ dS'; S .= S .+ S'
    @test same(dS, S)
    for (T, val) in ((Float32, 1.5f0), (Int16, 0x0102), (Float16, Float16(2.5)), (Bool, true))
        @test same(fill!(CuArray{T}(undef, 9), val), fill(T(val), 9))
    end
    # a non-constant global: refused, suggesting a constant Ref (read at each launch)
    @eval Main glob = 3f0
    @eval Main gfun(v) = v * glob
    err = try gfun.(a); nothing; catch e; e; end
    @test err isa CuMem.KernelCompileError && occursin("const glob = Ref(x)", err.msg)
    # the unrolled grid-stride loop (CuMem.BCAST_UNROLL, off by default): the same results,
    # and a throw in any of its four steps still surfaces as Base's exception
    CuMem.BCAST_UNROLL[] = true
    for T in (Int32, Int64, Float16, Float32, Float64)
        x, y = testvals(T, 13), testvals(T, 13)
        a, b = CuArray(x), CuArray(y)
        @test same(a .* 2 .+ b ./ 3, x .* 2 .+ y ./ 3)
        @test same(ifelse.(a .> b, a, b .- a), ifelse.(x .> y, x, y .- x))
    end
    @test any(e -> occursin("i0 + 3 * stride", e.source), values(CuMem.KERNEL_TABLE))
    @test_throws DivideError Array(div.(CuArray(collect(1:9)), CuArray([1, 1, 1, 1, 1, 0, 1, 1, 1])))
    CuMem.BCAST_UNROLL[] = false
    @test !occursin("i0 + 3 * stride", CuMem.bcast_source(CuMem.device_function(+, (Float32, Float32)), nothing, Float32,
                                                          true, [(Float32, true), (Float32, true)], 1, false))
    # the vector loop of contiguous kernels (print_vectorized): chunks of 16 bytes of the
    # widest type where every address is a multiple of its chunk, the plain loop for the
    # n mod V elements left and for arrays at other addresses (views from the second element)
    for T in (Bool, UInt8, Int16, Float16, Int32, Float32, Int64, Float64)
        for n in (1, 7, 16, 35)
            x, y = testvals(T, n + 1), testvals(T, n + 1)
            a, b = CuArray(x), CuArray(y)
            @test same(a .+ b, x .+ y)
            @test same(view(a, 2:n+1) .+ view(b, 1:n), view(x, 2:n+1) .+ view(y, 1:n))
            @test same(a .* 2 .+ Float64.(b), x .* 2 .+ Float64.(y))
            @test same(ifelse.(a .> b, a, b), ifelse.(x .> y, x, y))
            @test same(a .== b, x .== y)
            @test same(a .+ (1:n+1), x .+ (1:n+1))
            c, z = CuArray(x), copy(x)
            view(c, 2:n+1) .= view(b, 1:n) .* one(T); view(z, 2:n+1) .= view(y, 1:n) .* one(T)
            @test same(c, z)
            @test same(fill!(CuArray{T}(undef, n), one(T)), fill(one(T), n))
        end
    end
    src = CuMem.bcast_source(CuMem.device_function(+, (Float32, Float32)), nothing, Float32, true,
                             [(Float32, true), (Float32, true)], 1, false)
    @test occursin("jl_vec<float, 4>", src) && occursin("i0 = nv * 4", src)
    @test CuMem.bcast_vec_width(Float64, Float64, [(Float32, true, false), (Int16, true, false)]) == 2
    @test CuMem.bcast_vec_width(Float32, Float32, [(NTuple{3,Float32}, true, false)]) == 1
    @test CuMem.bcast_vec_width(Float32, Union{}, [(Float32, true, false)]) == 1
    # a throw in a chunk and in the tail: Base's exception, nothing of the chunk stored
    for k in (3, 37)
        d = ones(Int, 38); d[k] = 0
        @test_throws DivideError Array(div.(CuArray(collect(1:38)), CuArray(d)))
    end
    # random: same bits as the host generator
    for T in (Float16, Float32, Float64, Int8, Int64, UInt32, Bool)
        CuMem.seed!(9); r = Array(CuMem.rand(T, 1001))
        h = CuMem.host_random!(Array{T}(undef, 1001), UInt64(9), UInt64(0), false)
        @test r == h
    end
    for T in (Float16, Float32, Float64)
        CuMem.seed!(9); r = Array(CuMem.randn(T, 1001))
        h = CuMem.host_random!(Array{T}(undef, 1001), UInt64(9), UInt64(0), true)
        @test all(isapprox.(r, h; rtol = 1e-2, atol = 1e-3))
    end
end

# Base's Char functions, which call utf8proc, through the tables built at precompile time
# (julia/compute/compiler/unicode.jl): every code point 0 .. 0x10FFFF (surrogates
# included) and Chars past Unicode's range, against Base.
@testset "Char functions (utf8proc tables) over every code point" begin
    chars = vcat(Char.(UInt32(0):UInt32(0x10ffff)), Char(0x110000), Char(0x1fffff))
    dc = CuArray(chars)
    for f in (uppercase, lowercase, titlecase, isletter, isuppercase, islowercase, Base.Unicode.iscased, isnumeric,
              ispunct, isprint, isspace, textwidth, Base.Unicode.category_code)
        @test Array(f.(dc)) == f.(chars)
    end
    # a malformed Char: Base's InvalidCharError, raised by the kernel
    @test_throws Base.InvalidCharError Array(uppercase.(CuArray([reinterpret(Char, 0xc0800000)])))
end

# The typed-IR compiler (issue 23): every form against Base, through the generated C.
include(joinpath(@__DIR__, "compiler_cases.jl"))

# The broadcast suite's cases (broadcast_tests.jl) through the generated C as well.
const EMULATED = true
const NVRTC = false
include(joinpath(@__DIR__, "..", "broadcast", "broadcast_cases.jl"))

# The CUDA C kernels of the linear algebra (julia/cuda/linalg.cuh, launched by
# julia/compute/linalg/kernels.jl) run on the host device: each kernel is compiled by the host's C++
# compiler with the few CUDA builtins it uses emulated and launched as one thread (the
# kernels are grid-stride loops), with the arguments the GPU path marshals. Checks triu!/
# tril!, istriu/istril, issymmetric/ishermitian, the tiled transpose, A + λI, the symmetric/Hermitian fill and
# integer matrix products (wrapping) against Base, for the element types each handles.
# Run by runtests.jl when g++ (with _Float16) is found; this process pretends not to be on
# the host device, so only the operations below are used (no cuBLAS/cuSOLVER, no generated
# broadcast or strided-copy kernels: test/kernel_emulation_tests.jl covers those).
using CuMem, Libdl, Test, Random, LinearAlgebra
CuMem.allowscalar(false)
Random.seed!(7)

isdefined(@__MODULE__, :gxx_library) || include(joinpath(@__DIR__, "..", "gxx.jl"))
const HDR = raw"""
#include <string.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
static inline void __syncthreads() {}
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx = {0,0,0}, threadIdx = {0,0,0}, blockDim = {1,1,1}, gridDim = {1,1,1};
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
static inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { unsigned o = *p; if (o == c) *p = v; return o; }
static inline void __threadfence_system() {}
"""
# The prelude's (julia/cuda/prelude.cuh) Float16 conversions through PTX asm, replaced.
function emu_compile(src)
    src = replace(src, r"static __device__ __forceinline__ float jl_h2f.*\n" => "static inline float jl_h2f(half_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_f2h.*\n" => "static inline half_t jl_f2h(float x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_d2h.*\n" => "static inline half_t jl_d2h(double x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    return Libdl.dlopen(gxx_library(HDR, src, ["-O1", "-std=c++17"]))
end
const LIBS = Dict{String,Ptr{Cvoid}}()
struct EmuKernel
    f::Ptr{Cvoid}
end
@eval CuMem begin
    on_host() = false
    load_kernel(source::String, name::String) =
        Main.EmuKernel(Libdl.dlsym(get!(() -> Main.emu_compile(source), Main.LIBS, source), name))
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

vals(::Type{Bool}, dims...) = rand(Bool, dims...)
vals(::Type{T}, dims...) where {T<:Integer} = rand(T(0):T(9), dims...) .* rand((T(1), T(1), T(0)), dims...)
vals(::Type{T}, dims...) where {T} = rand(T, dims...) .* rand((1, 1, 0), dims...)

@testset "emulated linear-algebra kernels" begin
    for T in (Bool, Int8, UInt16, Int32, Int64, Float16, Float32, Float64, ComplexF32, ComplexF64)
        A = vals(T, 5, 4)
        for k in (-2, -1, 0, 1, 3)
            @test Array(triu(CuArray(A), k)) == triu(A, k)
            @test Array(tril(CuArray(A), k)) == tril(A, k)
            @test istriu(CuArray(A), k) == istriu(A, k)
            @test istril(CuArray(A), k) == istril(A, k)
            @test istriu(CuArray(triu(A, k)), k) && istril(CuArray(tril(A, k)), k)
        end
        # the tiled transpose (partial tiles at the edges), conjugating or not
        for (m, n) in ((37, 70), (1, 5), (32, 32))
            X = vals(T, m, n)
            @test Array(CuMem.la_adjoint(CuArray(X))) == permutedims(conj.(X))
            @test Array(CuMem.adjoint_into!(CuArray{T}(undef, n, m), CuArray(X), false)) == permutedims(X)
        end
        # both flags of A \ b's dispatch in one download
        S = vals(T, 4, 4)
        for M in (S, triu(S), tril(S), Matrix(Diagonal(S)), zeros(T, 4, 4))
            @test CuMem.triangularity(CuArray(M)) == (istril(M), istriu(M))
        end
        S = vals(T, 4, 4)
        for M in (S, S + transpose(S), T <: Complex ? S + S' : S + transpose(S))
            @test issymmetric(CuArray(M)) == issymmetric(M)
            @test ishermitian(CuArray(M)) == ishermitian(M)
        end
        @test !issymmetric(CuArray(A))
        for up in (:U, :L)
            @test Array(CuArray(Symmetric(CuArray(S), up))) == Matrix(Symmetric(S, up))
            T <: Union{Real,ComplexF32,ComplexF64} &&
                @test Array(CuArray(Hermitian(CuArray(S), up))) == Matrix(Hermitian(S, up))
        end
        if T !== Bool
            @test Array(CuArray(S) + I) == S + I
            @test Array(CuArray(S) - T(2) * I) == S - T(2) * I     # same type: no conversion kernel
        end
    end
    # -0.0 is zero, NaN is not symmetric with itself
    Z = triu(rand(Float32, 3, 3)); Z[2, 1] = -0.0f0
    @test istriu(CuArray(Z))
    N = Float64[1 NaN; NaN 1]
    @test issymmetric(CuArray(N)) == issymmetric(N) == false
    H = ComplexF64[1 2im; -2im 3+1im]                 # diagonal not real: not Hermitian
    @test ishermitian(CuArray(H)) == ishermitian(H) == false
    # integer products wrap as Base
    for T in (Int8, UInt8, Int16, Int32, UInt32, Int64, UInt64)
        A = rand(T, 5, 7); B = rand(T, 7, 3); x = rand(T, 7)
        @test Array(CuArray(A) * CuArray(B)) == A * B
        @test Array(CuArray(A) * CuArray(x)) == A * x
    end
end

# The small matrix product (julia/cuda/gemm.cuh) behind mul!/`*` of small real matrices:
# every op pair, α/β (β = 0 ignores NaN in C), partial tiles and k over one chunk, against
# BLAS in Float64
@testset "emulated small gemm" begin
    @test CuMem.small_gemm_fits(Float32, 128, 64, 64) && CuMem.small_gemm_fits(Float64, 10, 64, 128)
    @test !CuMem.small_gemm_fits(Float32, 256, 256, 256)          # m*n*k over 128^3
    @test !CuMem.small_gemm_fits(Float32, 1, 1, 513)              # k over 512
    @test !CuMem.small_gemm_fits(Float32, 4, 4, 0)                # k = 0: cuBLAS (C = βC)
    @test !CuMem.small_gemm_fits(ComplexF32, 4, 4, 4)
    @test CuMem.small_gemm!(false) && !CuMem.small_gemm_fits(Float32, 4, 4, 4)
    @test !CuMem.small_gemm!(true) && CuMem.small_gemm()
    op(t, X) = t == 'N' ? X : transpose(X)
    cuop(t, X) = t == 'N' ? CuArray(X) : (t == 'T' ? transpose(CuArray(X)) : CuArray(X)')
    for T in (Float32, Float64), (m, n, k) in ((128, 64, 64), (10, 64, 128), (37, 70, 5), (1, 1, 1), (17, 33, 65), (3, 20, 129), (5, 7, 300))
        tol = T === Float32 ? 1f-5 : 1e-13
        for ta in ('N', 'T', 'C'), tb in ('N', 'T', 'C')
            A = rand(T, (ta == 'N' ? (m, k) : (k, m))...) .- T(0.5)
            B = rand(T, (tb == 'N' ? (k, n) : (n, k))...) .- T(0.5)
            C0 = rand(T, m, n)
            ref = Float64.(op(ta, A)) * Float64.(op(tb, B))
            scale = sqrt(k) + 1
            @test maximum(abs.(Array(cuop(ta, A) * cuop(tb, B)) .- ref)) <= tol * scale
            for (α, β) in ((T(-0.05), T(1)), (T(2), T(0.5)), (T(1), T(0)))
                C = copy(C0)
                β == 0 && (C[1] = T(NaN))
                dC = CuArray(C)
                @test mul!(dC, cuop(ta, A), cuop(tb, B), α, β) === dC
                want = α .* ref .+ (β == 0 ? 0 : β .* Float64.(C0))
                @test maximum(abs.(Array(dC) .- want)) <= tol * scale * 4
            end
        end
    end
end

# The same source through NVRTC to PTX (where libnvrtc is present): every entry point the
# Julia side launches by name is there.
@testset "linear-algebra kernel source compiles" begin
    if isdefined(CuMem, :nvrtc_available) && CuMem.nvrtc_available()
        ptx = CuMem.compile_ptx(CuMem.LINALG_KERNELS_SOURCE)
        for s in ("w1", "w2", "w4", "w8", "w16", "c32", "c64")
            @test occursin(".entry la_transpose_$(s)(", ptx)
        end
        for s in ("w1", "w2", "w4", "w8", "w16")
            @test occursin(".entry la_band_$(s)(", ptx)
        end
        for s in ("h16", "f32", "f64", "c32", "c64")
            @test occursin(".entry la_isband_$(s)(", ptx) && occursin(".entry la_issym_$(s)(", ptx)
        end
        gptx = CuMem.compile_ptx(CuMem.GEMM_SOURCE)
        @test occursin(".entry cumem_gemm_small_f32(", gptx) && occursin(".entry cumem_gemm_small_f64(", gptx)
    else
        @info "libnvrtc not found: the linear-algebra kernel source was not compiled"
    end
end

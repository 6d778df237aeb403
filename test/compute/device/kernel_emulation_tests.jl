# The CUDA C of user kernels (@cuda, julia/compute/device/) run on the CPU: each kernel's
# generated source is compiled by g++ (C++20) with the CUDA built-ins it uses emulated -
# every thread of a block a host thread (3-d indices), `__shared__` memory shared by them,
# `__syncthreads` and its count/and/or forms a barrier of the block that returned threads
# drop out of, shuffles and votes through a barrier of the warp, atomics the compiler's -
# and launched with the values the GPU path passes (the context, the CuDeviceArrays of
# the arrays' host memory, isbits arguments). So the C the GPU runs is checked here too,
# against Base and the host runner. Host device only.
#
#   CUMEM_DEVICE=host julia --project=. test/compute/device/kernel_emulation_tests.jl

using CuMem, Test, Libdl

# the arrays' memory must be the CPU's, and g++ with C++20's <barrier> must be there
if !CuMem.on_host() || Sys.which("g++") === nothing
    println("kernel_emulation_tests.jl: skipped (host device and g++ only)")
    exit(0)
end

isdefined(@__MODULE__, :gxx_library) || include(joinpath(@__DIR__, "..", "gxx.jl"))
const HDR = raw"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __align__(n) alignas(n)
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ threadIdx = {0,0,0};
static thread_local unsigned emu_lin = 0;
static dim3_ blockIdx = {0,0,0}, blockDim = {1,1,1}, gridDim = {1,1,1};
static const int warpSize = 32;
static std::barrier<>* emu_block_bar;
static std::vector<std::barrier<>*> emu_warp_bar;
static uint64_t emu_slot[1024];
static std::atomic<int> emu_acc{0};
static unsigned char* emu_dynshmem;
#define jl_dynshmem emu_dynshmem
static inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
static inline int emu_bar_sum(int p) {
  emu_block_bar->arrive_and_wait(); emu_acc += p; emu_block_bar->arrive_and_wait();
  int r = emu_acc.load(); emu_block_bar->arrive_and_wait();
  if (emu_lin == 0) emu_acc = 0;
  emu_block_bar->arrive_and_wait(); return r; }
static std::atomic<int> emu_live{0};
static inline int __syncthreads_count(int p) { return emu_bar_sum(p != 0); }
static inline int __syncthreads_or(int p) { return emu_bar_sum(p != 0) > 0; }
static inline int __syncthreads_and(int p) { return emu_bar_sum(p == 0) == 0; }
static inline void emu_warp_sync() { emu_warp_bar[emu_lin / 32]->arrive_and_wait(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_sync(); }
static inline unsigned emu_nlanes() { unsigned n = blockDim.x * blockDim.y * blockDim.z, base = emu_lin - emu_lin % 32; return n - base < 32 ? n - base : 32; }
static inline unsigned emu_xchg(unsigned v, int src) {
  emu_slot[emu_lin] = v; emu_warp_sync();
  unsigned base = emu_lin - emu_lin % 32; unsigned r = v;
  if (src >= 0 && (unsigned)src < emu_nlanes()) r = (unsigned)emu_slot[base + src];
  emu_warp_sync(); return r; }
static inline unsigned __shfl_sync(unsigned, unsigned v, int s, int w = 32) { int l = emu_lin % 32; return emu_xchg(v, (l / w) * w + s % w); }
static inline unsigned __shfl_up_sync(unsigned, unsigned v, unsigned d, int w = 32) { int l = emu_lin % 32; int s = l - (int)d; return emu_xchg(v, s < (l / w) * w ? l : s); }
static inline unsigned __shfl_down_sync(unsigned, unsigned v, unsigned d, int w = 32) { int l = emu_lin % 32; int s = l + (int)d; return emu_xchg(v, s >= (l / w) * w + w ? l : s); }
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, int m, int w = 32) { int l = emu_lin % 32; int s = l ^ m; return emu_xchg(v, s >= (l / w) * w + w ? l : s); }
static inline unsigned __ballot_sync(unsigned mask, int p) {
  emu_slot[emu_lin] = p != 0; emu_warp_sync();
  unsigned base = emu_lin - emu_lin % 32, b = 0;
  for (unsigned l = 0; l < emu_nlanes(); l++) if (emu_slot[base + l]) b |= 1u << l;
  emu_warp_sync(); return b & mask; }
static inline int __all_sync(unsigned mask, int p) { unsigned n = emu_nlanes(); unsigned all = n == 32 ? 0xffffffffu : (1u << n) - 1; return (__ballot_sync(mask, p) & mask & all) == (mask & all); }
static inline int __any_sync(unsigned mask, int p) { return __ballot_sync(mask, p) != 0; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
template <typename T, typename V> static inline T atomicCAS(T* p, V c0, V v) { T c = (T)c0; __atomic_compare_exchange_n(p, &c, (T)v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
template <typename T, typename V> static inline T atomicExch(T* p, V v) { return __atomic_exchange_n(p, (T)v, __ATOMIC_SEQ_CST); }
static inline float atomicExch(float* p, float v) { unsigned u; memcpy(&u, &v, 4); u = __atomic_exchange_n((unsigned*)p, u, __ATOMIC_SEQ_CST); float r; memcpy(&r, &u, 4); return r; }
template <typename T, typename V> static inline T atomicAdd(T* p, V v) { return __atomic_fetch_add(p, (T)v, __ATOMIC_SEQ_CST); }
template <typename T, typename V> static inline T atomicSub(T* p, V v) { return __atomic_fetch_sub(p, (T)v, __ATOMIC_SEQ_CST); }
template <typename T, typename V> static inline T atomicAnd(T* p, V v) { return __atomic_fetch_and(p, (T)v, __ATOMIC_SEQ_CST); }
template <typename T, typename V> static inline T atomicOr(T* p, V v) { return __atomic_fetch_or(p, (T)v, __ATOMIC_SEQ_CST); }
template <typename T, typename V> static inline T atomicXor(T* p, V v) { return __atomic_fetch_xor(p, (T)v, __ATOMIC_SEQ_CST); }
template <typename T, typename F> static inline T emu_rmw(T* p, T v, F f) {
  T o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(p, &o, f(o, v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
template <typename T, typename V> static inline T atomicMax(T* p, V v) { return emu_rmw(p, (T)v, [](T a, T b) { return a < b ? b : a; }); }
template <typename T, typename V> static inline T atomicMin(T* p, V v) { return emu_rmw(p, (T)v, [](T a, T b) { return b < a ? b : a; }); }
static inline unsigned atomicInc(unsigned* p, unsigned v) { return emu_rmw(p, v, [](unsigned a, unsigned b) { return a >= b ? 0u : a + 1; }); }
static inline unsigned atomicDec(unsigned* p, unsigned v) { return emu_rmw(p, v, [](unsigned a, unsigned b) { return (a == 0 || a > b) ? b : a - 1; }); }
template <typename T, typename U> static inline T emu_fadd(T* p, T v) {
  U o = __atomic_load_n((U*)p, __ATOMIC_SEQ_CST); T f, r;
  do { memcpy(&f, &o, sizeof(T)); r = f + v; U n; memcpy(&n, &r, sizeof(T)); if (__atomic_compare_exchange_n((U*)p, &o, n, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break; } while (true);
  return f; }
static inline float atomicAdd(float* p, float v) { return emu_fadd<float, unsigned>(p, v); }
static inline double atomicAdd(double* p, double v) { return emu_fadd<double, unsigned long long>(p, v); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
template <typename F> static void emu_grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, F body) {
  gridDim = {gx, gy, gz}; blockDim = {bx, by, bz};
  unsigned n = bx * by * bz;
  std::vector<unsigned char> dyn(shmem + 16); emu_dynshmem = dyn.data();
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    blockIdx = {x, y, z};
    std::barrier<> bar(n); emu_block_bar = &bar;
    std::vector<std::barrier<>*> wb;
    for (unsigned w = 0; w < (n + 31) / 32; w++) wb.push_back(new std::barrier<>(n - 32 * w < 32 ? n - 32 * w : 32));
    emu_warp_bar = wb;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < n; t++) ts.emplace_back([t, bx, by, &body, &bar, &wb] {
      threadIdx = {t % bx, (t / bx) % by, t / (bx * by)}; emu_lin = t;
      body();
      bar.arrive_and_drop(); wb[t / 32]->arrive_and_drop(); });
    for (auto& th : ts) th.join();
    for (auto b : wb) delete b;
  }
}
"""

function emu_source(src)
    src = replace(src, r"static __device__ __forceinline__ float jl_h2f.*\n" => "static inline float jl_h2f(half_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_f2h.*\n" => "static inline half_t jl_f2h(float x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_d2h.*\n" => "static inline half_t jl_d2h(double x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, r"static __device__ __forceinline__ int32_t jl_laneid.*\n" => "static inline int32_t jl_laneid() { return (int32_t)(emu_lin % 32) + 1; }\n")
    src = replace(src, "extern __shared__ __align__(16) unsigned char jl_dynshmem[];" => "")
    src = replace(src, "__shared__ __align__(16)" => "alignas(16) static")
    for t in ("typedef long long int64_t; typedef unsigned long long uint64_t;", "typedef signed char int8_t; typedef unsigned char uint8_t;",
              "typedef short int16_t; typedef unsigned short uint16_t;", "typedef int int32_t; typedef unsigned int uint32_t;")
        src = replace(src, t => "")
    end
    m = match(r"(?:extern \"C\" __global__|CUMEM_KERNEL) void (\w+)\(([^)]*)\)", src)
    name, params = m.captures
    ps = [strip(p) for p in split(params, ',')]
    types = [strip(p[1:findlast(' ', p)]) for p in ps]
    io = IOBuffer()
    print(io, "extern \"C\" void emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, void** args) {\n")
    for (k, T) in enumerate(types)
        print(io, "  ", T, " a", k, " = *(", T, "*)args[", k - 1, "];\n")
    end
    print(io, "  emu_grid(gx, gy, gz, bx, by, bz, shmem, [&] { ", name, "(", join(("a$k" for k in 1:length(types)), ", "), "); });\n}\n")
    return src * String(take!(io))
end

const LIBS = Dict{String,Ptr{Cvoid}}()
emu_lib(src) = get!(() -> Libdl.dlopen(gxx_library(HDR, emu_source(src), ["-O1", "-std=c++20", "-pthread"])), LIBS, src)

# `@cuda threads blocks shmem f(args...)` through the generated C on g++ threads
function emu(f, args...; threads = 1, blocks = 1, shmem = 0)
    kargs = map(cudaconvert, args)
    k = cufunction(cudaconvert(f), typeof(kargs))
    t, b = CuMem.dv_dims3(threads), CuMem.dv_dims3(blocks)
    vals = CuMem.dv_params(CuMem.launch_context(k.fun.df), k.f, kargs...)
    fp = Libdl.dlsym(emu_lib(k.fun.source), :emu_launch)
    V = typeof(vals)
    vref = Ref(vals)
    GC.@preserve args vref begin
        base = Ptr{UInt8}(Base.unsafe_convert(Ptr{Cvoid}, vref))
        ptrs = [Ptr{Cvoid}(base + fieldoffset(V, i)) for i in 1:fieldcount(V)]
        ccall(fp, Cvoid, (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, Ptr{Ptr{Cvoid}}),
              b[1], b[2], b[3], t[1], t[2], t[3], shmem, ptrs)
    end
    return nothing
end

function add3!(y, x)
    index = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    stride = gridDim().x * blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
function idx3!(out)
    t = threadIdx().x + (threadIdx().y - 1) * blockDim().x + (threadIdx().z - 1) * blockDim().x * blockDim().y
    g = t + (blockIdx().x - 1 + (blockIdx().y - 1) * gridDim().x) * blockDim().x * blockDim().y * blockDim().z
    out[1, g] = threadIdx().x; out[2, g] = threadIdx().y; out[3, g] = threadIdx().z
    out[4, g] = blockIdx().x; out[5, g] = blockIdx().y; out[6, g] = laneid()
    return nothing
end
function tree!(out, x)
    sh = CuStaticSharedArray(Float64, 128)
    t = threadIdx().x
    i = (blockIdx().x - 1) * blockDim().x + t
    sh[t] = i <= length(x) ? x[i] : 0.0
    sync_threads()
    s = 64
    while s > 0
        t <= s && (sh[t] += sh[t+s])
        sync_threads()
        s ÷= 2
    end
    t == 1 && CuMem.atomic_add!(pointer(out), sh[1])
    return nothing
end
function dyn!(out)
    a = CuDynamicSharedArray(Int32, blockDim().x)
    b = CuDynamicSharedArray(Float32, blockDim().x, blockDim().x * 4)
    t = threadIdx().x
    a[t] = t; b[t] = 0.5f0 * t
    sync_threads()
    out[t] = a[blockDim().x-t+1] + b[t]
    return nothing
end
function preds!(out)
    t = threadIdx().x
    out[t] = sync_threads_count(iseven(t)) + 100 * sync_threads_and(t > 0) + 1000 * sync_threads_or(t == 7) +
             10000 * sync_threads_and(t > 1)
    return nothing
end
function warp!(out, v)
    t = threadIdx().x
    x = v[t]
    out[1, t] = shfl_sync(FULL_MASK, x, 3)
    out[2, t] = shfl_down_sync(FULL_MASK, x, 4)
    out[3, t] = shfl_up_sync(FULL_MASK, x, 1)
    out[4, t] = shfl_xor_sync(FULL_MASK, x, 2)
    out[5, t] = vote_ballot_sync(FULL_MASK, t % 3 == 0)
    out[6, t] = vote_all_sync(FULL_MASK, t > 0) + 2 * vote_any_sync(FULL_MASK, t == 40)
    p = shfl_xor_sync(FULL_MASK, (x, Float32(t), Int16(-t)), 1)
    out[7, t] = p[1] + Int(p[2]) + p[3]
    return nothing
end
function atom!(c, f)
    i = threadIdx().x + (blockIdx().x - 1) * blockDim().x
    CuMem.atomic_add!(pointer(c, 1), Int64(1))
    CuMem.atomic_max!(pointer(c, 2), Int64(i))
    CuMem.@atomic c[3] -= Int64(2)
    CuMem.@atomic f[1] += 0.25f0
    CuMem.@atomic f[2] = max(f[2], Float32(i))
    CuMem.@atomic c[4] = min(c[4], Int64(i))
    return nothing
end
struct PQ
    p::Float32
    q::Int32
end
argk!(out, s::PQ, t, r) = (i = threadIdx().x; out[i] = s.p * i + s.q + t[1] + t[2] + r[]; nothing)
# one step range per thread: its length, wrapping sum and last element
function ranges_emu!(len, tot, lst, a, s, b)
    t = threadIdx().x
    r = a[t]:s[t]:b[t]
    n = 0
    acc = zero(eltype(a))
    for i in r
        n += 1
        acc += i
    end
    len[t] = n; tot[t] = acc; lst[t] = isempty(r) ? zero(eltype(a)) : last(r)
    return nothing
end
oob_emu!(a) = (a[threadIdx().x + 1] = 1; nothing)
div_emu!(a, d) = (a[1] = div(a[1], d); nothing)


@testset "user kernels' CUDA C on g++ threads" begin
    x = CuArray(collect(1f0:1000f0)); y = CuArray(fill(1f0, 1000))
    emu(add3!, y, x; threads = 64, blocks = 4)
    @test Array(y) == collect(2f0:1001f0)

    out = CuArray(zeros(Int, 6, 2 * 3 * 4 * 2 * 2))
    emu(idx3!, out; threads = (2, 3, 4), blocks = (2, 2))
    ref = CuArray(zeros(Int, 6, 2 * 3 * 4 * 2 * 2))
    @cuda threads=(2, 3, 4) blocks=(2, 2) idx3!(ref)
    @test Array(out) == Array(ref)

    xs = rand(1000)
    s = CuArray([0.0])
    emu(tree!, s, CuArray(xs); threads = 128, blocks = 8)
    @test Array(s)[1] ≈ sum(xs)

    d = CuArray(zeros(Float32, 32)); dref = CuArray(zeros(Float32, 32))
    emu(dyn!, d; threads = 32, shmem = 32 * 8)
    @cuda threads=32 shmem=32 * 8 dyn!(dref)
    @test Array(d) == Array(dref) == [33 - t + 0.5f0 * t for t in 1:32]

    p = CuArray(zeros(Int, 40)); pref = CuArray(zeros(Int, 40))
    emu(preds!, p; threads = 40)
    @cuda threads=40 preds!(pref)
    @test Array(p) == Array(pref) == fill(20 + 100 + 1000, 40)

    v = CuArray(collect(1:48) .* 7)
    w = CuArray(zeros(Int, 7, 48)); wref = CuArray(zeros(Int, 7, 48))
    emu(warp!, w, v; threads = 48)
    @cuda threads=48 warp!(wref, v)
    @test Array(w) == Array(wref)

    c = CuArray(Int64[0, 0, 0, 10^6]); f = CuArray(Float32[0, -1])
    emu(atom!, c, f; threads = 32, blocks = 3)
    @test Array(c) == [96, 96, -192, 1]
    @test Array(f) == Float32[24, 96]

    o = CuArray(zeros(Float32, 5)); oref = CuArray(zeros(Float32, 5))
    emu(argk!, o, PQ(1.5f0, 2), (3, 0.5f0), Ref(10f0); threads = 5)
    @cuda threads=5 argk!(oref, PQ(1.5f0, 2), (3, 0.5f0), Ref(10f0))
    @test Array(o) == Array(oref)

    # exceptions through the error record, thrown at the next synchronization
    a = CuArray(zeros(Int, 4))
    emu(oob_emu!, a; threads = 4)
    @test_throws BoundsError synchronize()
    emu(div_emu!, CuArray([5]), 0)
    @test_throws DivideError synchronize()

    # step ranges: the one-element fast path of the C (dc_steprange_fast), Base.steprange_last
    # otherwise (overflowing differences, negative steps, empty ranges), its throw for step 0
    for T in (Int64, Int32)
        lo, hi = typemin(T), typemax(T)
        cs = T[1 1 1; 5 3 7; 5 3 8; 5 3 4; 7 -2 1; 7 -2 8; 1 10 10; 1 9 10; -3 5 1; hi-1 5 hi; lo hi hi;
               lo 2 lo+3; hi -1 hi-2; lo+2 -5 lo; 0 1 0; 4 1 3; lo hi-1 hi; -1 hi hi]
        m = size(cs, 1)
        len, tot, lst = CuArray(zeros(Int, m)), CuArray(zeros(T, m)), CuArray(zeros(T, m))
        emu(ranges_emu!, len, tot, lst, CuArray(cs[:, 1]), CuArray(cs[:, 2]), CuArray(cs[:, 3]); threads = m)
        rs = [cs[k, 1]:cs[k, 2]:cs[k, 3] for k in 1:m]
        @test Array(len) == length.(rs)
        @test Array(tot) == [foldl(+, r; init = zero(T)) for r in rs]
        @test Array(lst) == [isempty(r) ? zero(T) : last(r) for r in rs]
        k = cufunction(ranges_emu!, typeof(map(cudaconvert, (len, tot, lst, lst, lst, lst))))
        @test occursin(r"\) \{ s\d+ = s\d+; \} else \{", k.fun.source)      # the fast path is in the C
        emu(ranges_emu!, len, tot, lst, CuArray(T[1]), CuArray(T[0]), CuArray(T[5]); threads = 1)
        @test_throws ArgumentError synchronize()
    end
end

# The CUDA C of generated kernels run on the CPU: each source is compiled by g++ (C++20) with
# the CUDA built-ins it uses emulated - every thread of a block is a host thread, `__shared__`
# memory is shared by them, `__syncthreads` is a barrier of the block,
# `__match_any_sync`/`__shfl_down_sync` go through a barrier of the warp, atomics are the
# compiler's - and launched with the arguments the GPU path marshals. Blocks run one after
# another. Included by test/compute/algorithms/arraylib_emulation_tests.jl and
# test/compute/reduce/reduce_emulation_tests.jl, which pretend not to be on the host device (the
# GPU path runs, with these stand-in kernels).
using CuMem, Libdl
# The typed broadcast fast path (julia/compute/broadcast/fastpath.jl) cannot hold the stand-in kernels:
# the emulation runs the general path, which every broadcast takes on its first call.
CuMem.FAST_BROADCAST[] = false

const HDR = raw"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <barrier>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ threadIdx = {0,0,0};
static dim3_ blockIdx = {0,0,0}, blockDim = {1,1,1}, gridDim = {1,1,1};
static std::barrier<>* emu_block_bar;
static std::vector<std::barrier<>*> emu_warp_bar;
static uint64_t emu_slot[1024];
static inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
static inline unsigned emu_lane() { return threadIdx.x % 32; }
static inline void emu_warp_sync() { emu_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
static inline unsigned __match_any_sync(unsigned, unsigned v) {
  emu_slot[threadIdx.x] = v; emu_warp_sync();
  unsigned base = threadIdx.x - emu_lane(), n = blockDim.x - base < 32 ? blockDim.x - base : 32, m = 0;
  for (unsigned l = 0; l < n; l++) if ((unsigned)emu_slot[base + l] == v) m |= 1u << l;
  emu_warp_sync(); return m; }
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int o) {
  uint64_t u = 0; memcpy(&u, &v, sizeof(T)); emu_slot[threadIdx.x] = u; emu_warp_sync();
  unsigned base = threadIdx.x - emu_lane(), n = blockDim.x - base < 32 ? blockDim.x - base : 32;
  T r = v; if (emu_lane() + o < n) memcpy(&r, &emu_slot[threadIdx.x + o], sizeof(T));
  emu_warp_sync(); return r; }
template <typename T> static inline T __shfl_up_sync(unsigned, T v, int o) {
  uint64_t u = 0; memcpy(&u, &v, sizeof(T)); emu_slot[threadIdx.x] = u; emu_warp_sync();
  T r = v; if (emu_lane() >= (unsigned)o) memcpy(&r, &emu_slot[threadIdx.x - o], sizeof(T));
  emu_warp_sync(); return r; }
static inline unsigned __ballot_sync(unsigned, int p) {
  emu_slot[threadIdx.x] = p != 0; emu_warp_sync();
  unsigned base = threadIdx.x - emu_lane(), n = blockDim.x - base < 32 ? blockDim.x - base : 32, m = 0;
  for (unsigned l = 0; l < n; l++) if (emu_slot[base + l]) m |= 1u << l;
  emu_warp_sync(); return m; }
/* sort.cuh's warp match by __match_any_sync (one warp barrier, not nine ballots) */
#define CUMEM_EMU_MATCH_ANY 1
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
static inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
template <typename T> static inline T atomicCAS(T* p, T c, T v) {
  __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
template <typename T> static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_sync(); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
static inline long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
template <typename F> static void emu_grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, F body) {
  gridDim = {gx, gy, gz}; blockDim = {bx, 1, 1};
  std::barrier<> bar(bx); emu_block_bar = &bar;
  std::vector<std::barrier<>*> wb;
  for (unsigned w = 0; w < (bx + 31) / 32; w++) wb.push_back(new std::barrier<>(bx - 32 * w < 32 ? bx - 32 * w : 32));
  emu_warp_bar = wb;
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    blockIdx = {x, y, z};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < bx; t++) ts.emplace_back([t, &body] { threadIdx = {t, 0, 0}; body(); });
    for (auto& th : ts) th.join();
  }
  for (auto b : wb) delete b;
}
"""

# The kernels' sources use half_t conversions through PTX asm: replace them, and the
# prelude's 64-bit typedefs (the system's are used).
function emu_source(src)
    src = replace(src, r"static __device__ __forceinline__ float jl_h2f.*\n" => "static inline float jl_h2f(half_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_f2h.*\n" => "static inline half_t jl_f2h(float x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, r"static __device__ __forceinline__ half_t jl_d2h.*\n" => "static inline half_t jl_d2h(double x) { _Float16 f = (_Float16)x; half_t h; memcpy(&h, &f, 2); return h; }\n")
    src = replace(src, "typedef long long int64_t; typedef unsigned long long uint64_t;" => "")
    src = replace(src, "typedef signed char int8_t; typedef unsigned char uint8_t;" => "")
    src = replace(src, "typedef short int16_t; typedef unsigned short uint16_t;" => "")
    src = replace(src, "typedef int int32_t; typedef unsigned int uint32_t;" => "")
    # a launcher per kernel: emu_<name>(gx, gy, gz, bx, the kernel's parameters...)
    io = IOBuffer()
    for m in eachmatch(r"(?:extern \"C\" __global__|CUMEM_KERNEL) void (\w+)\(([^)]*)\)", src)
        name, params = m.captures
        name == "NAME" && continue          # a macro's template
        ps = [strip(p) for p in split(params, ',')]
        names = [match(r"(\w+)$", p).captures[1] for p in ps]
        print(io, "extern \"C\" void emu_$name(unsigned emu_gx, unsigned emu_gy, unsigned emu_gz, unsigned emu_bx, ", join(ps, ", "),
              ") { emu_grid(emu_gx, emu_gy, emu_gz, emu_bx, [&] { $name(", join(names, ", "), "); }); }\n")
    end
    return HDR * src * String(take!(io))
end

const LIBS = Dict{String,Ptr{Cvoid}}()
function emu_lib(src)
    get!(LIBS, src) do
        dir = mktempdir()
        write(joinpath(dir, "k.cpp"), emu_source(src))
        run(`g++ -O1 -std=c++20 -shared -fPIC -w -pthread -o $(joinpath(dir, "k.so")) $(joinpath(dir, "k.cpp"))`)
        Libdl.dlopen(joinpath(dir, "k.so"))
    end
end
struct EmuKernel
    lib::Ptr{Cvoid}
    name::String
end
@eval CuMem begin
    on_host() = false
    load_kernel(source::String, name::String) = Main.EmuKernel(Main.emu_lib(source), name)
end
const LAUNCHES = Ref(0)
function CuMem.launch(k::EmuKernel, args...; blocks, threads, shmem = 0)
    b = blocks isa Tuple ? (blocks..., 1, 1) : (blocks, 1, 1)
    f = Libdl.dlsym(k.lib, "emu_" * k.name)
    vals = map(CuMem.kernel_value, args)
    types = map(typeof, vals)
    LAUNCHES[] += 1
    Core.eval(Main, :(ccall($f, Cvoid, (UInt32, UInt32, UInt32, UInt32, $(types...)),
                            $(UInt32(b[1])), $(UInt32(b[2])), $(UInt32(b[3])), $(UInt32(threads)), $(vals...))))
    return nothing
end
CuMem.sm_count() = 1       # few blocks: the emulation runs them one after another
# strided copies (their fixed kernels come from a macro) take the host device's plan
CuMem.run_plan!(d::CuMem.StridedOperand, s::CuMem.StridedOperand) = CuMem.host_plan!(d, s)


# The CUDA C of generated kernels run on the CPU: each source is compiled by g++ (C++20) with
# the CUDA built-ins it uses emulated - every thread of a block is a fiber (its own stack) of
# the calling thread, `__shared__` memory is shared by them, `__syncthreads` is a barrier of
# the block, `__match_any_sync`/`__shfl_down_sync`/`__shfl_sync` go through a barrier of the warp, atomics
# are the compiler's - and launched with the arguments the GPU path marshals. Blocks run one
# after another. A thread runs until it reaches a barrier, then the next one runs (in thread
# order, and in reverse order on alternate rounds, so that a missing barrier shows whichever
# thread writes first); switching fibers costs nanoseconds where a block of OS threads cost a
# thread start per GPU thread and a futex wake-up per barrier. Included by
# test/compute/algorithms/{arraylib,sort}_emulation_tests.jl and
# test/compute/reduce/reduce_emulation_tests.jl, which pretend not to be on the host device (the
# GPU path runs, with these stand-in kernels).
using CuMem, Libdl
# The typed broadcast fast path (julia/compute/broadcast/fastpath.jl) cannot hold the stand-in kernels:
# the emulation runs the general path, which every broadcast takes on its first call.
CuMem.FAST_BROADCAST[] = false

isdefined(@__MODULE__, :gxx_library) || include(joinpath(@__DIR__, "gxx.jl"))
const HDR = raw"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __align__(n) alignas(n)
struct dim3_ { unsigned x, y, z; };
static dim3_ threadIdx = {0,0,0};       /* the running thread's: set before each switch to it */
static dim3_ blockIdx = {0,0,0}, blockDim = {1,1,1}, gridDim = {1,1,1};
/* The threads of a block are fibers of the calling OS thread: each has its own stack, and a
   thread waiting at a barrier switches back to the scheduler (emu_run), which resumes the
   threads in turn, in thread order and in reverse order on alternate rounds. emu_switch
   saves the callee-saved registers (x86-64 System V) on the current stack, stores the stack
   pointer in *save and continues on the stack `to`. */
extern "C" __attribute__((visibility("hidden"))) void emu_switch(void** save, void* to);
__asm__(".pushsection .text\n.globl emu_switch\n.hidden emu_switch\n.type emu_switch,@function\nemu_switch:\n"
        "pushq %rbp\npushq %rbx\npushq %r12\npushq %r13\npushq %r14\npushq %r15\n"
        "movq %rsp, (%rdi)\nmovq %rsi, %rsp\n"
        "popq %r15\npopq %r14\npopq %r13\npopq %r12\npopq %rbx\npopq %rbp\nret\n"
        ".size emu_switch, .-emu_switch\n.popsection\n");
struct emu_bar { unsigned n; volatile unsigned count, gen; };
static emu_bar emu_block_bar, emu_warp_bar[32];
static void* emu_main_sp;
static void** emu_sp;                    /* each thread's saved stack pointer */
static unsigned char* emu_done;
static unsigned emu_cur;
static volatile unsigned long emu_progress;
static void (*emu_fn)(void*);
static void* emu_fn_arg;
static uint64_t emu_slot[1024];
static inline void emu_yield() { emu_switch(&emu_sp[emu_cur], emu_main_sp); }
static void emu_arrive(emu_bar* b) {
  emu_progress = emu_progress + 1;
  if (b->count + 1 == b->n) { b->count = 0; b->gen = b->gen + 1; return; }
  b->count = b->count + 1;
  const unsigned g = b->gen;
  do emu_yield(); while (b->gen == g);
}
static void emu_fiber_main() {
  emu_fn(emu_fn_arg);
  emu_done[emu_cur] = 1;
  emu_progress = emu_progress + 1;
  emu_yield();                            /* never resumed */
  __builtin_trap();
}
static inline void __syncthreads() { emu_arrive(&emu_block_bar); }
static inline unsigned emu_lane() { return threadIdx.x % 32; }
static inline void emu_warp_sync() { emu_arrive(&emu_warp_bar[threadIdx.x / 32]); }
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
template <typename T> static inline T __shfl_sync(unsigned, T v, int src) {
  uint64_t u = 0; memcpy(&u, &v, sizeof(T)); emu_slot[threadIdx.x] = u; emu_warp_sync();
  unsigned base = threadIdx.x - emu_lane(), n = blockDim.x - base < 32 ? blockDim.x - base : 32;
  T r = v; if ((unsigned)(src & 31) < n) memcpy(&r, &emu_slot[base + (src & 31)], sizeof(T));
  emu_warp_sync(); return r; }
static inline unsigned __ballot_sync(unsigned, int p) {
  emu_slot[threadIdx.x] = p != 0; emu_warp_sync();
  unsigned base = threadIdx.x - emu_lane(), n = blockDim.x - base < 32 ? blockDim.x - base : 32, m = 0;
  for (unsigned l = 0; l < n; l++) if (emu_slot[base + l]) m |= 1u << l;
  emu_warp_sync(); return m; }
/* sort.cuh's warp match by __match_any_sync (one warp barrier, not nine ballots) */
#define CUMEM_EMU_MATCH_ANY 1
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
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
/* the grid's blocks one after another, each block's bx threads as fibers (256 KiB stacks, a
   guard page below each); a round in which no thread reaches a barrier or its end is a
   deadlock (a barrier that some threads never reach): reported, then abort */
static void emu_run(unsigned gx, unsigned gy, unsigned gz, unsigned bx, void (*fn)(void*), void* arg) {
  const size_t SZ = 256 << 10;
  if (bx == 0 || bx > 1024) { fprintf(stderr, "emulation: %u threads per block\n", bx); abort(); }
  gridDim = {gx, gy, gz}; blockDim = {bx, 1, 1};
  emu_fn = fn; emu_fn_arg = arg;
  unsigned char* stacks = (unsigned char*)mmap(0, bx * SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == (unsigned char*)MAP_FAILED) { perror("emulation: thread stacks"); abort(); }
  for (unsigned t = 0; t < bx; t++) mprotect(stacks + t * SZ, 4096, PROT_NONE);
  void** sp = (void**)malloc(bx * sizeof(void*));
  unsigned char* done = (unsigned char*)malloc(bx);
  emu_sp = sp; emu_done = done;
  emu_block_bar.n = bx; emu_block_bar.count = 0;
  for (unsigned w = 0; w < (bx + 31) / 32; w++) { emu_warp_bar[w].n = bx - 32 * w < 32 ? bx - 32 * w : 32; emu_warp_bar[w].count = 0; }
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    blockIdx = {x, y, z};
    for (unsigned t = 0; t < bx; t++) {
      uint64_t* s = (uint64_t*)(stacks + (t + 1) * SZ) - 8;    /* 6 registers, the entry, a null return address */
      for (int k = 0; k < 8; k++) s[k] = 0;
      s[6] = (uint64_t)(void*)&emu_fiber_main;
      sp[t] = s; done[t] = 0;
    }
    unsigned left = bx;
    for (unsigned round = 0; left > 0; round++) {
      const unsigned long before = emu_progress;
      for (unsigned k = 0; k < bx; k++) {
        const unsigned t = (round & 1) ? bx - 1 - k : k;
        if (done[t]) continue;
        emu_cur = t; threadIdx = {t, 0, 0};
        emu_switch(&emu_main_sp, sp[t]);
        if (done[t]) left--;
      }
      if (left > 0 && emu_progress == before) {
        fprintf(stderr, "emulation: block (%u, %u, %u): %u of %u threads wait at a barrier that the others never reach\n", x, y, z, left, bx);
        abort();
      }
    }
  }
  munmap(stacks, bx * SZ); free(sp); free(done);
}
template <typename F> static void emu_grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, F body) {
  emu_run(gx, gy, gz, bx, [](void* p) { (*(F*)p)(); }, (void*)&body);
}
"""

# The kernels' sources use half_t conversions through PTX asm: replace them, and the
# prelude's 64-bit typedefs (the system's are used). HDR comes first, added by
# gxx_library (test/compute/gxx.jl) as a precompiled header.
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
    # (sort.cuh's and scan.cuh's kernels carry their __launch_bounds__ macro before the name)
    for m in eachmatch(r"(?:extern \"C\" __global__|CUMEM_KERNEL) void (?:CUMEM_SORT_BOUNDS |CUMEM_SCAN_BOUNDS )?(\w+)\(([^)]*)\)", src)
        name, params = m.captures
        name == "NAME" && continue          # a macro's template
        ps = [strip(p) for p in split(params, ',')]
        names = [match(r"(\w+)$", p).captures[1] for p in ps]
        print(io, "extern \"C\" void emu_$name(unsigned emu_gx, unsigned emu_gy, unsigned emu_gz, unsigned emu_bx, ", join(ps, ", "),
              ") { emu_grid(emu_gx, emu_gy, emu_gz, emu_bx, [&] { $name(", join(names, ", "), "); }); }\n")
    end
    return src * String(take!(io))
end

# g++'s optimisation level (CUMEM_EMU_OPT, default -O1; the fuzzer's CI job takes -O0, which
# compiles each kernel faster)
const EMU_OPT = get(ENV, "CUMEM_EMU_OPT", "-O1")
const LIBS = Dict{String,Ptr{Cvoid}}()
emu_lib(src) = get!(() -> Libdl.dlopen(gxx_library(HDR, emu_source(src), [EMU_OPT, "-std=c++20"])), LIBS, src)
struct EmuKernel
    lib::Ptr{Cvoid}
    name::String
end
@eval CuMem begin
    on_host() = false
    load_kernel(source::String, name::String) = Main.EmuKernel(Main.emu_lib(source), name)
end
const LAUNCHES = Ref(0)
const CALLERS = Dict{Any,Function}()
function CuMem.launch(k::EmuKernel, args...; blocks, threads, shmem = 0)
    b = blocks isa Tuple ? (blocks..., 1, 1) : (blocks, 1, 1)
    f = Libdl.dlsym(k.lib, "emu_" * k.name)
    vals = map(CuMem.kernel_value, args)
    types = map(typeof, vals)
    LAUNCHES[] += 1
    # one caller per list of argument types (an `eval` per launch compiled a new ccall each time)
    call = get!(CALLERS, types) do
        vs = [:(vs[$i]) for i in 1:length(types)]
        Core.eval(Main, :((f, gx, gy, gz, bx, vs) -> ccall(f, Cvoid, (UInt32, UInt32, UInt32, UInt32, $(types...)), gx, gy, gz, bx, $(vs...))))
    end
    Base.invokelatest(call, f, UInt32(b[1]), UInt32(b[2]), UInt32(b[3]), UInt32(threads), vals)
    return nothing
end
CuMem.sm_count() = 1       # few blocks: the emulation runs them one after another
# strided copies (their fixed kernels come from a macro) take the host device's plan
CuMem.run_plan!(d::CuMem.StridedOperand, s::CuMem.StridedOperand) = CuMem.host_plan!(d, s)


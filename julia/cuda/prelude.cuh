/* prelude.cuh: the fixed C that every kernel built on the typed-IR compiler
 * (julia/compute/compiler/) starts with, as CuMem.C_PRELUDE_V2: integer typedefs (NVRTC
 * has no <stdint.h>), Float16 as bits with the hardware conversions, the error record a
 * throwing kernel fills, and the helpers that give C Julia's semantics for intrinsics
 * (shifts, `===`, `isequal`/`isless` on floats). The launch context jl_ctx_t is declared
 * here and defined by kernel_source (julia/compute/compiler/device.jl).
 * The g++ emulation tests (test/compute/emulation_threads.jl) replace the typedef lines and
 * the jl_h2f/jl_f2h/jl_d2h lines by their text: keep each on one line as it is. */
#ifndef CUMEM_PRELUDE_CUH
#define CUMEM_PRELUDE_CUH
#include "common.cuh"
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
typedef unsigned short half_t;
struct jl_ghost_t {};
/* the error record: a flag (0: none), the throw site, a lock, the element number, then the
 * site's values (as many bytes as the largest site needs: julia/memory/kernel_errors.jl) */
struct jl_err_t { uint32_t flag; uint32_t site; uint32_t lock; uint32_t elem; uint64_t payload[1]; };
struct jl_ctx_t;
static __device__ __forceinline__ float jl_h2f(half_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
static __device__ __forceinline__ half_t jl_f2h(float f) { half_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
static __device__ __forceinline__ half_t jl_d2h(double f) { half_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(f)); return h; }
static __device__ __forceinline__ double jl_h2d(half_t h) { return (double)jl_h2f(h); }
static __device__ __forceinline__ uint32_t jl_bits(float x) { return (uint32_t)__float_as_int(x); }
static __device__ __forceinline__ uint64_t jl_bits(double x) { return (uint64_t)__double_as_longlong(x); }
static __device__ __forceinline__ float jl_f32(uint32_t b) { return __int_as_float((int)b); }
static __device__ __forceinline__ double jl_f64(uint64_t b) { return __longlong_as_double((long long)b); }
template <typename To, typename From> static __device__ __forceinline__ To jl_bitcast(From x) { union { From f; To t; } u; u.f = x; return u.t; }
template <typename T> static __device__ __forceinline__ bool jl_egal(T a, T b) { return a == b; }
/* bswap of 16 bits (Julia's bswap_int on Int16/UInt16). LLVM turns shifts and masks into a
 * byte swap of the zero-extended value, and ptxas of CUDA 13.0 (fixed by 13.5) drops that
 * zero extension when the value was sign-extended from 8 bits, so bswap(Int16(x::Int8)) of
 * a negative x gave -1; __byte_perm's selector 0x4401 takes bytes 1 and 0 and zeros, so
 * the register's upper half never matters. */
static __device__ __forceinline__ uint16_t jl_bswap16(uint16_t x) {
#if defined(__CUDA_ARCH__)
  return (uint16_t)__byte_perm((unsigned)x, 0u, 0x4401u);
#else
  return (uint16_t)((uint16_t)(x >> 8) | (uint16_t)(x << 8));
#endif
}
static __device__ __forceinline__ bool jl_egal(float a, float b) { return jl_bits(a) == jl_bits(b); }
static __device__ __forceinline__ bool jl_egal(double a, double b) { return jl_bits(a) == jl_bits(b); }
static __device__ __forceinline__ bool jl_egal(jl_ghost_t, jl_ghost_t) { return true; }
/* isequal / isless of floats (Julia's fpiseq, fpislt) */
template <typename T> static __device__ __forceinline__ bool jl_fpiseq(T x, T y) { return (x != x && y != y) || jl_bits(x) == jl_bits(y); }
static __device__ __forceinline__ bool jl_fpislt(float x, float y) {
  int32_t a = (int32_t)jl_bits(x), b = (int32_t)jl_bits(y);
  return (x == x && y != y) || (!(x != x || y != y) && ((a >= 0 && a < b) || (a < 0 && (uint32_t)a > (uint32_t)b))); }
static __device__ __forceinline__ bool jl_fpislt(double x, double y) {
  int64_t a = (int64_t)jl_bits(x), b = (int64_t)jl_bits(y);
  return (x == x && y != y) || (!(x != x || y != y) && ((a >= 0 && a < b) || (a < 0 && (uint64_t)a > (uint64_t)b))); }
/* shifts: counts (unsigned) of at least the width give 0, or the sign for ashr */
template <typename T, typename U> static __device__ __forceinline__ T jl_shl(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (T)0 : (T)(U)((uint64_t)(U)x << n); }
template <typename T, typename U> static __device__ __forceinline__ T jl_lshr(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (T)0 : (T)(U)((uint64_t)(U)x >> n); }
template <typename T, typename U> static __device__ __forceinline__ T jl_ashr(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (x < 0 ? (T)-1 : (T)0) : (T)(x >> n); }
/* a throw site: the record keeps the throw of the lowest element number (ctx->elem: the
 * kernel's element index, as Base would have thrown first; equal numbers: the first to
 * claim). Claiming takes the record's lock (a spin lock: sm_70+ schedules the threads of
 * a warp independently), which jl_err_done releases after the site's values are stored.
 * A waiting thread reads the record again before each attempt and gives up, without the
 * lock, once it holds a throw of a lower or equal number: only the throws that lower the
 * record's number take the lock. (Every throw took it once before, one after another
 * through the record in host memory, each attempt an atomic across the bus: a grid whose
 * every element throws, `sqrt.(x .- 2f0)` over 70000 elements, ran past 460 s under
 * compute-sanitizer.) It reads the lock before its atomic and pauses between attempts,
 * 32 ns doubling to 1 us (__nanosleep, sm_70+): the holder may be a thread of its warp. */
static __device__ __forceinline__ bool jl_err_claim(jl_err_t* e, uint32_t elem) {
  volatile jl_err_t* v = e;
#if defined(__CUDACC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700)
  unsigned ns = 32u;
#endif
  while (true) {
    if (v->flag != 0u && v->elem <= elem) return false;
    if (v->lock == 0u && atomicCAS(&e->lock, 0u, 1u) == 0u) break;
#if defined(__CUDACC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700)
    __nanosleep(ns); if (ns < 1024u) ns *= 2u;
#endif
  }
  if (v->flag != 0u && v->elem <= elem) { __threadfence_system(); atomicCAS(&e->lock, 1u, 0u); return false; }
  return true; }
static __device__ __forceinline__ void jl_err_put(jl_err_t* e, int off, const void* p, int n) {
  const char* s = (const char*)p; char* d = (char*)e->payload + off; for (int i = 0; i < n; i++) d[i] = s[i]; }
static __device__ __forceinline__ void jl_err_done(jl_err_t* e, uint32_t site, uint32_t elem) {
  volatile jl_err_t* v = e; v->site = site; v->elem = elem; v->flag = 1u;
  __threadfence_system(); atomicCAS(&e->lock, 1u, 0u); }
/* the element number of a kernel's 0-based element index i (saturated) */
static __device__ __forceinline__ uint32_t jl_elem(uint64_t i) { return i < 0xffffffffull ? (uint32_t)i : 0xffffffffu; }
/* integer power by squaring, wrapping (a negative exponent is checked by the caller) */
template <typename T, typename U> static __device__ __forceinline__ T jl_ipow(T x, int64_t p) {
  if (p < 0) return x == 1 ? (T)1 : ((p & 1) ? x : (T)1);
  U r = 1, b = (U)x; while (p) { if (p & 1) r = (U)(r * b); b = (U)(b * b); p >>= 1; } return (T)r; }
template <typename T> static __device__ __forceinline__ T jl_sq(T x) { return x * x; }
/* V elements of T as one aligned chunk (V * sizeof(T) a power of two, at most 16 bytes): a
 * contiguous kernel loads and stores a chunk with one vector instruction (ld.global.v4 ...)
 * where every array's address is a multiple of the chunk's size (jl_aligned). */
template <typename T, int V> struct alignas(sizeof(T) * V) jl_vec { T v[V]; };
static __device__ __forceinline__ bool jl_aligned(const void* p, uint64_t a) { return ((uint64_t)p & (a - 1u)) == 0u; }

#endif /* CUMEM_PRELUDE_CUH */

/* The kernel language's device helpers (julia/compute/device/): atomics over the element
   types CUDA.jl supports, warp shuffles of any isbits value (split into 32-bit words, as
   CUDA.jl's shfl_recurse) and votes. Put into every user kernel's source after the
   compiled types (kernel_source's prelude). Needs the typedefs and jl_bitcast of the
   compiler's prelude (C_PRELUDE_V2), included here for a compile on its own (its guard
   keeps it once in a kernel). */
#include "prelude.cuh"
template <int N> struct jl_uint_of;
template <> struct jl_uint_of<2> { typedef unsigned short type; };
template <> struct jl_uint_of<4> { typedef unsigned int type; };
template <> struct jl_uint_of<8> { typedef unsigned long long type; };
/* read-modify-write through compare-and-swap: returns the old value */
template <typename T, typename Op> static __device__ __forceinline__ T jl_atomic_rmw(T* p, T v, Op op) {
  typedef typename jl_uint_of<sizeof(T)>::type U;
  U* q = (U*)p; U old = *(volatile U*)q, assumed;
  do { assumed = old; old = atomicCAS(q, assumed, jl_bitcast<U>(op(jl_bitcast<T>(assumed), v))); } while (assumed != old);
  return jl_bitcast<T>(old); }
template <typename T> static __device__ __forceinline__ T jl_atomic_cas(T* p, T cmp, T v) {
  typedef typename jl_uint_of<sizeof(T)>::type U;
  return jl_bitcast<T>(atomicCAS((U*)p, jl_bitcast<U>(cmp), jl_bitcast<U>(v))); }
template <typename T> static __device__ __forceinline__ T jl_atomic_xchg(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return b; }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_add(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a + b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_sub(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a - b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_mul(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a * b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_div(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a / b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_and(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a & b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_or(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a | b); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_xor(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (T)(a ^ b); }); }
/* max/min with Julia's rules for floats: NaN wins */
template <typename T> static __device__ __forceinline__ T jl_atomic_max(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (a != a || b != b) ? (T)(a + b) : (a < b ? b : a); }); }
template <typename T> static __device__ __forceinline__ T jl_atomic_min(T* p, T v) { return jl_atomic_rmw(p, v, [](T a, T b) { return (a != a || b != b) ? (T)(a + b) : (b < a ? b : a); }); }
/* the native ones */
static __device__ __forceinline__ int32_t jl_atomic_add(int32_t* p, int32_t v) { return atomicAdd((int*)p, (int)v); }
static __device__ __forceinline__ uint32_t jl_atomic_add(uint32_t* p, uint32_t v) { return atomicAdd((unsigned*)p, v); }
static __device__ __forceinline__ int64_t jl_atomic_add(int64_t* p, int64_t v) { return (int64_t)atomicAdd((unsigned long long*)p, (unsigned long long)v); }
static __device__ __forceinline__ uint64_t jl_atomic_add(uint64_t* p, uint64_t v) { return atomicAdd((unsigned long long*)p, v); }
static __device__ __forceinline__ float jl_atomic_add(float* p, float v) { return atomicAdd(p, v); }
static __device__ __forceinline__ double jl_atomic_add(double* p, double v) { return atomicAdd(p, v); }
static __device__ __forceinline__ int32_t jl_atomic_sub(int32_t* p, int32_t v) { return atomicSub((int*)p, (int)v); }
static __device__ __forceinline__ uint32_t jl_atomic_sub(uint32_t* p, uint32_t v) { return atomicSub((unsigned*)p, v); }
static __device__ __forceinline__ int64_t jl_atomic_sub(int64_t* p, int64_t v) { return (int64_t)atomicAdd((unsigned long long*)p, (unsigned long long)0 - (unsigned long long)v); }
static __device__ __forceinline__ uint64_t jl_atomic_sub(uint64_t* p, uint64_t v) { return atomicAdd((unsigned long long*)p, (unsigned long long)0 - v); }
static __device__ __forceinline__ int32_t jl_atomic_xchg(int32_t* p, int32_t v) { return atomicExch((int*)p, (int)v); }
static __device__ __forceinline__ uint32_t jl_atomic_xchg(uint32_t* p, uint32_t v) { return atomicExch((unsigned*)p, v); }
static __device__ __forceinline__ int64_t jl_atomic_xchg(int64_t* p, int64_t v) { return (int64_t)atomicExch((unsigned long long*)p, (unsigned long long)v); }
static __device__ __forceinline__ uint64_t jl_atomic_xchg(uint64_t* p, uint64_t v) { return atomicExch((unsigned long long*)p, v); }
static __device__ __forceinline__ float jl_atomic_xchg(float* p, float v) { return atomicExch(p, v); }
#define JL_ATOMIC_INT(op, fn) \
  static __device__ __forceinline__ int32_t jl_atomic_##op(int32_t* p, int32_t v) { return fn((int*)p, (int)v); } \
  static __device__ __forceinline__ uint32_t jl_atomic_##op(uint32_t* p, uint32_t v) { return fn((unsigned*)p, v); } \
  static __device__ __forceinline__ int64_t jl_atomic_##op(int64_t* p, int64_t v) { return (int64_t)fn((long long*)p, (long long)v); } \
  static __device__ __forceinline__ uint64_t jl_atomic_##op(uint64_t* p, uint64_t v) { return fn((unsigned long long*)p, v); }
JL_ATOMIC_INT(max, atomicMax)
JL_ATOMIC_INT(min, atomicMin)
#undef JL_ATOMIC_INT
#define JL_ATOMIC_BITS(op, fn) \
  static __device__ __forceinline__ int32_t jl_atomic_##op(int32_t* p, int32_t v) { return fn((int*)p, (int)v); } \
  static __device__ __forceinline__ uint32_t jl_atomic_##op(uint32_t* p, uint32_t v) { return fn((unsigned*)p, v); } \
  static __device__ __forceinline__ int64_t jl_atomic_##op(int64_t* p, int64_t v) { return (int64_t)fn((unsigned long long*)p, (unsigned long long)v); } \
  static __device__ __forceinline__ uint64_t jl_atomic_##op(uint64_t* p, uint64_t v) { return fn((unsigned long long*)p, v); }
JL_ATOMIC_BITS(and, atomicAnd)
JL_ATOMIC_BITS(or, atomicOr)
JL_ATOMIC_BITS(xor, atomicXor)
#undef JL_ATOMIC_BITS
/* Float16 (bits in half_t): arithmetic in float, rounded back */
static __device__ __forceinline__ half_t jl_atomic_addh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { return jl_f2h(jl_h2f(a) + jl_h2f(b)); }); }
static __device__ __forceinline__ half_t jl_atomic_subh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { return jl_f2h(jl_h2f(a) - jl_h2f(b)); }); }
static __device__ __forceinline__ half_t jl_atomic_mulh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { return jl_f2h(jl_h2f(a) * jl_h2f(b)); }); }
static __device__ __forceinline__ half_t jl_atomic_divh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { return jl_f2h(jl_h2f(a) / jl_h2f(b)); }); }
static __device__ __forceinline__ half_t jl_atomic_maxh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { float x = jl_h2f(a), y = jl_h2f(b); return (x != x) ? a : (y != y) ? b : (x < y ? b : a); }); }
static __device__ __forceinline__ half_t jl_atomic_minh(half_t* p, half_t v) { return jl_atomic_rmw(p, v, [](half_t a, half_t b) { float x = jl_h2f(a), y = jl_h2f(b); return (x != x) ? a : (y != y) ? b : (y < x ? b : a); }); }
/* CUDA's wrapping increment/decrement (atomicInc/atomicDec) */
static __device__ __forceinline__ uint32_t jl_atomic_inc(uint32_t* p, uint32_t v) { return atomicInc((unsigned*)p, v); }
static __device__ __forceinline__ int32_t jl_atomic_inc(int32_t* p, int32_t v) { return (int32_t)atomicInc((unsigned*)p, (unsigned)v); }
static __device__ __forceinline__ uint32_t jl_atomic_dec(uint32_t* p, uint32_t v) { return atomicDec((unsigned*)p, v); }
static __device__ __forceinline__ int32_t jl_atomic_dec(int32_t* p, int32_t v) { return (int32_t)atomicDec((unsigned*)p, (unsigned)v); }
/* shuffles of any value: mode 0 idx (lane 0-based), 1 up, 2 down, 3 xor */
template <typename T> static __device__ __forceinline__ T jl_shfl(int mode, uint32_t mask, T v, int32_t s, int32_t w) {
  const int n = (int)((sizeof(T) + 3) / 4);
  uint32_t a[(sizeof(T) + 3) / 4];
  const char* src = (const char*)&v; char* dst = (char*)a;
  for (int k = 0; k < 4 * n; k++) dst[k] = k < (int)sizeof(T) ? src[k] : 0;
  for (int k = 0; k < n; k++) {
    uint32_t x = a[k];
    a[k] = mode == 0 ? __shfl_sync(mask, x, s, w) : mode == 1 ? __shfl_up_sync(mask, x, (unsigned)s, w) :
           mode == 2 ? __shfl_down_sync(mask, x, (unsigned)s, w) : __shfl_xor_sync(mask, x, s, w);
  }
  T r; char* out = (char*)&r; for (int k = 0; k < (int)sizeof(T); k++) out[k] = dst[k];
  return r; }
/* the thread's lane, 1-based */
static __device__ __forceinline__ int32_t jl_laneid() { unsigned r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return (int32_t)r + 1; }
/* __nanosleep where the GPU has it (sm_70 and later), else nothing */
static __device__ __forceinline__ void jl_nanosleep(uint32_t t) {
#if __CUDA_ARCH__ >= 700
  __nanosleep(t);
#else
  (void)t;
#endif
}

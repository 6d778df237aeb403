/* linalg.cuh: element kernels for the linear algebra cuBLAS lacks (julia/compute/linalg/):
 * zeroing outside a band (triu!, tril!), testing a band (istriu, istril) and symmetry
 * (issymmetric, ishermitian), adding to the diagonal (A + λI), integer matrix products,
 * the tiled transpose/adjoint and the symmetric/Hermitian fill. Templates instantiated per
 * element size (moves of bits: la_w1 ... la_w16) or per element type (arithmetic and
 * comparisons: la_h16, float, double, la_c32, la_c64), each a grid-stride loop over
 * column-major matrices with leading dimension lda. Kernel names: <op>_<suffix>, the
 * suffixes of word_suffix/value_suffix in julia/compute/linalg/kernels.jl.
 * test/compute/linalg/linalg_kernel_tests.jl compiles this file with g++. */
#include "prelude.cuh"   /* jl_h2f/jl_f2h (Float16 bits <-> float), common.cuh */

typedef unsigned char la_w1; typedef unsigned short la_w2; typedef unsigned int la_w4;
typedef unsigned long long la_w8;
struct la_w16 { unsigned long long lo, hi; };
struct la_c32 { float re, im; };
struct la_c64 { double re, im; };

/* element operations: zero test, equality (x == y, or x == conj(y)), addition */
template <typename T> struct la_ops {
  static __device__ __forceinline__ bool iszero(T x) { return x == 0; }
  static __device__ __forceinline__ bool eq(T x, T y, bool conj) { return x == y; }
  static __device__ __forceinline__ T add(T x, T y) { return (T)(x + y); }
};
struct la_h16 { unsigned short bits; };
template <> struct la_ops<la_h16> {
  static __device__ __forceinline__ bool iszero(la_h16 x) { return (x.bits & 0x7fff) == 0; }
  static __device__ __forceinline__ bool eq(la_h16 x, la_h16 y, bool conj) { return jl_h2f(x.bits) == jl_h2f(y.bits); }
  static __device__ __forceinline__ la_h16 add(la_h16 x, la_h16 y) { la_h16 r; r.bits = jl_f2h(jl_h2f(x.bits) + jl_h2f(y.bits)); return r; }
};
template <> struct la_ops<la_c32> {
  static __device__ __forceinline__ bool iszero(la_c32 x) { return x.re == 0 && x.im == 0; }
  static __device__ __forceinline__ bool eq(la_c32 x, la_c32 y, bool conj) { return x.re == y.re && x.im == (conj ? -y.im : y.im); }
  static __device__ __forceinline__ la_c32 add(la_c32 x, la_c32 y) { la_c32 r; r.re = x.re + y.re; r.im = x.im + y.im; return r; }
};
template <> struct la_ops<la_c64> {
  static __device__ __forceinline__ bool iszero(la_c64 x) { return x.re == 0 && x.im == 0; }
  static __device__ __forceinline__ bool eq(la_c64 x, la_c64 y, bool conj) { return x.re == y.re && x.im == (conj ? -y.im : y.im); }
  static __device__ __forceinline__ la_c64 add(la_c64 x, la_c64 y) { la_c64 r; r.re = x.re + y.re; r.im = x.im + y.im; return r; }
};

/* outside the band: j - i < k (upper: what triu!(A, k) zeroes) or j - i > k (lower) */
static __device__ __forceinline__ bool la_outside(long long i, long long j, long long k, int upper) {
  return upper ? (j - i < k) : (j - i > k);
}

template <typename W>
__device__ __forceinline__ void la_band(W *a, long long m, long long n, long long lda, long long k, int upper) {
  const long long total = m * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % m, j = t / m;
    if (la_outside(i, j, k, upper)) a[i + j * lda] = W();
  }
}

template <typename T>
__device__ __forceinline__ void la_isband(const T *a, long long m, long long n, long long lda, long long k, int upper, int *flag) {
  const long long total = m * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % m, j = t / m;
    if (la_outside(i, j, k, upper) && !la_ops<T>::iszero(a[i + j * lda])) *flag = 1;
  }
}

template <typename T>
__device__ __forceinline__ void la_issym(const T *a, long long n, long long lda, int conj, int *flag) {
  const long long total = n * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % n, j = t / n;
    if (i <= j && !la_ops<T>::eq(a[i + j * lda], a[j + i * lda], conj != 0)) *flag = 1;
  }
}

template <typename T>
__device__ __forceinline__ void la_diagadd(T *a, long long len, long long stride, T v) {
  for (long long t = cumem_thread_index<long long>(); t < len; t += cumem_grid_threads<long long>())
    a[t * stride] = la_ops<T>::add(a[t * stride], v);
}

/* C = A * B for integers of one width, wrapping as Julia: arithmetic modulo 2^bits in the
   unsigned type U (products of the low bits are exact modulo 2^bits, signed or not) */
template <typename W, typename U>
__device__ __forceinline__ void la_imatmul(const W *a, const W *b, W *c, long long m, long long n, long long k,
                                           long long lda, long long ldb, long long ldc) {
  const long long total = m * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % m, j = t / m;
    U acc = 0;
    for (long long p = 0; p < k; p++) acc = (U)(acc + (U)((U)a[i + p * lda] * (U)b[p + j * ldb]));
    c[i + j * ldc] = (W)acc;
  }
}

/* B = transpose(A), or adjoint(A) with conj for la_c32/la_c64 (B n×m, A m×n): 32×32 tiles
   through shared memory, so reads and writes are both coalesced; any block size (thread t
   takes tile elements t, t + blockDim.x, ...), a grid-stride loop over the tiles */
template <typename W> struct la_cj { static __device__ __forceinline__ W op(W x, int c) { return x; } };
template <> struct la_cj<la_c32> { static __device__ __forceinline__ la_c32 op(la_c32 x, int c) { if (c) x.im = -x.im; return x; } };
template <> struct la_cj<la_c64> { static __device__ __forceinline__ la_c64 op(la_c64 x, int c) { if (c) x.im = -x.im; return x; } };
template <typename W>
__device__ __forceinline__ void la_transpose(W *b, const W *a, long long m, long long n, long long lda, long long ldb, int conj) {
  __shared__ W tile[32][33];
  const long long tm = (m + 31) / 32, tiles = tm * ((n + 31) / 32);
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = (t % tm) * 32, c0 = (t / tm) * 32;
    for (int e = threadIdx.x; e < 1024; e += blockDim.x) {
      const int i = e % 32, j = e / 32;           /* tile[j][i] = A[r0 + i, c0 + j] */
      if (r0 + i < m && c0 + j < n) tile[j][i] = a[(r0 + i) + (c0 + j) * lda];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 1024; e += blockDim.x) {
      const int i = e % 32, j = e / 32;           /* B[c0 + i, r0 + j] = A[r0 + j, c0 + i] */
      if (c0 + i < n && r0 + j < m) b[(c0 + i) + (r0 + j) * ldb] = la_cj<W>::op(tile[i][j], conj);
    }
    __syncthreads();
  }
}
#define LA_TRANSPOSE(S, W) extern "C" __global__ void la_transpose_##S(W *b, const W *a, long long m, long long n, long long lda, long long ldb, int conj) { CUMEM_PDL_ENTRY(); la_transpose<W>(b, a, m, n, lda, ldb, conj); }
LA_TRANSPOSE(w1, la_w1) LA_TRANSPOSE(w2, la_w2) LA_TRANSPOSE(w4, la_w4) LA_TRANSPOSE(w8, la_w8) LA_TRANSPOSE(w16, la_w16)
LA_TRANSPOSE(c32, la_c32) LA_TRANSPOSE(c64, la_c64)
#define LA_BAND(S, W) extern "C" __global__ void la_band_##S(W *a, long long m, long long n, long long lda, long long k, int upper) { CUMEM_PDL_ENTRY(); la_band<W>(a, m, n, lda, k, upper); }
LA_BAND(w1, la_w1) LA_BAND(w2, la_w2) LA_BAND(w4, la_w4) LA_BAND(w8, la_w8) LA_BAND(w16, la_w16)

#define LA_TYPED(S, T) \
  extern "C" __global__ void la_isband_##S(const T *a, long long m, long long n, long long lda, long long k, int upper, int *flag) { CUMEM_PDL_ENTRY(); la_isband<T>(a, m, n, lda, k, upper, flag); } \
  extern "C" __global__ void la_issym_##S(const T *a, long long n, long long lda, int conj, int *flag) { CUMEM_PDL_ENTRY(); la_issym<T>(a, n, lda, conj, flag); } \
  extern "C" __global__ void la_diagadd_##S(T *a, long long len, long long stride, T v) { CUMEM_PDL_ENTRY(); la_diagadd<T>(a, len, stride, v); }
LA_TYPED(w1, la_w1) LA_TYPED(w2, la_w2) LA_TYPED(w4, la_w4) LA_TYPED(w8, la_w8)
LA_TYPED(h16, la_h16) LA_TYPED(f32, float) LA_TYPED(f64, double) LA_TYPED(c32, la_c32) LA_TYPED(c64, la_c64)

#define LA_IMATMUL(S, W, U) extern "C" __global__ void la_imatmul_##S(const W *a, const W *b, W *c, long long m, long long n, long long k, long long lda, long long ldb, long long ldc) { CUMEM_PDL_ENTRY(); la_imatmul<W, U>(a, b, c, m, n, k, lda, ldb, ldc); }
LA_IMATMUL(w1, la_w1, unsigned int) LA_IMATMUL(w2, la_w2, unsigned int) LA_IMATMUL(w4, la_w4, unsigned int) LA_IMATMUL(w8, la_w8, unsigned long long)

/* the symmetric fill: the stored triangle (upper != 0: the upper one) mirrored into the
   other; for complex Hermitian matrices (la_hermfill on the float/double pairs) conjugated,
   with the imaginary part of the diagonal zeroed */
template <typename W> __device__ __forceinline__ void la_symfill(W *a, long long n, long long lda, int upper) {
  const long long total = n * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % n, j = t / n;
    if (upper ? (i > j) : (i < j)) a[i + j * lda] = a[j + i * lda];
  }
}
template <typename R> __device__ __forceinline__ void la_hermfill(R *a, long long n, long long lda, int upper) {
  const long long total = n * n;
  for (long long t = cumem_thread_index<long long>(); t < total; t += cumem_grid_threads<long long>()) {
    const long long i = t % n, j = t / n;
    if (i == j) a[2 * (i + j * lda) + 1] = 0;
    else if (upper ? (i > j) : (i < j)) {
      a[2 * (i + j * lda)] = a[2 * (j + i * lda)];
      a[2 * (i + j * lda) + 1] = -a[2 * (j + i * lda) + 1];
    }
  }
}
#define LA_SYMFILL(S, W) extern "C" __global__ void la_symfill_##S(W *a, long long n, long long lda, int upper) { CUMEM_PDL_ENTRY(); la_symfill<W>(a, n, lda, upper); }
LA_SYMFILL(w1, la_w1) LA_SYMFILL(w2, la_w2) LA_SYMFILL(w4, la_w4) LA_SYMFILL(w8, la_w8) LA_SYMFILL(w16, la_w16)
extern "C" __global__ void la_hermfill_c32(float *a, long long n, long long lda, int upper) { CUMEM_PDL_ENTRY(); la_hermfill<float>(a, n, lda, upper); }
extern "C" __global__ void la_hermfill_c64(double *a, long long n, long long lda, int upper) { CUMEM_PDL_ENTRY(); la_hermfill<double>(a, n, lda, upper); }

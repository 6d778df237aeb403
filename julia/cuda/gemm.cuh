/* gemm.cuh: the small matrix product C = alpha * op(A) * op(B) + beta * C of real Float32 and
 * Float64 matrices (julia/compute/linalg/products.jl, small_gemm!), for the shapes where a
 * cuBLAS gemm costs its fixed ~7 µs on an H100/H200 (every dimension up to a few hundred).
 *
 * The shapes are too small to fill the GPU with output tiles (the demo's 10×64 product is
 * 640 outputs), so the kernel splits k instead: a block of 256 threads takes 32 consecutive
 * outputs of C (column-major order) and 8 slices of k; thread t computes output t % 32
 * over slice t / 32 with fused multiply-adds, reading A and B straight from global memory
 * (they are a few KiB: the caches hold them; along the outputs, op = N reads A coalesced
 * and every lane of a column reads the same B element), and the 8 partial sums of each
 * output are added in slice order through shared memory. A first version with 16×16
 * output tiles through shared memory and 64 threads a block took 13–35 µs a product under
 * Nsight Compute on an H200 (each thread's 64 global loads one after another, nothing to
 * hide their latency): bench/results/h200x4-2026-11-28-session11, call B.
 *
 * Column-major operands with leading dimensions lda, ldb, ldc; ta/tb = 0 for A/B as stored,
 * 1 for their transposes (the adjoint of a real matrix). op(A) is m×k, op(B) k×n, C m×n;
 * beta == 0 does not read C (BLAS: NaN there is overwritten). Indices are 32-bit: the caller
 * keeps m*k, k*n and m*n below 2^31.
 *
 * Launch: any grid (a grid-stride loop over the groups of 32 outputs), blocks of 256
 * threads on the GPU; any block size works (a thread takes the (output, slice) pairs
 * blockDim.x apart), which is how test/compute/linalg/linalg_kernel_tests.jl runs this
 * file compiled by g++ on one thread.
 * Kernel names: cumem_gemm_small_f32, cumem_gemm_small_f64. */
#include "common.cuh"

#define GEMM_OUTS 32      /* outputs of C a block takes at a time */
#define GEMM_SPLIT 8      /* slices of k, each a warp's on the GPU */
#define GEMM_THREADS 256  /* GEMM_OUTS * GEMM_SPLIT */

/* x * y + a rounded once, as cuBLAS accumulates (the package's kernels are compiled
   without contraction, so it is spelled out); the C library's fma under g++ */
#if defined(__CUDACC__)
static __device__ __forceinline__ float cumem_gemm_fma(float x, float y, float a) { return __fmaf_rn(x, y, a); }
static __device__ __forceinline__ double cumem_gemm_fma(double x, double y, double a) { return __fma_rn(x, y, a); }
#else
#include <math.h>
static inline float cumem_gemm_fma(float x, float y, float a) { return fmaf(x, y, a); }
static inline double cumem_gemm_fma(double x, double y, double a) { return fma(x, y, a); }
#endif

template <typename T>
__device__ __forceinline__ void cumem_gemm_small(T *c, const T *a, const T *b, int m, int n, int k, int lda, int ldb,
                                                 int ldc, int ta, int tb, T alpha, T beta) {
  __shared__ T part[GEMM_SPLIT][GEMM_OUTS];  /* each slice's partial sum of each output */
  const int outs = m * n, groups = (outs + GEMM_OUTS - 1) / GEMM_OUTS;
  const int kc = (k + GEMM_SPLIT - 1) / GEMM_SPLIT;  /* k per slice */
  /* A(r, p) = a[r * ars + p * aps], B(p, col) = b[p * bps + col * bcs] */
  const int ars = ta ? lda : 1, aps = ta ? 1 : lda, bps = tb ? ldb : 1, bcs = tb ? 1 : ldb;
  for (int g = blockIdx.x; g < groups; g += gridDim.x) {
    for (int q = threadIdx.x; q < GEMM_THREADS; q += blockDim.x) {
      const int o = g * GEMM_OUTS + q % GEMM_OUTS, s = q / GEMM_OUTS;
      T acc = T(0);
      if (o < outs) {
        const int r = o % m, col = o / m, p1 = k < (s + 1) * kc ? k : (s + 1) * kc;
        const T *ap = a + r * ars, *bp = b + col * bcs;
#pragma unroll 8
        for (int p = s * kc; p < p1; ++p) acc = cumem_gemm_fma(ap[p * aps], bp[p * bps], acc);
      }
      part[s][q % GEMM_OUTS] = acc;
    }
    __syncthreads();
    for (int q = threadIdx.x; q < GEMM_OUTS; q += blockDim.x) {
      const int o = g * GEMM_OUTS + q;
      if (o < outs) {
        T acc = part[0][q];
        for (int s = 1; s < GEMM_SPLIT; ++s) acc += part[s][q];
        T *cp = c + (o % m + (o / m) * ldc);
        *cp = beta == T(0) ? alpha * acc : cumem_gemm_fma(alpha, acc, beta * *cp);
      }
    }
    __syncthreads();  /* part read by every thread before the next group writes it */
  }
}

#define CUMEM_GEMM_SMALL(S, T)                                                                                      \
  CUMEM_KERNEL void cumem_gemm_small_##S(T *c, const T *a, const T *b, int m, int n, int k, int lda, int ldb,        \
                                         int ldc, int ta, int tb, T alpha, T beta) {                               \
    CUMEM_PDL_ENTRY();                                                                                             \
    cumem_gemm_small<T>(c, a, b, m, n, k, lda, ldb, ldc, ta, tb, alpha, beta);                                     \
  }
CUMEM_GEMM_SMALL(f32, float)
CUMEM_GEMM_SMALL(f64, double)

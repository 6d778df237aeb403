/* gemm.cuh: the small matrix product C = alpha * op(A) * op(B) + beta * C of real Float32 and
 * Float64 matrices (julia/compute/linalg/products.jl, small_gemm!), for the shapes where a
 * cuBLAS gemm costs its fixed ~7 µs on an H100/H200 (every dimension up to a few hundred):
 * one kernel of 16×16 output tiles, 64 threads a block, each thread a 2×2 block of outputs
 * accumulated in registers over k in chunks of GEMM_TK through shared memory (padded rows:
 * the loads are coalesced along whichever index is contiguous in memory for op = N or T,
 * and the shared stores and reads have no bank conflicts to speak of).
 *
 * Column-major operands with leading dimensions lda, ldb, ldc; ta/tb = 0 for A/B as stored,
 * 1 for their transposes (the adjoint of a real matrix). op(A) is m×k, op(B) k×n, C m×n;
 * beta == 0 does not read C (BLAS: NaN there is overwritten). The products are accumulated
 * in order p = 0, 1, ..., k-1 by fused multiply-adds. Indices are 32-bit: the caller keeps
 * m*k, k*n and m*n below 2^31.
 *
 * Launch: any grid (a grid-stride loop over the tiles), blocks of 64 threads on the GPU; a
 * block size that divides 64 also works (each thread then takes 64/blockDim.x micro-tiles
 * one after the other, loading the chunks again for each), which is how
 * test/compute/linalg/linalg_kernel_tests.jl runs this file compiled by g++ on one thread.
 * Kernel names: cumem_gemm_small_f32, cumem_gemm_small_f64. */
#include "common.cuh"

#define GEMM_TILE 16      /* output tile: GEMM_TILE × GEMM_TILE */
#define GEMM_TK 64        /* k per shared-memory chunk */
#define GEMM_THREADS 64   /* (GEMM_TILE / 2)^2 threads, each a 2×2 micro-tile */

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
  /* as[p][i] = op(A)[r0 + i, p0 + p], bs[p][j] = op(B)[p0 + p, c0 + j] (zero outside) */
  __shared__ T as[GEMM_TK][GEMM_TILE + 1];
  __shared__ T bs[GEMM_TK][GEMM_TILE + 1];
  const int tm = (m + GEMM_TILE - 1) / GEMM_TILE;
  const int tiles = tm * ((n + GEMM_TILE - 1) / GEMM_TILE);
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int r0 = (t % tm) * GEMM_TILE, c0 = (t / tm) * GEMM_TILE;
    for (int q = threadIdx.x; q < GEMM_THREADS; q += blockDim.x) {
      const int i0 = 2 * (q % (GEMM_TILE / 2)), j0 = 2 * (q / (GEMM_TILE / 2));
      T acc00 = T(0), acc10 = T(0), acc01 = T(0), acc11 = T(0);
      for (int p0 = 0; p0 < k; p0 += GEMM_TK) {
        const int pn = k - p0 < GEMM_TK ? k - p0 : GEMM_TK;
        __syncthreads();   /* the previous chunk read by every thread */
        for (int e = threadIdx.x; e < GEMM_TK * GEMM_TILE; e += blockDim.x) {
          int i, p;
          if (ta) { p = e % GEMM_TK; i = e / GEMM_TK; } else { i = e % GEMM_TILE; p = e / GEMM_TILE; }
          const int r = r0 + i, s = p0 + p;
          as[p][i] = (r < m && p < pn) ? a[ta ? s + r * lda : r + s * lda] : T(0);
        }
        for (int e = threadIdx.x; e < GEMM_TK * GEMM_TILE; e += blockDim.x) {
          int j, p;
          if (tb) { j = e % GEMM_TILE; p = e / GEMM_TILE; } else { p = e % GEMM_TK; j = e / GEMM_TK; }
          const int col = c0 + j, s = p0 + p;
          bs[p][j] = (col < n && p < pn) ? b[tb ? col + s * ldb : s + col * ldb] : T(0);
        }
        __syncthreads();
#pragma unroll 4
        for (int p = 0; p < pn; ++p) {
          const T x0 = as[p][i0], x1 = as[p][i0 + 1], y0 = bs[p][j0], y1 = bs[p][j0 + 1];
          acc00 = cumem_gemm_fma(x0, y0, acc00); acc10 = cumem_gemm_fma(x1, y0, acc10);
          acc01 = cumem_gemm_fma(x0, y1, acc01); acc11 = cumem_gemm_fma(x1, y1, acc11);
        }
      }
      const T accs[2][2] = {{acc00, acc01}, {acc10, acc11}};
      for (int di = 0; di < 2; ++di)
        for (int dj = 0; dj < 2; ++dj) {
          const int r = r0 + i0 + di, col = c0 + j0 + dj;
          if (r < m && col < n) {
            T *cp = c + (r + col * ldc);
            *cp = beta == T(0) ? alpha * accs[di][dj] : cumem_gemm_fma(alpha, accs[di][dj], beta * *cp);
          }
        }
    }
  }
}

#define CUMEM_GEMM_SMALL(S, T)                                                                                      \
  CUMEM_KERNEL void cumem_gemm_small_##S(T *c, const T *a, const T *b, int m, int n, int k, int lda, int ldb,        \
                                         int ldc, int ta, int tb, T alpha, T beta) {                               \
    cumem_gemm_small<T>(c, a, b, m, n, k, lda, ldb, ldc, ta, tb, alpha, beta);                                     \
  }
CUMEM_GEMM_SMALL(f32, float)
CUMEM_GEMM_SMALL(f64, double)

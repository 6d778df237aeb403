/* findext.cuh: findmax/findmin/argmax/argmin (julia/compute/reduce/findext.jl), after the
 * compiler's output. The kernel source defines, before this text,
 *   CUMEM_BETTER(w, v)  whether candidate w replaces v (the compiled CuMem.FindBetter:
 *                       a NaN beats every number, otherwise isless decides),
 * and after it one kernel, cumem_findext, that calls cumem_findext_body. One block per
 * output j (grid-stride over nout): (value, index) pairs over the output's nred reduced
 * elements, ties to the smaller index k (0-based over the reduced dimensions), written to
 * outv[j], outi[j]. Layout as reduce.cuh's (NK kept dimensions ks/kst; reduced elements at
 * base + k when LINEAR, else over the NR dimensions rs/rst). */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* (v, i) becomes (w, k) when w is better, or equally good at a smaller index; i < 0: none yet,
   k < 0: no candidate */
template <typename T>
static __device__ __forceinline__ void cumem_findext_combine(jl_ctx_t& ctx, T& v, int64_t& i, T w, int64_t k) {
  if (k < 0) return;
  if (i < 0) { v = w; i = k; return; }
  const bool wb = CUMEM_BETTER(w, v), vb = CUMEM_BETTER(v, w);
  if (wb || (!vb && k < i)) { v = w; i = k; }
}

template <typename TC, typename IDX, typename OFF, int NK, int NR, bool LINEAR>
static __device__ __forceinline__ void cumem_findext_body(jl_ctx_t& ctx, const TC* src, TC* outv, int64_t* outi, IDX nout,
                                                          IDX nred, const IDX* ks, const OFF* kst, const IDX* rs, const OFF* rst) {
  __shared__ TC shv[32];
  __shared__ int64_t shi[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
  for (IDX j = blockIdx.x; j < nout; j += gridDim.x) {
    OFF base = 0;
    if (NK > 0) {
      IDX r = j;
      #pragma unroll
      for (int d = 0; d < NK; d++) { base += (OFF)(r % ks[d]) * kst[d]; r /= ks[d]; }
    }
    TC v = src[base]; int64_t vi = -1;
    for (IDX k = threadIdx.x; k < nred; k += blockDim.x) {
      OFF off = base;
      if (LINEAR) off = base + (OFF)k;
      else {
        IDX r = k;
        #pragma unroll
        for (int d = 0; d < NR; d++) { off += (OFF)(r % rs[d]) * rst[d]; r /= rs[d]; }
      }
      cumem_findext_combine(ctx, v, vi, src[off], (int64_t)k);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const TC w = cumem_shfl_down(v, o);
      const int64_t k = cumem_shfl_down(vi, o);
      cumem_findext_combine(ctx, v, vi, w, k);
    }
    if (lane == 0) { shv[warp] = v; shi[warp] = vi; }
    __syncthreads();
    if (warp == 0) {
      if (lane < nwarps) { v = shv[lane]; vi = shi[lane]; } else vi = -1;
      for (int o = 16; o > 0; o >>= 1) {
        const TC w = cumem_shfl_down(v, o);
        const int64_t k = cumem_shfl_down(vi, o);
        cumem_findext_combine(ctx, v, vi, w, k);
      }
      if (lane == 0) { outv[j] = v; outi[j] = vi; }
    }
    __syncthreads();
  }
}

/* reduce.cuh: the reduction over some dimensions (julia/compute/reduce/mapreduce.jl,
 * reduce_source), after the compiler's output (prelude, types, jl_ctx_t, the compiled
 * element functions). The kernel source defines, before this text:
 *   CUMEM_F(x)      f of one loaded element, as the accumulator type (a compiled call
 *                   through ctx and the function object f),
 *   CUMEM_OP(a, b)  op of two accumulators,
 *   CUMEM_OUT(a)    an output's value from its accumulator (the compiled `fin` or a itself),
 * and after it one kernel, cumem_reduce, that calls cumem_reduce_body with its parameters.
 *
 * Layout (mapreduce.jl's ReducePlan): output j's elements start at src + base(j), base from
 * the NK kept dimensions (sizes ks, strides kst, in elements); reduced element k (0-based)
 * is at base + k (LINEAR) or at the offset of k over the NR reduced dimensions (rs, rst).
 * Blocks: gx * gy in x; block b reduces its share (grid-stride over gy blocks) of output
 * j = b % gx, j + gx, ... and writes out[(b / gx) * nout + j] (gy > 1: partials). */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* 16 bytes of W elements of T, for one vector load */
template <typename T, int W> struct __align__(16) cumem_vec { T x[W]; };

template <typename TC, typename AC, typename OUT, typename IDX, typename OFF, int NK, int NR, bool LINEAR, int W,
          typename FT, typename OPT, typename FINT>
static __device__ __forceinline__ void cumem_reduce_body(jl_ctx_t& ctx, const TC* src, OUT* out, IDX nout, IDX nred, IDX gx,
                                                         AC neut, const IDX* ks, const OFF* kst, const IDX* rs, const OFF* rst,
                                                         FT f, OPT op, FINT fin) {
  __shared__ AC sh[32];
  const IDX by = blockIdx.x / gx, bx = blockIdx.x % gx, gy = gridDim.x / gx;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
  for (IDX j = bx; j < nout; j += gx) {
    OFF base = 0;
    if (NK > 0) {
      IDX r = j;
      #pragma unroll
      for (int d = 0; d < NK; d++) { base += (OFF)(r % ks[d]) * kst[d]; r /= ks[d]; }
    }
    AC acc = neut;
    if (LINEAR) {
      /* contiguous elements: four independent accumulators over four consecutive grid-stride
         steps keep four loads in flight per thread (one accumulator serialises each load
         behind the previous add: sum at 0.69 of torch.sum's bandwidth on an H100) */
      AC acc1 = neut, acc2 = neut, acc3 = neut;
      const IDX stride = (IDX)blockDim.x * gy;
      IDX k = by * blockDim.x + threadIdx.x;
      if (W > 0 && ((uint64_t)src & 15) == 0) {
        /* W > 0 (one output, 4- or 8-byte elements): 16-byte loads from a 16-byte aligned
           start into W accumulators, the W-aligned tail below */
        typedef cumem_vec<TC, (W > 0 ? W : 1)> vec_t;
        const vec_t* vs = reinterpret_cast<const vec_t*>(src);
        const IDX nv = nred / W;
        #pragma unroll 4
        for (IDX i = k; i < nv; i += stride) {
          const vec_t w = vs[i];
          acc = CUMEM_OP(acc, CUMEM_F(w.x[0]));
          acc1 = CUMEM_OP(acc1, CUMEM_F(w.x[W > 1 ? 1 : 0]));
          if (W > 2) {
            acc2 = CUMEM_OP(acc2, CUMEM_F(w.x[W > 2 ? 2 : 0]));
            acc3 = CUMEM_OP(acc3, CUMEM_F(w.x[W > 3 ? 3 : 0]));
          }
        }
        k += nv * W;
      } else
        for (; k + 3 * stride < nred; k += 4 * stride) {
          const TC v0 = src[base + (OFF)(k + 0 * stride)];
          const TC v1 = src[base + (OFF)(k + 1 * stride)];
          const TC v2 = src[base + (OFF)(k + 2 * stride)];
          const TC v3 = src[base + (OFF)(k + 3 * stride)];
          acc = CUMEM_OP(acc, CUMEM_F(v0));
          acc1 = CUMEM_OP(acc1, CUMEM_F(v1));
          acc2 = CUMEM_OP(acc2, CUMEM_F(v2));
          acc3 = CUMEM_OP(acc3, CUMEM_F(v3));
        }
      acc = CUMEM_OP(acc, acc1);
      acc2 = CUMEM_OP(acc2, acc3);
      acc = CUMEM_OP(acc, acc2);
      for (; k < nred; k += stride) {
        const OFF off = base + (OFF)k;
        acc = CUMEM_OP(acc, CUMEM_F(src[off]));
      }
    } else {
      for (IDX k = by * blockDim.x + threadIdx.x; k < nred; k += (IDX)blockDim.x * gy) {
        OFF off = base; IDX r = k;
        #pragma unroll
        for (int d = 0; d < NR; d++) { off += (OFF)(r % rs[d]) * rst[d]; r /= rs[d]; }
        acc = CUMEM_OP(acc, CUMEM_F(src[off]));
      }
    }
    for (int o = 16; o > 0; o >>= 1) acc = CUMEM_OP(acc, cumem_shfl_down(acc, o));
    if (lane == 0) sh[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < nwarps ? sh[lane] : neut;
      for (int o = 16; o > 0; o >>= 1) acc = CUMEM_OP(acc, cumem_shfl_down(acc, o));
      if (lane == 0) {
        out[by * nout + j] = CUMEM_OUT(acc);
      }
    }
    __syncthreads();
  }
}

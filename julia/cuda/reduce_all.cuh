/* reduce_all.cuh: the fixed parts of the whole-array reduction cumem_reduce_all
 * (julia/compute/reduce/reduce_full.jl, full_reduce_source, which generates the kernel's
 * parameter list and its unrolled loads for the K source arrays). The kernel source
 * defines, before this text,
 *   CUMEM_F(x1, ..., xK)  f of one element of each source, as the accumulator type,
 *   CUMEM_OP(a, b)        op of two accumulators (a compiled call through ctx and op).
 * Each block of FULL_THREADS (256) threads reduces its grid-stride share into four
 * accumulators, combines them, reduces across the block and writes its partial to
 * part[blockIdx.x]; the host combines the partials. */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* the kernel's launch bounds: 256 threads (FULL_THREADS in reduce_full.jl), 4 blocks per SM */
#ifdef __CUDACC__
#define CUMEM_BOUNDS __launch_bounds__(256, 4)
#else
#define CUMEM_BOUNDS
#endif

/* a = op(a, f(elements...)), in a's type */
#define CUMEM_ACC(a, ...) { const decltype(a) b_ = CUMEM_F(__VA_ARGS__); a = CUMEM_OP(a, b_); }
/* the same for element number i_ (0-based): a throw of a lower one wins (jl_err_claim) */
#define CUMEM_ACC_AT(i_, a, ...) { ctx.elem = jl_elem(i_); CUMEM_ACC(a, __VA_ARGS__) }

/* the end of the kernel: the four accumulators combined ((acc op acc1) op (acc2 op acc3)),
   reduced over the warp, then over the block's warps (neut for the missing ones), and the
   block's partial written to part[blockIdx.x] */
template <typename AC, typename OPT>
static __device__ __forceinline__ void cumem_reduce_all_finish(jl_ctx_t& ctx, OPT op, AC acc, AC acc1, AC acc2, AC acc3,
                                                               AC neut, AC* part) {
  __shared__ AC sh[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
  acc = CUMEM_OP(acc, acc1);
  acc2 = CUMEM_OP(acc2, acc3);
  acc = CUMEM_OP(acc, acc2);
  for (int o = 16; o > 0; o >>= 1) { const AC b_ = cumem_shfl_down(acc, o); acc = CUMEM_OP(acc, b_); }
  if (lane == 0) sh[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < nwarps ? sh[lane] : neut;
    for (int o = 16; o > 0; o >>= 1) { const AC b_ = cumem_shfl_down(acc, o); acc = CUMEM_OP(acc, b_); }
    if (lane == 0) part[blockIdx.x] = acc;
  }
}

/* bitonic.cuh: one merge step of Batcher's bitonic sorting network over a permutation, for
 * sorts with a general comparison (julia/compute/algorithms/sorting.jl, bitonic_perm), after
 * the compiler's output. The kernel source ends with one kernel, cumem_bitonic, that calls
 * cumem_bitonic_step with the compiled comparison as a lambda cmp(a, b) = lt(by(a), by(b)). */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* Step (k, j) over the m = 2^p slots of the permutation idx (0-based; slots >= n hold
   indices >= n, which order after every element), grid-stride. Ties are broken on the
   original index, so the sort is stable. */
template <typename T, typename Cmp>
static __device__ __forceinline__ void cumem_bitonic_step(const T* v, int64_t* idx, int64_t n, int64_t m, int64_t k, int64_t j, Cmp cmp)
{
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t l = i ^ j;
    if (l <= i) continue;
    const int64_t p = idx[i], q = idx[l];
    bool after;    /* whether element p belongs after element q */
    if (p >= n || q >= n) after = p > q;
    else {
      const bool qp = cmp(v[q], v[p]);
      const bool pq = cmp(v[p], v[q]);
      after = qp || (!pq && p > q);
    }
    if (((i & k) == 0) == after) { idx[i] = q; idx[l] = p; }
  }
}

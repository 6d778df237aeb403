/* search.cuh: the fixed kernels of searching and rearranging (julia/compute/algorithms/
 * searching.jl, as CuMem.SEARCH_SOURCE; the compiler's prelude gives int64_t, uint8_t, ...): the scatter of stream compaction (findall), the first/last true
 * element (findfirst/findlast), and the gather/scatter of elements of w bytes by 1-based
 * Int64 index vectors (getindex/setindex! with index arrays). Each is a grid-stride loop. */
#include "prelude.cuh"

/* out[incl[i] - 1] = the index of element i (1-based; linear, or n-d coordinates) when m[i] */
extern "C" __global__ void cumem_compact(const bool* m, const int64_t* incl, int64_t* out, int64_t n,
                                         int nd, int64_t s1, int64_t s2, int64_t s3, int64_t s4,
                                         int64_t s5, int64_t s6, int64_t s7)
{
  CUMEM_PDL_ENTRY();
  const int64_t sz[7] = {s1, s2, s3, s4, s5, s6, s7};
  for (int64_t i = cumem_thread_index<int64_t>(); i < n; i += cumem_grid_threads<int64_t>()) {
    if (!m[i]) continue;
    int64_t* o = out + (incl[i] - 1) * nd;
    if (nd == 1) { o[0] = i + 1; continue; }
    int64_t r = i;
    for (int d = 0; d < nd - 1; d++) { o[d] = r % sz[d] + 1; r /= sz[d]; }
    o[nd - 1] = r + 1;
  }
}
/* the smallest (first = 1) or largest (first = 0) i with m[i], or -1 */
extern "C" __global__ void cumem_findone(const bool* m, int64_t n, unsigned long long* res, int first)
{
  CUMEM_PDL_ENTRY();
  for (int64_t i = cumem_thread_index<int64_t>(); i < n; i += cumem_grid_threads<int64_t>()) {
    if (!m[i]) continue;
    if (first) atomicMin(res, (unsigned long long)i); else atomicMax(res, (unsigned long long)(i + 1));
  }
}
/* dst[i] = src[idx[i] - 1] for elements of w bytes (1, 2, 4, 8 or 16) */
extern "C" __global__ void cumem_gather(const uint8_t* src, const int64_t* idx, uint8_t* dst, int64_t n, int w)
{
  CUMEM_PDL_ENTRY();
  for (int64_t i = cumem_thread_index<int64_t>(); i < n; i += cumem_grid_threads<int64_t>()) {
    const int64_t j = idx[i] - 1;
    switch (w) {
      case 1: dst[i] = src[j]; break;
      case 2: ((uint16_t*)dst)[i] = ((const uint16_t*)src)[j]; break;
      case 4: ((uint32_t*)dst)[i] = ((const uint32_t*)src)[j]; break;
      case 8: ((uint64_t*)dst)[i] = ((const uint64_t*)src)[j]; break;
      default: for (int b = 0; b < w; b++) dst[i * w + b] = src[j * w + b];
    }
  }
}
/* dst[idx[i] - 1] = src[i] (the scatter of setindex!; later duplicates win as on the CPU only
   when idx has none, as in CUDA.jl) */
extern "C" __global__ void cumem_scatter(const uint8_t* src, const int64_t* idx, uint8_t* dst, int64_t n, int w, int64_t sstride)
{
  CUMEM_PDL_ENTRY();
  for (int64_t i = cumem_thread_index<int64_t>(); i < n; i += cumem_grid_threads<int64_t>()) {
    const int64_t j = idx[i] - 1, k = i * sstride;
    switch (w) {
      case 1: dst[j] = src[k]; break;
      case 2: ((uint16_t*)dst)[j] = ((const uint16_t*)src)[k]; break;
      case 4: ((uint32_t*)dst)[j] = ((const uint32_t*)src)[k]; break;
      case 8: ((uint64_t*)dst)[j] = ((const uint64_t*)src)[k]; break;
      default: for (int b = 0; b < w; b++) dst[j * w + b] = src[k * w + b];
    }
  }
}

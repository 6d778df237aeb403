/* random.cuh: the random-number kernel (julia/compute/random/random.jl); the compiler's
 * prelude gives uint32_t/uint64_t, half_t and jl_f2h. Philox4x32-10 (Salmon, Moraes,
 * Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), as cuRAND's Philox:
 * group g of D::G elements takes the four words philox({g lo, g hi, c2, c3}, {k0, k1}), and
 * element i of the group is D::at<T>(w, i), bit for bit what uniform_from/normal_from in
 * random.jl compute on the host. One kernel per element type and distribution:
 *   CUMEM_RANDOM_KERNEL(float, cumem_uniform_f32)
 * defines extern "C" cumem_random(T* dst, uint64_t n, k0, k1, c2, c3) over n elements. */
#include "prelude.cuh"

/* ten Philox4x32 rounds on the counter c under the key (k0, k1), in place */
static __device__ __forceinline__ void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
  #pragma unroll
  for (int i = 0; i < 10; i++) {
    if (i > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint32_t lo0 = 0xD2511F53u * c[0], hi0 = __umulhi(0xD2511F53u, c[0]);
    const uint32_t lo1 = 0xCD9E8D57u * c[2], hi1 = __umulhi(0xCD9E8D57u, c[2]);
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
  }
}

/* words a (low) and b (high) of a group as one 64-bit word */
static __device__ __forceinline__ uint64_t cumem_w64(const uint32_t* w, int a, int b) {
  return ((uint64_t)w[a] | ((uint64_t)w[b] << 32));
}

/* The distributions: G elements per group; at<T>(w, i) is element i (0-based). */
/* integers of 4 bytes or less: the word, truncated */
struct cumem_uniform_bits32 {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return (T)w[i]; }
};
/* 8-byte integers: a word pair */
struct cumem_uniform_bits64 {
  static const int G = 2;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return (T)cumem_w64(w, 2 * i, 2 * i + 1); }
};
/* Bool: the word's low bit */
struct cumem_uniform_bool {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return (w[i] & 1u) != 0; }
};
/* [0, 1) on the grid of 2^-24 (Float32), 2^-11 (Float16), 2^-53 (Float64) */
struct cumem_uniform_f32 {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return (float)(w[i] >> 8) * 0x1p-24f; }
};
struct cumem_uniform_f16 {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return jl_f2h((float)(w[i] >> 21) * 0x1p-11f); }
};
struct cumem_uniform_f64 {
  static const int G = 2;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return (double)(cumem_w64(w, 2 * i, 2 * i + 1) >> 11) * 0x1p-53; }
};
/* standard normals by Box-Muller: words (2p, 2p + 1) give elements 2p (cosine) and 2p + 1
   (sine) in Float32 (Float16 rounds them); Float64 uses the two 64-bit words */
struct cumem_normal_f32 {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) {
    const int p = i / 2;
    const float r = sqrtf(-2.0f * logf((float)((w[2 * p] >> 8) + 1) * 0x1p-24f));
    const float u2 = ((float)(w[2 * p + 1] >> 8) * 0x1p-24f);
    return i % 2 == 0 ? r * cospif(2.0f * u2) : r * sinpif(2.0f * u2);
  }
};
struct cumem_normal_f16 {
  static const int G = 4;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) { return jl_f2h(cumem_normal_f32::at<float>(w, i)); }
};
struct cumem_normal_f64 {
  static const int G = 2;
  template <typename T> static __device__ __forceinline__ T at(const uint32_t* w, int i) {
    const double r = sqrt(-2.0 * log((double)(((cumem_w64(w, 0, 1)) >> 11) + 1) * 0x1p-53));
    const double u2 = ((double)(cumem_w64(w, 2, 3) >> 11) * 0x1p-53);
    return i == 0 ? r * cospi(2.0 * u2) : r * sinpi(2.0 * u2);
  }
};

/* dst[0:n) from the stream (k0, k1; c2, c3): a grid-stride loop over the groups */
template <typename T, typename D>
static __device__ __forceinline__ void cumem_random_body(T* dst, uint64_t n, uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3) {
  const uint64_t groups = (n + (D::G - 1)) / D::G;
  for (uint64_t g = cumem_thread_index<uint64_t>(); g < groups; g += cumem_grid_threads<uint64_t>()) {
    uint32_t w[4] = {(uint32_t)g, (uint32_t)(g >> 32), c2, c3};
    philox(w, k0, k1);
    #pragma unroll
    for (int i = 0; i < D::G; i++)
      if (g * D::G + i < n) dst[g * D::G + i] = D::template at<T>(w, i);
  }
}

#define CUMEM_RANDOM_KERNEL(T, D) \
  extern "C" __global__ void cumem_random(T* dst, uint64_t n, uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3) { CUMEM_PDL_ENTRY(); \
    cumem_random_body<T, D>(dst, n, k0, k1, c2, c3); \
  }

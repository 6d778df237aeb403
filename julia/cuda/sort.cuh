/* Onesweep LSD radix sort (Adinets & Merrill, "Onesweep: A Faster Least Significant Digit
 * Radix Sort for GPUs", 2022; the scheme of CUB's DeviceRadixSort on sm_70+).
 *
 * Fixed text, instantiated by the typedefs and macros that julia/compute/algorithms/sorting.jl
 * puts before it (after C_PRELUDE_V2's integer typedefs):
 *   cumem_key_t     the unsigned type of a key's bits (uint8_t .. uint64_t)
 *   cumem_val_t     the payload (uint32_t, uint64_t; uint8_t when there is none)
 *   cumem_status_t  a look-back word: uint32_t (n < 2^30) or uint64_t
 *   CUMEM_KEY_KIND  0 unsigned (also Bool, Char), 1 signed, 2 IEEE float
 *   CUMEM_KEY_BITS  8 * sizeof(cumem_key_t);  CUMEM_MANT  mantissa bits of a float key
 *
 * Launch order for n keys (1 <= n < 2^32), NPASS = sizeof(cumem_key_t) digits of 8 bits:
 *   1. cumem_sort_hist      every digit's histogram in one read of the keys
 *   2. cumem_sort_offsets   one block: exclusive offsets per digit; which passes are active
 *                           (a digit equal over all keys is skipped) and their buffer parity
 *   3. cumem_sort_onesweep  once per pass p = 0 .. NPASS-1 (a skipped pass returns at once):
 *                           tiles of CUMEM_SORT_TILE keys taken in order by an atomic
 *                           counter, ranked in shared memory (warp match), digit offsets by
 *                           decoupled look-back over the tiles, keys (and payload) regrouped
 *                           in shared memory before the scattered write
 *   4. cumem_sort_finish    the result back into the A buffers after an odd number of passes
 * or, for n <= CUMEM_SORT_TILE, cumem_sort_small alone (one block, every pass in shared memory).
 * Keys are mapped to unsigned integers whose order is Julia's isless (floats: negatives
 * complemented, the sign bit set on the others, every NaN to the largest key: NaNs last,
 * -0.0 before 0.0), complemented when `flip` (rev), on the first active pass's load and back
 * on the last one's store. Stable: equal keys keep their order (ranks follow tile order,
 * tiles follow input order). Scratch (hist/info/counters and status) must be zero before 1. */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* Tuning (sorting.jl's radix_source defines them from CuMem.sort_tuning(); these are the
 * defaults): keys per thread of a tile, the onesweep kernel's __launch_bounds__ minimum of
 * resident blocks per SM (0: none; with 256 threads 3: at most 80 registers, 4: at most 64; with
 * 384 threads 3: at most 56. NVRTC 13's sm_90 compile of 4-byte keys without payload fits 256 x 24
 * in 64 and 384 x 18 in 56 without spilling; without bounds 256 x 24 takes 72:
 * bench/results/host-2026-11-29-sort15), tiles a digit's look-back reads
 * per round trip, and its pause in ns (__nanosleep; 0: none) before it reads a tile that was
 * not yet published again (a thread polling L2 in a loop takes issue slots from the warps
 * still ranking keys). */
/* threads of a onesweep (and histogram, one-block) block: a multiple of 32 from 256 to 1024;
   threads 0-255 own the 256 digits (counts, scans, look-back), the others only rank and move
   keys (CUB's onesweep for 4-byte keys on sm_90: 384 threads of 19-20 keys) */
#ifndef CUMEM_SORT_THREADS
#define CUMEM_SORT_THREADS 256
#endif
/* keys a thread of the histogram kernel loads before it counts any (in flight together) */
#ifndef CUMEM_SORT_HIST
#define CUMEM_SORT_HIST 4
#endif
#ifndef CUMEM_SORT_ITEMS
#define CUMEM_SORT_ITEMS 16
#endif
#ifndef CUMEM_SORT_BLOCKS_PER_SM
#define CUMEM_SORT_BLOCKS_PER_SM 4
#endif
#ifndef CUMEM_SORT_LOOKBACK
#define CUMEM_SORT_LOOKBACK 8
#endif
#ifndef CUMEM_SORT_SLEEP_NS
#define CUMEM_SORT_SLEEP_NS 100
#endif
/* the onesweep's warp match: 1 a shared-memory atomicOr per key, 0 ballots, 2 each pass its own:
   ballots where one digit holds more than 1/8 of the keys (lanes of equal digit serialize the
   atomicOr: the top byte of uniform floats in [0, 1) takes about three values), else atomicOr;
   3 as 2 with __match_any_sync in place of the ballots (one instruction whose cost grows with
   the distinct digits of the warp: few where one digit holds more than 1/8 of the keys) */
#ifndef CUMEM_SORT_MATCH
#define CUMEM_SORT_MATCH 2
#endif
/* the onesweep's early counts (CUB's BlockRadixRankMatchEarlyCounts): 0 none, the tile's digit
   counts come from the ranking and are published after it; 1 the tile's count of each digit by
   shared-memory atomics right after the load (lanes of equal digit first merged by
   __match_any_sync where one digit holds more than 1/8 of the keys), published at once, so that
   the next tiles' look-back need not wait for this tile's ranking; the look-back after the
   ranking; 2 as 1, and the look-back (and the tile's prefix published) before the ranking */
#ifndef CUMEM_SORT_EARLY
#define CUMEM_SORT_EARLY 0
#endif
/* how the look-back takes a window of CUMEM_SORT_LOOKBACK tiles: 0 tile by tile, a branch
   each (about 13 instructions a tile); 1 each tile's flag as a bit of two masks (unpublished or
   prefix: where the walk stops; prefix), the stop found by one __ffs and the counts added under
   a predicate (about 6 a tile, no branch): the look-back took about a third of the onesweep's
   instructions (ncu: ~270 M a pass of 10^8 keys, ~90 M of them outside the per-key code) */
#ifndef CUMEM_SORT_WALK
#define CUMEM_SORT_WALK 0
#endif
/* 0 when the source is for keys only (cumem_val_t then a placeholder): the kernels' `hasv` is
   then known false at compile time, and the onesweep keeps no payload positions in registers */
#ifndef CUMEM_SORT_HAS_PAYLOAD
#define CUMEM_SORT_HAS_PAYLOAD 1
#endif
#if defined(__CUDACC__) && CUMEM_SORT_BLOCKS_PER_SM > 0
#define CUMEM_SORT_BOUNDS __launch_bounds__(CUMEM_SORT_THREADS, CUMEM_SORT_BLOCKS_PER_SM)
#else
#define CUMEM_SORT_BOUNDS
#endif
#define CUMEM_SORT_TILE (CUMEM_SORT_THREADS * CUMEM_SORT_ITEMS)
#define CUMEM_SORT_WARPS (CUMEM_SORT_THREADS / 32)
#define CUMEM_SORT_DWARPS 8                    /* the warps of the digit-owning threads 0-255 */
#if CUMEM_SORT_THREADS % 32 != 0 || CUMEM_SORT_THREADS < 256 || CUMEM_SORT_THREADS > 1024
#error "CUMEM_SORT_THREADS: a multiple of 32 from 256 to 1024"
#endif
#define CUMEM_NPASS ((int)sizeof(cumem_key_t))
#define CUMEM_ST_SHIFT (8 * (int)sizeof(cumem_status_t) - 2)
#define CUMEM_ST_AGG ((cumem_status_t)1 << CUMEM_ST_SHIFT)
#define CUMEM_ST_PRE ((cumem_status_t)2 << CUMEM_ST_SHIFT)
#define CUMEM_ST_VAL(w) ((w) & (CUMEM_ST_AGG - 1))

/* the ordered key of a key's bits, and back */
static __device__ __forceinline__ cumem_key_t cumem_to_key(cumem_key_t u) {
#if CUMEM_KEY_KIND == 2
  const cumem_key_t sign = (cumem_key_t)((cumem_key_t)1 << (CUMEM_KEY_BITS - 1));
  const cumem_key_t expm = (cumem_key_t)((((cumem_key_t)1 << (CUMEM_KEY_BITS - 1 - CUMEM_MANT)) - 1) << CUMEM_MANT);
  const cumem_key_t mantm = (cumem_key_t)(((cumem_key_t)1 << CUMEM_MANT) - 1);
  if ((u & expm) == expm && (u & mantm) != 0) return (cumem_key_t)~(cumem_key_t)0;   /* NaN: after +Inf */
  return (u & sign) ? (cumem_key_t)~u : (cumem_key_t)(u | sign);
#elif CUMEM_KEY_KIND == 1
  return (cumem_key_t)(u ^ (cumem_key_t)((cumem_key_t)1 << (CUMEM_KEY_BITS - 1)));
#else
  return u;
#endif
}
static __device__ __forceinline__ cumem_key_t cumem_from_key(cumem_key_t u) {
#if CUMEM_KEY_KIND == 2
  const cumem_key_t sign = (cumem_key_t)((cumem_key_t)1 << (CUMEM_KEY_BITS - 1));
  return (u & sign) ? (cumem_key_t)(u ^ sign) : (cumem_key_t)~u;
#elif CUMEM_KEY_KIND == 1
  return (cumem_key_t)(u ^ (cumem_key_t)((cumem_key_t)1 << (CUMEM_KEY_BITS - 1)));
#else
  return u;
#endif
}
static __device__ __forceinline__ unsigned cumem_digit(cumem_key_t k, int pass) {
  if (sizeof(cumem_key_t) <= 4) return ((unsigned)k >> (8 * pass)) & 255u;     /* (a 32-bit shift) */
  return (unsigned)((unsigned long long)k >> (8 * pass)) & 255u;
}

/* hist[p * 256 + d] += the number of keys whose digit p is d (keys read from src, ordered and
 * complemented by flip as the first pass will; grid-stride) */
CUMEM_KERNEL void cumem_sort_hist(const cumem_key_t* src, uint32_t* hist, int64_t n, cumem_key_t flip)
{
  CUMEM_PDL_ENTRY();
  __shared__ uint32_t h[CUMEM_NPASS * 256];
  const int t = threadIdx.x;
  for (int i = t; i < CUMEM_NPASS * 256; i += CUMEM_SORT_THREADS) h[i] = 0;
  __syncthreads();
  /* CUMEM_SORT_HIST keys per thread loaded before any is counted: the loads are in flight
     together (a load followed by shared-memory atomics would wait for each load in turn) */
  const int64_t stride = (int64_t)CUMEM_SORT_THREADS * gridDim.x;
  int64_t i = (int64_t)blockIdx.x * CUMEM_SORT_THREADS + t;
  for (; i + (CUMEM_SORT_HIST - 1) * stride < n; i += CUMEM_SORT_HIST * stride) {
    cumem_key_t ks[CUMEM_SORT_HIST];
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_HIST; u++) ks[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_HIST; u++) {
      const cumem_key_t k = (cumem_key_t)(cumem_to_key(ks[u]) ^ flip);
      for (int p = 0; p < CUMEM_NPASS; p++) atomicAdd(&h[p * 256 + cumem_digit(k, p)], 1u);
    }
  }
  for (; i < n; i += stride) {
    const cumem_key_t k = (cumem_key_t)(cumem_to_key(src[i]) ^ flip);
    for (int p = 0; p < CUMEM_NPASS; p++) atomicAdd(&h[p * 256 + cumem_digit(k, p)], 1u);
  }
  __syncthreads();
  for (int i = t; i < CUMEM_NPASS * 256; i += CUMEM_SORT_THREADS)
    if (h[i] != 0) atomicAdd(&hist[i], h[i]);
}

/* One block of 256 threads. hist[p * 256 + d] becomes the exclusive prefix over digits < d;
 * info[p] = active | parity << 1 | first << 2 | last << 3 | skewed << 4 (parity: the number of
 * active passes before p, mod 2: 0 reads the A buffers; skewed: a digit holds more than 1/8 of
 * the keys); info[NPASS] = the number of active passes. */
CUMEM_KERNEL void cumem_sort_offsets(uint32_t* hist, uint32_t* info, int64_t n)
{
  CUMEM_PDL_ENTRY();
  __shared__ uint32_t s[256];
  __shared__ uint32_t constant[8];
  __shared__ uint32_t skewed[8];
  const int t = threadIdx.x;
  for (int p = 0; p < CUMEM_NPASS; p++) {
    const uint32_t c = hist[p * 256 + t];
    if (t == 0) { constant[p] = 0; skewed[p] = 0; }
    s[t] = c;
    __syncthreads();
    if ((int64_t)c == n) constant[p] = 1;
    if (8 * (int64_t)c > n) skewed[p] = 1;
    for (int o = 1; o < 256; o <<= 1) {
      const uint32_t u = t >= o ? s[t - o] : 0u;
      __syncthreads();
      s[t] += u;
      __syncthreads();
    }
    hist[p * 256 + t] = s[t] - c;
    __syncthreads();
  }
  if (t == 0) {
    int na = 0, firstp = -1, lastp = -1;
    for (int p = 0; p < CUMEM_NPASS; p++) if (!constant[p]) { if (firstp < 0) firstp = p; lastp = p; }
    for (int p = 0; p < CUMEM_NPASS; p++) {
      const uint32_t a = constant[p] ? 0u : 1u;
      info[p] = a | ((uint32_t)(na & 1) << 1) | ((uint32_t)(p == firstp) << 2) | ((uint32_t)(p == lastp) << 3) |
                ((uint32_t)skewed[p] << 4);
      na += (int)a;
    }
    info[CUMEM_NPASS] = (uint32_t)na;
  }
}

/* a mask of a look-back window's tiles and one more bit, and its first set bit (1-based) */
#if CUMEM_SORT_LOOKBACK < 32
typedef unsigned cumem_lbmask_t;
static __device__ __forceinline__ int cumem_lbmask_ffs(unsigned m) { return __ffs((int)m); }
#else
typedef unsigned long long cumem_lbmask_t;
static __device__ __forceinline__ int cumem_lbmask_ffs(unsigned long long m) { return __ffsll((long long)m); }
#endif
static __device__ __forceinline__ cumem_status_t cumem_vload(const cumem_status_t* p) { return *(const volatile cumem_status_t*)p; }
static __device__ __forceinline__ void cumem_vstore(cumem_status_t* p, cumem_status_t v) { *(volatile cumem_status_t*)p = v; }

/* The lanes of the warp whose label (below 2^bits, bits <= 9) equals this lane's: one ballot
 * per bit of the label, as CUB's MatchAny does. `__match_any_sync` gives the same mask, but its cost grows with
 * the number of distinct labels in the warp (about 27 of 32 lanes differ for random 8-bit
 * digits), and the onesweep pass calls it once per key. */
static __device__ __forceinline__ unsigned cumem_sort_match(unsigned label, int bits) {
#ifdef CUMEM_EMU_MATCH_ANY
  /* the g++ emulation (test/compute/emulation_threads.jl): one warp barrier instead of nine;
     sort_emulation_tests.jl checks the ballots below against it */
  return __match_any_sync(0xffffffffu, label);
#endif
  unsigned peers = 0xffffffffu;
#pragma unroll
  for (int b = 0; b < 9; b++) {
    if (b >= bits) break;                 /* (bits: a constant where it is inlined) */
    const bool bit = (label >> b) & 1u;
    const unsigned m = __ballot_sync(0xffffffffu, bit);
    peers &= bit ? m : ~m;
  }
  return peers;
}

/* A thread's ranks, two to a register (16 bits each: a rank within a tile is below
 * CUMEM_SORT_TILE <= 32768, so adding to one half never carries into the other): the ranks
 * and the keys are what a thread keeps from the load to the regrouping, and halving the
 * ranks' registers is what lets a tile of 384 x 18 keys fit 56 registers. */
#define CUMEM_SORT_RANK_WORDS ((CUMEM_SORT_ITEMS + 1) / 2)
static __device__ __forceinline__ uint32_t cumem_rank_get(const uint32_t* rank, int r) {
  return (r & 1) ? rank[r >> 1] >> 16 : rank[r >> 1] & 0xffffu;
}
static __device__ __forceinline__ void cumem_rank_set(uint32_t* rank, int r, uint32_t v) {   /* in order r = 0, 1, ... */
  if (r & 1) rank[r >> 1] |= v << 16; else rank[r >> 1] = v;
}
static __device__ __forceinline__ void cumem_rank_add(uint32_t* rank, int r, uint32_t v) {
  rank[r >> 1] += (r & 1) ? v << 16 : v;
}

/* The rank of each of a lane's items (warp-striped: item r of the lane is the warp's 32 r + lane;
 * those from wvalid on are not counted, their ranks meaningless; FULL: all are counted) among
 * the warp's items of the same digit, in item order (packed: cumem_rank_set); whist (the warp's
 * 256 counters, zeroed) ends with the warp's count of each digit. (32-bit positions within the
 * tile: a 64-bit test per item took registers.)
 * Equal digits are found (CUMEM_SORT_MATCH, when ATOMIC) by each lane setting its bit in
 * wmatch[digit] (the warp's 256 words, zeroed; left zeroed) with a shared-memory atomicOr, as
 * CUB's WARP_MATCH_ATOMIC_OR: about 15 instructions per key; otherwise by cumem_sort_match's
 * ballots (8 for a full tile; 9 for a partial one, whose invalid items carry the label 256,
 * equal only to each other): 50 to 60 instructions per key; ANY: by __match_any_sync. */
template <bool FULL, bool ATOMIC, bool ANY = false>
static __device__ __forceinline__ void cumem_sort_warp_rank(const cumem_key_t* key, uint32_t* rank, int wvalid,
                                                            int pass, uint32_t* whist, uint32_t* wmatch, int lane)
{
  const unsigned below_mask = (1u << lane) - 1u;
#pragma unroll
  for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
    const bool valid = FULL || 32 * r + lane < wvalid;
    if (ATOMIC) {
      const unsigned d = cumem_digit(key[r], pass);
      if (valid) atomicOr(&wmatch[d], 1u << lane);
      __syncwarp();
      const unsigned peers = valid ? wmatch[d] : 0u;
      const uint32_t b = valid ? whist[d] : 0u;
      const unsigned below = (unsigned)__popc(peers & below_mask);
      __syncwarp();
      if (valid && below == 0) { whist[d] = b + (uint32_t)__popc(peers); wmatch[d] = 0u; }
      __syncwarp();
      cumem_rank_set(rank, r, b + below);
    } else {
      const unsigned d = valid ? cumem_digit(key[r], pass) : 256u;
      const unsigned peers = ANY ? __match_any_sync(0xffffffffu, d) : cumem_sort_match(d, FULL ? 8 : 9);
      const unsigned below = (unsigned)__popc(peers & below_mask);
      const uint32_t b = valid ? whist[d] : 0u;
      __syncwarp();
      if (valid && below == 0) whist[d] = b + (uint32_t)__popc(peers);
      __syncwarp();
      cumem_rank_set(rank, r, b + below);
    }
  }
}

/* Decoupled look-back of digit t (thread t) for tile `tile` > 0 whose count of the digit is cnt:
 * the count of the digit in the tiles before it, and the tile's prefix (that plus cnt)
 * published in st. CUMEM_SORT_LOOKBACK tiles j, j - 1, ... read at once (one round trip to L2
 * where one tile at a time cost one each: a tile far from the last published prefix walked
 * back one tile per round trip), then taken nearest first up to the first prefix; the walk
 * goes on from the first tile not yet published (spinning there) or past the window. */
static __device__ __forceinline__ uint32_t cumem_sort_lookback(const cumem_status_t* status, uint32_t tile, int t, uint32_t cnt,
                                                               cumem_status_t* st)
{
  uint32_t excl = 0;
  bool done = false;
#if CUMEM_SORT_WALK
  int j = (int)tile - 1;                               /* (fewer than 2^31 tiles: 32-bit tests) */
  const cumem_status_t* p = status + (int64_t)j * 256 + t;   /* tile j's word; tile j - u's at p - 256 u */
  while (!done) {
    cumem_status_t x[CUMEM_SORT_LOOKBACK];
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_LOOKBACK; u++) x[u] = j >= u ? cumem_vload(p - u * 256) : (cumem_status_t)0;
    /* bit u of stop: tile j - u unpublished (flag 0) or a prefix (flag 2); bit L: the window's end */
    cumem_lbmask_t stop = (cumem_lbmask_t)1 << CUMEM_SORT_LOOKBACK, pre = 0;
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_LOOKBACK; u++) {
      const unsigned f = (unsigned)(x[u] >> CUMEM_ST_SHIFT);           /* 0, 1 (aggregate) or 2 */
      stop |= (cumem_lbmask_t)(f != 1u) << u;
      pre |= (cumem_lbmask_t)(f >> 1) << u;
    }
    const int first = cumem_lbmask_ffs(stop) - 1;                        /* the nearest stop (L: none) */
    done = (pre >> first) & 1u;
    const int used = first + (int)done;                                  /* tiles whose counts add */
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_LOOKBACK; u++)
      if (u < used) excl += (uint32_t)CUMEM_ST_VAL(x[u]);
    p -= (int64_t)used * 256;
#else
  int64_t j = (int64_t)tile - 1;
  while (!done) {
    cumem_status_t x[CUMEM_SORT_LOOKBACK];
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_LOOKBACK; u++) x[u] = j - u >= 0 ? cumem_vload(status + (j - u) * 256 + t) : (cumem_status_t)0;
    int used = 0;
#pragma unroll
    for (int u = 0; u < CUMEM_SORT_LOOKBACK; u++) {
      if (done || used < u) continue;                      /* (past a prefix or a tile not yet published) */
      const unsigned f = (unsigned)(x[u] >> CUMEM_ST_SHIFT);
      if (f == 0u) continue;                               /* not yet published: read again from here */
      excl += (uint32_t)CUMEM_ST_VAL(x[u]);
      used = u + 1;
      done = f == 2u;
    }
#endif
    j -= used;
#if defined(__CUDACC__) && CUMEM_SORT_SLEEP_NS > 0
    if (!done && used < CUMEM_SORT_LOOKBACK) __nanosleep(CUMEM_SORT_SLEEP_NS);
#endif
  }
  cumem_vstore(st, CUMEM_ST_PRE | (cumem_status_t)(excl + cnt));
  return excl;
}

/* The onesweep kernel's shared memory (declared once in the kernel: the full-tile and partial
 * tile instantiations of cumem_sort_onesweep_tile share it). The warps' digit counts and match
 * words share their bytes with the keys and then the payload (as CUB's onesweep: the ranks are
 * final in registers before the keys are regrouped), so that a tile of 8-byte keys, or of 384
 * or 512 threads, takes more keys within CUDA's 48 KiB. */
struct cumem_sort_smem_t {
  uint32_t lstart[256];
  uint32_t gbase[256];
  uint32_t wsum[CUMEM_SORT_DWARPS];
  uint32_t tile;
  union {          /* each warp's digit counts and match words while ranking, then keys, then payload */
    struct { uint32_t whist[CUMEM_SORT_WARPS][256]; uint32_t m[CUMEM_SORT_WARPS][256]; } r;
    cumem_key_t k[CUMEM_SORT_TILE]; cumem_val_t v[CUMEM_SORT_TILE];
  } buf;
};

/* Tile `tile` of one pass (s.whist zeroed): FULL when all its CUMEM_SORT_TILE keys are below
 * n, so that no load or store tests its index (fewer instructions on every tile but the last);
 * `atomic`: the warp match by atomicOr, else by ballots.
 * What stays in registers decides the occupancy (the kernel is latency-bound; CUB's onesweep
 * runs 384 x 18 keys in 56 registers): the keys and their ranks live from the load to the
 * regrouping in shared memory. So the ranks are 16-bit, two to a register (cumem_rank_get);
 * the keys are regrouped before the look-back, which the tile's own counts suffice for, so that
 * no key (and, without payload, no rank) is live across it; positions within the tile are
 * 32-bit; the payload's global places are recomputed from the digits (a byte each, 4 to a
 * register) rather than kept, and the payload is loaded 8 keys' worth at a time. The last,
 * partial tile is ranked as a full one: its keys past n are the largest key (every digit 255),
 * so they rank after all of the tile's keys and fill its last slots, which are not stored; their
 * counts (in the digit 255's) go only into this tile's look-back word, which no tile reads (the
 * tiles after it in the counter's order would; there are none). A separate partial ranking took
 * registers of its own (tests per key, a ninth ballot) and made the kernel spill. */
template <bool FULL>
static __device__ __forceinline__ void cumem_sort_onesweep_tile(cumem_sort_smem_t& s, const cumem_key_t* kin, cumem_key_t* kout,
                                                                const cumem_val_t* vin, cumem_val_t* vout, const uint32_t* offs,
                                                                cumem_status_t* status, uint32_t tile, int64_t n, int pass,
                                                                cumem_key_t flip, bool first, bool last, bool atomic, int hasv, int iota)
{
  cumem_key_t* s_keys = s.buf.k;
  cumem_val_t* s_vals = s.buf.v;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int64_t base = (int64_t)tile * CUMEM_SORT_TILE;
  const int wofs = w * 32 * CUMEM_SORT_ITEMS + lane;      /* item 0 of this lane, within the tile */
  /* the tile's keys below n (a partial tile: the last, n - base < CUMEM_SORT_TILE), and this
     lane's: item r is valid when 32 r < lvalid */
  const int nvalid = FULL ? CUMEM_SORT_TILE : (int)(n - base);
  const int lvalid = nvalid - wofs;
  const bool owner = t < 256;             /* thread t owns digit t (block-uniform per warp) */
  cumem_status_t* st = status + (int64_t)tile * 256 + (t & 255);
  uint32_t excl = 0;

  /* load (warp-striped: item r of a lane is the tile's wofs + 32 r) */
  cumem_key_t key[CUMEM_SORT_ITEMS];
  uint32_t rank[CUMEM_SORT_RANK_WORDS];
  {
    const cumem_key_t* kl = kin + base + wofs;
#pragma unroll
    for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
      cumem_key_t k = (cumem_key_t)~(cumem_key_t)0;     /* (past n: the largest key, see above) */
      if (FULL || 32 * r < lvalid) {
        k = kl[32 * r];
        if (first) k = (cumem_key_t)(cumem_to_key(k) ^ flip);
      }
      key[r] = k;
    }
  }
#if CUMEM_SORT_EARLY
  /* early counts: the tile's count of each digit in s.gbase (zeroed by the kernel; its own
     use comes after the look-back), published at once (tile 0: as its prefix) */
  {
    const unsigned below_mask = (1u << lane) - 1u;
#pragma unroll
    for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
      const unsigned d = cumem_digit(key[r], pass);
      if (atomic) {
        atomicAdd(&s.gbase[d], 1u);
      } else {
        const unsigned peers = __match_any_sync(0xffffffffu, d);
        if ((peers & below_mask) == 0u) atomicAdd(&s.gbase[d], (uint32_t)__popc(peers));
      }
    }
    __syncthreads();
    if (owner) {
      const uint32_t ecnt = s.gbase[t];
      cumem_vstore(st, (tile == 0 ? CUMEM_ST_PRE : CUMEM_ST_AGG) | (cumem_status_t)ecnt);
#if CUMEM_SORT_EARLY == 2
      if (tile > 0) excl = cumem_sort_lookback(status, tile, t, ecnt, st);
#endif
    }
  }
#endif
  if (atomic) cumem_sort_warp_rank<true, true>(key, rank, 0, pass, s.buf.r.whist[w], s.buf.r.m[w], lane);
  else cumem_sort_warp_rank<true, false, CUMEM_SORT_MATCH == 3>(key, rank, 0, pass, s.buf.r.whist[w], s.buf.r.m[w], lane);
  __syncthreads();
  /* thread t < 256 owns digit t: the warps' exclusive offsets and the tile's count */
  uint32_t cnt = 0, incl = 0;
  if (owner) {
    for (int k = 0; k < CUMEM_SORT_WARPS; k++) { const uint32_t x = s.buf.r.whist[k][t]; s.buf.r.whist[k][t] = cnt; cnt += x; }
#if !CUMEM_SORT_EARLY
    cumem_vstore(st, (tile == 0 ? CUMEM_ST_PRE : CUMEM_ST_AGG) | (cumem_status_t)cnt);
#endif
    /* exclusive scan of the counts over digits: warp shuffles, then the warps' sums */
    incl = cnt;
    for (int o = 1; o < 32; o <<= 1) { const uint32_t u = __shfl_up_sync(0xffffffffu, incl, o); if (lane >= o) incl += u; }
    if (lane == 31) s.wsum[w] = incl;
  }
  __syncthreads();
  if (owner) {
    uint32_t lstart = incl - cnt;
    for (int k = 0; k < w; k++) lstart += s.wsum[k];
    s.lstart[t] = lstart;
  }
  __syncthreads();
  /* the ranks in the tile, then (the counts read: their bytes become the keys') the keys
     regrouped in shared memory by them */
#pragma unroll
  for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
    const unsigned d = cumem_digit(key[r], pass);
    cumem_rank_add(rank, r, s.lstart[d] + s.buf.r.whist[w][d]);
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < CUMEM_SORT_ITEMS; r++)
    s_keys[cumem_rank_get(rank, r)] = key[r];
  /* decoupled look-back (the keys are in shared memory): the count of digit t in the tiles
     before this one, and the global place of the tile's slot 0 of digit t */
  if (owner) {
#if CUMEM_SORT_EARLY != 2
    if (tile > 0) excl = cumem_sort_lookback(status, tile, t, cnt, st);
#endif
    s.gbase[t] = offs[pass * 256 + t] + excl - s.lstart[t];     /* (mod 2^32) global place of local slot 0 */
  }
  __syncthreads();
  /* each slot's key to its place: slot i (thread t's k-th: k * CUMEM_SORT_THREADS + t) at
     gbase[its digit] + i; the digits kept (a byte each) for the payload's places */
  uint32_t dig[CUMEM_SORT_HAS_PAYLOAD ? (CUMEM_SORT_ITEMS + 3) / 4 : 1];
#pragma unroll
  for (int k = 0; k < CUMEM_SORT_ITEMS; k++) {
    const int i = k * CUMEM_SORT_THREADS + t;
    if (FULL || i < nvalid) {
      const cumem_key_t kk = s_keys[i];
      const unsigned d = cumem_digit(kk, pass);
      if (CUMEM_SORT_HAS_PAYLOAD) { if (k % 4 == 0) dig[k / 4] = d; else dig[k / 4] |= d << (8 * (k % 4)); }
      kout[s.gbase[d] + (uint32_t)i] = last ? cumem_from_key((cumem_key_t)(kk ^ flip)) : kk;
    }
  }
  if (CUMEM_SORT_HAS_PAYLOAD && hasv) {
    __syncthreads();
    /* the payload into registers (8 keys' worth at a time: their loads in flight together; a
       load followed at once by a store to shared memory would wait for each load in turn, the
       compiler cannot tell that vin does not point into shared memory), then regrouped */
    const cumem_val_t* vl = vin + base + wofs;
#pragma unroll
    for (int r0 = 0; r0 < CUMEM_SORT_ITEMS; r0 += 8) {
      cumem_val_t val[8];
#pragma unroll
      for (int u = 0; u < 8 && r0 + u < CUMEM_SORT_ITEMS; u++) {
        const int r = r0 + u;
        val[u] = (FULL || 32 * r < lvalid) ? ((first && iota) ? (cumem_val_t)(base + wofs + 32 * r) : vl[32 * r]) : (cumem_val_t)0;
      }
#pragma unroll
      for (int u = 0; u < 8 && r0 + u < CUMEM_SORT_ITEMS; u++) {
        const int r = r0 + u;
        s_vals[cumem_rank_get(rank, r)] = val[u];
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < CUMEM_SORT_ITEMS; k++) {
      const int i = k * CUMEM_SORT_THREADS + t;
      if (FULL || i < nvalid) vout[s.gbase[(dig[k / 4] >> (8 * (k % 4))) & 255u] + (uint32_t)i] = s_vals[i];
    }
  }
}

/* One pass: keys from (first active pass) src, else the A (parity 0) or B buffers, to the
 * other buffers. status: this pass's ntiles * 256 zeroed look-back words; counter: this pass's
 * zeroed tile counter. iota: the payload is the input position (made on the first pass). */
CUMEM_KERNEL void CUMEM_SORT_BOUNDS cumem_sort_onesweep(const cumem_key_t* src, cumem_key_t* kA, cumem_key_t* kB,
                                                        cumem_val_t* vA, cumem_val_t* vB, const uint32_t* offs,
                                                        const uint32_t* info, cumem_status_t* status, uint32_t* counter,
                                                        int64_t n, int pass, cumem_key_t flip, int hasv, int iota)
{
  CUMEM_PDL_ENTRY();
  __shared__ cumem_sort_smem_t s;
  const uint32_t inf = info[pass];
  if (!(inf & 1u)) return;
  const bool parity = (inf >> 1) & 1u, first = (inf >> 2) & 1u, last = (inf >> 3) & 1u;
  const bool atomic = CUMEM_SORT_MATCH == 1 || (CUMEM_SORT_MATCH >= 2 && !((inf >> 4) & 1u));
  const cumem_key_t* kin = first ? src : (parity ? kB : kA);
  cumem_key_t* kout = parity ? kA : kB;
  const cumem_val_t* vin = parity ? vB : vA;
  cumem_val_t* vout = parity ? vA : vB;
  const int t = threadIdx.x;

  for (int i = t; i < CUMEM_SORT_WARPS * 256; i += CUMEM_SORT_THREADS) { (&s.buf.r.whist[0][0])[i] = 0; (&s.buf.r.m[0][0])[i] = 0; }
  if (CUMEM_SORT_EARLY && t < 256) s.gbase[t] = 0;          /* (the early counts) */
  if (t == 0) s.tile = atomicAdd(counter, 1u);
  __syncthreads();
  const uint32_t tile = s.tile;
  if (((int64_t)tile + 1) * CUMEM_SORT_TILE <= n)
    cumem_sort_onesweep_tile<true>(s, kin, kout, vin, vout, offs, status, tile, n, pass, flip, first, last, atomic, hasv, iota);
  else
    cumem_sort_onesweep_tile<false>(s, kin, kout, vin, vout, offs, status, tile, n, pass, flip, first, last, atomic, hasv, iota);
}

/* After the passes: an odd number of them left the result in the B buffers (copied to A); none
 * (every key equal) leaves the keys as they were and, with iota, the payload 0, 1, 2, ... */
CUMEM_KERNEL void cumem_sort_finish(cumem_key_t* kA, const cumem_key_t* kB, cumem_val_t* vA, const cumem_val_t* vB,
                                             const uint32_t* info, int64_t n, int hasv, int iota)
{
  CUMEM_PDL_ENTRY();
  const uint32_t na = info[CUMEM_NPASS];
  if (!(na & 1u) && !(na == 0 && hasv && iota)) return;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    if (na & 1u) { kA[i] = kB[i]; if (hasv) vA[i] = vB[i]; }
    else vA[i] = (cumem_val_t)i;
  }
}

/* n <= CUMEM_SORT_TILE keys sorted by one block of CUMEM_SORT_THREADS, every pass in shared memory
 * (no histogram kernel, no look-back): keys from src (ordered on load) to keys, payload in
 * vals (iota: made). A digit equal over all keys is skipped. */
CUMEM_KERNEL void cumem_sort_small(const cumem_key_t* src, cumem_key_t* keys, cumem_val_t* vals, int64_t n,
                                            cumem_key_t flip, int hasv, int iota)
{
  CUMEM_PDL_ENTRY();
  __shared__ uint32_t s_lstart[256];
  __shared__ uint32_t s_wsum[CUMEM_SORT_DWARPS];
  __shared__ int s_const[CUMEM_NPASS];
  /* each warp's digit counts while ranking, then the keys, then the payload (as the onesweep's) */
  __shared__ union { uint32_t whist[CUMEM_SORT_WARPS][256]; cumem_key_t k[CUMEM_SORT_TILE]; cumem_val_t v[CUMEM_SORT_TILE]; } s_buf;
  uint32_t (*s_whist)[256] = s_buf.whist;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int64_t wbase = (int64_t)w * 32 * CUMEM_SORT_ITEMS;
  cumem_key_t key[CUMEM_SORT_ITEMS];
  cumem_val_t val[CUMEM_SORT_ITEMS];
  uint32_t rank[CUMEM_SORT_RANK_WORDS];
  for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
    const int64_t i = wbase + 32 * r + lane;
    key[r] = i < n ? (cumem_key_t)(cumem_to_key(src[i]) ^ flip) : (cumem_key_t)0;
    if (hasv) val[r] = i < n ? (iota ? (cumem_val_t)i : vals[i]) : (cumem_val_t)0;
  }
  if (t < CUMEM_NPASS) s_const[t] = 0;
  for (int pass = 0; pass < CUMEM_NPASS; pass++) {
    for (int i = t; i < CUMEM_SORT_WARPS * 256; i += CUMEM_SORT_THREADS) (&s_whist[0][0])[i] = 0;
    __syncthreads();
    cumem_sort_warp_rank<false, false>(key, rank, (int)(n - wbase), pass, s_whist[w], (uint32_t*)0, lane);
    __syncthreads();
    uint32_t cnt = 0, incl = 0;
    if (t < 256) {                              /* (thread t owns digit t; whole warps) */
      for (int k = 0; k < CUMEM_SORT_WARPS; k++) { const uint32_t x = s_whist[k][t]; s_whist[k][t] = cnt; cnt += x; }
      if ((int64_t)cnt == n) s_const[pass] = 1;
      incl = cnt;
      for (int o = 1; o < 32; o <<= 1) { const uint32_t u = __shfl_up_sync(0xffffffffu, incl, o); if (lane >= o) incl += u; }
      if (lane == 31) s_wsum[w] = incl;
    }
    __syncthreads();
    if (s_const[pass]) continue;                /* (block-uniform; each pass its own flag) */
    if (t < 256) {
      uint32_t lstart = incl - cnt;
      for (int k = 0; k < w; k++) lstart += s_wsum[k];
      s_lstart[t] = lstart;
    }
    __syncthreads();
    for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
      if (wbase + 32 * r + lane < n) {
        const unsigned d = cumem_digit(key[r], pass);
        cumem_rank_add(rank, r, s_lstart[d] + s_whist[w][d]);
      }
    }
    __syncthreads();                            /* (the counts read: their bytes become the keys') */
    for (int r = 0; r < CUMEM_SORT_ITEMS; r++) if (wbase + 32 * r + lane < n) s_buf.k[cumem_rank_get(rank, r)] = key[r];
    __syncthreads();
    for (int r = 0; r < CUMEM_SORT_ITEMS; r++) { const int64_t i = wbase + 32 * r + lane; if (i < n) key[r] = s_buf.k[i]; }
    if (hasv) {
      __syncthreads();
      for (int r = 0; r < CUMEM_SORT_ITEMS; r++) if (wbase + 32 * r + lane < n) s_buf.v[cumem_rank_get(rank, r)] = val[r];
      __syncthreads();
      for (int r = 0; r < CUMEM_SORT_ITEMS; r++) { const int64_t i = wbase + 32 * r + lane; if (i < n) val[r] = s_buf.v[i]; }
    }
    __syncthreads();
  }
  for (int r = 0; r < CUMEM_SORT_ITEMS; r++) {
    const int64_t i = wbase + 32 * r + lane;
    if (i < n) {
      keys[i] = cumem_from_key((cumem_key_t)(key[r] ^ flip));
      if (hasv) vals[i] = val[r];
    }
  }
}

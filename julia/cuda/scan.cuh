/* Inclusive scans with any associative operator: one pass with decoupled look-back (Merrill &
 * Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016; CUB's
 * DeviceScan), and one thread per line for many short lines.
 *
 * After the compiler's output (prelude, types, jl_ctx_t, the compiled element functions).
 * julia/compute/algorithms/accumulate.jl (scan_kernels_source) defines, before this text,
 *   CUMEM_SCAN_OP(a, b)  the operator on two accumulators (a compiled call through ctx and op)
 *   CUMEM_SCAN_LD(x)     an input element x as an accumulator (through ld)
 *   CUMEM_SCAN_ST(a)     an output element from an accumulator (through st)
 * and after it two kernels (cumem_scan_lines, cumem_scan_onepass) whose bodies are
 * CUMEM_SCAN_LAMBDAS and a call of cumem_scan_serial / cumem_scan_onepass. The templates take
 *   op(a, b) -> Acc           the operator
 *   line(j, &ib, &ob)         the offsets (elements) of line j's first input and output element
 *   ld(ib, k) -> Acc          element k of the line starting at ib, converted to Acc
 *   st(ob, k, Acc)            stores element k of the line starting at ob
 * `init` (HAS_INIT) is applied once, before the line's first element. The operator's
 * applications are regrouped (associativity assumed, as CUB, CuPy and CUDA.jl do). */
#include "prelude.cuh"   /* already in the kernel source: skipped there (its guard) */

/* Tuning (accumulate.jl's scan_kernels_source defines them from CuMem.scan_tuning(); these are
 * the defaults): threads per block of the one-pass kernel (a multiple of 32; also the tiles its
 * look-back reads per round trip), its __launch_bounds__ minimum of resident blocks per SM
 * (0: none; 6 keeps 256 threads with 16 Float32s each at 40 registers without spilling, 6
 * blocks per SM; the GPU's compile of the kernel before its fast path took 70 registers and ran
 * 3 blocks per SM), and the look-back's pause in ns (__nanosleep; 0: none). Elements per thread are
 * the template's ITEMS. */
#ifndef CUMEM_SCAN_THREADS
#define CUMEM_SCAN_THREADS 256
#endif
#ifndef CUMEM_SCAN_BLOCKS_PER_SM
#define CUMEM_SCAN_BLOCKS_PER_SM 6
#endif
#ifndef CUMEM_SCAN_SLEEP_NS          /* the look-back's pause before reading an unpublished tile again */
#define CUMEM_SCAN_SLEEP_NS 0
#endif
/* the look-back's wait (CUMEM_SCAN_SPIN): 1 each thread nearer than the window's nearest
   published prefix waits on its own tile (the others neither wait nor read again), then one
   combine; 0 rounds of the whole block, each reading the window again from the nearest
   unpublished tile */
#ifndef CUMEM_SCAN_SPIN
#define CUMEM_SCAN_SPIN 1
#endif
#if defined(__CUDACC__) && CUMEM_SCAN_BLOCKS_PER_SM > 0
#define CUMEM_SCAN_BOUNDS __launch_bounds__(CUMEM_SCAN_THREADS, CUMEM_SCAN_BLOCKS_PER_SM)
#else
#define CUMEM_SCAN_BOUNDS
#endif
#define CUMEM_SCAN_PAD(i) ((i) + ((i) >> 5))     /* one pad word per 32: no bank conflicts */
/* CUMEM_SCAN_PAD(r * CUMEM_SCAN_THREADS + t) (a multiple of 32 threads): one address per thread
   and constant offsets, where the shift of each index cost four instructions per element */
#define CUMEM_SCAN_PADS(r, t) ((r) * (CUMEM_SCAN_THREADS + CUMEM_SCAN_THREADS / 32) + CUMEM_SCAN_PAD(t))

/* a value written by another block: read through volatile words (no stale L1 line) */
template <typename A> static __device__ __forceinline__ A cumem_scan_vload(const A* p) {
  A r;
  if (sizeof(A) % 4 == 0) {
    const volatile uint32_t* s = (const volatile uint32_t*)p; uint32_t* d = (uint32_t*)&r;
    for (int i = 0; i < (int)(sizeof(A) / 4); i++) d[i] = s[i];
  } else {
    const volatile unsigned char* s = (const volatile unsigned char*)p; unsigned char* d = (unsigned char*)&r;
    for (int i = 0; i < (int)sizeof(A); i++) d[i] = s[i];
  }
  return r;
}
template <typename A> static __device__ __forceinline__ void cumem_scan_vstore(A* p, A v) {
  if (sizeof(A) % 4 == 0) {
    volatile uint32_t* d = (volatile uint32_t*)p; const uint32_t* s = (const uint32_t*)&v;
    for (int i = 0; i < (int)(sizeof(A) / 4); i++) d[i] = s[i];
  } else {
    volatile unsigned char* d = (volatile unsigned char*)p; const unsigned char* s = (const unsigned char*)&v;
    for (int i = 0; i < (int)sizeof(A); i++) d[i] = s[i];
  }
}

/* A look-back status word for accumulators of up to 4 bytes: the flag in the high 32 bits, the
   value's bytes in the low ones. One 64-bit store publishes both and one load reads both (as
   CUB's ScanTileState does for small types), where separate flag and value words cost a fence
   on each side and a second dependent load of the value in the look-back. */
template <typename A> static __device__ __forceinline__ uint64_t cumem_scan_pack(uint32_t f, A a) {
  union U { A v; uint32_t w; __device__ U() {} } u;
  u.w = 0u; u.v = a;
  return ((uint64_t)f << 32) | (uint64_t)u.w;
}
template <typename A> static __device__ __forceinline__ A cumem_scan_unpack(uint64_t x) {
  union U { A v; uint32_t w; __device__ U() {} } u;
  u.w = (uint32_t)x;
  return u.v;
}

/* Publishes tile `id`'s look-back status: flag f with value a (f = 1: a is the tile's own
   total, kept in aggs; f = 2: a is its line's total up to and including the tile, init
   included, kept in incs), so that a block that reads the flag reads the value: PACK (the
   accumulators of up to 4 bytes), one 64-bit store of both into the words at `flags`;
   otherwise the value, a fence, then the flag. */
template <bool PACK, typename Acc>
static __device__ __forceinline__ void cumem_scan_publish(uint32_t* flags, Acc* aggs, Acc* incs, int64_t id, uint32_t f, Acc a) {
  if constexpr (PACK) {
    *(volatile uint64_t*)((uint64_t*)flags + id) = cumem_scan_pack(f, a);
  } else {
    cumem_scan_vstore((f == 2u ? incs : aggs) + id, a);
    __threadfence();
    *(volatile uint32_t*)(flags + id) = f;
  }
}

/* The first input and output offsets of line j: the NK kept dimensions (sizes ks, input
   strides kst, output strides okst; j's index in them in column-major order). */
template <int NK> static __device__ __forceinline__ void cumem_scan_line_base(int64_t j, const int64_t* ks, const int64_t* kst,
                                                                             const int64_t* okst, int64_t* ib, int64_t* ob) {
  int64_t a = 0, b = 0, r = j;
  for (int d = 0; d < NK; d++) { const int64_t q = r % ks[d]; a += q * kst[d]; b += q * okst[d]; r /= ks[d]; }
  *ib = a; *ob = b;
}

/* The lambdas of a kernel over `src`/`dst` (strides ist/ost) with NK kept dimensions in the
   arrays ks, kst, okst, from the CUMEM_SCAN_* macros (s_ld1/s_st1: strides of 1). */
#define CUMEM_SCAN_LAMBDAS(AC, NK) \
  auto s_op = [&](const AC a, const AC b) -> AC { AC r; r = CUMEM_SCAN_OP(a, b); return r; }; \
  auto s_line = [&](int64_t j, int64_t* ibp, int64_t* obp) { cumem_scan_line_base<NK>(j, ks, kst, okst, ibp, obp); }; \
  auto s_ld = [&](int64_t ib, int64_t k) -> AC { AC r; r = CUMEM_SCAN_LD(src[ib + k * ist]); return r; }; \
  auto s_st = [&](int64_t ob, int64_t k, const AC a) { dst[ob + k * ost] = CUMEM_SCAN_ST(a); }; \
  auto s_ld1 = [&](int64_t ib, int64_t k) -> AC { AC r; r = CUMEM_SCAN_LD(src[ib + k]); return r; }; \
  auto s_st1 = [&](int64_t ob, int64_t k, const AC a) { dst[ob + k] = CUMEM_SCAN_ST(a); };

/* One line per thread (grid-stride over the nlines lines of n elements; strides ist/ost). */
template <typename Acc, bool HAS_INIT, typename Op, typename Line, typename Ld, typename St>
static __device__ __forceinline__ void cumem_scan_serial(int64_t nlines, int64_t n, Acc p0, Op op, Line line, Ld ld, St st)
{
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nlines; j += (int64_t)blockDim.x * gridDim.x) {
    int64_t ib, ob;
    line(j, &ib, &ob);
    Acc acc = ld(ib, 0);
    if (HAS_INIT) acc = op(p0, acc);
    st(ob, 0, acc);
    for (int64_t k = 1; k < n; k++) { acc = op(acc, ld(ib, k)); st(ob, k, acc); }
  }
}

/* The prefix of warp w's elements in its tile, after the look-back (both kernels): the tile's
   exclusive prefix (s_excl, where s_have) combined with the earlier warps' total (s_wtot[w],
   warp 0: none); `have` says whether there is one (the first tile of a line without init:
   none for warp 0). */
template <typename Acc, typename Op>
static __device__ __forceinline__ Acc cumem_scan_warp_prefix(Op op, int s_have, const Acc& s_excl, const Acc* s_wtot, int w, bool* have) {
  bool h = s_have != 0;
  Acc pre{};
  if (h) pre = s_excl;
  if (w > 0) { const Acc u = s_wtot[w]; pre = h ? op(pre, u) : u; h = true; }
  *have = h;
  return pre;
}

/* One pass over nlines lines of n elements cut in ntiles tiles of CUMEM_SCAN_THREADS * ITEMS.
 * Blocks take tiles in order (line-major) from `counter` (zeroed); `flags` (nlines * ntiles,
 * zeroed): 1 when aggs[tile] (the tile's own total) is published, 2 when incs[tile] (the
 * total of the line up to and including the tile, init included) is. Accumulators of up to
 * 4 bytes use 64-bit status words instead (cumem_scan_pack; `flags` then points to
 * nlines * ntiles zeroed uint64_t words, aggs and incs are unused). A tile waits only on
 * earlier tiles of its line, which are running or done: forward progress on any GPU. The
 * look-back reads CUMEM_SCAN_THREADS tiles at once, one per thread, and combines them with
 * warp shuffles and the warps' totals. `unit`: both strides are 1, and ld1/st1 are ld/st
 * without the stride multiplication (full tiles then load and store without index tests,
 * from one base address: a few instructions per element where the general path spent
 * about twenty). */
template <typename Acc, int ITEMS, bool HAS_INIT, typename Op, typename Line, typename Ld, typename St, typename Ld1, typename St1>
static __device__ __forceinline__ void cumem_scan_onepass(int64_t n, int64_t ntiles, Acc p0, Op op, Line line, Ld ld, St st,
                                                          Ld1 ld1, St1 st1, bool unit,
                                                          uint32_t* flags, Acc* aggs, Acc* incs, uint32_t* counter)
{
  const int TILE = CUMEM_SCAN_THREADS * ITEMS;
  constexpr bool PACK = sizeof(Acc) <= 4;
  uint64_t* const words = (uint64_t*)flags;
  __shared__ Acc s_items[CUMEM_SCAN_PAD(CUMEM_SCAN_THREADS * ITEMS)];
  __shared__ Acc s_warp[CUMEM_SCAN_THREADS];
  __shared__ Acc s_wtot[CUMEM_SCAN_THREADS / 32];
  __shared__ Acc s_excl;
  __shared__ int s_have;
  __shared__ uint32_t s_lbm[CUMEM_SCAN_THREADS / 32];
  __shared__ uint32_t s_lbz[CUMEM_SCAN_THREADS / 32];
#if CUMEM_SCAN_SPIN
  __shared__ uint32_t s_lbm2[CUMEM_SCAN_THREADS / 32];
#else
  uint32_t* const s_lbm2 = s_lbm;
#endif
  __shared__ Acc s_lbagg[CUMEM_SCAN_THREADS / 32];
  __shared__ int64_t s_id, s_j, s_tile;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  if (t == 0) {
    const int64_t id = (int64_t)atomicAdd(counter, 1u);      /* (one thread divides: 64-bit division is long) */
    s_id = id; s_j = id / ntiles; s_tile = id % ntiles;
  }
  __syncthreads();
  const int64_t id = s_id, j = s_j, tile = s_tile;
  int64_t ib, ob;
  line(j, &ib, &ob);
  const int64_t base = tile * TILE;
  const int cnt = n - base < TILE ? (int)(n - base) : TILE;
  const bool fast = unit && cnt == TILE;
  /* coalesced loads into registers, all in flight at once, then into shared memory (a load
     stored to shared memory at once would wait for each load in turn: the compiler cannot tell
     that src does not point into shared memory); each thread then takes ITEMS consecutive
     elements */
  {
    Acc in[ITEMS];
    if (fast) {
      const int64_t b0 = ib + base;
      for (int r = 0; r < ITEMS; r++) in[r] = ld1(b0, r * CUMEM_SCAN_THREADS + t);
    } else {
      for (int r = 0; r < ITEMS; r++) {
        const int i = r * CUMEM_SCAN_THREADS + t;
        if (i < cnt) in[r] = ld(ib, base + i);
      }
    }
    for (int r = 0; r < ITEMS; r++) {
      const int i = r * CUMEM_SCAN_THREADS + t;
      if (fast || i < cnt) s_items[CUMEM_SCAN_PADS(r, t)] = in[r];
    }
  }
  __syncthreads();
  const int mine = cnt - t * ITEMS <= 0 ? 0 : (cnt - t * ITEMS < ITEMS ? cnt - t * ITEMS : ITEMS);
  Acc x[ITEMS];
  Acc v{};
  /* thread t's elements t * ITEMS + k in shared memory: from one address when ITEMS divides 32
     (no pad word among them) */
  const int tb = t * ITEMS;
  const int tp = CUMEM_SCAN_PAD(tb);
#define CUMEM_SCAN_MINE(k) (32 % ITEMS == 0 ? tp + (k) : CUMEM_SCAN_PAD(tb + (k)))
  if (fast) {                             /* (the same without the tests of k < mine) */
    for (int k = 0; k < ITEMS; k++) {
      x[k] = s_items[CUMEM_SCAN_MINE(k)];
      if (k > 0) x[k] = op(x[k - 1], x[k]);
    }
    v = x[ITEMS - 1];
  } else {
    for (int k = 0; k < ITEMS; k++) {
      if (k < mine) {
        x[k] = s_items[CUMEM_SCAN_MINE(k)];
        if (k > 0) x[k] = op(x[k - 1], x[k]);
        v = x[k];
      }
    }
  }
  /* inclusive scan of the threads' totals in each warp (threads without elements come last:
     their values reach only threads without elements) */
  for (int o = 1; o < 32; o <<= 1) {
    const Acc u = cumem_shfl_up(v, o);
    if (lane >= o) v = op(u, v);
  }
  s_warp[t] = v;
  if (lane == 31) s_wtot[w] = v;
  __syncthreads();
  if (t == 0) {
    /* the warps' totals: exclusive prefixes in place, the tile's total (for a partial last
       tile, garbage that no later tile of the line reads) */
    Acc agg = s_wtot[0];
    for (int k = 1; k < CUMEM_SCAN_THREADS / 32; k++) { const Acc u = s_wtot[k]; s_wtot[k] = agg; agg = op(agg, u); }
    if (tile == 0) {
      cumem_scan_publish<PACK>(flags, aggs, incs, id, 2u, HAS_INIT ? op(p0, agg) : agg);
      s_have = HAS_INIT ? 1 : 0;
      if (HAS_INIT) s_excl = p0;
    } else {
      cumem_scan_publish<PACK>(flags, aggs, incs, id, 1u, agg);
    }
    s_wtot[0] = agg;     /* (warp 0 has no prefix: the slot carries the total to the look-back) */
  }
  if (tile > 0) {
    /* decoupled look-back, CUMEM_SCAN_THREADS tiles at a time: thread u reads tile q = jt - u
       once per round. The round combines tiles jt, jt - 1, ... up to the nearest with its
       prefix published, when no tile before that one is unpublished: done; otherwise up to
       the tile before the nearest unpublished one, and the next round reads again from there
       (after CUMEM_SCAN_SLEEP_NS: waiting threads that poll L2 in a loop took issue slots
       from the blocks still scanning, and no thread waits alone on one tile).
       (A window of one warp's 32 tiles bounded the scan: a prefix published by one tile reached
       only the 32 after it per round trip to L2, about 30 tiles per microsecond whatever the
       bandwidth, 0.85 ms for 10^8 Float32 on the H200.) */
    bool have = false;                   /* (thread 0's) */
    Acc excl{};
    int64_t jt = tile - 1;
    while (true) {
      const int64_t q = jt - t;
      uint32_t f = 2u;
      Acc a{};
      uint64_t x = 0;
      if constexpr (PACK) {
        if (q >= 0) { x = *(volatile uint64_t*)(words + j * ntiles + q); f = (uint32_t)(x >> 32); }
      } else {
        if (q >= 0) f = *(volatile uint32_t*)(flags + j * ntiles + q);
      }
#if CUMEM_SCAN_SPIN
      {
        /* the nearest published prefix read (CUMEM_SCAN_THREADS: none); the threads nearer
           than it wait each on its own tile (published by a block that runs or ran: a tile
           waits only on earlier ones), so that none of 0..kp is unpublished after */
        const uint32_t m0 = __ballot_sync(0xffffffffu, f == 2u);
        if (lane == 0) s_lbm[w] = m0;
        __syncthreads();
        int kp = CUMEM_SCAN_THREADS;
        for (int k = CUMEM_SCAN_THREADS / 32 - 1; k >= 0; k--)
          if (s_lbm[k] != 0u) kp = 32 * k + __ffs((int)s_lbm[k]) - 1;
        while (t < kp && f == 0u) {
#if defined(__CUDACC__) && CUMEM_SCAN_SLEEP_NS > 0
          __nanosleep(CUMEM_SCAN_SLEEP_NS);
#endif
          if constexpr (PACK) { x = *(volatile uint64_t*)(words + j * ntiles + q); f = (uint32_t)(x >> 32); }
          else f = *(volatile uint32_t*)(flags + j * ntiles + q);
        }
      }
#endif
      if constexpr (PACK) {
        if (q >= 0) a = cumem_scan_unpack<Acc>(x);
      } else {
        __threadfence();
        if (q >= 0 && f != 0u) a = cumem_scan_vload((f == 2u ? incs : aggs) + j * ntiles + q);
      }
      /* the window: threads 0..kmax (a thread past tile 0 is never below tile 0, whose prefix
         is published), combined earlier tile first: in each warp, after the step of o, lane l
         holds lanes l .. min(l + 2o - 1, the warp's last in the window); then thread 0
         combines the warps' */
      const uint32_t mp = __ballot_sync(0xffffffffu, f == 2u);
      const uint32_t mz = __ballot_sync(0xffffffffu, f == 0u);
      /* (SPIN: s_lbm was read before the waits, s_lbagg and s_lbz take these two) */
      uint32_t* const lbm = CUMEM_SCAN_SPIN ? s_lbm2 : s_lbm;
      if (lane == 0) { lbm[w] = mp; s_lbz[w] = mz; }
      __syncthreads();
      int kp = CUMEM_SCAN_THREADS, kz = CUMEM_SCAN_THREADS;
      for (int k = CUMEM_SCAN_THREADS / 32 - 1; k >= 0; k--) {
        if (lbm[k] != 0u) kp = 32 * k + __ffs((int)lbm[k]) - 1;
        if (s_lbz[k] != 0u) kz = 32 * k + __ffs((int)s_lbz[k]) - 1;
      }
      const bool found = kp < kz;
      const int kmax = found ? kp : kz - 1;                 /* -1: nothing to combine this round */
      const int lmax = kmax - 32 * w;
      for (int o = 1; o < 32; o <<= 1) {
        const Acc u = cumem_shfl_down(a, o);
        if (lane + o <= lmax) a = op(u, a);
      }
      if (lane == 0 && lmax >= 0) s_lbagg[w] = a;
      __syncthreads();
      if (t == 0 && kmax >= 0) {
        Acc win = s_lbagg[kmax >> 5];
        for (int k = (kmax >> 5) - 1; k >= 0; k--) win = op(win, s_lbagg[k]);
        excl = have ? op(win, excl) : win;
        have = true;
      }
      if (found) break;
      jt -= kz;
#if defined(__CUDACC__) && CUMEM_SCAN_SLEEP_NS > 0
      if (kz < CUMEM_SCAN_THREADS) __nanosleep(CUMEM_SCAN_SLEEP_NS);
#endif
    }
    if (t == 0) {
      cumem_scan_publish<PACK>(flags, aggs, incs, id, 2u, op(excl, s_wtot[0]));
      s_excl = excl;
      s_have = 1;
    }
  }
  __syncthreads();
  /* each thread's prefix: the tile's, its warp's, its lane's */
  bool have;
  Acc pre = cumem_scan_warp_prefix(op, s_have, s_excl, s_wtot, w, &have);
  if (lane > 0) { const Acc u = s_warp[t - 1]; pre = have ? op(pre, u) : u; have = true; }
  for (int k = 0; k < ITEMS; k++)
    if (fast || k < mine) s_items[CUMEM_SCAN_MINE(k)] = have ? op(pre, x[k]) : x[k];
#undef CUMEM_SCAN_MINE
  __syncthreads();
  if (fast) {
    const int64_t b0 = ob + base;
    for (int r = 0; r < ITEMS; r++) {
      const int i = r * CUMEM_SCAN_THREADS + t;
      st1(b0, i, s_items[CUMEM_SCAN_PADS(r, t)]);
    }
  } else {
    for (int r = 0; r < ITEMS; r++) {
      const int i = r * CUMEM_SCAN_THREADS + t;
      if (i < cnt) st(ob, base + i, s_items[CUMEM_SCAN_PADS(r, t)]);
    }
  }
}

/* ---- The vector kernel (ScanTuning's kernel = 1): the tile's elements stay in registers ----
 * Warp w of the block owns elements [w * 32 * ITEMS, (w + 1) * 32 * ITEMS) of the tile, in
 * ITEMS / G rows of 32 * G; lane l holds elements l * G .. l * G + G - 1 of each row, G
 * consecutive elements that one vector instruction loads (and one stores) where the line has
 * unit strides and its addresses are multiples of the chunk (G elements of the input, G of
 * the output; vok below) - 16 bytes per lane, a warp's 512 contiguous bytes per instruction,
 * the layout of a copy. Scalar loads and stores with index tests otherwise (strides, a view's
 * misaligned start, the partial last tile), in the same layout. The scan: each lane's G
 * elements in registers, then each row across the lanes by warp shuffles (the rows of a warp
 * side by side: independent shuffles), the rows' totals (lane 31's) in order in registers,
 * the warps' totals through shared memory (thread 0), no shared-memory pass over the
 * elements (the block kernel above moves each element through shared memory twice, with a
 * __syncthreads each way). The look-back is one warp's (warp 0, as CUB's
 * TilePrefixCallbackOp), without a block barrier per round: lane l reads the status of
 * CUMEM_SCAN_WINDOW tiles (its K = CUMEM_SCAN_WINDOW loads in flight at once: a window of
 * 32 * K tiles per round trip to L2), each lane combines its tiles nearest first up to the
 * first published prefix or unpublished tile, and the lanes combine by shuffles up to the
 * nearest lane that stopped. A window that ends at an unpublished tile is combined, and the
 * next round reads from that tile (after CUMEM_SCAN_SLEEP_NS). The status words, `flags`,
 * `aggs`, `incs` and `counter` are cumem_scan_onepass's.
 *   vld(p, Acc o[G])      o = the G input elements at linear offset p (unit stride, aligned)
 *   vst(p, const Acc a[G]) stores G outputs at linear offset p (unit stride, aligned)
 *   vok(ib, ob) -> int    bit 0: vld may load at ib + multiples of G; bit 1: vst may store
 *                         at ob + multiples of G */
#ifndef CUMEM_SCAN_WINDOW
#define CUMEM_SCAN_WINDOW 8
#endif

/* __shfl_sync over the full warp for a value of any trivially copyable type T: lane src's v */
template <typename T> static __device__ __forceinline__ T cumem_scan_shfl_idx(T v, int src) {
  union U { T v; unsigned w[(sizeof(T) + 3) / 4]; __device__ U() {} } u, r;
  u.v = v;
  for (int i = 0; i < (int)((sizeof(T) + 3) / 4); i++) r.w[i] = __shfl_sync(0xffffffffu, u.w[i], src);
  return r.v;
}

/* G elements of T as one aligned chunk (G * sizeof(T) a power of two, at most 16 bytes: one
   vector load or store; prelude.cuh's jl_vec, which lookback_emulation.cpp goes without) */
template <typename T, int G> struct alignas(sizeof(T) * G) cumem_scan_chunk { T v[G]; };
/* G elements of T at p (p a multiple of G * sizeof(T) bytes) through conv, into o; and back */
template <int G, typename T, typename Conv, typename A>
static __device__ __forceinline__ void cumem_scan_vget(const T* p, Conv conv, A* o) {
  const cumem_scan_chunk<T, G> v = *(const cumem_scan_chunk<T, G>*)p;
  for (int g = 0; g < G; g++) o[g] = conv(v.v[g]);
}
template <int G, typename T, typename Conv, typename A>
static __device__ __forceinline__ void cumem_scan_vput(T* p, Conv conv, const A* a) {
  cumem_scan_chunk<T, G> v;
  for (int g = 0; g < G; g++) v.v[g] = conv(a[g]);
  *(cumem_scan_chunk<T, G>*)p = v;
}

/* The vector kernel's lambdas (after CUMEM_SCAN_LAMBDAS) over src/dst (elements of type TC),
   G elements a chunk. No generic
   lambda (`auto` parameter): NVRTC 13.0 takes its call operator for a host function and
   refuses it in JIT mode (13.5 accepts it). */
#define CUMEM_SCAN_VLAMBDAS(AC, G, TC) \
  auto s_vld = [&](int64_t p, AC* o) { cumem_scan_vget<G>(src + p, [&](const TC e) -> AC { AC r; r = CUMEM_SCAN_LD(e); return r; }, o); }; \
  auto s_vst = [&](int64_t p, const AC* a) { cumem_scan_vput<G>(dst + p, [&](const AC e) { return CUMEM_SCAN_ST(e); }, a); }; \
  auto s_vok = [&](int64_t ib, int64_t ob) -> int { \
    return (ist == 1 && jl_aligned(src + ib, G * sizeof(*src)) ? 1 : 0) | (ost == 1 && jl_aligned(dst + ob, G * sizeof(*dst)) ? 2 : 0); };

/* The vector kernel's pieces (cumem_scan_onepass_vec below). */

/* A tile: its status index id (line j, tile `tile` of the line), the offsets of its line's
   first input and output elements (ib, ob), its first element in the line (base), its
   elements (cnt) and vok's bits for it (0 unless full) */
struct cumem_scan_tile_t { int64_t id, j, tile, ib, ob, base; int cnt, vk; };
template <int TILE, typename Line, typename VOk>
static __device__ __forceinline__ cumem_scan_tile_t cumem_scan_tile_at(int64_t id, int64_t j, int64_t tile, int64_t n, Line line, VOk vok) {
  cumem_scan_tile_t a;
  a.id = id; a.j = j; a.tile = tile;
  line(j, &a.ib, &a.ob);
  a.base = tile * TILE;
  a.cnt = n - a.base < TILE ? (int)(n - a.base) : TILE;
  a.vk = a.cnt == TILE ? vok(a.ib + a.base, a.ob + a.base) : 0;
  return a;
}

/* The tile's elements of this lane (e0: the tile's element of row 0, chunk element 0) into x,
   by vector loads where vok allowed them, else scalar ones with index tests (Acc{} past the end) */
template <typename Acc, int R, int G, typename Ld, typename VLd>
static __device__ __forceinline__ void cumem_scan_vtile_load(const cumem_scan_tile_t& a, int e0, Ld ld, VLd vld, Acc (&x)[R][G]) {
  if (a.vk & 1) {
    for (int r = 0; r < R; r++) vld(a.ib + a.base + e0 + r * 32 * G, x[r]);
  } else {
    for (int r = 0; r < R; r++)
      for (int g = 0; g < G; g++) {
        const int i = e0 + r * 32 * G + g;
        x[r][g] = Acc{};
        if (i < a.cnt) x[r][g] = ld(a.ib, a.base + i);
      }
  }
}

/* The warp's scan of its part of the tile in registers: each lane's chunks (the partial tile:
   valid elements only), then rows across the lanes; elements past the end come after every
   valid one (the row-major order of the tile), so what they add reaches only elements past
   the end, and the partial tile's total, which no tile reads. Leaves in ex[r] the lane's
   exclusive prefix in row r (lane 0: unused), in v[r] row r's exclusive prefix in the warp
   (row 0: unused), and the warp's total in s_wtot[w] (lane 0 writes it). */
template <typename Acc, int R, int G, typename Op>
static __device__ __forceinline__ void cumem_scan_vtile_scan(Op op, int e0, int cnt, bool full, Acc (&x)[R][G], Acc (&v)[R], Acc (&ex)[R],
                                                             Acc* s_wtot, int lane, int w) {
  for (int r = 0; r < R; r++) {
    for (int g = 1; g < G; g++)
      if (full || e0 + r * 32 * G + g < cnt) x[r][g] = op(x[r][g - 1], x[r][g]);
    v[r] = x[r][G - 1];
  }
  for (int o = 1; o < 32; o <<= 1)
    for (int r = 0; r < R; r++) {
      const Acc u = cumem_shfl_up(v[r], o);
      if (lane >= o) v[r] = op(u, v[r]);
    }
  for (int r = 0; r < R; r++) ex[r] = cumem_shfl_up(v[r], 1);       /* (lane 0's: unused) */
  Acc wt = cumem_scan_shfl_idx(v[0], 31);
  for (int r = 1; r < R; r++) {
    const Acc rt = cumem_scan_shfl_idx(v[r], 31);
    v[r] = wt;
    wt = op(wt, rt);
  }
  if (lane == 0) s_wtot[w] = wt;
}

/* Thread 0, after the warps' totals are in s_wtot: their exclusive prefixes in place (warp
   0: none), the tile's total returned, and the tile's status published (tile 0 of its line:
   its prefix, init included) */
template <bool PACK, bool HAS_INIT, int WARPS, typename Acc, typename Op>
static __device__ __forceinline__ Acc cumem_scan_vtile_total(Op op, Acc p0, const cumem_scan_tile_t& a, Acc* s_wtot,
                                                             uint32_t* flags, Acc* aggs, Acc* incs) {
  Acc agg = s_wtot[0];
  for (int k = 1; k < WARPS; k++) { const Acc u = s_wtot[k]; s_wtot[k] = agg; agg = op(agg, u); }
  if (a.tile == 0) cumem_scan_publish<PACK>(flags, aggs, incs, a.id, 2u, HAS_INIT ? op(p0, agg) : agg);
  else cumem_scan_publish<PACK>(flags, aggs, incs, a.id, 1u, agg);
  return agg;
}

/* The look-back of tile `tile` (> 0) of the line whose statuses start at index sb, by one
   whole warp (as CUB's TilePrefixCallbackOp): lane l reads the status of K =
   CUMEM_SCAN_WINDOW tiles (its K loads in flight at once: a window of 32 * K tiles per round
   trip to L2), each lane combines its tiles nearest first up to the first published prefix or
   unpublished tile, and the lanes combine by shuffles up to the nearest lane that stopped. A
   window that ends at an unpublished tile is combined, and the next round reads from that tile
   (after CUMEM_SCAN_SLEEP_NS). Returns the tile's exclusive prefix in lane 0. */
template <bool PACK, int K, typename Acc, typename Op>
static __device__ __forceinline__ Acc cumem_scan_warp_lookback(Op op, uint32_t* flags, Acc* aggs, Acc* incs, int64_t sb, int64_t tile, int lane) {
  uint64_t* const words = (uint64_t*)flags;
  Acc excl{};
  bool have = false;                   /* (lane 0's) */
  int64_t jt = tile - 1;               /* the nearest tile not combined yet */
  while (true) {
    /* lane l: tiles jt - l * K - i, i = 0 .. K - 1, nearest first (before tile 0: flag 2,
       never combined: tile 0's prefix, always published, ends the walk first) */
    uint32_t f[K];
    Acc a[K];
    for (int i = 0; i < K; i++) {
      const int64_t q = jt - (int64_t)lane * K - i;
      f[i] = 2u;
      a[i] = Acc{};
      if constexpr (PACK) {
        if (q >= 0) { const uint64_t x = *(volatile uint64_t*)(words + sb + q); f[i] = (uint32_t)(x >> 32); a[i] = cumem_scan_unpack<Acc>(x); }
      } else {
        if (q >= 0) f[i] = *(volatile uint32_t*)(flags + sb + q);
      }
    }
    if constexpr (!PACK) {
      __threadfence();
      for (int i = 0; i < K; i++) {
        const int64_t q = jt - (int64_t)lane * K - i;
        if (q >= 0 && f[i] != 0u) a[i] = cumem_scan_vload((f[i] == 2u ? incs : aggs) + sb + q);
      }
    }
    /* the lane's tiles up to its first stop: 1 a published prefix (included), 2 an
       unpublished tile (not included); si: the stop's i */
    Acc la{};
    bool lh = false;
    int stop = 0, si = K;
    for (int i = 0; i < K; i++) {
      if (stop == 0) {
        if (f[i] == 0u) { stop = 2; si = i; }
        else {
          la = lh ? op(a[i], la) : a[i];
          lh = true;
          if (f[i] == 2u) { stop = 1; si = i; }
        }
      }
    }
    const uint32_t ms = __ballot_sync(0xffffffffu, stop != 0);
    const uint32_t mp = __ballot_sync(0xffffffffu, stop == 1);
    const uint32_t mh = __ballot_sync(0xffffffffu, lh);
    const int L = ms != 0u ? __ffs((int)ms) - 1 : 31;            /* the nearest lane that stopped */
    const bool found = ((mp >> L) & 1u) != 0u;
    const int lmax = ((mh >> L) & 1u) != 0u ? L : L - 1;         /* lanes 0..lmax combine */
    for (int o = 1; o < 32; o <<= 1) {
      const Acc u = cumem_shfl_down(la, o);
      if (lane + o <= lmax) la = op(u, la);
    }
    if (lane == 0 && lmax >= 0) { excl = have ? op(la, excl) : la; have = true; }
    if (found) break;
    if (ms == 0u) {
      jt -= 32 * K;
    } else {
      jt -= (int64_t)L * K + cumem_scan_shfl_idx(si, L);        /* the unpublished tile */
#if defined(__CUDACC__) && CUMEM_SCAN_SLEEP_NS > 0
      __nanosleep(CUMEM_SCAN_SLEEP_NS);
#endif
    }
  }
  return excl;
}

/* The tile's outputs: each chunk's prefix (`pre` where `have`: the tile's and the warp's; the
   row's, the lane's) applied (full: every element valid), then stored, by vector stores where
   vok allowed them */
template <typename Acc, int R, int G, typename Op, typename St, typename VSt>
static __device__ __forceinline__ void cumem_scan_vtile_store(Op op, const cumem_scan_tile_t& a, bool full, int e0, bool have, Acc pre, Acc (&x)[R][G],
                                                              const Acc (&v)[R], const Acc (&ex)[R], int lane, St st, VSt vst) {
  for (int r = 0; r < R; r++) {
    bool h = have;
    Acc p = pre;
    if (r > 0) { p = h ? op(p, v[r]) : v[r]; h = true; }
    if (lane > 0) { p = h ? op(p, ex[r]) : ex[r]; h = true; }
    if (h)
      for (int g = 0; g < G; g++)
        if (full || e0 + r * 32 * G + g < a.cnt) x[r][g] = op(p, x[r][g]);
  }
  if (a.vk & 2) {
    for (int r = 0; r < R; r++) vst(a.ob + a.base + e0 + r * 32 * G, x[r]);
  } else {
    for (int r = 0; r < R; r++)
      for (int g = 0; g < G; g++) {
        const int i = e0 + r * 32 * G + g;
        if (i < a.cnt) st(a.ob, a.base + i, x[r][g]);
      }
  }
}

/* ---- The vector kernel (ScanTuning's kernel = 1): the tile's elements stay in registers ----
 * Warp w of the block owns elements [w * 32 * ITEMS, (w + 1) * 32 * ITEMS) of the tile, in
 * ITEMS / G rows of 32 * G; lane l holds elements l * G .. l * G + G - 1 of each row, G
 * consecutive elements that one vector instruction loads (and one stores) where the line has
 * unit strides and its addresses are multiples of the chunk (G elements of the input, G of
 * the output; vok below) - 16 bytes per lane, a warp's 512 contiguous bytes per instruction,
 * the layout of a copy. Scalar loads and stores with index tests otherwise (strides, a view's
 * misaligned start, the partial last tile), in the same layout. The scan: each lane's G
 * elements in registers, then each row across the lanes by warp shuffles (the rows of a warp
 * side by side: independent shuffles), the rows' totals (lane 31's) in order in registers,
 * the warps' totals through shared memory (thread 0), no shared-memory pass over the
 * elements (the block kernel above moves each element through shared memory twice, with a
 * __syncthreads each way). The look-back is one warp's (warp 0, cumem_scan_warp_lookback),
 * without a block barrier per round. The status words, `flags`, `aggs`, `incs` and `counter`
 * are cumem_scan_onepass's.
 *   vld(p, Acc o[G])      o = the G input elements at linear offset p (unit stride, aligned)
 *   vst(p, const Acc a[G]) stores G outputs at linear offset p (unit stride, aligned)
 *   vok(ib, ob) -> int    bit 0: vld may load at ib + multiples of G; bit 1: vst may store
 *                         at ob + multiples of G */
template <typename Acc, int ITEMS, int G, bool HAS_INIT, typename Op, typename Line, typename Ld, typename St, typename VLd, typename VSt, typename VOk>
static __device__ __forceinline__ void cumem_scan_onepass_vec(int64_t n, int64_t ntiles, Acc p0, Op op, Line line, Ld ld, St st,
                                                              VLd vld, VSt vst, VOk vok,
                                                              uint32_t* flags, Acc* aggs, Acc* incs, uint32_t* counter)
{
  static_assert(ITEMS % G == 0, "ITEMS must be a multiple of G");
  constexpr int TILE = CUMEM_SCAN_THREADS * ITEMS, R = ITEMS / G, WARPS = CUMEM_SCAN_THREADS / 32, K = CUMEM_SCAN_WINDOW;
  constexpr bool PACK = sizeof(Acc) <= 4;
  __shared__ Acc s_wtot[WARPS];          /* the warps' totals, then their exclusive prefixes (warp 0: none) */
  __shared__ Acc s_agg, s_excl;
  __shared__ int s_have;
  __shared__ int64_t s_id, s_j, s_tile;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  if (t == 0) {
    const int64_t id = (int64_t)atomicAdd(counter, 1u);
    s_id = id; s_j = id / ntiles; s_tile = id % ntiles;
  }
  __syncthreads();
  const cumem_scan_tile_t a = cumem_scan_tile_at<TILE>(s_id, s_j, s_tile, n, line, vok);
  const int e0 = w * 32 * ITEMS + lane * G;          /* the tile's element of (row 0, g 0) */
  Acc x[R][G], v[R], ex[R];
  cumem_scan_vtile_load(a, e0, ld, vld, x);
  cumem_scan_vtile_scan(op, e0, a.cnt, a.cnt == TILE, x, v, ex, s_wtot, lane, w);
  __syncthreads();
  if (t == 0) {
    s_agg = cumem_scan_vtile_total<PACK, HAS_INIT, WARPS>(op, p0, a, s_wtot, flags, aggs, incs);
    s_have = 0;
    if (HAS_INIT && a.tile == 0) { s_excl = p0; s_have = 1; }
  }
  if (a.tile > 0 && w == 0) {
    __syncwarp();
    const Acc excl = cumem_scan_warp_lookback<PACK, K>(op, flags, aggs, incs, a.j * ntiles, a.tile, lane);
    if (lane == 0) {
      cumem_scan_publish<PACK>(flags, aggs, incs, a.id, 2u, op(excl, s_agg));
      s_excl = excl;
      s_have = 1;
    }
  }
  __syncthreads();
  bool have;
  const Acc pre = cumem_scan_warp_prefix(op, s_have, s_excl, s_wtot, w, &have);
  cumem_scan_vtile_store(op, a, a.cnt == TILE, e0, have, pre, x, v, ex, lane, st, vst);
}

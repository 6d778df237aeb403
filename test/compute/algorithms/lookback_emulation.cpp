/* Decoupled look-back walking over aggregates, on the CPU: after each tile of the onesweep
 * sort (julia/cuda/sort.cuh) and of the one-pass scan (julia/cuda/scan.cuh), its published
 * prefix is turned back into its own aggregate, so the next tile walks back to tile 0 through
 * every aggregate (what overlapping blocks see on a GPU; run in order, tiles otherwise always
 * find their predecessor's prefix). Built by test/compute/algorithms/sort_emulation_tests.jl
 * with g++ and the emulated CUDA built-ins of test/compute/emulation_threads.jl (emu_hdr.h);
 * prints the number of wrong elements of each case. */
#include "emu_hdr.h"
#define CUMEM_PRELUDE_CUH      /* the system's integer types, not the prelude's typedefs */
#include "common.cuh"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
typedef uint32_t cumem_key_t; typedef uint32_t cumem_val_t; typedef uint32_t cumem_status_t;
typedef uint32_t jl_ctx_t;
#define CUMEM_KEY_KIND 0
#define CUMEM_KEY_BITS 32
#define CUMEM_MANT 0
#include "sort.cuh"
#include "scan.cuh"
int sort_test(int64_t n) {
  std::vector<uint32_t> h(n); for (auto& x: h) x = (uint32_t)rand() * 2654435761u;
  std::vector<uint32_t> kA(n), kB(n), vA(n), vB(n);
  int np=4; int64_t ntiles=(n+4095)/4096;
  std::vector<uint32_t> scratch(np*256+2*np+1,0), status(np*ntiles*256,0);
  uint32_t *hist=scratch.data(), *info=hist+np*256, *ctr=info+np+1;
  emu_grid(4,1,1,256,[&]{cumem_sort_hist(h.data(),hist,n,0);});
  emu_grid(1,1,1,256,[&]{cumem_sort_offsets(hist,info,n);});
  for(int p=0;p<np;p++) {
    uint32_t* st = status.data()+p*ntiles*256;
    std::vector<uint32_t> prev(256, 0);
    for (int64_t b = 0; b < ntiles; b++) {
      emu_grid(1,1,1,256,[&]{cumem_sort_onesweep(h.data(),kA.data(),kB.data(),vA.data(),vB.data(),hist,info,st,ctr+p,n,p,0,1,1);});
      for (int d = 0; d < 256; d++) { uint32_t w = st[b*256+d]; if ((w >> 30) != 2) return -1; uint32_t inc = w & 0x3fffffff;
        if (b > 0) st[b*256+d] = (1u << 30) | (inc - prev[d]); prev[d] = inc; }
    }
  }
  emu_grid(4,1,1,256,[&]{cumem_sort_finish(kA.data(),kB.data(),vA.data(),vB.data(),info,n,1,1);});
  std::vector<uint32_t> perm(n); for(int i=0;i<n;i++) perm[i]=i;
  std::stable_sort(perm.begin(),perm.end(),[&](uint32_t a,uint32_t b){return h[a]<h[b];});
  int bad=0; for(int i=0;i<n;i++){ if (vA[i]!=perm[i]) bad++; if (kA[i]!=h[perm[i]]) bad++; }
  return bad;
}
/* 4-byte accumulators: one 64-bit status word per tile (flag << 32 | value). Each published
   prefix is turned back into the tile's aggregate (prefix minus the previous tile's) but those
   of tiles 0, 10, 20, 30, 40: the look-back's windows of 256 tiles then hold a prefix among
   aggregates (tiles up to 296) or none (later tiles walk back a second window); unit strides
   (the full tiles' loads and stores without index tests) */
int scan_test(int64_t n) {
  int64_t ntiles = (n + 4095)/4096;
  std::vector<int> src(n), dst(n); std::vector<uint64_t> words(ntiles+1,0);
  for (auto& x: src) x = rand()%7-3;
  auto op = [&](int a, int b) -> int { return a + b; };
  auto line = [&](int64_t j, int64_t* ibp, int64_t* obp) { *ibp = 0; *obp = 0; };
  auto ld = [&](int64_t ib, int64_t k) -> int { return src[ib + k]; };
  auto st = [&](int64_t ob, int64_t k, int a) { dst[ob + k] = a; };
  int prev = 0;
  for (int64_t b = 0; b < ntiles; b++) {
    emu_grid(1,1,1,256,[&]{cumem_scan_onepass<int, 16, true>(n, ntiles, 5, op, line, ld, st, ld, st, true, (uint32_t*)words.data(), (int*)0, (int*)0, (uint32_t*)(words.data() + ntiles));});
    if ((words[b] >> 32) != 2) return -1;
    const int inc = (int)(uint32_t)words[b];
    if (b % 10 != 0 || b > 40) words[b] = (1ull << 32) | (uint32_t)(inc - prev);
    prev = inc;
  }
  int acc = 5, bad=0; for (int i=0;i<n;i++){ acc+=src[i]; if (dst[i]!=acc) bad++; }
  return bad;
}
/* 8-byte accumulators: 32-bit flags, aggregates and prefixes apart (tiles of 2048), the same
   walk; the general (strided) loads and stores */
int scan_test64(int64_t n) {
  int64_t ntiles = (n + 2047)/2048;
  std::vector<long long> src(n), dst(n), part(2*ntiles); std::vector<uint32_t> flags(ntiles+1,0);
  for (auto& x: src) x = rand()%7-3;
  auto op = [&](long long a, long long b) -> long long { return a + b; };
  auto line = [&](int64_t j, int64_t* ibp, int64_t* obp) { *ibp = 0; *obp = 0; };
  auto ld = [&](int64_t ib, int64_t k) -> long long { return src[ib + k]; };
  auto st = [&](int64_t ob, int64_t k, long long a) { dst[ob + k] = a; };
  for (int64_t b = 0; b < ntiles; b++) {
    emu_grid(1,1,1,256,[&]{cumem_scan_onepass<long long, 8, true>(n, ntiles, 5, op, line, ld, st, ld, st, false, flags.data(), part.data(), part.data() + ntiles, flags.data() + ntiles);});
    if (flags[b] != 2) return -1;
    if (b % 10 != 0 || b > 40) flags[b] = 1;
  }
  long long acc = 5; int bad=0; for (int i=0;i<n;i++){ acc+=src[i]; if (dst[i]!=acc) bad++; }
  return bad;
}
/* The vector kernel (cumem_scan_onepass_vec: chunks of G elements, the look-back by warp 0,
   CUMEM_SCAN_WINDOW = 8 status words a lane, windows of 256 tiles), the same walk: 4-byte
   accumulators (64-bit status words, chunks of 4, tiles of 4096) and 8-byte ones (flags
   apart, chunks of 2, tiles of 2048); vok 3 (vector loads and stores) but for the tiles
   whose index is a multiple of 7 (the scalar loads and stores) */
template <typename A, int ITEMS, int G>
int scan_test_vec(int64_t n) {
  const int64_t TILE = 256 * ITEMS, ntiles = (n + TILE - 1) / TILE;
  std::vector<A> src(n), dst(n), part(2 * ntiles); std::vector<uint64_t> words(ntiles + 1, 0);
  for (auto& x: src) x = rand() % 7 - 3;
  auto op = [&](A a, A b) -> A { return a + b; };
  auto line = [&](int64_t j, int64_t* ibp, int64_t* obp) { *ibp = 0; *obp = 0; };
  auto ld = [&](int64_t ib, int64_t k) -> A { return src[ib + k]; };
  auto st = [&](int64_t ob, int64_t k, A a) { dst[ob + k] = a; };
  auto vld = [&](int64_t p, A* o) { for (int g = 0; g < G; g++) o[g] = src[p + g]; };
  auto vst = [&](int64_t p, const A* a) { for (int g = 0; g < G; g++) dst[p + g] = a[g]; };
  auto vok = [&](int64_t ib, int64_t ob) -> int { return (ib / TILE) % 7 == 0 ? 0 : 3; };
  constexpr bool PACK = sizeof(A) <= 4;
  uint32_t* flags = (uint32_t*)words.data();
  uint32_t* ctr = PACK ? (uint32_t*)(words.data() + ntiles) : flags + ntiles;
  A prev = 0;
  for (int64_t b = 0; b < ntiles; b++) {
    emu_grid(1,1,1,256,[&]{cumem_scan_onepass_vec<A, ITEMS, G, true>(n, ntiles, (A)5, op, line, ld, st, vld, vst, vok, flags, part.data(), part.data() + ntiles, ctr);});
    if (PACK) {
      if ((words[b] >> 32) != 2) return -1;
      const A inc = (A)(uint32_t)words[b];
      if (b % 10 != 0 || b > 40) words[b] = (1ull << 32) | (uint32_t)(inc - prev);
      prev = inc;
    } else {
      if (flags[b] != 2) return -1;
      if (b % 10 != 0 || b > 40) flags[b] = 1;
    }
  }
  A acc = 5; int bad = 0; for (int64_t i = 0; i < n; i++) { acc += src[i]; if (dst[i] != acc) bad++; }
  return bad;
}
int main(){
  printf("%d %d %d %d %d %d\n", sort_test(9000), sort_test(20 * 4096 + 3), scan_test(300 * 4096 + 7), scan_test64(300 * 2048 + 5),
         scan_test_vec<int, 16, 4>(300 * 4096 + 7), scan_test_vec<long long, 8, 2>(300 * 2048 + 5));
}

/* unicode.cuh: look-ups of the Unicode tables of compiled element functions.
 *
 * Base's Char functions (uppercase, lowercase, titlecase, isletter, isuppercase,
 * islowercase, isdigit-like category tests, textwidth) call the C library utf8proc that
 * Julia links (`ccall(:utf8proc_toupper, ...)`, `utf8proc_category`, `utf8proc_charwidth`).
 * In a kernel those calls read tables that CuMem builds when the package is precompiled,
 * by calling the same utf8proc functions for every code point 0 .. 0x10FFFF
 * (julia/compute/compiler/unicode.jl), so a kernel gives Base's answer for every Char.
 * The tables follow this file in the kernel's source: a mapping is two sorted arrays (the
 * code points utf8proc changes, their images), a property is runs (the first code point
 * of each run, sorted, starting at 0, and the run's value).
 */
#ifndef CUMEM_UNICODE_CUH
#define CUMEM_UNICODE_CUH

/* The index of the last entry of keys[0 .. n) that is <= c; -1 when keys[0] > c.
   keys is sorted ascending. */
static __device__ int jl_uc_last_le(const unsigned int* keys, int n, unsigned int c) {
  int lo = 0, hi = n; /* answer in [lo - 1, hi - 1] */
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (keys[mid] <= c) lo = mid + 1; else hi = mid;
  }
  return lo - 1;
}

/* A mapping: vals[k] when c == keys[k], c itself otherwise (utf8proc's identity). */
static __device__ unsigned int jl_uc_map(const unsigned int* keys, const unsigned int* vals, int n,
                                         unsigned int c) {
  int k = jl_uc_last_le(keys, n, c);
  return (k >= 0 && keys[k] == c) ? vals[k] : c;
}

/* A property by runs: the value of the run holding c (starts[0] == 0). */
static __device__ int jl_uc_run(const unsigned int* starts, const signed char* vals, int n, unsigned int c) {
  int k = jl_uc_last_le(starts, n, c);
  return k >= 0 ? (int)vals[k] : 0;
}

#endif

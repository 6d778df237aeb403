# Element kernels for the linear algebra cuBLAS lacks: zeroing outside a band (triu!,
# tril!), testing a band (istriu, istril) and symmetry (issymmetric, ishermitian), adding to
# the diagonal (A + λI) and integer matrix products. Fixed CUDA C templates, instantiated
# per element size (moves of bits) or per element type (arithmetic, comparisons), each a
# grid-stride loop. On the host device the same operations run in Julia on `host_view`s;
# test/compute/linalg/linalg_kernel_tests.jl runs these kernels compiled by g++ on the CPU.

const LINALG_KERNELS_SOURCE = raw"""
typedef unsigned char la_w1; typedef unsigned short la_w2; typedef unsigned int la_w4;
typedef unsigned long long la_w8;
struct la_w16 { unsigned long long lo, hi; };
struct la_c32 { float re, im; };
struct la_c64 { double re, im; };
static __device__ __forceinline__ float la_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
static __device__ __forceinline__ unsigned short la_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

/* element operations: zero test, equality (x == y, or x == conj(y)), addition */
template <typename T> struct la_ops {
  static __device__ __forceinline__ bool iszero(T x) { return x == 0; }
  static __device__ __forceinline__ bool eq(T x, T y, bool conj) { return x == y; }
  static __device__ __forceinline__ T add(T x, T y) { return (T)(x + y); }
};
struct la_h16 { unsigned short bits; };
template <> struct la_ops<la_h16> {
  static __device__ __forceinline__ bool iszero(la_h16 x) { return (x.bits & 0x7fff) == 0; }
  static __device__ __forceinline__ bool eq(la_h16 x, la_h16 y, bool conj) { return la_h2f(x.bits) == la_h2f(y.bits); }
  static __device__ __forceinline__ la_h16 add(la_h16 x, la_h16 y) { la_h16 r; r.bits = la_f2h(la_h2f(x.bits) + la_h2f(y.bits)); return r; }
};
template <> struct la_ops<la_c32> {
  static __device__ __forceinline__ bool iszero(la_c32 x) { return x.re == 0 && x.im == 0; }
  static __device__ __forceinline__ bool eq(la_c32 x, la_c32 y, bool conj) { return x.re == y.re && x.im == (conj ? -y.im : y.im); }
  static __device__ __forceinline__ la_c32 add(la_c32 x, la_c32 y) { la_c32 r; r.re = x.re + y.re; r.im = x.im + y.im; return r; }
};
template <> struct la_ops<la_c64> {
  static __device__ __forceinline__ bool iszero(la_c64 x) { return x.re == 0 && x.im == 0; }
  static __device__ __forceinline__ bool eq(la_c64 x, la_c64 y, bool conj) { return x.re == y.re && x.im == (conj ? -y.im : y.im); }
  static __device__ __forceinline__ la_c64 add(la_c64 x, la_c64 y) { la_c64 r; r.re = x.re + y.re; r.im = x.im + y.im; return r; }
};

/* outside the band: j - i < k (upper: what triu!(A, k) zeroes) or j - i > k (lower) */
static __device__ __forceinline__ bool la_outside(long long i, long long j, long long k, int upper) {
  return upper ? (j - i < k) : (j - i > k);
}

template <typename W>
__device__ __forceinline__ void la_band(W *a, long long m, long long n, long long lda, long long k, int upper) {
  const long long total = m * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % m, j = t / m;
    if (la_outside(i, j, k, upper)) a[i + j * lda] = W();
  }
}

template <typename T>
__device__ __forceinline__ void la_isband(const T *a, long long m, long long n, long long lda, long long k, int upper, int *flag) {
  const long long total = m * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % m, j = t / m;
    if (la_outside(i, j, k, upper) && !la_ops<T>::iszero(a[i + j * lda])) *flag = 1;
  }
}

template <typename T>
__device__ __forceinline__ void la_issym(const T *a, long long n, long long lda, int conj, int *flag) {
  const long long total = n * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % n, j = t / n;
    if (i <= j && !la_ops<T>::eq(a[i + j * lda], a[j + i * lda], conj != 0)) *flag = 1;
  }
}

template <typename T>
__device__ __forceinline__ void la_diagadd(T *a, long long len, long long stride, T v) {
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < len; t += (long long)gridDim.x * blockDim.x)
    a[t * stride] = la_ops<T>::add(a[t * stride], v);
}

/* C = A * B for integers of one width, wrapping as Julia: arithmetic modulo 2^bits in the
   unsigned type U (products of the low bits are exact modulo 2^bits, signed or not) */
template <typename W, typename U>
__device__ __forceinline__ void la_imatmul(const W *a, const W *b, W *c, long long m, long long n, long long k,
                                           long long lda, long long ldb, long long ldc) {
  const long long total = m * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % m, j = t / m;
    U acc = 0;
    for (long long p = 0; p < k; p++) acc = (U)(acc + (U)((U)a[i + p * lda] * (U)b[p + j * ldb]));
    c[i + j * ldc] = (W)acc;
  }
}

/* B = transpose(A), or adjoint(A) with conj for la_c32/la_c64 (B n×m, A m×n): 32×32 tiles
   through shared memory, so reads and writes are both coalesced; any block size (thread t
   takes tile elements t, t + blockDim.x, ...), a grid-stride loop over the tiles */
template <typename W> struct la_cj { static __device__ __forceinline__ W op(W x, int c) { return x; } };
template <> struct la_cj<la_c32> { static __device__ __forceinline__ la_c32 op(la_c32 x, int c) { if (c) x.im = -x.im; return x; } };
template <> struct la_cj<la_c64> { static __device__ __forceinline__ la_c64 op(la_c64 x, int c) { if (c) x.im = -x.im; return x; } };
template <typename W>
__device__ __forceinline__ void la_transpose(W *b, const W *a, long long m, long long n, long long lda, long long ldb, int conj) {
  __shared__ W tile[32][33];
  const long long tm = (m + 31) / 32, tiles = tm * ((n + 31) / 32);
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = (t % tm) * 32, c0 = (t / tm) * 32;
    for (int e = threadIdx.x; e < 1024; e += blockDim.x) {
      const int i = e % 32, j = e / 32;           /* tile[j][i] = A[r0 + i, c0 + j] */
      if (r0 + i < m && c0 + j < n) tile[j][i] = a[(r0 + i) + (c0 + j) * lda];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 1024; e += blockDim.x) {
      const int i = e % 32, j = e / 32;           /* B[c0 + i, r0 + j] = A[r0 + j, c0 + i] */
      if (c0 + i < n && r0 + j < m) b[(c0 + i) + (r0 + j) * ldb] = la_cj<W>::op(tile[i][j], conj);
    }
    __syncthreads();
  }
}
#define LA_TRANSPOSE(S, W) extern "C" __global__ void la_transpose_##S(W *b, const W *a, long long m, long long n, long long lda, long long ldb, int conj) { la_transpose<W>(b, a, m, n, lda, ldb, conj); }
LA_TRANSPOSE(w1, la_w1) LA_TRANSPOSE(w2, la_w2) LA_TRANSPOSE(w4, la_w4) LA_TRANSPOSE(w8, la_w8) LA_TRANSPOSE(w16, la_w16)
LA_TRANSPOSE(c32, la_c32) LA_TRANSPOSE(c64, la_c64)
#define LA_BAND(S, W) extern "C" __global__ void la_band_##S(W *a, long long m, long long n, long long lda, long long k, int upper) { la_band<W>(a, m, n, lda, k, upper); }
LA_BAND(w1, la_w1) LA_BAND(w2, la_w2) LA_BAND(w4, la_w4) LA_BAND(w8, la_w8) LA_BAND(w16, la_w16)

#define LA_TYPED(S, T) \
  extern "C" __global__ void la_isband_##S(const T *a, long long m, long long n, long long lda, long long k, int upper, int *flag) { la_isband<T>(a, m, n, lda, k, upper, flag); } \
  extern "C" __global__ void la_issym_##S(const T *a, long long n, long long lda, int conj, int *flag) { la_issym<T>(a, n, lda, conj, flag); } \
  extern "C" __global__ void la_diagadd_##S(T *a, long long len, long long stride, T v) { la_diagadd<T>(a, len, stride, v); }
LA_TYPED(w1, la_w1) LA_TYPED(w2, la_w2) LA_TYPED(w4, la_w4) LA_TYPED(w8, la_w8)
LA_TYPED(h16, la_h16) LA_TYPED(f32, float) LA_TYPED(f64, double) LA_TYPED(c32, la_c32) LA_TYPED(c64, la_c64)

#define LA_IMATMUL(S, W, U) extern "C" __global__ void la_imatmul_##S(const W *a, const W *b, W *c, long long m, long long n, long long k, long long lda, long long ldb, long long ldc) { la_imatmul<W, U>(a, b, c, m, n, k, lda, ldb, ldc); }
LA_IMATMUL(w1, la_w1, unsigned int) LA_IMATMUL(w2, la_w2, unsigned int) LA_IMATMUL(w4, la_w4, unsigned int) LA_IMATMUL(w8, la_w8, unsigned long long)
"""

const LA_THREADS = 256

# kernel name suffixes: bits of a size; arithmetic and comparisons of a type
word_suffix(::Type{T}) where {T} = sizeof(T) in (1, 2, 4, 8, 16) ? "w$(sizeof(T))" :
    throw(ArgumentError("no GPU kernel for $(sizeof(T))-byte elements ($T)"))
function value_suffix(::Type{T}) where {T}
    T <: Union{Bool,Base.BitInteger} && return "w$(sizeof(T))"
    T === Float16 && return "h16"
    T === Float32 && return "f32"
    T === Float64 && return "f64"
    T === ComplexF32 && return "c32"
    T === ComplexF64 && return "c64"
    throw(ArgumentError("no GPU kernel for element type $T (integers, Bool, Float16/32/64, ComplexF32/64)"))
end

# one kernel value of type T as the C kernel takes it (Float16 as its bits, complex as a
# pair, 16 bytes as a word pair)
struct LaPair{T}
    a::T
    b::T
end
kernel_value(x::Union{Bool,Base.BitInteger,Float32,Float64}) = x
kernel_value(x::Float16) = reinterpret(UInt16, x)
kernel_value(x::Complex{T}) where {T<:Union{Float32,Float64}} = LaPair{T}(real(x), imag(x))

function la_launch(name, n, args...)
    n == 0 && return nothing
    k = fixed_kernel(:linalg, LINALG_KERNELS_SOURCE, name)
    blocks = max(1, min(cld(n, LA_THREADS), 65535 * 16))
    launch(k, args...; blocks = blocks, threads = LA_THREADS)
    return nothing
end

"""
    CuMem.adjoint_into!(B::CuMatrix{T}, A::CuMatrix{T}, conj = true) -> B

`B = adjoint(A)` (`transpose(A)` with `conj = false`, or for real `T`), `B` `n × m` for `A`
`m × n` and not sharing memory with it: one kernel of 32×32 tiles through shared memory
(reads and writes coalesced, where the strided copy behind `copy(adjoint(A))` reads with
a stride); `adjoint!`/`transpose!` on the host device. `CuMem.la_adjoint(A)` allocates `B`.
"""
function adjoint_into!(B::CuMatrix{T}, A::CuMatrix{T}, conj::Bool = true) where {T}
    m, n = size(A)
    size(B) == (n, m) || throw(DimensionMismatch("adjoint of a $m×$n matrix into one of size $(size(B))"))
    aliased(B, A) && throw(ArgumentError("adjoint_into!: B must not share memory with A"))
    check_devices("adjoint_into!", A, B)
    activate()
    (m == 0 || n == 0) && return B
    if on_host()
        GC.@preserve A B (conj ? adjoint!(host_view(B), host_view(A)) : transpose!(host_view(B), host_view(A)))
        return B
    end
    name = "la_transpose_" * (T <: Union{ComplexF32,ComplexF64} ? value_suffix(T) : word_suffix(T))
    k = load_kernel(LINALG_KERNELS_SOURCE, name)
    GC.@preserve A B launch(k, CuPtr{UInt8}(devaddr(B)), CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n), Int64(ld(A)),
                            Int64(ld(B)), Int32(conj); blocks = min(cld(m, 32) * cld(n, 32), 65535), threads = LA_THREADS)
    return B
end
la_adjoint(A::CuMatrix) = adjoint_into!(similar(A, size(A, 2), size(A, 1)), A)

# a flag word on the device, set by a kernel; read back
function la_flag(f)
    flag = CuMem.zeros(Int32, 1)
    GC.@preserve flag f(CuPtr{Int32}(devaddr(flag)))
    r = Array(flag)[1] != 0
    unsafe_free!(flag)
    return r
end

"""
    triu!(A::CuMatrix, k::Integer = 0) -> A
    tril!(A::CuMatrix, k::Integer = 0) -> A

Zero the elements below the `k`th superdiagonal (`triu!`) or above it (`tril!`) in place,
as LinearAlgebra (one kernel moving element bits; Base on the host device). `triu(A, k)`
and `tril(A, k)` copy first. Number element types of 1 to 16 bytes.
"""
LinearAlgebra.triu!(A::CuMatrix, k::Integer = 0) = band!(A, k, true)
LinearAlgebra.tril!(A::CuMatrix, k::Integer = 0) = band!(A, k, false)
LinearAlgebra.triu(A::CuMatrix, k::Integer = 0) = triu!(copy(A), k)
LinearAlgebra.tril(A::CuMatrix, k::Integer = 0) = tril!(copy(A), k)

function band!(A::CuMatrix{T}, k::Integer, upper::Bool) where {T}
    check_devices(upper ? "triu!" : "tril!", A)
    activate()
    m, n = size(A)
    if on_host()
        GC.@preserve A (upper ? triu!(host_view(A), k) : tril!(host_view(A), k))
        return A
    end
    T <: Number || throw(ArgumentError("triu!/tril! of $T elements on a GPU (numbers only)"))
    GC.@preserve A la_launch("la_band_" * word_suffix(T), m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n),
                             Int64(ld(A)), Int64(k), Int32(upper))
    return A
end

"""
    istriu(A::CuMatrix, k::Integer = 0) -> Bool
    istril(A::CuMatrix, k::Integer = 0) -> Bool

Whether every element below (`istriu`) or above (`istril`) the `k`th superdiagonal is
zero (`iszero`, so `-0.0` counts), as LinearAlgebra: one kernel and a 4-byte download.
"""
LinearAlgebra.istriu(A::CuMatrix, k::Integer = 0) = isband(A, k, true)
LinearAlgebra.istril(A::CuMatrix, k::Integer = 0) = isband(A, k, false)

function isband(A::CuMatrix{T}, k::Integer, upper::Bool) where {T}
    check_devices(upper ? "istriu" : "istril", A)
    activate()
    m, n = size(A)
    if on_host()
        return GC.@preserve A (upper ? istriu(host_view(A), k) : istril(host_view(A), k))
    end
    (m == 0 || n == 0) && return true
    name = "la_isband_" * value_suffix(T)
    return !GC.@preserve A la_flag(f -> la_launch(name, m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n),
                                                  Int64(ld(A)), Int64(k), Int32(upper), f))
end

# (istril(A), istriu(A)) with one download: the two band kernels write two flag words
function triangularity(A::CuMatrix{T}) where {T}
    check_devices("istriu", A)
    activate()
    m, n = size(A)
    if on_host()
        return GC.@preserve A (istril(host_view(A)), istriu(host_view(A)))
    end
    (m == 0 || n == 0) && return (true, true)
    name = "la_isband_" * value_suffix(T)
    flags = CuMem.zeros(Int32, 2)
    GC.@preserve A flags for (i, upper) in ((0, false), (1, true))
        la_launch(name, m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n), Int64(ld(A)), Int64(0), Int32(upper),
                  CuPtr{Int32}(devaddr(flags) + 4i))
    end
    f = Array(flags)
    unsafe_free!(flags)
    return f[1] == 0, f[2] == 0
end

"""
    issymmetric(A::CuMatrix) -> Bool
    ishermitian(A::CuMatrix) -> Bool

Whether `A == transpose(A)` (`A == A'`), as LinearAlgebra (`==` on the elements, so NaN
fails): one kernel and a 4-byte download. Non-square matrices are neither.
"""
LinearAlgebra.issymmetric(A::CuMatrix) = issym(A, false)
LinearAlgebra.ishermitian(A::CuMatrix) = issym(A, eltype(A) <: Complex)

function issym(A::CuMatrix{T}, conj::Bool) where {T}
    check_devices("issymmetric", A)
    activate()
    if on_host()
        return GC.@preserve A (conj ? ishermitian(host_view(A)) : issymmetric(host_view(A)))
    end
    m, n = size(A)
    m == n || return false
    n == 0 && return true
    name = "la_issym_" * value_suffix(T)
    return !GC.@preserve A la_flag(f -> la_launch(name, n * n, CuPtr{UInt8}(devaddr(A)), Int64(n), Int64(ld(A)),
                                                  Int32(conj), f))
end

# A[i,i] += λ for i in 1:min(size(A)...), in place (one kernel; Base on the host device)
function diag_add!(A::CuMatrix{T}, λ) where {T}
    activate()
    len = minimum(size(A))
    if on_host()
        GC.@preserve A begin
            H = host_view(A)
            for i in 1:len
                @inbounds H[i, i] += λ
            end
        end
        return A
    end
    GC.@preserve A la_launch("la_diagadd_" * value_suffix(T), len, CuPtr{UInt8}(devaddr(A)), Int64(len),
                             Int64(ld(A) + 1), kernel_value(convert(T, λ)))
    return A
end

# C = A * B for integer element types of one width (one kernel; Base's generic matmul on
# the host device). A, B, C are CuMatrix (the caller materialises transposes).
function int_matmul!(C::CuMatrix{T}, A::CuMatrix{T}, B::CuMatrix{T}) where {T<:Base.BitInteger}
    m, n, k = size(C, 1), size(C, 2), size(A, 2)
    activate()
    if on_host()
        GC.@preserve A B C mul!(host_view(C), host_view(A), host_view(B))
        return C
    end
    GC.@preserve A B C la_launch("la_imatmul_w$(sizeof(T))", m * n, CuPtr{UInt8}(devaddr(A)), CuPtr{UInt8}(devaddr(B)),
                                 CuPtr{UInt8}(devaddr(C)), Int64(m), Int64(n), Int64(k), Int64(ld(A)),
                                 Int64(ld(B)), Int64(ld(C)))
    return C
end

## the symmetric fill: the stored triangle mirrored

const SYMFILL_SOURCE = raw"""
struct la_w16s { unsigned long long lo, hi; };
template <typename W> __device__ __forceinline__ void la_symfill(W *a, long long n, long long lda, int upper) {
  const long long total = n * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % n, j = t / n;
    if (upper ? (i > j) : (i < j)) a[i + j * lda] = a[j + i * lda];
  }
}
template <typename R> __device__ __forceinline__ void la_hermfill(R *a, long long n, long long lda, int upper) {
  const long long total = n * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const long long i = t % n, j = t / n;
    if (i == j) a[2 * (i + j * lda) + 1] = 0;
    else if (upper ? (i > j) : (i < j)) {
      a[2 * (i + j * lda)] = a[2 * (j + i * lda)];
      a[2 * (i + j * lda) + 1] = -a[2 * (j + i * lda) + 1];
    }
  }
}
#define LA_SYMFILL(S, W) extern "C" __global__ void la_symfill_##S(W *a, long long n, long long lda, int upper) { la_symfill<W>(a, n, lda, upper); }
LA_SYMFILL(w1, unsigned char) LA_SYMFILL(w2, unsigned short) LA_SYMFILL(w4, unsigned int) LA_SYMFILL(w8, unsigned long long) LA_SYMFILL(w16, la_w16s)
extern "C" __global__ void la_hermfill_c32(float *a, long long n, long long lda, int upper) { la_hermfill<float>(a, n, lda, upper); }
extern "C" __global__ void la_hermfill_c64(double *a, long long n, long long lda, int upper) { la_hermfill<double>(a, n, lda, upper); }
"""

# M's `uplo` triangle copied into the other one (conjugated, with a real diagonal, for a
# complex Hermitian matrix), in place
function sym_fill!(M::CuMatrix{T}, uplo::Char, herm::Bool) where {T}
    n = LinearAlgebra.checksquare(M)
    activate()
    if on_host()
        GC.@preserve M begin
            H = host_view(M)
            copyto!(H, herm ? Matrix(Hermitian(H, Symbol(uplo))) : Matrix(Symmetric(H, Symbol(uplo))))
        end
        return M
    end
    n == 0 && return M
    herm && !(T <: Union{ComplexF32,ComplexF64}) &&
        throw(ArgumentError("Hermitian of $T elements on a GPU (ComplexF32/ComplexF64 or real types)"))
    name = herm ? (T === ComplexF32 ? "la_hermfill_c32" : "la_hermfill_c64") : "la_symfill_" * word_suffix(T)
    k = fixed_kernel(:symfill, SYMFILL_SOURCE, name)
    GC.@preserve M launch(k, CuPtr{UInt8}(devaddr(M)), Int64(n), Int64(ld(M)), Int32(uplo == 'U');
                          blocks = max(1, min(cld(n * n, LA_THREADS), 65535 * 16)), threads = LA_THREADS)
    return M
end


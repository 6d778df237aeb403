//! The C functions of linear algebra beyond gemm: cuBLAS's triangular, symmetric and
//! batched products ([`crate::compute::blas_ext`]) and cuSOLVER's factorizations
//! ([`crate::compute::solver`]). All act on the calling thread's current device; the
//! `_async` forms queue on `stream` (a handle of `cumem_stream_create`; 0: the legacy default
//! stream), the forms without the suffix on the legacy default stream; take device
//! addresses with leading dimensions in elements, and use the element-type codes of
//! `cumem_gemm` (0 = Float32, 1 = Float64, 2 = ComplexF32, 3 = ComplexF64; 4 = Float16
//! for the batched gemm). Enum codes are cuBLAS's: side 0 = left, 1 = right; uplo
//! 0 = lower, 1 = upper; trans 0 = N, 1 = T, 2 = C; diag 0 = non-unit, 1 = unit.
//!
//! Common results: `CUMEM_ERROR_INVALID_VALUE` for a bad code, a size outside
//! 0..2^31-1, a leading dimension below the stored rows, a null pointer, an unknown
//! stream, or an operand not inside one live allocation (checked on every device before
//! anything runs); `CUMEM_ERROR_NOT_SUPPORTED` on the host device or without the library
//! (`CUMEM_CUBLAS_LIBRARY`, `CUMEM_CUSOLVER_LIBRARY` name them); `CUMEM_ERROR_OUT_OF_MEMORY`
//! when a cuSOLVER workspace does not fit; `CUMEM_ERROR_DEVICE` when the library fails.
//!
//! The cuSOLVER functions wait for `stream` and store LAPACK's `info` in `*info`: 0, or
//! `i > 0` as each function says (the Julia package turns it into `SingularException`,
//! `PosDefException` or `LAPACKException`). Their workspaces come from the engine's pool.

use crate::compute::blas::{Dtype, Operand};
use crate::compute::{blas_ext, solver};
use crate::error::Result;
use crate::ffi::{guard, null_err};
use std::ffi::c_void;

fn op(ptr: u64, ld: i64) -> Operand {
    Operand { ptr, ld }
}

/// Runs a cuSOLVER call and stores its `info`.
fn with_info(info: *mut i32, f: impl FnOnce(&'static crate::engine::Engine) -> Result<i32>) -> i32 {
    guard(|e| {
        if info.is_null() {
            return Err(null_err("info"));
        }
        let i = f(e)?;
        // SAFETY: checked non-null; the caller passes a writable int.
        unsafe { *info = i };
        Ok(())
    })
}

/// Triangular solve in place (cuBLAS trsm; trsv for one column with `alpha` = 1):
/// `B = alpha * op(A)⁻¹ * B` (side 0) or `B = alpha * B * op(A)⁻¹` (side 1); `B` is
/// `m × n`, `A` triangular of order `m` (side 0) or `n` (side 1). `alpha` points to a host
/// value of `dtype`. Returns without waiting; results as the module says.
///
/// # Safety
/// `alpha` must be null or point to a readable value of `dtype`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_trsm_async(
    stream: u64,
    dtype: i32,
    side: i32,
    uplo: i32,
    trans: i32,
    diag: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
) -> i32 {
    guard(|e| {
        let d = Dtype::from_code(dtype)?;
        // SAFETY: the caller vouches for alpha (null is checked).
        unsafe {
            blas_ext::trsm(e, stream, d, (side, uplo, trans, diag), (m, n), alpha, op(A, lda), op(B, ldb))
        }
    })
}

/// Triangular product in place (cuBLAS trmm with C = B; trmv for one column with
/// `alpha` = 1): `B = alpha * op(A) * B` (side 0) or `B = alpha * B * op(A)` (side 1);
/// arguments as `cumem_trsm`.
///
/// # Safety
/// As `cumem_trsm`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_trmm_async(
    stream: u64,
    dtype: i32,
    side: i32,
    uplo: i32,
    trans: i32,
    diag: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
) -> i32 {
    guard(|e| {
        let d = Dtype::from_code(dtype)?;
        // SAFETY: as cumem_trsm.
        unsafe {
            blas_ext::trmm(e, stream, d, (side, uplo, trans, diag), (m, n), alpha, op(A, lda), op(B, ldb))
        }
    })
}

/// `C = alpha * A * B + beta * C` (side 0) or `alpha * B * A + beta * C` (side 1), `A`
/// symmetric (`hermitian` 0) or Hermitian (1) of order `m` (side 0) or `n` (side 1) with
/// only its `uplo` triangle read; `B`, `C` `m × n`, `C` not overlapping `A` or `B`
/// (cuBLAS symm/hemm; symv/hemv for one column on the left). `alpha`, `beta`: host values
/// of `dtype`. Returns without waiting.
///
/// # Safety
/// `alpha` and `beta` must be null or point to readable values of `dtype`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_symm_async(
    stream: u64,
    dtype: i32,
    hermitian: i32,
    side: i32,
    uplo: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
    beta: *const c_void,
    C: u64,
    ldc: i64,
) -> i32 {
    guard(|e| {
        let d = Dtype::from_code(dtype)?;
        let (a, b, c) = (op(A, lda), op(B, ldb), op(C, ldc));
        // SAFETY: the caller vouches for alpha and beta (null is checked).
        unsafe { blas_ext::symm(e, stream, d, hermitian != 0, (side, uplo), (m, n), alpha, a, b, beta, c) }
    })
}

/// Strided batched gemm: `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for `i` in
/// `0..batch`, `X_i` starting `i * strideX` elements after `X` (0 reuses one matrix);
/// op(A) `m × k`, op(B) `k × n`, C `m × n`; codes as `cumem_gemm`, Float16 (4) through
/// `cublasGemmStridedBatchedEx` with Float32 accumulation (`alpha`/`beta` then point to
/// `float`s). Each operand's whole extent must lie in one live allocation; C's matrices
/// must not overlap. Returns without waiting.
///
/// # Safety
/// `alpha` and `beta` must be null or point to readable values of the type above.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gemm_strided_batched_async(
    stream: u64,
    dtype: i32,
    transa: i32,
    transb: i32,
    m: i64,
    n: i64,
    k: i64,
    batch: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    strideA: i64,
    B: u64,
    ldb: i64,
    strideB: i64,
    beta: *const c_void,
    C: u64,
    ldc: i64,
    strideC: i64,
) -> i32 {
    guard(|e| {
        let d = Dtype::from_code(dtype)?;
        // SAFETY: the caller vouches for alpha and beta (null is checked).
        unsafe {
            blas_ext::gemm_strided_batched(
                e,
                stream,
                d,
                (transa, transb),
                (m, n, k, batch),
                alpha,
                (op(A, lda), strideA),
                (op(B, ldb), strideB),
                beta,
                (op(C, ldc), strideC),
            )
        }
    })
}

/// LU factorization with partial pivoting of `A` (`m × n`) in place (cusolverDnXgetrf);
/// `ipiv`: device address of min(m, n) `int64_t` row interchanges (1-based). `*info`:
/// 0, or `i > 0` when `U[i,i]` is exactly zero. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cumem_getrf_async(
    stream: u64,
    dtype: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    ipiv: u64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| solver::getrf(e, stream, Dtype::from_code(dtype)?, (m, n), op(A, lda), ipiv))
}

/// Solves `op(A) X = B` in place of `B` (`n × nrhs`) with `cumem_getrf`'s factors and
/// pivots of `A` (`n × n`) (cusolverDnXgetrs). `*info`: 0. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_getrs_async(
    stream: u64,
    dtype: i32,
    trans: i32,
    n: i64,
    nrhs: i64,
    A: u64,
    lda: i64,
    ipiv: u64,
    B: u64,
    ldb: i64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| {
        solver::getrs(e, stream, Dtype::from_code(dtype)?, trans, (n, nrhs), op(A, lda), ipiv, op(B, ldb))
    })
}

/// QR factorization of `A` (`m × n`) in place, LAPACK's compact form, with min(m, n)
/// reflector scalars into `tau` (cusolverDnXgeqrf). `*info`: 0. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cumem_geqrf_async(
    stream: u64,
    dtype: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    tau: u64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| solver::geqrf(e, stream, Dtype::from_code(dtype)?, (m, n), op(A, lda), tau))
}

/// The first `n` columns of Q in place of `A` (`m × n`, m ≥ n ≥ k) from `k` reflectors of
/// `cumem_geqrf` (orgqr/ungqr). `*info`: 0. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_orgqr_async(
    stream: u64,
    dtype: i32,
    m: i64,
    n: i64,
    k: i64,
    A: u64,
    lda: i64,
    tau: u64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| solver::orgqr(e, stream, Dtype::from_code(dtype)?, (m, n, k), op(A, lda), tau))
}

/// `C = op(Q) C` (side 0) or `C op(Q)` (side 1) in place of `C` (`m × n`), Q from the `k`
/// reflectors of `cumem_geqrf` in `A` (ormqr/unmqr; trans 2 means T for real types).
/// `*info`: 0. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_ormqr_async(
    stream: u64,
    dtype: i32,
    side: i32,
    trans: i32,
    m: i64,
    n: i64,
    k: i64,
    A: u64,
    lda: i64,
    tau: u64,
    C: u64,
    ldc: i64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| {
        solver::ormqr(
            e,
            stream,
            Dtype::from_code(dtype)?,
            (side, trans),
            (m, n, k),
            op(A, lda),
            tau,
            op(C, ldc),
        )
    })
}

/// Cholesky factorization in place of the `uplo` triangle of `A` (`n × n`)
/// (cusolverDnXpotrf). `*info`: 0, or `i > 0` when the leading minor of order `i` is not
/// positive definite. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cumem_potrf_async(
    stream: u64,
    dtype: i32,
    uplo: i32,
    n: i64,
    A: u64,
    lda: i64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| solver::potrf(e, stream, Dtype::from_code(dtype)?, uplo, n, op(A, lda)))
}

/// Solves `A X = B` in place of `B` (`n × nrhs`) with `cumem_potrf`'s factor in the
/// `uplo` triangle of `A` (cusolverDnXpotrs). `*info`: 0. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_potrs_async(
    stream: u64,
    dtype: i32,
    uplo: i32,
    n: i64,
    nrhs: i64,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| {
        solver::potrs(e, stream, Dtype::from_code(dtype)?, uplo, (n, nrhs), op(A, lda), op(B, ldb))
    })
}

/// Singular value decomposition of `A` (`m × n`, destroyed): min(m, n) values into `S`
/// (real type), and with `vectors` 1 the thin `U` (`m × min(m,n)`) and, for `jacobi` 1
/// (cusolverDn<t>gesvdj, Jacobi, PyTorch's default driver), `V` (`n × min(m,n)`), for
/// `jacobi` 0 (cusolverDnXgesvd, m ≥ n only) `Vᴴ` (`min(m,n) × n`) into `V`; with
/// `vectors` 2 the full factors (`U` `m × m`, `V`/`Vᴴ` `n × n`). `*info`: 0,
/// or `i > 0` when the iteration did not converge. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gesvd_async(
    stream: u64,
    dtype: i32,
    jacobi: i32,
    vectors: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    S: u64,
    U: u64,
    ldu: i64,
    V: u64,
    ldv: i64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| {
        let d = Dtype::from_code(dtype)?;
        solver::gesvd(e, stream, d, (jacobi != 0, vectors), (m, n), op(A, lda), S, op(U, ldu), op(V, ldv))
    })
}

/// Eigenvalues (ascending, `n` of the real type into `W`) and with `vectors` 1 the
/// eigenvectors (in place of `A`) of the symmetric/Hermitian `A` (`n × n`), its `uplo`
/// triangle read (cusolverDnXsyevd: syevd/heevd). `*info`: 0, or `i > 0` when it did not
/// converge. Waits for `stream`.
///
/// # Safety
/// `info` must be null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_syevd_async(
    stream: u64,
    dtype: i32,
    vectors: i32,
    uplo: i32,
    n: i64,
    A: u64,
    lda: i64,
    W: u64,
    info: *mut i32,
) -> i32 {
    with_info(info, |e| solver::syevd(e, stream, Dtype::from_code(dtype)?, (vectors, uplo), n, op(A, lda), W))
}

/// As `cumem_trsm_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_trsm_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_trsm(
    dtype: i32,
    side: i32,
    uplo: i32,
    trans: i32,
    diag: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_trsm_async(0, dtype, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb) }
}

/// As `cumem_trmm_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_trmm_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_trmm(
    dtype: i32,
    side: i32,
    uplo: i32,
    trans: i32,
    diag: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_trmm_async(0, dtype, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb) }
}

/// As `cumem_symm_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_symm_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_symm(
    dtype: i32,
    hermitian: i32,
    side: i32,
    uplo: i32,
    m: i64,
    n: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
    beta: *const c_void,
    C: u64,
    ldc: i64,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_symm_async(0, dtype, hermitian, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc) }
}

/// As `cumem_gemm_strided_batched_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_gemm_strided_batched_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gemm_strided_batched(
    dtype: i32,
    transa: i32,
    transb: i32,
    m: i64,
    n: i64,
    k: i64,
    batch: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    strideA: i64,
    B: u64,
    ldb: i64,
    strideB: i64,
    beta: *const c_void,
    C: u64,
    ldc: i64,
    strideC: i64,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe {
        cumem_gemm_strided_batched_async(
            0, dtype, transa, transb, m, n, k, batch, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
            strideC,
        )
    }
}

/// As `cumem_getrf_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_getrf_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_getrf(
    dtype: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    ipiv: u64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_getrf_async(0, dtype, m, n, A, lda, ipiv, info) }
}

/// As `cumem_getrs_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_getrs_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_getrs(
    dtype: i32,
    trans: i32,
    n: i64,
    nrhs: i64,
    A: u64,
    lda: i64,
    ipiv: u64,
    B: u64,
    ldb: i64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_getrs_async(0, dtype, trans, n, nrhs, A, lda, ipiv, B, ldb, info) }
}

/// As `cumem_geqrf_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_geqrf_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_geqrf(
    dtype: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    tau: u64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_geqrf_async(0, dtype, m, n, A, lda, tau, info) }
}

/// As `cumem_orgqr_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_orgqr_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_orgqr(
    dtype: i32,
    m: i64,
    n: i64,
    k: i64,
    A: u64,
    lda: i64,
    tau: u64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_orgqr_async(0, dtype, m, n, k, A, lda, tau, info) }
}

/// As `cumem_ormqr_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_ormqr_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_ormqr(
    dtype: i32,
    side: i32,
    trans: i32,
    m: i64,
    n: i64,
    k: i64,
    A: u64,
    lda: i64,
    tau: u64,
    C: u64,
    ldc: i64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_ormqr_async(0, dtype, side, trans, m, n, k, A, lda, tau, C, ldc, info) }
}

/// As `cumem_potrf_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_potrf_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_potrf(dtype: i32, uplo: i32, n: i64, A: u64, lda: i64, info: *mut i32) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_potrf_async(0, dtype, uplo, n, A, lda, info) }
}

/// As `cumem_potrs_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_potrs_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_potrs(
    dtype: i32,
    uplo: i32,
    n: i64,
    nrhs: i64,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_potrs_async(0, dtype, uplo, n, nrhs, A, lda, B, ldb, info) }
}

/// As `cumem_gesvd_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_gesvd_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gesvd(
    dtype: i32,
    jacobi: i32,
    vectors: i32,
    m: i64,
    n: i64,
    A: u64,
    lda: i64,
    S: u64,
    U: u64,
    ldu: i64,
    V: u64,
    ldv: i64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_gesvd_async(0, dtype, jacobi, vectors, m, n, A, lda, S, U, ldu, V, ldv, info) }
}

/// As `cumem_syevd_async`, on the legacy default stream.
///
/// # Safety
/// As `cumem_syevd_async`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_syevd(
    dtype: i32,
    vectors: i32,
    uplo: i32,
    n: i64,
    A: u64,
    lda: i64,
    W: u64,
    info: *mut i32,
) -> i32 {
    // SAFETY: forwarded; stream 0 is the legacy default stream.
    unsafe { cumem_syevd_async(0, dtype, vectors, uplo, n, A, lda, W, info) }
}

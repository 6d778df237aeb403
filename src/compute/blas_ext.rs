//! cuBLAS beyond `gemm`: triangular products and solves (`trmm`/`trmv`, `trsm`/`trsv`),
//! symmetric and Hermitian products (`symm`/`symv`, `hemm`/`hemv`), strided batched gemm,
//! and Float16 gemm through `cublasGemmEx` (Float32 accumulation, as CUDA.jl and PyTorch).
//!
//! The functions are resolved with gemm's when [`super::blas`] opens libcublas, and
//! run on that module's per-device handle (its lock, its stream setting). Every operand is
//! checked to lie inside one live allocation of the engine before anything runs, on every
//! device; on the host device the calls then fail with [`Error::NotSupported`] (the Julia
//! package computes through Julia's BLAS there). Column-major as BLAS; codes as cuBLAS's
//! enums: side 0 = left, 1 = right; uplo 0 = lower, 1 = upper; trans 0 = N, 1 = T,
//! 2 = C; diag 0 = non-unit, 1 = unit.

use super::blas::{CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, CUDA_R_16F};
use super::blas::{Dtype, Operand, check, check_matrix, code, size, with_handle};
use crate::engine::Engine;
use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};

type P = *const c_void;
type M = *mut c_void;

fn blas_dtype(fname: &str, dtype: Dtype) -> Result<usize> {
    if dtype == Dtype::F16 {
        return Err(Error::InvalidValue(format!(
            "{fname}: Float16 is not supported (cuBLAS has it for gemm only)"
        )));
    }
    Ok(dtype as usize)
}

/// Whether `*alpha`, a value of `dtype`, is one (then a vector operand goes to the
/// level-2 routine, which has no alpha).
///
/// # Safety
/// `alpha` must point to a readable value of `dtype`.
unsafe fn is_one(dtype: Dtype, alpha: P) -> bool {
    // SAFETY: as the caller guarantees.
    unsafe {
        match dtype {
            Dtype::F32 => *(alpha as *const f32) == 1.0,
            Dtype::F64 => *(alpha as *const f64) == 1.0,
            Dtype::C32 => *(alpha as *const [f32; 2]) == [1.0, 0.0],
            Dtype::C64 => *(alpha as *const [f64; 2]) == [1.0, 0.0],
            Dtype::F16 => false,
        }
    }
}

fn null_check(fname: &str, ptrs: &[(&str, P)]) -> Result<()> {
    for (what, p) in ptrs {
        if p.is_null() {
            return Err(Error::InvalidValue(format!("{fname}: {what} is a null pointer")));
        }
    }
    Ok(())
}

/// Triangular solve in place: `B = alpha * op(A)⁻¹ * B` (side 0) or `B = alpha * B *
/// op(A)⁻¹` (side 1), `B` `m × n`, `A` triangular of order `m` (left) or `n` (right)
/// with `uplo`/`trans`/`diag` as the module says (cuBLAS `trsm`; `trsv` when `n == 1`,
/// side left and `alpha == 1`). `alpha` points to a host value of `dtype`. Queued on
/// `stream`; returns without waiting. A singular `A` gives Inf/NaN, as BLAS.
///
/// Errors: [`Error::InvalidValue`] for bad codes or sizes, Float16, a null `alpha`, or an
/// operand outside the live allocations (checked first, on every device);
/// [`Error::NotSupported`] on the host device or without libcublas; [`Error::Device`].
///
/// # Safety
/// `alpha` must be null or point to a readable value of `dtype`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn trsm(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (side, uplo, trans, diag): (i32, i32, i32, i32),
    (m, n): (i64, i64),
    alpha: P,
    a: Operand,
    b: Operand,
) -> Result<()> {
    // SAFETY: forwarded.
    unsafe { triangular(engine, stream, dtype, (side, uplo, trans, diag), (m, n), alpha, a, b, false) }
}

/// Triangular product in place: `B = alpha * op(A) * B` (side 0) or `B = alpha * B *
/// op(A)` (side 1); as [`trsm`] otherwise (cuBLAS `trmm` with `C = B`, which cuBLAS
/// documents as its in-place form; `trmv` when `n == 1`, side left and `alpha == 1`).
///
/// # Safety
/// As [`trsm`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn trmm(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (side, uplo, trans, diag): (i32, i32, i32, i32),
    (m, n): (i64, i64),
    alpha: P,
    a: Operand,
    b: Operand,
) -> Result<()> {
    // SAFETY: forwarded.
    unsafe { triangular(engine, stream, dtype, (side, uplo, trans, diag), (m, n), alpha, a, b, true) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn triangular(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (side, uplo, trans, diag): (i32, i32, i32, i32),
    (m, n): (i64, i64),
    alpha: P,
    a: Operand,
    b: Operand,
    product: bool,
) -> Result<()> {
    let fname = if product { "trmm" } else { "trsm" };
    let t = blas_dtype(fname, dtype)?;
    let (side, uplo) = (code(fname, "side", side, 1)?, code(fname, "uplo", uplo, 1)?);
    let (trans, diag) = (code(fname, "trans", trans, 2)?, code(fname, "diag", diag, 1)?);
    let (mi, ni) = (size(fname, "m", m)?, size(fname, "n", n)?);
    null_check(fname, &[("alpha", alpha)])?;
    let order = if side == 0 { m } else { n };
    let es = dtype.size();
    check_matrix(engine, fname, "A", a, order, order, es)?;
    check_matrix(engine, fname, "B", b, m, n, es)?;
    with_handle(engine, stream, &format!("{fname} (cuBLAS)"), |cb, h| {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let x = &cb.api;
        // SAFETY: operands checked above; the caller vouches for alpha; handle locked.
        unsafe {
            if side == 0 && n == 1 && is_one(dtype, alpha) {
                let f = if product { x.trmv[t] } else { x.trsv[t] };
                let name = if product { "cublastrmv" } else { "cublastrsv" };
                return check(name, f(h, uplo, trans, diag, mi, a.ptr as P, a.ld as c_int, b.ptr as M, 1));
            }
            if product {
                check(
                    "cublastrmm",
                    (x.trmm[t])(
                        h,
                        side,
                        uplo,
                        trans,
                        diag,
                        mi,
                        ni,
                        alpha,
                        a.ptr as P,
                        a.ld as c_int,
                        b.ptr as P,
                        b.ld as c_int,
                        b.ptr as M,
                        b.ld as c_int,
                    ),
                )
            } else {
                check(
                    "cublastrsm",
                    (x.trsm[t])(
                        h,
                        side,
                        uplo,
                        trans,
                        diag,
                        mi,
                        ni,
                        alpha,
                        a.ptr as P,
                        a.ld as c_int,
                        b.ptr as M,
                        b.ld as c_int,
                    ),
                )
            }
        }
    })
}

/// `C = alpha * A * B + beta * C` (side 0) or `C = alpha * B * A + beta * C` (side 1)
/// with `A` symmetric (`hermitian` false) or Hermitian (true; complex types, otherwise
/// the same as symmetric) of order `m` (left) or `n` (right), only its `uplo` triangle
/// read; `B`, `C` `m × n` (cuBLAS `symm`/`hemm`; `symv`/`hemv` when `n == 1` and side
/// left). `alpha`/`beta` point to host values of `dtype`. `C` must not overlap `A` or `B`
/// (the caller's duty, as BLAS).
///
/// Errors: as [`trsm`].
///
/// # Safety
/// `alpha` and `beta` must be null or point to readable values of `dtype`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn symm(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    hermitian: bool,
    (side, uplo): (i32, i32),
    (m, n): (i64, i64),
    alpha: P,
    a: Operand,
    b: Operand,
    beta: P,
    c: Operand,
) -> Result<()> {
    let fname = if hermitian { "hemm" } else { "symm" };
    let t = blas_dtype(fname, dtype)?;
    let (side, uplo) = (code(fname, "side", side, 1)?, code(fname, "uplo", uplo, 1)?);
    let (mi, ni) = (size(fname, "m", m)?, size(fname, "n", n)?);
    null_check(fname, &[("alpha", alpha), ("beta", beta)])?;
    let order = if side == 0 { m } else { n };
    let es = dtype.size();
    check_matrix(engine, fname, "A", a, order, order, es)?;
    check_matrix(engine, fname, "B", b, m, n, es)?;
    check_matrix(engine, fname, "C", c, m, n, es)?;
    let herm = hermitian && t >= 2;
    with_handle(engine, stream, &format!("{fname} (cuBLAS)"), |cb, h| {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let x = &cb.api;
        // SAFETY: operands checked above; the caller vouches for alpha and beta.
        unsafe {
            if side == 0 && n == 1 {
                let f = if herm { x.hemv[t - 2] } else { x.symv[t] };
                return check(
                    "cublassymv",
                    f(h, uplo, mi, alpha, a.ptr as P, a.ld as c_int, b.ptr as P, 1, beta, c.ptr as M, 1),
                );
            }
            let f = if herm { x.hemm[t - 2] } else { x.symm[t] };
            check(
                "cublassymm",
                f(
                    h,
                    side,
                    uplo,
                    mi,
                    ni,
                    alpha,
                    a.ptr as P,
                    a.ld as c_int,
                    b.ptr as P,
                    b.ld as c_int,
                    beta,
                    c.ptr as M,
                    c.ld as c_int,
                ),
            )
        }
    })
}

/// Strided batched gemm: for `i` in `0..batch`, `C_i = alpha * op(A_i) * op(B_i) + beta *
/// C_i` where `X_i` starts `i * stride_x` elements after `X` (a stride of 0 reuses one
/// matrix for every batch), op(A) `m × k`, op(B) `k × n`, C `m × n`; codes and types as
/// [`super::blas::gemm`] (Float16 through `cublasGemmStridedBatchedEx`, `alpha`/`beta` then
/// `f32`). The whole extent of each operand (`(batch-1)*stride` plus one matrix) must lie
/// in one live allocation; `C`'s matrices must not overlap each other (`stride_c` at least
/// `ldc * n`) nor `A`/`B` (the caller's duty). Queued on `stream`.
///
/// Errors: as [`super::blas::gemm`], and [`Error::InvalidValue`] for a negative batch or stride,
/// or a `stride_c` that makes C's matrices overlap.
///
/// # Safety
/// `alpha` and `beta` must be null or point to readable values of the type above.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_strided_batched(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (transa, transb): (i32, i32),
    (m, n, k, batch): (i64, i64, i64, i64),
    alpha: P,
    (a, stride_a): (Operand, i64),
    (b, stride_b): (Operand, i64),
    beta: P,
    (c, stride_c): (Operand, i64),
) -> Result<()> {
    let f = "gemm_strided_batched";
    let (ta, tb) = (code(f, "transa", transa, 2)?, code(f, "transb", transb, 2)?);
    let (mi, ni, ki, bi) = (size(f, "m", m)?, size(f, "n", n)?, size(f, "k", k)?, size(f, "batch", batch)?);
    null_check(f, &[("alpha", alpha), ("beta", beta)])?;
    for (what, s) in [("stride_a", stride_a), ("stride_b", stride_b), ("stride_c", stride_c)] {
        if s < 0 {
            return Err(Error::InvalidValue(format!("{f}: {what} = {s} is negative")));
        }
    }
    if batch > 1 && m > 0 && n > 0 && stride_c < c.ld * n {
        return Err(Error::InvalidValue(format!(
            "{f}: stride_c = {stride_c} makes the matrices of C (ld {} × {n}) overlap",
            c.ld
        )));
    }
    let es = dtype.size();
    let (ar, ac) = if ta == 0 { (m, k) } else { (k, m) };
    let (br, bc) = if tb == 0 { (k, n) } else { (n, k) };
    // the first matrix of each (leading dimension, sizes), then the whole extent below
    check_matrix(engine, f, "A", a, ar, ac, es)?;
    check_matrix(engine, f, "B", b, br, bc, es)?;
    check_matrix(engine, f, "C", c, m, n, es)?;
    if batch > 0 {
        // one allocation from the first to the last matrix
        for (what, op, st, rows, cols) in
            [("A", a, stride_a, ar, ac), ("B", b, stride_b, br, bc), ("C", c, stride_c, m, n)]
        {
            if rows > 0 && cols > 0 {
                let bytes =
                    (((batch - 1) as u64 * st as u64) + ((cols - 1) as u64 * op.ld as u64) + rows as u64)
                        * es;
                engine
                    .check_range(op.ptr, bytes)
                    .map_err(|e| Error::InvalidValue(format!("{f}: {what} over {batch} matrices: {e}")))?;
            }
        }
    }
    with_handle(engine, stream, "gemm_strided_batched (cuBLAS)", |cb, h| {
        if m == 0 || n == 0 || batch == 0 {
            return Ok(());
        }
        let x = &cb.api;
        // SAFETY: extents checked above; the caller vouches for alpha and beta.
        unsafe {
            if dtype == Dtype::F16 {
                return check(
                    "cublasGemmStridedBatchedEx",
                    (x.gemm_batched_ex)(
                        h,
                        ta,
                        tb,
                        mi,
                        ni,
                        ki,
                        alpha,
                        a.ptr as P,
                        CUDA_R_16F,
                        a.ld as c_int,
                        stride_a,
                        b.ptr as P,
                        CUDA_R_16F,
                        b.ld as c_int,
                        stride_b,
                        beta,
                        c.ptr as M,
                        CUDA_R_16F,
                        c.ld as c_int,
                        stride_c,
                        bi,
                        CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT,
                    ),
                );
            }
            check(
                "cublasgemmStridedBatched",
                (x.gemm_batched[dtype as usize])(
                    h,
                    ta,
                    tb,
                    mi,
                    ni,
                    ki,
                    alpha,
                    a.ptr as P,
                    a.ld as c_int,
                    stride_a,
                    b.ptr as P,
                    b.ld as c_int,
                    stride_b,
                    beta,
                    c.ptr as M,
                    c.ld as c_int,
                    stride_c,
                    bi,
                ),
            )
        }
    })
}

//! Matrix multiplication through cuBLAS (`cublas<t>gemm`), column-major as BLAS.
//!
//! One cuBLAS handle per device, created on first use on that device (a handle belongs
//! to the context current at its creation) and guarded by a mutex (a handle must not be
//! used by two threads at once; a call only queues work, so the lock is short). The handle keeps cuBLAS's defaults that matter for results: math mode
//! `CUBLAS_DEFAULT_MATH` (no TF32 unless `NVIDIA_TF32_OVERRIDE` says otherwise), host
//! pointer mode for alpha and beta. The stream is set before every call
//! (`cublasSetStream`): the caller's, the legacy default stream (NULL) unless named.

use super::dylib::{self, Opened, library_api};
use super::gpu;
use crate::engine::Engine;
use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

pub(super) type Handle = *mut c_void;
pub(super) type Status = c_int;
type P = *const c_void;
type M = *mut c_void;

/// cudaDataType `CUDA_R_16F`, cublasComputeType_t `CUBLAS_COMPUTE_32F` and
/// cublasGemmAlgo_t `CUBLAS_GEMM_DEFAULT` (library_types.h, cublas_api.h).
pub(super) const CUDA_R_16F: c_int = 2;
/// See [`CUDA_R_16F`].
pub(super) const CUBLAS_COMPUTE_32F: c_int = 68;
/// See [`CUDA_R_16F`].
pub(super) const CUBLAS_GEMM_DEFAULT: c_int = -1;
type Long = std::ffi::c_longlong;

library_api! {
    /// The functions of libcublas the engine calls (cublas_api.h, v2 API, CUDA 11 and
    /// later; typed pointers passed as void pointers). Arrays are indexed by [`Dtype`]:
    /// S, D, C, Z (hemm/hemv: C, Z).
    pub(super) struct Api {
        create: "cublasCreate_v2" => (*mut Handle),
        set_stream: "cublasSetStream_v2" => (Handle, M),
        set_math_mode: "cublasSetMathMode" => (Handle, c_int),
        set_pointer_mode: "cublasSetPointerMode_v2" => (Handle, c_int),
        get_version: "cublasGetVersion_v2" => (Handle, *mut c_int),
        // (h, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        gemm: ("cublas", [S D C Z], "gemm_v2") =>
            (Handle, c_int, c_int, c_int, c_int, c_int, P, P, c_int, P, c_int, P, M, c_int),
        // (h, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb)
        pub(super) trsm: ("cublas", [S D C Z], "trsm_v2") =>
            (Handle, c_int, c_int, c_int, c_int, c_int, c_int, P, P, c_int, M, c_int),
        // (h, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb, C, ldc)
        pub(super) trmm: ("cublas", [S D C Z], "trmm_v2") =>
            (Handle, c_int, c_int, c_int, c_int, c_int, c_int, P, P, c_int, P, c_int, M, c_int),
        // (h, uplo, trans, diag, n, A, lda, x, incx)
        pub(super) trsv: ("cublas", [S D C Z], "trsv_v2") =>
            (Handle, c_int, c_int, c_int, c_int, P, c_int, M, c_int),
        pub(super) trmv: ("cublas", [S D C Z], "trmv_v2") =>
            (Handle, c_int, c_int, c_int, c_int, P, c_int, M, c_int),
        // (h, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc)
        pub(super) symm: ("cublas", [S D C Z], "symm_v2") =>
            (Handle, c_int, c_int, c_int, c_int, P, P, c_int, P, c_int, P, M, c_int),
        pub(super) hemm: ("cublas", [C Z], "hemm_v2") =>
            (Handle, c_int, c_int, c_int, c_int, P, P, c_int, P, c_int, P, M, c_int),
        // (h, uplo, n, alpha, A, lda, x, incx, beta, y, incy)
        pub(super) symv: ("cublas", [S D C Z], "symv_v2") =>
            (Handle, c_int, c_int, P, P, c_int, P, c_int, P, M, c_int),
        pub(super) hemv: ("cublas", [C Z], "hemv_v2") =>
            (Handle, c_int, c_int, P, P, c_int, P, c_int, P, M, c_int),
        // (h, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch)
        pub(super) gemm_batched: ("cublas", [S D C Z], "gemmStridedBatched") =>
            (Handle, c_int, c_int, c_int, c_int, c_int, P, P, c_int, Long, P, c_int, Long, P, M, c_int, Long, c_int),
        // (h, ta, tb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo)
        pub(super) gemm_ex: "cublasGemmEx" => (Handle, c_int, c_int, c_int, c_int, c_int, P,
            P, c_int, c_int, P, c_int, c_int, P, M, c_int, c_int, c_int, c_int),
        // GemmEx's arguments with each operand's stride after its ld, then batch before computeType
        pub(super) gemm_batched_ex: "cublasGemmStridedBatchedEx" => (Handle, c_int, c_int, c_int, c_int, c_int, P,
            P, c_int, c_int, Long, P, c_int, c_int, Long, P, M, c_int, c_int, Long, c_int, c_int, c_int),
    }
}

pub(super) struct Cublas {
    pub(super) api: Api,
    /// The handle of each device ordinal that used cuBLAS.
    handle: parking_lot::Mutex<rustc_hash::FxHashMap<u32, usize>>,
    from: String,
    _lib: Opened,
}

/// File names tried for libcublas, newest CUDA first; `CUMEM_CUBLAS_LIBRARY` overrides.
pub const CUBLAS_NAMES: &[&str] = &["libcublas.so.13", "libcublas.so.12", "libcublas.so"];
/// libcublasLt of the same release, opened first when libcublas is opened by path.
const CUBLASLT_NAMES: &[&str] = &["libcublasLt.so.13", "libcublasLt.so.12"];

pub(super) fn cublas() -> Result<&'static Cublas> {
    static CUBLAS: OnceLock<Result<Cublas>> = OnceLock::new();
    CUBLAS.get_or_init(Cublas::open).as_ref().map_err(Clone::clone)
}

impl Cublas {
    fn open() -> Result<Cublas> {
        let lib = dylib::open(
            "libcublas (cuBLAS)",
            "CUMEM_CUBLAS_LIBRARY",
            CUBLAS_NAMES,
            CUBLASLT_NAMES,
            "the CUDA toolkit, or pip's nvidia-cublas",
        )?;
        // SAFETY: the signatures are those of cublas_api.h (v2 API, CUDA 11 and later).
        let api = unsafe { Api::load(&lib)? };
        let from = lib.from.clone();
        Ok(Cublas { api, handle: parking_lot::Mutex::new(Default::default()), from, _lib: lib })
    }
}

/// Runs `f` with the cuBLAS handle of `engine`'s device, bound to that device's context,
/// its stream set to `stream` (0: the legacy default stream), under the handle's lock.
/// Creates the handle on the device's first call. `what` names the operation in errors.
/// Errors: [`Error::NotSupported`] on the host device or without libcublas,
/// [`Error::InvalidValue`] for an unknown stream, [`Error::Device`] when cuBLAS fails.
pub(super) fn with_handle<R>(
    engine: &Engine,
    stream: u64,
    what: &str,
    f: impl FnOnce(&'static Cublas, Handle) -> Result<R>,
) -> Result<R> {
    let raw = engine.device().stream_raw(stream)?;
    gpu::bind(engine.device(), what)?;
    let cb = cublas()?;
    let mut handles = cb.handle.lock();
    let ord = engine.ordinal();
    let h = match handles.get(&ord) {
        Some(&h) => h as Handle,
        None => {
            let mut h: Handle = std::ptr::null_mut();
            // SAFETY: valid out-pointer; a context is current (bound above).
            check("cublasCreate", unsafe { (cb.api.create)(&mut h) })?;
            // SAFETY: `h` is a live handle. 0 = CUBLAS_DEFAULT_MATH, 0 = host pointers.
            unsafe {
                check("cublasSetStream", (cb.api.set_stream)(h, std::ptr::null_mut()))?;
                check("cublasSetMathMode", (cb.api.set_math_mode)(h, 0))?;
                check("cublasSetPointerMode", (cb.api.set_pointer_mode)(h, 0))?;
                let mut v = 0;
                check("cublasGetVersion", (cb.api.get_version)(h, &mut v))?;
                log::info!("cuBLAS {v} from {}", cb.from);
            }
            handles.insert(ord, h as usize);
            h
        }
    };
    // SAFETY: a live handle, used under the lock; `raw` is a live stream or NULL.
    check("cublasSetStream", unsafe { (cb.api.set_stream)(h, raw as *mut c_void) })?;
    f(cb, h)
}

/// `v` as a cuBLAS/cuSOLVER enum code of `fname`'s argument `what`, which must lie in
/// `0..=max`. Errors: [`Error::InvalidValue`] naming both.
pub(super) fn code(fname: &str, what: &str, v: i32, max: i32) -> Result<c_int> {
    if (0..=max).contains(&v) {
        Ok(v)
    } else {
        Err(Error::InvalidValue(format!("{fname}: {what} is {v}, not in 0 to {max}")))
    }
}

/// `v` as a size argument `what` of `fname` (cuBLAS's and cuSOLVER's `int`: 0 to 2^31-1).
/// Errors: [`Error::InvalidValue`] naming both.
pub(super) fn size(fname: &str, what: &str, v: i64) -> Result<c_int> {
    if (0..=i32::MAX as i64).contains(&v) {
        Ok(v as c_int)
    } else {
        Err(Error::InvalidValue(format!("{fname}: {what} = {v} is outside 0 to 2^31-1")))
    }
}

pub(super) fn check(what: &str, s: Status) -> Result<()> {
    match s {
        0 => Ok(()),
        // CUBLAS_STATUS_INVALID_VALUE: checked below first, so rare; still bad input.
        7 => Err(Error::InvalidValue(format!(
            "{what}: cuBLAS rejected the arguments (CUBLAS_STATUS_INVALID_VALUE)"
        ))),
        3 => Err(Error::OutOfMemory(format!(
            "{what}: cuBLAS could not allocate its workspace (CUBLAS_STATUS_ALLOC_FAILED)"
        ))),
        _ => Err(Error::Device(format!("{what} failed: cublasStatus_t {s}"))),
    }
}

/// Element types of [`gemm`], as the C ABI numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `float` (Float32), 4 bytes.
    F32 = 0,
    /// `double` (Float64), 8 bytes.
    F64 = 1,
    /// `cuComplex` (ComplexF32), 8 bytes.
    C32 = 2,
    /// `cuDoubleComplex` (ComplexF64), 16 bytes.
    C64 = 3,
    /// `__half` (Float16), 2 bytes: [`gemm`] and the batched gemm only (cuBLAS's
    /// `cublasGemmEx` with Float32 accumulation, as CUDA.jl and PyTorch).
    F16 = 4,
}

impl Dtype {
    /// The type numbered `d` (0 to 3). Errors: [`Error::InvalidValue`].
    pub fn from_code(d: i32) -> Result<Dtype> {
        Ok(match d {
            0 => Dtype::F32,
            1 => Dtype::F64,
            2 => Dtype::C32,
            3 => Dtype::C64,
            4 => Dtype::F16,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "dtype {d} is not 0 (Float32), 1 (Float64), 2 (ComplexF32), 3 (ComplexF64) or 4 (Float16)"
                )));
            }
        })
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        [4, 8, 8, 16, 2][self as usize]
    }
}

/// A matrix operand: device address and leading dimension (elements between columns).
#[derive(Debug, Clone, Copy)]
pub struct Operand {
    /// Device address of the first element.
    pub ptr: u64,
    /// Leading dimension in elements (≥ the number of stored rows, ≥ 1).
    pub ld: i64,
}

/// Checks that an operand stored as `rows × cols` with leading dimension `op.ld` lies
/// inside one live allocation of `engine`.
fn check_operand(engine: &Engine, what: &str, op: Operand, rows: i64, cols: i64, esize: u64) -> Result<()> {
    check_matrix(engine, "gemm", what, op, rows, cols, esize)
}

/// Checks that a matrix operand `what` of operation `fname`, stored as `rows × cols`
/// with leading dimension `op.ld` and `esize`-byte elements, lies inside one live
/// allocation of `engine`, and that its sizes fit cuBLAS's and cuSOLVER's `int`.
/// Errors: [`Error::InvalidValue`] naming `fname` and `what`.
pub(super) fn check_matrix(
    engine: &Engine,
    fname: &str,
    what: &str,
    op: Operand,
    rows: i64,
    cols: i64,
    esize: u64,
) -> Result<()> {
    if rows < 0 || cols < 0 || rows > i32::MAX as i64 || cols > i32::MAX as i64 {
        return Err(Error::InvalidValue(format!(
            "{fname}: {what} is {rows}×{cols}; sizes must lie in 0 to 2^31-1"
        )));
    }
    if op.ld < rows.max(1) {
        return Err(Error::InvalidValue(format!(
            "{fname}: leading dimension of {what} is {} but must be at least max(1, {rows})",
            op.ld
        )));
    }
    if op.ld > i32::MAX as i64 {
        return Err(Error::InvalidValue(format!(
            "{fname}: leading dimension of {what} ({}) exceeds 2^31-1",
            op.ld
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let elems = (cols as u128 - 1) * op.ld as u128 + rows as u128;
    let bytes = u64::try_from(elems * esize as u128)
        .map_err(|_| Error::InvalidValue(format!("{fname}: {what} would span more than 2^64 bytes")))?;
    engine
        .check_range(op.ptr, bytes)
        .map_err(|e| Error::InvalidValue(format!("{fname}: {what} ({rows}×{cols}, ld {}): {e}", op.ld)))
}

/// `C = alpha * op(A) * op(B) + beta * C` through cuBLAS, column-major: op(A) is `m × k`,
/// op(B) `k × n`, C `m × n`; `transa`/`transb` 0 = as is, 1 = transposed, 2 = conjugate
/// transposed (as BLAS's 'N', 'T', 'C'). `alpha` and `beta` point to host values of
/// `dtype` (for [`Dtype::F16`]: to `f32` values, the compute type). Queued on `stream` (0: the legacy default stream); returns without waiting. Sizes up to
/// 2^31 − 1 (cuBLAS's `int`).
///
/// Errors: [`Error::InvalidValue`] for a negative or oversized size, a bad op code, a
/// leading dimension below the stored rows, or an operand not inside one live allocation
/// of `engine` (all checked before anything runs, on every device);
/// [`Error::NotSupported`] on the host device or without libcublas; [`Error::Device`]
/// when cuBLAS fails.
///
/// # Safety
/// `alpha` and `beta` must point to readable values of `dtype`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm(
    engine: &Engine,
    dtype: Dtype,
    transa: i32,
    transb: i32,
    (m, n, k): (i64, i64, i64),
    alpha: *const c_void,
    a: Operand,
    b: Operand,
    beta: *const c_void,
    c: Operand,
    stream: u64,
) -> Result<()> {
    for (what, t) in [("transa", transa), ("transb", transb)] {
        if !(0..=2).contains(&t) {
            return Err(Error::InvalidValue(format!("gemm: {what} is {t}, not 0 (N), 1 (T) or 2 (C)")));
        }
    }
    for (what, v) in [("m", m), ("n", n), ("k", k)] {
        if !(0..=i32::MAX as i64).contains(&v) {
            return Err(Error::InvalidValue(format!("gemm: {what} = {v} is outside 0 to 2^31-1")));
        }
    }
    if alpha.is_null() || beta.is_null() {
        return Err(Error::InvalidValue(format!(
            "gemm: {} is a null pointer",
            if alpha.is_null() { "alpha" } else { "beta" }
        )));
    }
    let es = dtype.size();
    let (ar, ac) = if transa == 0 { (m, k) } else { (k, m) };
    let (br, bc) = if transb == 0 { (k, n) } else { (n, k) };
    check_operand(engine, "A", a, ar, ac, es)?;
    check_operand(engine, "B", b, br, bc, es)?;
    check_operand(engine, "C", c, m, n, es)?;
    if m == 0 || n == 0 {
        // still binds the device and creates the handle, so a missing cuBLAS is reported
        return with_handle(engine, stream, "gemm (cuBLAS)", |_, _| Ok(()));
    }
    with_handle(engine, stream, "gemm (cuBLAS)", |cb, h| {
        if dtype == Dtype::F16 {
            // SAFETY: as below.
            return unsafe { gemm_f16(cb, h, transa, transb, (m, n, k), alpha, a, b, beta, c) };
        }
        let f = cb.api.gemm[dtype as usize];
        // SAFETY: the operands were checked to lie in live allocations of their stated
        // shapes; the caller vouches for alpha and beta; the handle is used under the lock.
        check("cublasgemm", unsafe {
            f(
                h,
                transa,
                transb,
                m as c_int,
                n as c_int,
                k as c_int,
                alpha,
                a.ptr as *const c_void,
                a.ld as c_int,
                b.ptr as *const c_void,
                b.ld as c_int,
                beta,
                c.ptr as *mut c_void,
                c.ld as c_int,
            )
        })
    })
}

/// Float16 gemm (`cublasGemmEx`, `CUDA_R_16F` operands, `CUBLAS_COMPUTE_32F`), for
/// [`gemm`] with [`Dtype::F16`]: `alpha`/`beta` point to `f32` values.
///
/// # Safety
/// As [`gemm`]; the operands were checked; `h` is locked by the caller.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_f16(
    cb: &'static Cublas,
    h: Handle,
    transa: i32,
    transb: i32,
    (m, n, k): (i64, i64, i64),
    alpha: P,
    a: Operand,
    b: Operand,
    beta: P,
    c: Operand,
) -> Result<()> {
    let x = &cb.api;
    // SAFETY: as the caller guarantees.
    check("cublasGemmEx", unsafe {
        (x.gemm_ex)(
            h,
            transa,
            transb,
            m as c_int,
            n as c_int,
            k as c_int,
            alpha,
            a.ptr as P,
            CUDA_R_16F,
            a.ld as c_int,
            b.ptr as P,
            CUDA_R_16F,
            b.ld as c_int,
            beta,
            c.ptr as M,
            CUDA_R_16F,
            c.ld as c_int,
            CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT,
        )
    })
}

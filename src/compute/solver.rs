//! Dense factorizations and solves through cuSOLVER (`cusolverDn`): LU (`getrf`,
//! `getrs`), QR (`geqrf`, `orgqr`/`ungqr`, `ormqr`/`unmqr`), Cholesky (`potrf`, `potrs`),
//! the singular value decomposition (`gesvdj`, Jacobi, PyTorch's default driver; `gesvd`,
//! QR iteration) and the symmetric/Hermitian eigenproblem (`syevd`/`heevd`).
//!
//! libcusolver is opened at run time like libcublas ([`super::dylib`]; `CUMEM_CUSOLVER_LIBRARY`
//! overrides), with cudarc's signatures (`cudarc::cusolver::sys`, whose own loader cannot
//! serve: it tries CUDA 12's names only and panics when none loads). The 64-bit generic
//! API (`cusolverDnX...`, one function for the four types) where cuSOLVER has it, the
//! typed legacy functions otherwise (`orgqr`, `ormqr`, `gesvdj`).
//!
//! One handle per device (with its `cusolverDnParams_t` and `gesvdjInfo_t`), created on
//! first use and guarded by a mutex; its stream is set before every call. Workspaces
//! (device bytes and the `devInfo` word) are allocated from the engine's pool on the
//! call's stream, so they appear in the memory statistics, and freed when the call is
//! done; host workspaces are `Vec`s. Every function waits for its stream to read
//! `devInfo` and returns it: 0 for success, `i > 0` for LAPACK's meaning (a zero pivot
//! `U[i,i]`, a leading minor of order `i` not positive definite, `i` off-diagonal
//! elements that did not converge); a negative `devInfo` (an illegal argument, which the
//! checks here exclude) is an [`Error::InvalidValue`].
//!
//! Operands are checked to lie inside one live allocation before anything runs, on every
//! device; on the host device the functions then fail with [`Error::NotSupported`] (the
//! Julia package computes through LAPACK there). Codes as cuBLAS's enums: uplo 0 = lower,
//! 1 = upper; trans 0 = N, 1 = T, 2 = C; side 0 = left, 1 = right.

use super::blas::{Dtype, Operand, check_matrix};
use super::{dylib, gpu};
use crate::engine::Engine;
use crate::error::{Error, Result};
use cudarc::cusolver::sys::{cudaDataType, cusolverDnHandle_t, cusolverDnParams_t, gesvdjInfo_t};
use std::ffi::{c_int, c_schar, c_void};
use std::sync::OnceLock;

type H = cusolverDnHandle_t;
type Prm = cusolverDnParams_t;
type Status = c_int;
type P = *const c_void;
type M = *mut c_void;

type XGetrfBs = unsafe extern "C" fn(
    H,
    Prm,
    i64,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    *mut usize,
    *mut usize,
) -> Status;
type XGetrf = unsafe extern "C" fn(
    H,
    Prm,
    i64,
    i64,
    cudaDataType,
    M,
    i64,
    *mut i64,
    cudaDataType,
    M,
    usize,
    M,
    usize,
    *mut c_int,
) -> Status;
type XGetrs = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    i64,
    i64,
    cudaDataType,
    P,
    i64,
    *const i64,
    cudaDataType,
    M,
    i64,
    *mut c_int,
) -> Status;
type XGeqrfBs = unsafe extern "C" fn(
    H,
    Prm,
    i64,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    P,
    cudaDataType,
    *mut usize,
    *mut usize,
) -> Status;
type XGeqrf = unsafe extern "C" fn(
    H,
    Prm,
    i64,
    i64,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    cudaDataType,
    M,
    usize,
    M,
    usize,
    *mut c_int,
) -> Status;
type XPotrfBs = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    *mut usize,
    *mut usize,
) -> Status;
type XPotrf = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    i64,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    usize,
    M,
    usize,
    *mut c_int,
) -> Status;
type XPotrs = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    i64,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    M,
    i64,
    *mut c_int,
) -> Status;
type XGesvdBs = unsafe extern "C" fn(
    H,
    Prm,
    c_schar,
    c_schar,
    i64,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    P,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    *mut usize,
    *mut usize,
) -> Status;
type XGesvd = unsafe extern "C" fn(
    H,
    Prm,
    c_schar,
    c_schar,
    i64,
    i64,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    usize,
    M,
    usize,
    *mut c_int,
) -> Status;
type XSyevdBs = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    c_int,
    i64,
    cudaDataType,
    P,
    i64,
    cudaDataType,
    P,
    cudaDataType,
    *mut usize,
    *mut usize,
) -> Status;
type XSyevd = unsafe extern "C" fn(
    H,
    Prm,
    c_int,
    c_int,
    i64,
    cudaDataType,
    M,
    i64,
    cudaDataType,
    M,
    cudaDataType,
    M,
    usize,
    M,
    usize,
    *mut c_int,
) -> Status;
type OrgqrBs = unsafe extern "C" fn(H, c_int, c_int, c_int, P, c_int, P, *mut c_int) -> Status;
type Orgqr = unsafe extern "C" fn(H, c_int, c_int, c_int, M, c_int, P, M, c_int, *mut c_int) -> Status;
type OrmqrBs =
    unsafe extern "C" fn(H, c_int, c_int, c_int, c_int, c_int, P, c_int, P, P, c_int, *mut c_int) -> Status;
type Ormqr = unsafe extern "C" fn(
    H,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    P,
    c_int,
    P,
    M,
    c_int,
    M,
    c_int,
    *mut c_int,
) -> Status;
type GesvdjBs = unsafe extern "C" fn(
    H,
    c_int,
    c_int,
    c_int,
    c_int,
    P,
    c_int,
    P,
    P,
    c_int,
    P,
    c_int,
    *mut c_int,
    gesvdjInfo_t,
) -> Status;
type Gesvdj = unsafe extern "C" fn(
    H,
    c_int,
    c_int,
    c_int,
    c_int,
    M,
    c_int,
    M,
    M,
    c_int,
    M,
    c_int,
    M,
    c_int,
    *mut c_int,
    gesvdjInfo_t,
) -> Status;

/// The functions of libcusolver the engine calls.
struct Api {
    create: unsafe extern "C" fn(*mut H) -> Status,
    set_stream: unsafe extern "C" fn(H, *mut c_void) -> Status,
    create_params: unsafe extern "C" fn(*mut Prm) -> Status,
    create_gesvdj_info: unsafe extern "C" fn(*mut gesvdjInfo_t) -> Status,
    get_version: unsafe extern "C" fn(*mut c_int) -> Status,
    getrf_bs: XGetrfBs,
    getrf: XGetrf,
    getrs: XGetrs,
    geqrf_bs: XGeqrfBs,
    geqrf: XGeqrf,
    potrf_bs: XPotrfBs,
    potrf: XPotrf,
    potrs: XPotrs,
    gesvd_bs: XGesvdBs,
    gesvd: XGesvd,
    syevd_bs: XSyevdBs,
    syevd: XSyevd,
    /// S, D, C, Z (orgqr for the real types, ungqr for the complex ones; so below)
    orgqr_bs: [OrgqrBs; 4],
    orgqr: [Orgqr; 4],
    ormqr_bs: [OrmqrBs; 4],
    ormqr: [Ormqr; 4],
    gesvdj_bs: [GesvdjBs; 4],
    gesvdj: [Gesvdj; 4],
}

/// A device's handle with its parameter objects (raw pointers kept as `usize`).
#[derive(Clone, Copy)]
struct Handles {
    h: usize,
    params: usize,
    svdj: usize,
}

struct Cusolver {
    api: Api,
    handles: parking_lot::Mutex<rustc_hash::FxHashMap<u32, Handles>>,
    from: String,
    _lib: dylib::Opened,
}

/// File names tried for libcusolver, newest CUDA first (CUDA 13 ships `.so.12`, CUDA 12
/// `.so.11`); `CUMEM_CUSOLVER_LIBRARY` overrides.
pub const CUSOLVER_NAMES: &[&str] = &["libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"];
/// Its dependencies, opened first from the same folder when it is opened by path.
const CUSOLVER_DEPS: &[&str] = &[
    "libnvJitLink.so.13",
    "libnvJitLink.so.12",
    "libcublasLt.so.13",
    "libcublasLt.so.12",
    "libcublas.so.13",
    "libcublas.so.12",
    "libcusparse.so.12",
];

fn cusolver() -> Result<&'static Cusolver> {
    static LIB: OnceLock<Result<Cusolver>> = OnceLock::new();
    LIB.get_or_init(Cusolver::open).as_ref().map_err(Clone::clone)
}

impl Cusolver {
    fn open() -> Result<Cusolver> {
        let lib = dylib::open(
            "libcusolver (cuSOLVER)",
            "CUMEM_CUSOLVER_LIBRARY",
            CUSOLVER_NAMES,
            CUSOLVER_DEPS,
            "the CUDA toolkit, or pip's nvidia-cusolver",
        )?;
        let l = &lib;
        // SAFETY: the signatures are cusolverDn.h's (CUDA 11.1 and later), as cudarc's
        // bindings declare them; typed pointers are passed as void pointers.
        let api = unsafe {
            macro_rules! four {
                ($s:expr, $d:expr, $c:expr, $z:expr) => {
                    [
                        dylib::symbol(l, $s)?,
                        dylib::symbol(l, $d)?,
                        dylib::symbol(l, $c)?,
                        dylib::symbol(l, $z)?,
                    ]
                };
            }
            Api {
                create: dylib::symbol(l, "cusolverDnCreate")?,
                set_stream: dylib::symbol(l, "cusolverDnSetStream")?,
                create_params: dylib::symbol(l, "cusolverDnCreateParams")?,
                create_gesvdj_info: dylib::symbol(l, "cusolverDnCreateGesvdjInfo")?,
                get_version: dylib::symbol(l, "cusolverGetVersion")?,
                getrf_bs: dylib::symbol(l, "cusolverDnXgetrf_bufferSize")?,
                getrf: dylib::symbol(l, "cusolverDnXgetrf")?,
                getrs: dylib::symbol(l, "cusolverDnXgetrs")?,
                geqrf_bs: dylib::symbol(l, "cusolverDnXgeqrf_bufferSize")?,
                geqrf: dylib::symbol(l, "cusolverDnXgeqrf")?,
                potrf_bs: dylib::symbol(l, "cusolverDnXpotrf_bufferSize")?,
                potrf: dylib::symbol(l, "cusolverDnXpotrf")?,
                potrs: dylib::symbol(l, "cusolverDnXpotrs")?,
                gesvd_bs: dylib::symbol(l, "cusolverDnXgesvd_bufferSize")?,
                gesvd: dylib::symbol(l, "cusolverDnXgesvd")?,
                syevd_bs: dylib::symbol(l, "cusolverDnXsyevd_bufferSize")?,
                syevd: dylib::symbol(l, "cusolverDnXsyevd")?,
                orgqr_bs: four!(
                    "cusolverDnSorgqr_bufferSize",
                    "cusolverDnDorgqr_bufferSize",
                    "cusolverDnCungqr_bufferSize",
                    "cusolverDnZungqr_bufferSize"
                ),
                orgqr: four!("cusolverDnSorgqr", "cusolverDnDorgqr", "cusolverDnCungqr", "cusolverDnZungqr"),
                ormqr_bs: four!(
                    "cusolverDnSormqr_bufferSize",
                    "cusolverDnDormqr_bufferSize",
                    "cusolverDnCunmqr_bufferSize",
                    "cusolverDnZunmqr_bufferSize"
                ),
                ormqr: four!("cusolverDnSormqr", "cusolverDnDormqr", "cusolverDnCunmqr", "cusolverDnZunmqr"),
                gesvdj_bs: four!(
                    "cusolverDnSgesvdj_bufferSize",
                    "cusolverDnDgesvdj_bufferSize",
                    "cusolverDnCgesvdj_bufferSize",
                    "cusolverDnZgesvdj_bufferSize"
                ),
                gesvdj: four!(
                    "cusolverDnSgesvdj",
                    "cusolverDnDgesvdj",
                    "cusolverDnCgesvdj",
                    "cusolverDnZgesvdj"
                ),
            }
        };
        let from = lib.from.clone();
        Ok(Cusolver { api, handles: parking_lot::Mutex::new(Default::default()), from, _lib: lib })
    }
}

fn check(what: &str, s: Status) -> Result<()> {
    match s {
        0 => Ok(()),
        2 => Err(Error::OutOfMemory(format!(
            "{what}: cuSOLVER could not allocate (CUSOLVER_STATUS_ALLOC_FAILED)"
        ))),
        3 => Err(Error::InvalidValue(format!(
            "{what}: cuSOLVER rejected the arguments (CUSOLVER_STATUS_INVALID_VALUE)"
        ))),
        _ => Err(Error::Device(format!("{what} failed: cusolverStatus_t {s}"))),
    }
}

/// cudaDataType of the elements, and of their real part (singular values, eigenvalues).
fn types(fname: &str, dtype: Dtype) -> Result<(cudaDataType, cudaDataType)> {
    use cudaDataType::*;
    Ok(match dtype {
        Dtype::F32 => (CUDA_R_32F, CUDA_R_32F),
        Dtype::F64 => (CUDA_R_64F, CUDA_R_64F),
        Dtype::C32 => (CUDA_C_32F, CUDA_R_32F),
        Dtype::C64 => (CUDA_C_64F, CUDA_R_64F),
        Dtype::F16 => {
            return Err(Error::InvalidValue(format!(
                "{fname}: Float16 is not supported (cuSOLVER factors Float32, Float64, ComplexF32, ComplexF64)"
            )));
        }
    })
}

/// Bytes of the real part of `dtype`.
fn real_size(dtype: Dtype) -> u64 {
    match dtype {
        Dtype::C32 => 4,
        Dtype::C64 => 8,
        d => d.size(),
    }
}

fn code(fname: &str, what: &str, v: i32, max: i32) -> Result<c_int> {
    if (0..=max).contains(&v) {
        Ok(v)
    } else {
        Err(Error::InvalidValue(format!("{fname}: {what} is {v}, not in 0 to {max}")))
    }
}

fn nonneg(fname: &str, vals: &[(&str, i64)]) -> Result<()> {
    for (what, v) in vals {
        if !(0..=i32::MAX as i64).contains(v) {
            return Err(Error::InvalidValue(format!("{fname}: {what} = {v} is outside 0 to 2^31-1")));
        }
    }
    Ok(())
}

/// A vector operand of `len` elements of `esize` bytes inside one live allocation.
fn check_vector(engine: &Engine, fname: &str, what: &str, ptr: u64, len: i64, esize: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    engine
        .check_range(ptr, len as u64 * esize)
        .map_err(|e| Error::InvalidValue(format!("{fname}: {what} ({len} elements): {e}")))
}

/// What a call needs from its handle: the raw handle, params and gesvdj info.
struct Ctx {
    h: H,
    params: Prm,
    svdj: gesvdjInfo_t,
}

/// Runs one cuSOLVER routine on `engine`'s device and `stream`: `query` returns the
/// device and host workspace sizes in bytes; `call` queues the routine given the device
/// workspace, the host workspace and the `devInfo` address. Then waits for the stream,
/// reads `devInfo`, frees the workspace and returns `devInfo` (negative: an error).
fn run(
    engine: &Engine,
    stream: u64,
    fname: &str,
    query: impl FnOnce(&Api, &Ctx) -> Result<(usize, usize)>,
    call: impl FnOnce(&Api, &Ctx, (M, usize), (M, usize), *mut c_int) -> Status,
) -> Result<i32> {
    let raw = engine.device().stream_raw(stream)?;
    gpu::bind(engine.device(), &format!("{fname} (cuSOLVER)"))?;
    let cs = cusolver()?;
    let mut handles = cs.handles.lock();
    let ord = engine.ordinal();
    let hs = match handles.get(&ord) {
        Some(&h) => h,
        None => {
            let (mut h, mut p, mut j): (H, Prm, gesvdjInfo_t) =
                (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: valid out-pointers; a context is current (bound above).
            unsafe {
                check("cusolverDnCreate", (cs.api.create)(&mut h))?;
                check("cusolverDnCreateParams", (cs.api.create_params)(&mut p))?;
                check("cusolverDnCreateGesvdjInfo", (cs.api.create_gesvdj_info)(&mut j))?;
                let mut v = 0;
                check("cusolverGetVersion", (cs.api.get_version)(&mut v))?;
                log::info!("cuSOLVER {v} from {}", cs.from);
            }
            let hs = Handles { h: h as usize, params: p as usize, svdj: j as usize };
            handles.insert(ord, hs);
            hs
        }
    };
    let ctx = Ctx { h: hs.h as H, params: hs.params as Prm, svdj: hs.svdj as gesvdjInfo_t };
    // SAFETY: a live handle under the lock; `raw` is a live stream or NULL.
    check("cusolverDnSetStream", unsafe { (cs.api.set_stream)(ctx.h, raw as *mut c_void) })?;
    let (dev_bytes, host_bytes) = query(&cs.api, &ctx)?;
    // device workspace and devInfo in one block of the pool, on the call's stream
    let ws = (dev_bytes as u64).div_ceil(16) * 16;
    let block = engine.alloc_on(ws + 16, stream, true)?;
    let mut host = vec![0u8; host_bytes];
    let info_addr = block + ws;
    let queued = (|| -> Result<()> {
        engine.memset(info_addr, 0, 4)?;
        let hp = if host_bytes == 0 { std::ptr::null_mut() } else { host.as_mut_ptr() as M };
        check(fname, call(&cs.api, &ctx, (block as M, dev_bytes), (hp, host_bytes), info_addr as *mut c_int))
    })();
    drop(handles);
    let mut info: i32 = 0;
    let read = queued.and_then(|()| {
        // SAFETY: `info` outlives the copy: the stream is synchronised right after.
        unsafe { engine.copy_dtoh_async(&mut info as *mut i32 as *mut u8, info_addr, 4, stream) }?;
        engine.device().stream_synchronize(stream)
    });
    // the call is done (or never queued): the block goes back to the pool
    let freed = engine.free(block);
    read?;
    freed?;
    if info < 0 {
        return Err(Error::InvalidValue(format!("{fname}: cuSOLVER reports illegal argument {}", -info)));
    }
    Ok(info)
}

/// LU factorization with partial pivoting, in place: `A` (`m × n`) becomes `L` (unit
/// lower, below the diagonal) and `U`; `ipiv` (min(m, n) `i64`s, 1-based as LAPACK) the row
/// interchanges (cusolverDnXgetrf). Returns `info`: `i > 0` when `U[i,i]` is exactly zero.
/// Errors: [`Error::InvalidValue`] for bad sizes or operands, [`Error::NotSupported`] on
/// the host device or without libcusolver, [`Error::OutOfMemory`] for the workspace,
/// [`Error::Device`].
pub fn getrf(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (m, n): (i64, i64),
    a: Operand,
    ipiv: u64,
) -> Result<i32> {
    let f = "getrf";
    let (t, _) = types(f, dtype)?;
    nonneg(f, &[("m", m), ("n", n)])?;
    check_matrix(engine, f, "A", a, m, n, dtype.size())?;
    check_vector(engine, f, "ipiv", ipiv, m.min(n), 8)?;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let (mut d, mut h) = (0, 0);
            // SAFETY: checked operands, valid out-pointers.
            check(f, unsafe { (api.getrf_bs)(c.h, c.params, m, n, t, a.ptr as P, a.ld, t, &mut d, &mut h) })?;
            Ok((d, h))
        },
        |api, c, (dw, dn), (hw, hn), info| {
            // SAFETY: as above; workspaces of the queried sizes.
            unsafe {
                (api.getrf)(
                    c.h,
                    c.params,
                    m,
                    n,
                    t,
                    a.ptr as M,
                    a.ld,
                    ipiv as *mut i64,
                    t,
                    dw,
                    dn,
                    hw,
                    hn,
                    info,
                )
            }
        },
    )
}

/// Solves `op(A) X = B` in place of `B` (`n × nrhs`) with the LU factors and pivots of
/// [`getrf`] (`A` `n × n`, `ipiv` n `i64`s; cusolverDnXgetrs); `trans` 0 = N, 1 = T,
/// 2 = C. Returns 0. Errors as [`getrf`].
#[allow(clippy::too_many_arguments)]
pub fn getrs(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    trans: i32,
    (n, nrhs): (i64, i64),
    a: Operand,
    ipiv: u64,
    b: Operand,
) -> Result<i32> {
    let f = "getrs";
    let (t, _) = types(f, dtype)?;
    let trans = code(f, "trans", trans, 2)?;
    nonneg(f, &[("n", n), ("nrhs", nrhs)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_vector(engine, f, "ipiv", ipiv, n, 8)?;
    check_matrix(engine, f, "B", b, n, nrhs, dtype.size())?;
    run(
        engine,
        stream,
        f,
        |_, _| Ok((0, 0)),
        |api, c, _, _, info| {
            // SAFETY: checked operands.
            unsafe {
                (api.getrs)(
                    c.h,
                    c.params,
                    trans,
                    n,
                    nrhs,
                    t,
                    a.ptr as P,
                    a.ld,
                    ipiv as *const i64,
                    t,
                    b.ptr as M,
                    b.ld,
                    info,
                )
            }
        },
    )
}

/// QR factorization in place (cusolverDnXgeqrf): `A` (`m × n`) gets `R` on and above the
/// diagonal and the Householder vectors below; `tau` (min(m, n) elements of `dtype`) their
/// scalars, as LAPACK's geqrf. Returns 0. Errors as [`getrf`].
pub fn geqrf(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (m, n): (i64, i64),
    a: Operand,
    tau: u64,
) -> Result<i32> {
    let f = "geqrf";
    let (t, _) = types(f, dtype)?;
    nonneg(f, &[("m", m), ("n", n)])?;
    check_matrix(engine, f, "A", a, m, n, dtype.size())?;
    check_vector(engine, f, "tau", tau, m.min(n), dtype.size())?;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let (mut d, mut h) = (0, 0);
            // SAFETY: checked operands, valid out-pointers.
            check(f, unsafe {
                (api.geqrf_bs)(c.h, c.params, m, n, t, a.ptr as P, a.ld, t, tau as P, t, &mut d, &mut h)
            })?;
            Ok((d, h))
        },
        |api, c, (dw, dn), (hw, hn), info| {
            // SAFETY: as above.
            unsafe {
                (api.geqrf)(c.h, c.params, m, n, t, a.ptr as M, a.ld, t, tau as M, t, dw, dn, hw, hn, info)
            }
        },
    )
}

/// Forms the first `n` columns of `Q` in place of `A` (`m × n`, m ≥ n ≥ k) from the `k`
/// Householder vectors and `tau` of [`geqrf`] (orgqr for real types, ungqr for complex).
/// Returns 0. Errors as [`getrf`], and [`Error::InvalidValue`] unless m ≥ n ≥ k.
#[allow(clippy::too_many_arguments)]
pub fn orgqr(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (m, n, k): (i64, i64, i64),
    a: Operand,
    tau: u64,
) -> Result<i32> {
    let f = "orgqr";
    types(f, dtype)?;
    nonneg(f, &[("m", m), ("n", n), ("k", k)])?;
    if !(m >= n && n >= k) {
        return Err(Error::InvalidValue(format!("{f}: needs m ≥ n ≥ k, got m = {m}, n = {n}, k = {k}")));
    }
    let es = dtype.size();
    check_matrix(engine, f, "A", a, m, n, es)?;
    check_vector(engine, f, "tau", tau, k, es)?;
    let ti = dtype as usize;
    let (mi, ni, ki) = (m as c_int, n as c_int, k as c_int);
    let ld = a.ld as c_int;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let mut lw: c_int = 0;
            // SAFETY: checked operands, valid out-pointer.
            check(f, unsafe { (api.orgqr_bs[ti])(c.h, mi, ni, ki, a.ptr as P, ld, tau as P, &mut lw) })?;
            Ok((lw.max(1) as usize * es as usize, 0))
        },
        |api, c, (dw, dn), _, info| {
            let lw = (dn / es as usize) as c_int;
            // SAFETY: as above; `dw` holds `lw` elements.
            unsafe { (api.orgqr[ti])(c.h, mi, ni, ki, a.ptr as M, ld, tau as P, dw, lw, info) }
        },
    )
}

/// `C = op(Q) * C` (side 0) or `C * op(Q)` (side 1) in place of `C` (`m × n`), `Q` the
/// product of the `k` Householder reflectors of [`geqrf`] stored in `A` (`m × k` for the
/// left side, `n × k` for the right) with `tau`; `trans` 0 = N, 1 = T (real types), 2 = C
/// (complex types) (ormqr/unmqr). Returns 0. Errors as [`orgqr`].
#[allow(clippy::too_many_arguments)]
pub fn ormqr(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (side, trans): (i32, i32),
    (m, n, k): (i64, i64, i64),
    a: Operand,
    tau: u64,
    c: Operand,
) -> Result<i32> {
    let f = "ormqr";
    types(f, dtype)?;
    let (side, mut trans) = (code(f, "side", side, 1)?, code(f, "trans", trans, 2)?);
    let complex = matches!(dtype, Dtype::C32 | Dtype::C64);
    // real types: C is T; complex types take only N and C
    if !complex && trans == 2 {
        trans = 1;
    }
    if complex && trans == 1 {
        return Err(Error::InvalidValue(format!("{f}: complex Q takes trans 0 (N) or 2 (C), not 1 (T)")));
    }
    nonneg(f, &[("m", m), ("n", n), ("k", k)])?;
    let order = if side == 0 { m } else { n };
    if k > order {
        return Err(Error::InvalidValue(format!("{f}: k = {k} exceeds the order of Q ({order})")));
    }
    let es = dtype.size();
    check_matrix(engine, f, "A", a, order, k, es)?;
    check_vector(engine, f, "tau", tau, k, es)?;
    check_matrix(engine, f, "C", c, m, n, es)?;
    let ti = dtype as usize;
    let (mi, ni, ki) = (m as c_int, n as c_int, k as c_int);
    let (lda, ldc) = (a.ld as c_int, c.ld as c_int);
    run(
        engine,
        stream,
        f,
        |api, cx| {
            let mut lw: c_int = 0;
            // SAFETY: checked operands, valid out-pointer.
            check(f, unsafe {
                (api.ormqr_bs[ti])(
                    cx.h, side, trans, mi, ni, ki, a.ptr as P, lda, tau as P, c.ptr as P, ldc, &mut lw,
                )
            })?;
            Ok((lw.max(1) as usize * es as usize, 0))
        },
        |api, cx, (dw, dn), _, info| {
            let lw = (dn / es as usize) as c_int;
            // SAFETY: as above.
            unsafe {
                (api.ormqr[ti])(
                    cx.h, side, trans, mi, ni, ki, a.ptr as P, lda, tau as P, c.ptr as M, ldc, dw, lw, info,
                )
            }
        },
    )
}

/// Cholesky factorization in place (cusolverDnXpotrf): the `uplo` triangle of `A`
/// (`n × n`, Hermitian positive definite) becomes `U` (`A = U'U`, uplo 1) or `L`
/// (`A = LL'`, uplo 0); the other triangle is not touched. Returns `info`: `i > 0` when the
/// leading minor of order `i` is not positive definite. Errors as [`getrf`].
pub fn potrf(engine: &Engine, stream: u64, dtype: Dtype, uplo: i32, n: i64, a: Operand) -> Result<i32> {
    let f = "potrf";
    let (t, _) = types(f, dtype)?;
    let uplo = code(f, "uplo", uplo, 1)?;
    nonneg(f, &[("n", n)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let (mut d, mut h) = (0, 0);
            // SAFETY: checked operand, valid out-pointers.
            check(f, unsafe {
                (api.potrf_bs)(c.h, c.params, uplo, n, t, a.ptr as P, a.ld, t, &mut d, &mut h)
            })?;
            Ok((d, h))
        },
        |api, c, (dw, dn), (hw, hn), info| {
            // SAFETY: as above.
            unsafe { (api.potrf)(c.h, c.params, uplo, n, t, a.ptr as M, a.ld, t, dw, dn, hw, hn, info) }
        },
    )
}

/// Solves `A X = B` in place of `B` (`n × nrhs`) with the Cholesky factor of [`potrf`]
/// in the `uplo` triangle of `A` (cusolverDnXpotrs). Returns 0. Errors as [`getrf`].
pub fn potrs(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    uplo: i32,
    (n, nrhs): (i64, i64),
    a: Operand,
    b: Operand,
) -> Result<i32> {
    let f = "potrs";
    let (t, _) = types(f, dtype)?;
    let uplo = code(f, "uplo", uplo, 1)?;
    nonneg(f, &[("n", n), ("nrhs", nrhs)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_matrix(engine, f, "B", b, n, nrhs, dtype.size())?;
    run(
        engine,
        stream,
        f,
        |_, _| Ok((0, 0)),
        |api, c, _, _, info| {
            // SAFETY: checked operands.
            unsafe {
                (api.potrs)(c.h, c.params, uplo, n, nrhs, t, a.ptr as P, a.ld, t, b.ptr as M, b.ld, info)
            }
        },
    )
}

/// The singular value decomposition `A = U Σ Vᴴ` of `A` (`m × n`), which it destroys.
/// `s` gets the min(m, n) singular values (real type of `dtype`), descending. With
/// `vectors` 0 only the values; 1: the thin factors, `U` `m × min(m,n)` and `V`
/// `n × min(m,n)` (V itself, not Vᴴ); 2: the full factors, `U` `m × m`, `V` `n × n`.
///
/// `jacobi` true: cusolverDnXgesvdj (one-sided Jacobi, PyTorch's default driver; any
/// shape; returns `info > 0` when it did not converge). false: cusolverDnXgesvd (QR
/// iteration; needs m ≥ n; the caller transposes otherwise) with `V` receiving `Vᴴ`
/// (`min(m,n) × n`, or `n × n` for `vectors` 2, in `v`'s storage); `info > 0` counts superdiagonals that did not
/// converge. Errors as [`getrf`], and [`Error::InvalidValue`] for m < n with `jacobi` false.
#[allow(clippy::too_many_arguments)]
pub fn gesvd(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (jacobi, vectors): (bool, i32),
    (m, n): (i64, i64),
    a: Operand,
    s: u64,
    u: Operand,
    v: Operand,
) -> Result<i32> {
    let f = if jacobi { "gesvdj" } else { "gesvd" };
    let (t, tr) = types(f, dtype)?;
    let vectors = code(f, "vectors", vectors, 2)?;
    nonneg(f, &[("m", m), ("n", n)])?;
    if !jacobi && m < n {
        return Err(Error::InvalidValue(format!("{f}: cuSOLVER's gesvd needs m ≥ n, got {m}×{n}")));
    }
    let es = dtype.size();
    let k = m.min(n);
    check_matrix(engine, f, "A", a, m, n, es)?;
    check_vector(engine, f, "S", s, k, real_size(dtype))?;
    let full = vectors == 2;
    if vectors > 0 {
        check_matrix(engine, f, "U", u, m, if full { m } else { k }, es)?;
        if jacobi {
            check_matrix(engine, f, "V", v, n, if full { n } else { k }, es)?;
        } else {
            check_matrix(engine, f, "Vt", v, if full { n } else { k }, n, es)?;
        }
    }
    // unreferenced factors still need valid leading dimensions
    let (ldu, ldv) =
        if vectors > 0 { (u.ld, v.ld) } else { (m.max(1), if jacobi { n.max(1) } else { k.max(1) }) };
    let (up, vp) = if vectors > 0 { (u.ptr, v.ptr) } else { (0, 0) };
    let (jobz, econ) = (vectors.min(1), if full { 0 } else { 1 });
    if jacobi {
        let ti = dtype as usize;
        let (mi, ni, lda) = (m as c_int, n as c_int, a.ld as c_int);
        // gesvdj reads and writes U and V even when it is asked for the values only
        // (PyTorch allocates them for that reason; null pointers fault inside the
        // kernels): thin scratch factors (m×k, n×k) follow the workspace then.
        let scratch = if vectors == 0 { ((m * k + n * k) as u64 * es).div_ceil(16) * 16 } else { 0 };
        let lwork = std::cell::Cell::new(0 as c_int);
        return run(
            engine,
            stream,
            f,
            |api, c| {
                let mut lw: c_int = 0;
                // SAFETY: checked operands (the scratch factors are not read by the size
                // query), valid out-pointer.
                check(f, unsafe {
                    (api.gesvdj_bs[ti])(
                        c.h,
                        jobz,
                        econ,
                        mi,
                        ni,
                        a.ptr as P,
                        lda,
                        s as P,
                        up as P,
                        ldu as c_int,
                        vp as P,
                        ldv as c_int,
                        &mut lw,
                        c.svdj,
                    )
                })?;
                lwork.set(lw.max(1));
                Ok((((lwork.get() as u64 * es).div_ceil(16) * 16 + scratch) as usize, 0))
            },
            |api, c, (dw, _), _, info| {
                let lw = lwork.get();
                let (up, vp) = if vectors == 0 {
                    let u0 = dw as u64 + (lw as u64 * es).div_ceil(16) * 16;
                    (u0, u0 + (m * k) as u64 * es)
                } else {
                    (up, vp)
                };
                // SAFETY: as above; `dw` holds `lw` elements, then the scratch factors.
                unsafe {
                    (api.gesvdj[ti])(
                        c.h,
                        jobz,
                        econ,
                        mi,
                        ni,
                        a.ptr as M,
                        lda,
                        s as M,
                        up as M,
                        ldu as c_int,
                        vp as M,
                        ldv as c_int,
                        dw,
                        lw,
                        info,
                        c.svdj,
                    )
                }
            },
        );
    }
    let job = [b'N', b'S', b'A'][vectors as usize] as c_schar;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let (mut d, mut h) = (0, 0);
            // SAFETY: checked operands, valid out-pointers.
            check(f, unsafe {
                (api.gesvd_bs)(
                    c.h, c.params, job, job, m, n, t, a.ptr as P, a.ld, tr, s as P, t, up as P, ldu, t,
                    vp as P, ldv, t, &mut d, &mut h,
                )
            })?;
            Ok((d, h))
        },
        |api, c, (dw, dn), (hw, hn), info| {
            // SAFETY: as above.
            unsafe {
                (api.gesvd)(
                    c.h, c.params, job, job, m, n, t, a.ptr as M, a.ld, tr, s as M, t, up as M, ldu, t,
                    vp as M, ldv, t, dw, dn, hw, hn, info,
                )
            }
        },
    )
}

/// Eigenvalues (ascending, into `w`: n values of the real type) and, with `vectors` 1,
/// orthonormal eigenvectors (in place of `A`'s columns) of the symmetric or Hermitian `A`
/// (`n × n`), of which the `uplo` triangle is read (cusolverDnXsyevd, divide and conquer:
/// syevd/heevd, as PyTorch's eigh). `A` is destroyed when `vectors` is 0. Returns `info > 0`
/// when the algorithm did not converge. Errors as [`getrf`].
pub fn syevd(
    engine: &Engine,
    stream: u64,
    dtype: Dtype,
    (vectors, uplo): (i32, i32),
    n: i64,
    a: Operand,
    w: u64,
) -> Result<i32> {
    let f = "syevd";
    let (t, tr) = types(f, dtype)?;
    let (jobz, uplo) = (code(f, "vectors", vectors, 1)?, code(f, "uplo", uplo, 1)?);
    nonneg(f, &[("n", n)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_vector(engine, f, "W", w, n, real_size(dtype))?;
    run(
        engine,
        stream,
        f,
        |api, c| {
            let (mut d, mut h) = (0, 0);
            // SAFETY: checked operands, valid out-pointers.
            check(f, unsafe {
                (api.syevd_bs)(
                    c.h, c.params, jobz, uplo, n, t, a.ptr as P, a.ld, tr, w as P, t, &mut d, &mut h,
                )
            })?;
            Ok((d, h))
        },
        |api, c, (dw, dn), (hw, hn), info| {
            // SAFETY: as above.
            unsafe {
                (api.syevd)(
                    c.h, c.params, jobz, uplo, n, t, a.ptr as M, a.ld, tr, w as M, t, dw, dn, hw, hn, info,
                )
            }
        },
    )
}

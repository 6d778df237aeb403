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
//! call's stream, so they appear in the memory statistics, zeroed on it, and freed when
//! the call is done; host workspaces are `Vec`s. Every function waits for its stream to read
//! `devInfo` and returns it: 0 for success, `i > 0` for LAPACK's meaning (a zero pivot
//! `U[i,i]`, a leading minor of order `i` not positive definite, `i` off-diagonal
//! elements that did not converge); a negative `devInfo` (an illegal argument, which the
//! checks here exclude) is an [`Error::InvalidValue`].
//!
//! Operands are checked to lie inside one live allocation before anything runs, on every
//! device; on the host device the functions then fail with [`Error::NotSupported`] (the
//! Julia package computes through LAPACK there). Codes as cuBLAS's enums: uplo 0 = lower,
//! 1 = upper; trans 0 = N, 1 = T, 2 = C; side 0 = left, 1 = right.

use super::blas::{Dtype, Operand, check_matrix, code, size};
use super::dylib::{self, library_api};
use super::gpu;
use crate::engine::Engine;
use crate::error::{Error, Result};
use cudarc::cusolver::sys::{cudaDataType, cusolverDnHandle_t, cusolverDnParams_t, gesvdjInfo_t};
use std::ffi::{c_int, c_schar, c_void};
use std::sync::OnceLock;

type H = cusolverDnHandle_t;
type Prm = cusolverDnParams_t;
type Dt = cudaDataType;
type Status = c_int;
type P = *const c_void;
type M = *mut c_void;
type Info = *mut c_int;
type Sz = *mut usize;

library_api! {
    /// The functions of libcusolver the engine calls (cusolverDn.h, CUDA 11.1 and later, as
    /// cudarc's bindings declare them; typed pointers passed as void pointers, C enums as
    /// `int`). Arrays are indexed by [`Dtype`]: S, D, C, Z (orgqr/ormqr for the real
    /// types, ungqr/unmqr for the complex ones).
    struct Api {
        create: "cusolverDnCreate" => (*mut H),
        set_stream: "cusolverDnSetStream" => (H, M),
        create_params: "cusolverDnCreateParams" => (*mut Prm),
        create_gesvdj_info: "cusolverDnCreateGesvdjInfo" => (*mut gesvdjInfo_t),
        get_version: "cusolverGetVersion" => (*mut c_int),
        // the 64-bit API: (h, params, arguments.., [device workspace, its bytes, host
        // workspace, its bytes,] devInfo); the size queries end in (&device, &host bytes)
        getrf_bs: "cusolverDnXgetrf_bufferSize" => (H, Prm, i64, i64, Dt, P, i64, Dt, Sz, Sz),
        getrf: "cusolverDnXgetrf" => (H, Prm, i64, i64, Dt, M, i64, *mut i64, Dt, M, usize, M, usize, Info),
        getrs: "cusolverDnXgetrs" => (H, Prm, c_int, i64, i64, Dt, P, i64, *const i64, Dt, M, i64, Info),
        geqrf_bs: "cusolverDnXgeqrf_bufferSize" => (H, Prm, i64, i64, Dt, P, i64, Dt, P, Dt, Sz, Sz),
        geqrf: "cusolverDnXgeqrf" => (H, Prm, i64, i64, Dt, M, i64, Dt, M, Dt, M, usize, M, usize, Info),
        potrf_bs: "cusolverDnXpotrf_bufferSize" => (H, Prm, c_int, i64, Dt, P, i64, Dt, Sz, Sz),
        potrf: "cusolverDnXpotrf" => (H, Prm, c_int, i64, Dt, M, i64, Dt, M, usize, M, usize, Info),
        potrs: "cusolverDnXpotrs" => (H, Prm, c_int, i64, i64, Dt, P, i64, Dt, M, i64, Info),
        gesvd_bs: "cusolverDnXgesvd_bufferSize" =>
            (H, Prm, c_schar, c_schar, i64, i64, Dt, P, i64, Dt, P, Dt, P, i64, Dt, P, i64, Dt, Sz, Sz),
        gesvd: "cusolverDnXgesvd" => (H, Prm, c_schar, c_schar, i64, i64, Dt, M, i64, Dt, M, Dt, M, i64, Dt, M,
            i64, Dt, M, usize, M, usize, Info),
        syevd_bs: "cusolverDnXsyevd_bufferSize" => (H, Prm, c_int, c_int, i64, Dt, P, i64, Dt, P, Dt, Sz, Sz),
        syevd: "cusolverDnXsyevd" =>
            (H, Prm, c_int, c_int, i64, Dt, M, i64, Dt, M, Dt, M, usize, M, usize, Info),
        // the typed legacy API: (h, arguments.., [work, lwork in elements,] devInfo[, gesvdjInfo]);
        // the size queries end in (&lwork[, gesvdjInfo])
        orgqr_bs: ["cusolverDnSorgqr_bufferSize", "cusolverDnDorgqr_bufferSize", "cusolverDnCungqr_bufferSize",
            "cusolverDnZungqr_bufferSize"] => (H, c_int, c_int, c_int, P, c_int, P, Info),
        orgqr: ["cusolverDnSorgqr", "cusolverDnDorgqr", "cusolverDnCungqr", "cusolverDnZungqr"] =>
            (H, c_int, c_int, c_int, M, c_int, P, M, c_int, Info),
        ormqr_bs: ["cusolverDnSormqr_bufferSize", "cusolverDnDormqr_bufferSize", "cusolverDnCunmqr_bufferSize",
            "cusolverDnZunmqr_bufferSize"] => (H, c_int, c_int, c_int, c_int, c_int, P, c_int, P, P, c_int, Info),
        ormqr: ["cusolverDnSormqr", "cusolverDnDormqr", "cusolverDnCunmqr", "cusolverDnZunmqr"] =>
            (H, c_int, c_int, c_int, c_int, c_int, P, c_int, P, M, c_int, M, c_int, Info),
        gesvdj_bs: ("cusolverDn", [S D C Z], "gesvdj_bufferSize") =>
            (H, c_int, c_int, c_int, c_int, P, c_int, P, P, c_int, P, c_int, Info, gesvdjInfo_t),
        gesvdj: ("cusolverDn", [S D C Z], "gesvdj") =>
            (H, c_int, c_int, c_int, c_int, M, c_int, M, M, c_int, M, c_int, M, c_int, Info, gesvdjInfo_t),
    }
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
    LIB.get_or_init(|| {
        let lib = dylib::open(
            "libcusolver (cuSOLVER)",
            "CUMEM_CUSOLVER_LIBRARY",
            CUSOLVER_NAMES,
            CUSOLVER_DEPS,
            "the CUDA toolkit, or pip's nvidia-cusolver",
        )?;
        // SAFETY: the signatures are cusolverDn.h's (see `Api`).
        let api = unsafe { Api::load(&lib)? };
        let from = lib.from.clone();
        Ok(Cusolver { api, handles: parking_lot::Mutex::new(Default::default()), from, _lib: lib })
    })
    .as_ref()
    .map_err(Clone::clone)
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

/// Checks the sizes (each in 0 to 2^31-1, cuSOLVER's `int`).
fn sizes(fname: &str, vals: &[(&str, i64)]) -> Result<()> {
    vals.iter().try_for_each(|&(what, v)| size(fname, what, v).map(drop))
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

/// The workspaces of one call: device (`dev`, `dev_bytes`) and host (`host`, `host_bytes`)
/// workspaces of the sizes the query returned, `extra` (the device address of the scratch
/// bytes the caller asked [`run`] for, 0 when none) and the device `devInfo` word.
struct Work {
    dev: M,
    dev_bytes: usize,
    host: M,
    host_bytes: usize,
    extra: u64,
    info: Info,
}

impl Work {
    /// What the size queries see: no workspaces yet.
    const NONE: Work = Work {
        dev: std::ptr::null_mut(),
        dev_bytes: 0,
        host: std::ptr::null_mut(),
        host_bytes: 0,
        extra: 0,
        info: std::ptr::null_mut(),
    };
}

/// Runs one cuSOLVER routine on `engine`'s device and `stream` (the one place that checks
/// the handle out, takes the workspaces and reads `devInfo`): `query` returns the device
/// and host workspace sizes in bytes; `call` queues the routine given the [`Work`] (device
/// workspace and `extra` scratch bytes from the engine's pool in one block on `stream`,
/// host workspace a `Vec`). Then waits for the stream, reads `devInfo`, frees the block and
/// returns `devInfo` (negative: an error).
fn run(
    engine: &Engine,
    stream: u64,
    fname: &str,
    extra: u64,
    query: impl FnOnce(&Api, &Ctx) -> Result<(usize, usize)>,
    call: impl FnOnce(&Api, &Ctx, &Work) -> Status,
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
    check("cusolverDnSetStream", unsafe { (cs.api.set_stream)(ctx.h, raw as M) })?;
    let (dev_bytes, host_bytes) = query(&cs.api, &ctx)?;
    // [device workspace | extra scratch | devInfo], each part 16-byte aligned
    let ws = (dev_bytes as u64).div_ceil(16) * 16;
    let xs = extra.div_ceil(16) * 16;
    // Under stream capture (src/engine/graphs.rs) the call is recorded, not run: devInfo
    // is zeroed by the captured memset and not read back (info 0 is returned; the workspace
    // comes from the graph's pool), and a host workspace, which would not outlive this
    // call, is refused.
    let capturing = engine.is_capturing(stream);
    if capturing && host_bytes > 0 {
        return Err(Error::InvalidValue(format!(
            "{fname} needs a host workspace and cannot be captured in a graph"
        )));
    }
    let block = engine.alloc_on(ws + xs + 16, stream, true)?;
    let mut host = vec![0u8; host_bytes];
    let info_addr = block + ws + xs;
    let queued = (|| -> Result<()> {
        // the whole block zeroed on the call's stream, devInfo and the workspaces: cuSOLVER
        // reads workspace bytes it has not written (compute-sanitizer's initcheck: syevd's
        // sytrd kernel, a 32-byte read-back in gesvd), which then hold zeros rather than
        // what the pool's block held before (a NaN there times a zero is a NaN). One memset,
        // as devInfo's alone was before.
        engine.memset_async(block, 0, 4, (ws + xs + 16) / 4, stream)?;
        let work = Work {
            dev: block as M,
            dev_bytes,
            host: if host_bytes == 0 { std::ptr::null_mut() } else { host.as_mut_ptr() as M },
            host_bytes,
            extra: if extra == 0 { 0 } else { block + ws },
            info: info_addr as Info,
        };
        check(fname, call(&cs.api, &ctx, &work))
    })();
    drop(handles);
    let mut info: i32 = 0;
    let read = queued.and_then(|()| {
        if capturing {
            return Ok(());
        }
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

/// [`run`]s a routine of the 64-bit API: `$bs(h, params, $b.., &device bytes, &host
/// bytes)` sizes the workspaces, `$f(h, params, $a.., device workspace, its bytes, host
/// workspace, its bytes, devInfo)` runs it; the second form for a query that takes the
/// routine's own arguments. Pointer arguments are passed as `M` (coerced to `P`).
macro_rules! x_routine {
    ($e:expr, $s:expr, $fname:expr, $bs:ident($($b:expr),* $(,)?), $f:ident($($a:expr),* $(,)?)) => {
        run(
            $e,
            $s,
            $fname,
            0,
            |api, c| {
                let (mut d, mut h) = (0usize, 0usize);
                // SAFETY: operands checked by the caller, valid out-pointers.
                check($fname, unsafe { (api.$bs)(c.h, c.params, $($b,)* &mut d, &mut h) })?;
                Ok((d, h))
            },
            // SAFETY: as above, with workspaces of the queried sizes.
            |api, c, w| unsafe { (api.$f)(c.h, c.params, $($a,)* w.dev, w.dev_bytes, w.host, w.host_bytes, w.info) },
        )
    };
    ($e:expr, $s:expr, $fname:expr, $bs:ident, $f:ident, ($($a:expr),* $(,)?)) => {
        x_routine!($e, $s, $fname, $bs($($a),*), $f($($a),*))
    };
}

/// [`run`]s a routine of the typed legacy API for type index `$t` (S D C Z) whose elements
/// are `$es` bytes: `$bs[$t](h, $a.., &lwork $(, $tail)?)` sizes the workspace (elements),
/// `$f[$t](h, $a.., work, lwork, devInfo $(, $tail)?)` runs it, with `$extra` scratch
/// bytes at `$w.extra` (0 in the size query). `$c` and `$w` name the handle context and
/// the [`Work`] for the argument expressions.
macro_rules! legacy_routine {
    ($e:expr, $s:expr, $fname:expr, ($es:expr, $extra:expr), |$c:ident, $w:ident| $bs:ident, $f:ident[$t:expr],
     ($($a:expr),* $(,)?) $(, $tail:expr)?) => {{
        let lwork = std::cell::Cell::new(0 as c_int);
        run(
            $e,
            $s,
            $fname,
            $extra,
            |api, $c| {
                #[allow(unused_variables)]
                let $w = &Work::NONE;
                let mut lw: c_int = 0;
                // SAFETY: operands checked by the caller, valid out-pointer.
                check($fname, unsafe { (api.$bs[$t])($c.h, $($a,)* &mut lw $(, $tail)?) })?;
                lwork.set(lw.max(1));
                Ok((lwork.get() as usize * $es as usize, 0))
            },
            // SAFETY: as above; the workspace holds `lwork` elements.
            |api, $c, $w| unsafe { (api.$f[$t])($c.h, $($a,)* $w.dev, lwork.get(), $w.info $(, $tail)?) },
        )
    }};
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
    sizes(f, &[("m", m), ("n", n)])?;
    check_matrix(engine, f, "A", a, m, n, dtype.size())?;
    check_vector(engine, f, "ipiv", ipiv, m.min(n), 8)?;
    let ap = a.ptr as M;
    x_routine!(
        engine,
        stream,
        f,
        getrf_bs(m, n, t, ap, a.ld, t),
        getrf(m, n, t, ap, a.ld, ipiv as *mut i64, t)
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
    sizes(f, &[("n", n), ("nrhs", nrhs)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_vector(engine, f, "ipiv", ipiv, n, 8)?;
    check_matrix(engine, f, "B", b, n, nrhs, dtype.size())?;
    run(
        engine,
        stream,
        f,
        0,
        |_, _| Ok((0, 0)),
        // SAFETY: checked operands.
        |api, c, w| unsafe {
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
                w.info,
            )
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
    sizes(f, &[("m", m), ("n", n)])?;
    check_matrix(engine, f, "A", a, m, n, dtype.size())?;
    check_vector(engine, f, "tau", tau, m.min(n), dtype.size())?;
    x_routine!(engine, stream, f, geqrf_bs, geqrf, (m, n, t, a.ptr as M, a.ld, t, tau as M, t))
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
    let (mi, ni, ki) = (size(f, "m", m)?, size(f, "n", n)?, size(f, "k", k)?);
    if !(m >= n && n >= k) {
        return Err(Error::InvalidValue(format!("{f}: needs m ≥ n ≥ k, got m = {m}, n = {n}, k = {k}")));
    }
    let es = dtype.size();
    check_matrix(engine, f, "A", a, m, n, es)?;
    check_vector(engine, f, "tau", tau, k, es)?;
    let (ti, ld) = (dtype as usize, a.ld as c_int);
    legacy_routine!(
        engine,
        stream,
        f,
        (es, 0),
        |c, w| orgqr_bs,
        orgqr[ti],
        (mi, ni, ki, a.ptr as M, ld, tau as M)
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
    let (mi, ni, ki) = (size(f, "m", m)?, size(f, "n", n)?, size(f, "k", k)?);
    let order = if side == 0 { m } else { n };
    if k > order {
        return Err(Error::InvalidValue(format!("{f}: k = {k} exceeds the order of Q ({order})")));
    }
    let es = dtype.size();
    check_matrix(engine, f, "A", a, order, k, es)?;
    check_vector(engine, f, "tau", tau, k, es)?;
    check_matrix(engine, f, "C", c, m, n, es)?;
    let (ti, lda, ldc) = (dtype as usize, a.ld as c_int, c.ld as c_int);
    let (ap, cp) = (a.ptr as M, c.ptr as M);
    legacy_routine!(
        engine,
        stream,
        f,
        (es, 0),
        |cx, w| ormqr_bs,
        ormqr[ti],
        (side, trans, mi, ni, ki, ap, lda, tau as M, cp, ldc)
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
    sizes(f, &[("n", n)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    x_routine!(engine, stream, f, potrf_bs, potrf, (uplo, n, t, a.ptr as M, a.ld, t))
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
    sizes(f, &[("n", n), ("nrhs", nrhs)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_matrix(engine, f, "B", b, n, nrhs, dtype.size())?;
    run(
        engine,
        stream,
        f,
        0,
        |_, _| Ok((0, 0)),
        // SAFETY: checked operands.
        |api, c, w| unsafe {
            (api.potrs)(c.h, c.params, uplo, n, nrhs, t, a.ptr as P, a.ld, t, b.ptr as M, b.ld, w.info)
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
    let (mi, ni) = (size(f, "m", m)?, size(f, "n", n)?);
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
    let (ap, sp) = (a.ptr as M, s as M);
    if jacobi {
        // gesvdj reads and writes U and V even when asked for the values only (null
        // pointers fault inside its kernels and poison the context; PyTorch allocates them
        // for that reason): then thin scratch factors, m×k and n×k, follow the workspace.
        let scratch = if vectors == 0 { (m * k + n * k) as u64 * es } else { 0 };
        let uv = |w: &Work| match (vectors, w.extra) {
            (0, 0) => (0, 0),
            (0, x) => (x, x + (m * k) as u64 * es),
            _ => (u.ptr, v.ptr),
        };
        let (jobz, econ) = (vectors.min(1), if full { 0 } else { 1 });
        let (ti, lda, ldu, ldv) = (dtype as usize, a.ld as c_int, ldu as c_int, ldv as c_int);
        return legacy_routine!(
            engine,
            stream,
            f,
            (es, scratch),
            |c, w| gesvdj_bs,
            gesvdj[ti],
            (jobz, econ, mi, ni, ap, lda, sp, uv(w).0 as M, ldu, uv(w).1 as M, ldv),
            c.svdj
        );
    }
    let job = [b'N', b'S', b'A'][vectors as usize] as c_schar;
    let (up, vp) =
        if vectors > 0 { (u.ptr as M, v.ptr as M) } else { (std::ptr::null_mut(), std::ptr::null_mut()) };
    x_routine!(
        engine,
        stream,
        f,
        gesvd_bs,
        gesvd,
        (job, job, m, n, t, ap, a.ld, tr, sp, t, up, ldu, t, vp, ldv, t)
    )
}

/// Eigenvalues (ascending, into `w`: n values of the real type) and, with `vectors` 1,
/// orthonormal eigenvectors (in place of `A`'s columns) of the symmetric or Hermitian `A`
/// (`n × n`), of which the `uplo` triangle is read (cusolverDnXsyevd, divide and conquer:
/// syevd/heevd, as PyTorch's eigh). `A` is destroyed when `vectors` is 0. Returns `info > 0`
/// when the algorithm did not converge. Errors as [`getrf`].
#[allow(clippy::too_many_arguments)]
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
    sizes(f, &[("n", n)])?;
    check_matrix(engine, f, "A", a, n, n, dtype.size())?;
    check_vector(engine, f, "W", w, n, real_size(dtype))?;
    x_routine!(engine, stream, f, syevd_bs, syevd, (jobz, uplo, n, t, a.ptr as M, a.ld, tr, w as M, t))
}

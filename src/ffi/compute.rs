//! The compute part of the C ABI (`include/cumem.h`): NVRTC, kernels, device facts,
//! synchronisation and cuBLAS GEMM. As in [`crate::ffi`], every function is thread-safe,
//! returns a status code, catches panics (`CUMEM_ERROR_INTERNAL`) and leaves its message
//! for `cumem_last_error` when it fails. Bad input is `CUMEM_ERROR_INVALID_VALUE` and
//! changes nothing; what needs an absent GPU or library is `CUMEM_ERROR_NOT_SUPPORTED`.

use super::{guard, null_err};
use crate::compute::blas::{self, Dtype, Operand};
use crate::compute::{gpu, module, nvrtc};
use crate::error::{Error, Result};
use std::ffi::{CStr, c_char, c_void};

/// Reads a C string argument. Errors: null or not UTF-8 → `InvalidValue`.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
unsafe fn arg_str<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null_err(name));
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| Error::InvalidValue(format!("{name} is not UTF-8")))
}

/// NVRTC's version into `*major`, `*minor` (e.g. 13, 0). Works without a GPU. Returns
/// `CUMEM_ERROR_NOT_SUPPORTED` when libnvrtc cannot be found (the message lists where it
/// was looked for; `CUMEM_NVRTC_LIBRARY` names it), `CUMEM_ERROR_INVALID_VALUE` for a null
/// pointer.
///
/// # Safety
/// `major` and `minor` must be null or writable for one `int32_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_nvrtc_version(major: *mut i32, minor: *mut i32) -> i32 {
    guard(|_| {
        if major.is_null() || minor.is_null() {
            return Err(null_err(if major.is_null() { "major" } else { "minor" }));
        }
        let (a, b) = nvrtc::nvrtc()?.version();
        // SAFETY: checked non-null; the caller guarantees they are writable.
        unsafe {
            *major = a;
            *minor = b;
        }
        Ok(())
    })
}

/// Compiles CUDA C++ `source` to PTX with NVRTC (`-std=c++17 --fmad=false`, no fast math) for `arch`
/// (e.g. `"compute_90"`; NULL: the current GPU's `compute_XY`, or `compute_75` on the
/// host device). Works without a GPU: only libnvrtc is needed. Writes `min(cap, len)`
/// bytes of the NUL-terminated PTX into `buf` (`buf` may be NULL when `cap` is 0) and the
/// PTX length + 1 into `*len`, so a caller can ask for the size first.
///
/// Returns `CUMEM_ERROR_COMPILE` when NVRTC rejects the source (`cumem_last_error`: its
/// log, then the source with line numbers), `CUMEM_ERROR_NOT_SUPPORTED` without libnvrtc,
/// `CUMEM_ERROR_INVALID_VALUE` for a null `source` or `len`, a NULL `buf` with `cap` > 0,
/// or a malformed `arch`.
///
/// # Safety
/// `source` and `arch` must be null or NUL-terminated; `buf` writable for `cap` bytes;
/// `len` null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_compile_ptx(
    source: *const c_char,
    arch: *const c_char,
    buf: *mut c_char,
    cap: u64,
    len: *mut u64,
) -> i32 {
    guard(|e| {
        // SAFETY: the caller's guarantees on `source` and `arch`.
        let src = unsafe { arg_str(source, "source") }?;
        if len.is_null() {
            return Err(null_err("len"));
        }
        if buf.is_null() && cap > 0 {
            return Err(Error::InvalidValue(format!("buf is a null pointer but cap is {cap}")));
        }
        let arch = if arch.is_null() {
            let info = gpu::info(e.device())?;
            let nv = nvrtc::nvrtc()?;
            if e.device().is_host() {
                "compute_75".to_owned()
            } else {
                format!(
                    "compute_{}",
                    match nv.target_for(info.cc())? {
                        nvrtc::Target::Real(a) | nvrtc::Target::Virtual(a) => a,
                    }
                )
            }
        } else {
            // SAFETY: as above.
            unsafe { arg_str(arch, "arch") }?.to_owned()
        };
        let out = nvrtc::nvrtc()?.compile_cached(src, &arch)?;
        let bytes = out.ptx.as_bytes();
        let total = bytes.len() as u64 + 1;
        let k = cap.min(total) as usize;
        if k > 0 {
            // SAFETY: `buf` is writable for `cap` ≥ `k` bytes; the last of them is the NUL
            // when the whole text fits, else `k` bytes of the text.
            unsafe {
                let n = k.min(bytes.len());
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
                if k > bytes.len() {
                    *buf.add(bytes.len()) = 0;
                }
            }
        }
        // SAFETY: checked non-null.
        unsafe { *len = total };
        Ok(())
    })
}

/// Compiles `source` with NVRTC for the current GPU (a CUBIN for its `sm_XY`, or PTX
/// that the driver compiles when NVRTC does not know the GPU), loads it with
/// `cuModuleLoadData` and writes an opaque handle to its `extern "C" __global__` function
/// `name` into `*kernel`. Cached by (source, name) for the life of the process: a second
/// call returns the same handle after a hash lookup.
///
/// Returns `CUMEM_ERROR_NOT_SUPPORTED` on the host device or without libnvrtc,
/// `CUMEM_ERROR_COMPILE` (NVRTC's log and the numbered source),
/// `CUMEM_ERROR_INVALID_VALUE` for a null argument or when the source defines no such
/// function, `CUMEM_ERROR_DEVICE` when the driver cannot load the module.
///
/// # Safety
/// `source` and `name` must be null or NUL-terminated; `kernel` null or writable for
/// one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_load(
    source: *const c_char,
    name: *const c_char,
    kernel: *mut u64,
) -> i32 {
    guard(|e| {
        // SAFETY: the caller's guarantees.
        let (src, nm) = unsafe { (arg_str(source, "source")?, arg_str(name, "name")?) };
        if kernel.is_null() {
            return Err(null_err("kernel"));
        }
        let h = module::load(e.device(), src, nm)?;
        // SAFETY: checked non-null.
        unsafe { *kernel = h };
        Ok(())
    })
}

/// Launches `kernel` (a handle from `cumem_kernel_load`) with `gx × gy × gz` blocks of
/// `bx × by × bz` threads and `shared_bytes` of dynamic shared memory on the legacy
/// default stream (`cuLaunchKernel`), and returns without waiting. `args` is
/// `cuLaunchKernel`'s `kernelParams`: an array with one pointer per kernel parameter to
/// that argument's value (NULL only for a kernel without parameters). A kernel that
/// executes `griddepcontrol.wait` (CuMem's own all do) is launched on an sm_90+ GPU with
/// programmatic dependent launch (`cuLaunchKernelEx`; see `cumem_kernel_uses_pdl`).
///
/// Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown handle, a zero dimension, or a
/// geometry the driver refuses (too many threads or too much shared memory per block);
/// `CUMEM_ERROR_NOT_SUPPORTED` on the host device; `CUMEM_ERROR_DEVICE` when the launch
/// fails otherwise (also how a fault of an earlier kernel shows).
///
/// # Safety
/// `args` must hold one valid pointer per kernel parameter, each to a value of the
/// parameter's C type; device addresses among them must be valid for the kernel's use.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cumem_kernel_launch(
    kernel: u64,
    gx: u32,
    gy: u32,
    gz: u32,
    bx: u32,
    by: u32,
    bz: u32,
    shared_bytes: u32,
    args: *mut *mut c_void,
) -> i32 {
    // SAFETY: the caller vouches for `args`; stream 0 is the legacy default stream.
    unsafe { cumem_kernel_launch_async(0, kernel, gx, gy, gz, bx, by, bz, shared_bytes, args) }
}

/// As `cumem_kernel_launch`, queued on `stream` (a handle of `cumem_stream_create`; 0:
/// the legacy default stream). Also `CUMEM_ERROR_INVALID_VALUE` for an unknown stream.
/// Memory the kernel uses that belongs to another stream must be declared with
/// `cumem_record_stream` before it is freed.
///
/// # Safety
/// As `cumem_kernel_launch`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cumem_kernel_launch_async(
    stream: u64,
    kernel: u64,
    gx: u32,
    gy: u32,
    gz: u32,
    bx: u32,
    by: u32,
    bz: u32,
    shared_bytes: u32,
    args: *mut *mut c_void,
) -> i32 {
    guard(|e| {
        let geometry = module::Launch { grid: (gx, gy, gz), block: (bx, by, bz), shared_bytes };
        // SAFETY: the caller vouches for `args`.
        unsafe { module::launch(e.device(), kernel, stream, geometry, args) }
    })
}

/// Writes into `*on` 1 when `kernel` (a handle from `cumem_kernel_load`) is launched with
/// programmatic dependent launch (`cuLaunchKernelEx` with
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`): its code executes
/// `griddepcontrol.wait` (every kernel CuMem generates or ships begins with it,
/// `CUMEM_PDL_ENTRY()` of julia/cuda/common.cuh), the GPU is sm_90 or later, the driver
/// CUDA 12.3 or later, and PDL is on (`cumem_set_pdl`, `CUMEM_PDL`); else 0. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown handle or a null `on`.
///
/// # Safety
/// `on` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_uses_pdl(kernel: u64, on: *mut i32) -> i32 {
    guard(|_| {
        if on.is_null() {
            return Err(null_err("on"));
        }
        let v = module::uses_pdl(kernel)?;
        // SAFETY: checked non-null.
        unsafe { *on = v as i32 };
        Ok(())
    })
}

/// Turns programmatic dependent launch on (`on` != 0) or off for the kernel launches from
/// now on, and writes into `*was` (when not NULL) 1 if it was on. On by default;
/// `CUMEM_PDL=0` (or `off`, `false`, `no`) in the environment turns it off and wins over
/// this call (the measuring switch and the fallback). Graphs captured before keep their
/// edges. Works without a GPU (nothing is launched there).
///
/// # Safety
/// `was` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_set_pdl(on: i32, was: *mut i32) -> i32 {
    guard(|_| {
        let w = module::set_pdl(on != 0);
        if !was.is_null() {
            // SAFETY: non-null, writable by the caller's guarantee.
            unsafe { *was = w as i32 };
        }
        Ok(())
    })
}

/// Queues on `stream` an operation that takes `ns` nanoseconds and touches no memory:
/// the deliberately slow kernel of the ordering tests and benchmarks. On a GPU a
/// one-thread kernel spinning on `%globaltimer` (compiled with NVRTC on first use); on
/// the host device a sleep on the stream's worker thread (on the default stream, of
/// the calling thread). Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown stream,
/// `CUMEM_ERROR_NOT_SUPPORTED` on a GPU without libnvrtc.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_stream_sleep(stream: u64, ns: u64) -> i32 {
    guard(|e| module::sleep(e.device(), stream, ns))
}

/// Writes into `*threads` the block size that maximises `kernel`'s occupancy with no
/// dynamic shared memory (`cuOccupancyMaxPotentialBlockSize`). Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown handle or a null `threads`,
/// `CUMEM_ERROR_NOT_SUPPORTED` on the host device.
///
/// # Safety
/// `threads` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_block_size(kernel: u64, threads: *mut i32) -> i32 {
    guard(|e| {
        if threads.is_null() {
            return Err(null_err("threads"));
        }
        let t = module::block_size(e.device(), kernel)?;
        // SAFETY: checked non-null.
        unsafe { *threads = t };
        Ok(())
    })
}

/// Writes into `*blocks` and `*threads` the launch shape that maximises `kernel`'s
/// occupancy with `shmem` bytes of dynamic shared memory per block and at most
/// `max_threads` threads per block (0: no limit): the block size and the smallest grid
/// that fills the GPU (`cuOccupancyMaxPotentialBlockSize`, as CUDA.jl's
/// `launch_configuration`). On the host device: 1 block of `max_threads` (1024 without a
/// limit) for any `kernel`. Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown handle, a
/// negative `max_threads` or a null pointer.
///
/// # Safety
/// `blocks` and `threads` must be null or writable for one `int32_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_occupancy(
    kernel: u64,
    shmem: u64,
    max_threads: i32,
    blocks: *mut i32,
    threads: *mut i32,
) -> i32 {
    guard(|e| {
        if blocks.is_null() {
            return Err(null_err("blocks"));
        }
        if threads.is_null() {
            return Err(null_err("threads"));
        }
        let (g, t) = module::occupancy(e.device(), kernel, shmem as usize, max_threads)?;
        // SAFETY: checked non-null.
        unsafe {
            *blocks = g;
            *threads = t;
        }
        Ok(())
    })
}

/// Writes into `*value` attribute `attr` of `kernel` (`cuFuncGetAttribute`; `attr` is the
/// driver's `CUfunction_attribute`: 0 max threads per block, 1 static shared memory in
/// bytes, 2 constant memory in bytes, 3 local memory per thread in bytes, 4 registers per
/// thread, 5 PTX version (major × 10 + minor), 6 binary version (likewise), 7 cache mode,
/// 8 max dynamic shared memory in bytes, 9 preferred shared memory carveout in percent).
/// Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown handle, an attribute outside 0 to 9
/// or a null `value`, `CUMEM_ERROR_NOT_SUPPORTED` on the host device.
///
/// # Safety
/// `value` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_attribute(kernel: u64, attr: i32, value: *mut i32) -> i32 {
    guard(|e| {
        if value.is_null() {
            return Err(null_err("value"));
        }
        let v = module::attribute(e.device(), kernel, attr)?;
        // SAFETY: checked non-null.
        unsafe { *value = v };
        Ok(())
    })
}

/// Sets attribute `attr` of `kernel` to `value` (`cuFuncSetAttribute`; attributes as
/// `cumem_kernel_attribute`; the driver lets 8, the max dynamic shared memory in bytes,
/// and 9, the carveout, be set: a launch with more than 48 KiB of dynamic shared memory
/// needs 8 raised first, up to the GPU's opt-in limit, 227 KiB on an H100). Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown handle, an attribute outside 0 to 9 or a
/// value the driver refuses, `CUMEM_ERROR_NOT_SUPPORTED` on the host device.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_kernel_set_attribute(kernel: u64, attr: i32, value: i32) -> i32 {
    guard(|e| module::set_attribute(e.device(), kernel, attr, value))
}

/// The byte size of each of `kernel`'s parameters, so a caller can check its arguments
/// before `cumem_kernel_launch` (which cannot: `kernelParams` carries no sizes). Writes
/// the number of parameters into `*count` (-1 when the driver cannot tell: drivers older
/// than CUDA 12.4 lack `cuFuncGetParamInfo`) and the first `min(cap, count)` sizes, in
/// bytes, into `sizes` (which may be NULL when `cap` is 0). Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown handle, a null `count`, or a NULL `sizes`
/// with `cap` > 0.
///
/// # Safety
/// `count` must be null or writable for one `int32_t`; `sizes` writable for `cap`
/// `uint64_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_params(kernel: u64, count: *mut i32, sizes: *mut u64, cap: i32) -> i32 {
    guard(|_| {
        if count.is_null() {
            return Err(null_err("count"));
        }
        if sizes.is_null() && cap > 0 {
            return Err(Error::InvalidValue(format!("sizes is a null pointer but cap is {cap}")));
        }
        let p = module::params(kernel)?;
        let n = p.as_ref().map_or(-1, |v| v.len() as i32);
        if let Some(v) = p {
            for (i, s) in v.iter().take(cap.max(0) as usize).enumerate() {
                // SAFETY: `sizes` is writable for `cap` > i entries.
                unsafe { *sizes.add(i) = *s };
            }
        }
        // SAFETY: checked non-null.
        unsafe { *count = n };
        Ok(())
    })
}

/// The device's compute capability (`*cc_major`, `*cc_minor`), number of streaming
/// multiprocessors and maximum threads per block. On the host device: 0, 0, the number
/// of CPUs, 1024. Returns `CUMEM_ERROR_INVALID_VALUE` if any pointer is null.
///
/// # Safety
/// Each pointer must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_device_info(
    cc_major: *mut i32,
    cc_minor: *mut i32,
    sm_count: *mut i32,
    max_threads: *mut i32,
) -> i32 {
    guard(|e| {
        for (p, name) in [
            (cc_major, "cc_major"),
            (cc_minor, "cc_minor"),
            (sm_count, "sm_count"),
            (max_threads, "max_threads"),
        ] {
            if p.is_null() {
                return Err(null_err(name));
            }
        }
        let i = gpu::info(e.device())?;
        // SAFETY: checked non-null.
        unsafe {
            *cc_major = i.cc_major;
            *cc_minor = i.cc_minor;
            *sm_count = i.sm_count;
            *max_threads = i.max_threads;
        }
        Ok(())
    })
}

/// Waits until all queued device work (kernels, cuBLAS, copies), on every stream, is
/// done (`cuCtxSynchronize`); on the host device, until every stream's queue is done. Returns `CUMEM_ERROR_DEVICE` when
/// the device reports a failure, e.g. a kernel's illegal address.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_synchronize() -> i32 {
    guard(|e| gpu::synchronize(e.device()))
}

/// Column-major GEMM through cuBLAS: `C = alpha * op(A) * op(B) + beta * C` with op(A)
/// `m × k`, op(B) `k × n`, C `m × n`. `transa`/`transb`: 0 = N, 1 = T, 2 = C (conjugate
/// transpose). `dtype`: 0 = Float32, 1 = Float64, 2 = ComplexF32, 3 = ComplexF64, 4 = Float16
/// (cublasGemmEx with Float32 accumulation; `alpha` and `beta` then point to `float`s).
/// `alpha` and `beta` point to host scalars of `dtype`; `A`, `B`, `C` are device
/// addresses with leading dimensions in elements. Default math mode (no TF32), legacy
/// default stream; returns without waiting.
///
/// Returns `CUMEM_ERROR_INVALID_VALUE` for a bad `dtype` or op, a size outside
/// 0..2^31-1, a leading dimension below the stored rows, a null scalar pointer, or an
/// operand not inside one live allocation (checked on every device, before anything
/// runs); `CUMEM_ERROR_NOT_SUPPORTED` on the host device or without libcublas
/// (`CUMEM_CUBLAS_LIBRARY` names it); `CUMEM_ERROR_DEVICE` when cuBLAS fails.
///
/// # Safety
/// `alpha` and `beta` must be null or point to readable values of `dtype`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gemm(
    dtype: i32,
    transa: i32,
    transb: i32,
    m: i64,
    n: i64,
    k: i64,
    alpha: *const c_void,
    A: u64,
    lda: i64,
    B: u64,
    ldb: i64,
    beta: *const c_void,
    C: u64,
    ldc: i64,
) -> i32 {
    // SAFETY: the caller vouches for alpha and beta; stream 0 is the legacy default stream.
    unsafe { cumem_gemm_async(0, dtype, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) }
}

/// As `cumem_gemm`, queued on `stream` (a handle of `cumem_stream_create`; 0: the legacy
/// default stream). Also `CUMEM_ERROR_INVALID_VALUE` for an unknown stream.
///
/// # Safety
/// As `cumem_gemm`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn cumem_gemm_async(
    stream: u64,
    dtype: i32,
    transa: i32,
    transb: i32,
    m: i64,
    n: i64,
    k: i64,
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
        let dtype = Dtype::from_code(dtype)?;
        let (a, b, c) =
            (Operand { ptr: A, ld: lda }, Operand { ptr: B, ld: ldb }, Operand { ptr: C, ld: ldc });
        // SAFETY: the caller vouches for alpha and beta (null is checked).
        unsafe { blas::gemm(e, dtype, transa, transb, (m, n, k), alpha, a, b, beta, c, stream) }
    })
}

/// Configures the kernel cache on disk (NVRTC's output kept across processes, keyed by
/// the source, the architecture and NVRTC's version; see docs/compute.md): `dir` the
/// directory (NULL: `CUMEM_CACHE_DIR`, else `$XDG_CACHE_HOME/cumem/kernels` or
/// `~/.cache/cumem/kernels`), `max_bytes` the bound on its files (0:
/// `CUMEM_CACHE_MAXSIZE`, else 256 MiB), `enabled` 0 to turn it off. The environment
/// wins: `CUMEM_KERNEL_CACHE=0` keeps it off and `CUMEM_CACHE_DIR` keeps its directory.
/// Works without a GPU. Returns `CUMEM_ERROR_INVALID_VALUE` for a `dir` that is empty or
/// not UTF-8 (nothing changes).
///
/// # Safety
/// `dir` must be null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_cache_config(dir: *const c_char, max_bytes: u64, enabled: i32) -> i32 {
    guard(|_| {
        let d = if dir.is_null() {
            None
        } else {
            // SAFETY: the caller's guarantee.
            let s = unsafe { arg_str(dir, "dir") }?;
            if s.is_empty() {
                return Err(Error::InvalidValue("the kernel cache directory is an empty string".into()));
            }
            Some(std::path::PathBuf::from(s))
        };
        crate::compute::disk_cache::configure(d, max_bytes, enabled != 0);
        Ok(())
    })
}

/// What the kernel cache on disk did in this process: compiles answered from a file
/// (`*hits`), compiles that ran NVRTC (`*misses`), files written (`*writes`) and files
/// deleted to stay under the bound (`*evictions`). Any pointer may be NULL.
///
/// # Safety
/// Each pointer must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_kernel_cache_stats(
    hits: *mut u64,
    misses: *mut u64,
    writes: *mut u64,
    evictions: *mut u64,
) -> i32 {
    guard(|_| {
        let c = crate::compute::disk_cache::counters();
        for (p, v) in [(hits, c.hits), (misses, c.misses), (writes, c.writes), (evictions, c.evictions)] {
            if !p.is_null() {
                // SAFETY: non-null, writable by the caller's guarantee.
                unsafe { *p = v };
            }
        }
        Ok(())
    })
}

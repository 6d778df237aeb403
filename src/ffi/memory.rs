//! The engine's C functions: initialisation, version, log capture, the last error,
//! allocation and free, statistics, `memory_status`, pool and device facts, and the
//! synchronous copies (each on the device that owns its addresses).

use super::{guard, host_len, last_error, null_err, pinned, tools, write_c_string};
use crate::config::MAX_DEVICES;
use crate::engine::{CopyPath, Engine};
use crate::engines::{on_owner, owner};
use crate::error::{Error, Result};
use crate::report::{self, Allocations};
use crate::stats::Stats;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

/// Initialises the engine from the environment (the configuration table of docs/contract.md). Idempotent: later
/// calls return the first successful result; after a failure, the next call tries again.
/// Returns `CUMEM_SUCCESS`, `CUMEM_ERROR_CONFIG` (bad variable; see `cumem_last_error`)
/// or `CUMEM_ERROR_DEVICE` (`CUMEM_DEVICE=cuda` without a usable GPU).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_init() -> i32 {
    guard(|_| Ok(()))
}

/// The engine's version (the crate's, e.g. `"0.1.0"`). Static storage; never fails and
/// does not initialise the engine.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_version() -> *const c_char {
    static V: &std::ffi::CStr =
        match std::ffi::CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"",
        };
    V.as_ptr()
}

/// Turns capture of the engine's log messages on (`on` ≠ 0) or off. While on, messages
/// that pass the `CUMEM_LOG` filter are queued (at most 256, the oldest dropped) instead
/// of written to stderr, for the caller to take with `cumem_log_next` and pass to its own
/// logging. Call it before `cumem_init` to capture the messages of initialisation (e.g.
/// the host-device fallback warning). Returns 1 if capture was on before, else 0. Does
/// not initialise the engine.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_log_capture(on: i32) -> i32 {
    catch_unwind(|| crate::logging::set_capture(on != 0) as i32).unwrap_or(0)
}

/// Takes the oldest captured log message. Writes its level to `*level` (1 error, 2 warn,
/// 3 info, 4 debug, 5 trace; 0 when the queue is empty) and the text to `buf` with
/// `snprintf` semantics, and returns the text's full length in bytes (without NUL; 0 when
/// empty). The message is removed from the queue only when it fit (`len` > the returned
/// length): call again with a larger buffer otherwise. Does not initialise the engine.
///
/// # Safety
/// `level` must be null or writable for one `int32_t`; `buf` null or writable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_log_next(level: *mut i32, buf: *mut c_char, len: usize) -> usize {
    let r = catch_unwind(AssertUnwindSafe(|| {
        crate::logging::with_next(|lv, msg| {
            let fits = !buf.is_null() && len > msg.len();
            // SAFETY: the caller's guarantee on `buf`.
            let n = unsafe { write_c_string(msg, buf, len) };
            ((lv as i32, n), fits)
        })
    }));
    let (lv, n) = r.ok().flatten().unwrap_or((0, 0));
    if !level.is_null() {
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *level = lv };
    }
    if n == 0 && !buf.is_null() && len > 0 {
        // SAFETY: `buf` is writable for `len` ≥ 1 bytes.
        unsafe { *buf = 0 };
    }
    n
}

/// This thread's last error message, `""` if none. The string belongs to CuMem and to
/// the calling thread: the pointer stays valid, and the text unchanged, until this
/// thread's next call fails with a different message, or the thread exits; copy it to
/// keep it longer. Calls that succeed leave it alone. A failure that repeats with the
/// same message (every call after a failed initialisation fails with the
/// initialisation's error) keeps the same pointer.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_last_error() -> *const c_char {
    last_error()
}

/// Allocates `bytes` bytes of device memory into `*ptr` (256-byte aligned; 0 bytes gives
/// 0). Returns `CUMEM_SUCCESS`, `CUMEM_ERROR_OUT_OF_MEMORY` (after releasing the cache
/// and retrying; at once for `bytes` > 2^48, more than any device holds), or
/// `CUMEM_ERROR_INVALID_VALUE` (`ptr` null, `bytes` > 2^63 − 1).
///
/// # Safety
/// `ptr` must be null or point to writable memory for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_alloc(bytes: u64, ptr: *mut u64) -> i32 {
    guard(|e| {
        if ptr.is_null() {
            return Err(null_err("ptr"));
        }
        let p = e.alloc(bytes)?;
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *ptr = p };
        Ok(())
    })
}

/// Flag for `cumem_alloc_ex`: on out of memory, fail at once instead of releasing the
/// cache and retrying (and do not count the failure in `num_ooms`).
pub const CUMEM_ALLOC_NO_RECLAIM: u32 = 1;

/// Flag for `cumem_alloc_ex`: this call retries an allocation after the caller ran a
/// garbage collection; counted in `num_gc_retries`.
pub const CUMEM_ALLOC_GC_RETRY: u32 = 2;

/// Flag for `cumem_alloc_ex`: this call is the caller's last-resort retry (the rung that
/// lets the engine release its cache, or a wait for other threads' frees); counted in
/// `num_reclaim_retries`.
pub const CUMEM_ALLOC_RECLAIM_RETRY: u32 = 4;

/// As `cumem_alloc`, with `flags`: 0, or `CUMEM_ALLOC_NO_RECLAIM` for callers that run
/// their own recovery first (the Julia package: GC, full GC, then `cumem_reclaim` and a
/// plain `cumem_alloc`), or-ed with `CUMEM_ALLOC_GC_RETRY` or `CUMEM_ALLOC_RECLAIM_RETRY`
/// to count the call as a retry of that ladder (`num_gc_retries`,
/// `num_reclaim_retries`). Unknown flag bits are `CUMEM_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `ptr` must be null or point to writable memory for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_alloc_ex(bytes: u64, ptr: *mut u64, flags: u32) -> i32 {
    guard(|e| {
        if ptr.is_null() {
            return Err(null_err("ptr"));
        }
        // The Julia package's first try (NO_RECLAIM alone) inline; the rest out of line.
        let p = if flags == CUMEM_ALLOC_NO_RECLAIM {
            e.try_alloc(bytes)?
        } else {
            alloc_flagged(e, bytes, flags)?
        };
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *ptr = p };
        Ok(())
    })
}

/// `cumem_alloc_ex` with flags other than `CUMEM_ALLOC_NO_RECLAIM` alone.
#[inline(never)]
fn alloc_flagged(e: &'static Engine, bytes: u64, flags: u32) -> Result<u64> {
    const KNOWN: u32 = CUMEM_ALLOC_NO_RECLAIM | CUMEM_ALLOC_GC_RETRY | CUMEM_ALLOC_RECLAIM_RETRY;
    if flags & !KNOWN != 0 {
        return Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_alloc_ex")));
    }
    if flags & !CUMEM_ALLOC_NO_RECLAIM != 0 {
        tools::note_retries(e, flags)?;
    }
    if flags & CUMEM_ALLOC_NO_RECLAIM != 0 { e.try_alloc(bytes) } else { e.alloc(bytes) }
}

/// Returns the allocation at `ptr` to its device's pool (whichever device owns it, the
/// current one first); 0 is a no-op. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown or already freed pointer (nothing changes).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_free(ptr: u64) -> i32 {
    guard(|e| on_owner(e, ptr, |e| e.free(ptr)))
}

/// Releases cached memory to the device until at least `bytes` were released or nothing
/// is cached (`UINT64_MAX`: everything). Returns the bytes released (0 on error).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_reclaim(bytes: u64) -> u64 {
    let mut out = 0;
    guard(|e| {
        out = e.reclaim(bytes);
        Ok(())
    });
    out
}

/// Writes a snapshot of the statistics to `*out`. Returns `CUMEM_ERROR_INVALID_VALUE`
/// when `out` is null.
///
/// # Safety
/// `out` must be null or point to writable memory for one `cumem_stats_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_get_stats(out: *mut Stats) -> i32 {
    guard(|e| {
        if out.is_null() {
            return Err(null_err("out"));
        }
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { out.write(e.stats()) };
        Ok(())
    })
}

/// Resets counters to 0 and peaks to the current values; current values (requested,
/// allocated, cached, reserved bytes) are untouched (PyTorch's
/// `reset_peak_memory_stats` and `reset_accumulated_memory_stats` together). Counters
/// then count events since the reset: freeing a block allocated before it counts in
/// `num_frees` but not in `num_allocations`, so `num_frees` may exceed `num_allocations`.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_reset_stats() {
    guard(|e| {
        e.reset_stats();
        Ok(())
    });
}

/// Writes the `memory_status` text (CUDA.jl's: device usage, CuMem's reserved bytes,
/// the pool's split between allocated and cached, the limit if any, and at
/// `CUMEM_DEBUG` ≥ 1 every outstanding allocation; then, once the pinned host pool is
/// in use, its lines: `Pinned host memory usage: …`, the limit, registered ranges)
/// into `buf` with `snprintf` semantics:
/// at most `len − 1` bytes and a terminating NUL (nothing when `len` is 0 or `buf`
/// null). Returns the full length of the text in bytes, without NUL.
///
/// # Safety
/// `buf` must be null or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_memory_status(buf: *mut c_char, len: usize) -> usize {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { write_status(buf, len, Allocations::Listed) }
}

/// Flag for `cumem_memory_status_ex`: leave out the outstanding allocations, for callers
/// that list them with stack traces of their own (the Julia package under `-g2`).
pub const CUMEM_STATUS_NO_ALLOCATIONS: u32 = 1;

/// As `cumem_memory_status`, with `flags`: 0, or `CUMEM_STATUS_NO_ALLOCATIONS`. Unknown
/// flag bits write `""` and return 0 (`CUMEM_ERROR_INVALID_VALUE` in
/// `cumem_last_error`).
///
/// # Safety
/// `buf` must be null or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_memory_status_ex(buf: *mut c_char, len: usize, flags: u32) -> usize {
    if flags & !CUMEM_STATUS_NO_ALLOCATIONS != 0 {
        if !buf.is_null() && len > 0 {
            // SAFETY: `buf` is writable for `len` ≥ 1 bytes.
            unsafe { *buf = 0 };
        }
        guard(|_| Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_memory_status_ex"))));
        return 0;
    }
    let what =
        if flags & CUMEM_STATUS_NO_ALLOCATIONS != 0 { Allocations::Omitted } else { Allocations::Listed };
    // SAFETY: the caller's guarantee, passed on.
    unsafe { write_status(buf, len, what) }
}

/// The body of `cumem_memory_status(_ex)`.
///
/// # Safety
/// `buf` must be null or writable for `len` bytes.
unsafe fn write_status(buf: *mut c_char, len: usize, what: Allocations) -> usize {
    let mut n = 0;
    if !buf.is_null() && len > 0 {
        // As snprintf, always terminate: an engine that cannot start leaves "".
        // SAFETY: `buf` is writable for `len` ≥ 1 bytes.
        unsafe { *buf = 0 };
    }
    guard(|e| {
        let mut s = report::memory_status(e, what);
        // The pinned host pool is the process's, not a device's: its lines come once, with
        // device 0's status (the first section when several devices are listed).
        if e.ordinal() == 0 {
            s.push_str(&pinned::status_lines());
        }
        // SAFETY: the caller's guarantee on `buf`.
        n = unsafe { write_c_string(&s, buf, len) };
        Ok(())
    });
    n
}

/// The pool's name: `"binned"`, `"split"`, `"expandable"`, `"simple"` or `"none"` (`""` if the engine
/// cannot start; see `cumem_last_error`). Static storage.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_pool_name() -> *const c_char {
    let mut out = c"".as_ptr();
    guard(|e| {
        out = e.pool_kind().names().name.as_ptr();
        Ok(())
    });
    out
}

/// The pool's type name as CUDA.jl 2.x calls it and `memory_status` prints it:
/// `"BinnedPool"`, `"SplitPool"`, `"ExpandablePool"`, `"SimplePool"` or `"NoPool"` (`""`
/// if the engine cannot start; see `cumem_last_error`). Static storage.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_pool_type_name() -> *const c_char {
    let mut out = c"".as_ptr();
    guard(|e| {
        out = e.pool_kind().names().type_name.as_ptr();
        Ok(())
    });
    out
}

/// The current device's name, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"` (`""`
/// if the engine cannot start). Valid for the life of the process.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_device_name() -> *const c_char {
    let mut out = c"".as_ptr();
    guard(|e| {
        static NAMES: [OnceLock<CString>; MAX_DEVICES as usize] =
            [const { OnceLock::new() }; MAX_DEVICES as usize];
        let name = NAMES
            .get(e.ordinal() as usize)
            .ok_or_else(|| Error::Internal("device ordinal past MAX_DEVICES".into()))?;
        out = name.get_or_init(|| CString::new(e.device().name()).unwrap_or_default()).as_ptr();
        Ok(())
    });
    out
}

/// 1 when the engine runs on the host device (host memory standing in for a GPU), 0 on
/// a CUDA GPU, -1 if the engine cannot start (see `cumem_last_error`).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_device_is_host() -> i32 {
    let mut out = -1;
    guard(|e| {
        out = e.device().is_host() as i32;
        Ok(())
    });
    out
}

/// Writes the device's free and total memory in bytes. Returns
/// `CUMEM_ERROR_INVALID_VALUE` if either pointer is null, `CUMEM_ERROR_DEVICE` on failure.
///
/// # Safety
/// `free` and `total` must be null or writable for one `uint64_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_device_memory(free: *mut u64, total: *mut u64) -> i32 {
    guard(|e| {
        if free.is_null() || total.is_null() {
            return Err(null_err(if free.is_null() { "free" } else { "total" }));
        }
        let (f, t) = e.device_memory()?;
        // SAFETY: checked non-null; the caller guarantees they are writable.
        unsafe {
            *free = f;
            *total = t;
        }
        Ok(())
    })
}

/// Copies `bytes` from host memory `src` to device address `dst`. The device range must
/// lie inside one live allocation, else `CUMEM_ERROR_INVALID_VALUE` and nothing is
/// written; `src` null with `bytes` > 0 is `CUMEM_ERROR_INVALID_VALUE`.
///
/// The range is checked and its block pinned in one step: a `cumem_free` of the block on
/// another thread during the copy succeeds at once, but the memory is reused (or given
/// back to the device) only after the copy returns. What no check can catch is the
/// caller's job: a stale pointer whose block was freed and whose address was then handed
/// out again by a new allocation is live again, and a copy through it writes into the
/// new block. The same holds for `cumem_copy_dtoh`, `cumem_copy_dtod` and `cumem_memset`.
///
/// # Safety
/// `src` must be readable for `bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_copy_htod(dst: u64, src: *const core::ffi::c_void, bytes: u64) -> i32 {
    guard(|e| {
        if bytes == 0 {
            return Ok(());
        }
        if src.is_null() {
            return Err(null_err("src"));
        }
        on_owner(e, dst, |e| {
            let len = host_len(e, dst, bytes)?;
            // SAFETY: the caller guarantees `src` is readable for `bytes` (≤ 2^48).
            e.copy_htod(dst, unsafe { std::slice::from_raw_parts(src as *const u8, len) })
        })
    })
}

/// Copies `bytes` from device address `src` to host memory `dst`, with the checks of
/// `cumem_copy_htod`.
///
/// # Safety
/// `dst` must be writable for `bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_copy_dtoh(dst: *mut core::ffi::c_void, src: u64, bytes: u64) -> i32 {
    guard(|e| {
        if bytes == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(null_err("dst"));
        }
        on_owner(e, src, |e| {
            let len = host_len(e, src, bytes)?;
            // SAFETY: the caller guarantees `dst` is writable for `bytes` (≤ 2^48).
            e.copy_dtoh(unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, len) }, src)
        })
    })
}

/// Copies `bytes` between device addresses (overlap allowed); both ranges must lie inside
/// live allocations, else `CUMEM_ERROR_INVALID_VALUE` and nothing is written. The ranges
/// may lie on two devices: the copy then goes as `cumem_copy_peer` with no flags. A copy
/// of a range onto itself (`dst == src`) only checks the range (no device call, no byte
/// read), so it checks that a range lies inside one live allocation.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_copy_dtod(dst: u64, src: u64, bytes: u64) -> i32 {
    guard(|_| copy_any(dst, src, bytes, false).map(drop))
}

/// Sets `bytes` bytes at device address `dst` to `value`; the range must lie inside one
/// live allocation, else `CUMEM_ERROR_INVALID_VALUE` and nothing is written.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_memset(dst: u64, value: u8, bytes: u64) -> i32 {
    guard(|e| on_owner(e, dst, |e| e.memset(dst, value, bytes)))
}

/// A copy between device addresses on whichever devices own them.
fn copy_any(dst: u64, src: u64, bytes: u64, staged: bool) -> Result<CopyPath> {
    if bytes == 0 {
        return Ok(CopyPath::Same);
    }
    let (de, se) = (owner(dst)?, owner(src)?);
    crate::engine::copy_between(de, dst, se, src, bytes, staged)
}

/// Flag for `cumem_copy_peer`: stage the copy through host memory even where the devices
/// could copy directly (to compare the two paths, or to avoid enabling peer access).
pub const CUMEM_COPY_STAGED: u32 = 1;
/// `cumem_copy_peer`'s path: both ranges on one device, a device-to-device copy.
pub const CUMEM_COPY_PATH_SAME: i32 = 0;
/// `cumem_copy_peer`'s path: directly between devices (CUDA peer access,
/// `cuMemcpyPeer`; host stand-ins: one `memcpy`).
pub const CUMEM_COPY_PATH_PEER: i32 = 1;
/// `cumem_copy_peer`'s path: staged through a host buffer (64 MiB chunks).
pub const CUMEM_COPY_PATH_HOST: i32 = 2;

/// Copies `bytes` from device address `src` to device address `dst`, each on whichever
/// device owns it, and writes the path taken to `*path` (when not null):
/// `CUMEM_COPY_PATH_SAME` (one device), `CUMEM_COPY_PATH_PEER` (direct: on CUDA peer
/// access is enabled on first use where `cuDeviceCanAccessPeer` allows, then
/// `cuMemcpyPeer`, as PyTorch's `tensor.to("cuda:1")`) or `CUMEM_COPY_PATH_HOST`
/// (staged through host memory: no peer path, or `CUMEM_COPY_STAGED` in `flags`).
/// Synchronous: the bytes are in place when it returns. Both ranges must lie inside live
/// allocations, else `CUMEM_ERROR_INVALID_VALUE` and nothing is written; unknown flag
/// bits are `CUMEM_ERROR_INVALID_VALUE` too.
///
/// # Safety
/// `path` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_copy_peer(dst: u64, src: u64, bytes: u64, flags: u32, path: *mut i32) -> i32 {
    guard(|_| {
        if flags & !CUMEM_COPY_STAGED != 0 {
            return Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_copy_peer")));
        }
        let p = copy_any(dst, src, bytes, flags & CUMEM_COPY_STAGED != 0)?;
        if !path.is_null() {
            // SAFETY: checked non-null; the caller guarantees it is writable.
            unsafe { *path = p as i32 };
        }
        Ok(())
    })
}

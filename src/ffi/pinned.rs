//! The C ABI of the pinned host pool ([`crate::pinned`]): page-locked host memory for
//! fast copies to and from the GPU (PyTorch's `pin_memory`), registration of host memory
//! allocated elsewhere (`cuMemHostRegister`, CUDA.jl's `pin`), and the pool's
//! statistics. The pool is created on first use, over the device engine's kind of
//! memory: CUDA's `cuMemHostAlloc` on a GPU, page-aligned (`mlock`ed where allowed)
//! memory on the host device. Its own process-wide value, beside the device engine's,
//! so that the device engine can change (one per GPU) without touching it.
//!
//! Host pointers are `void *`. The copy functions (`cumem_copy_htod`, `cumem_copy_dtoh`)
//! take pinned pointers like any other host pointer; on a GPU they then run at the
//! bus's speed.

use super::{guard, null_err};
use crate::engines::{pinned_host, pinned_started};
use crate::error::Result;
use crate::pinned::PinnedHost;
use crate::report;
use crate::stats::Stats;
use std::ffi::c_void;

/// The pinned pool's lines of `memory_status` (see `report::pinned_status`), or `""`
/// while it was never used.
pub(crate) fn status_lines() -> String {
    pinned_started().map_or_else(String::new, |p| report::pinned_status(p.engine(), p.registered()))
}

/// Runs `f` on the pinned pool under the C ABI's guard (errors and panics become status
/// codes and `cumem_last_error`).
fn guard_pinned(f: impl FnOnce(&'static PinnedHost) -> Result<()>) -> i32 {
    guard(|e| f(pinned_host(e)?))
}

/// Allocates `bytes` bytes of page-locked host memory into `*ptr` (at least 512-byte
/// aligned; 0 bytes gives NULL), from the pinned host pool: cached blocks are reused
/// (binned size classes, as PyTorch's `CachingHostAllocator`), and new ones come from
/// `cuMemHostAlloc(CU_MEMHOSTALLOC_PORTABLE)` on a GPU. Returns `CUMEM_SUCCESS`,
/// `CUMEM_ERROR_OUT_OF_MEMORY` (after releasing the pool's cache and retrying; when
/// `CUMEM_PINNED_LIMIT` would be crossed or the driver cannot lock more),
/// `CUMEM_ERROR_INVALID_VALUE` (`ptr` null, `bytes` > 2^63 − 1) or
/// `CUMEM_ERROR_DEVICE`.
///
/// # Safety
/// `ptr` must be null or point to writable memory for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_host_alloc(bytes: u64, ptr: *mut *mut c_void) -> i32 {
    guard_pinned(|p| {
        if ptr.is_null() {
            return Err(null_err("ptr"));
        }
        let a = p.alloc(bytes)?;
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *ptr = a as *mut c_void };
        Ok(())
    })
}

/// Returns a block of `cumem_host_alloc` to the pinned host pool; NULL is a no-op.
/// Returns `CUMEM_ERROR_INVALID_VALUE` for any other pointer (not from
/// `cumem_host_alloc`, or already freed; nothing changes).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_host_free(ptr: *mut c_void) -> i32 {
    guard_pinned(|p| p.free(ptr as u64))
}

/// Page-locks `bytes` bytes of host memory at `ptr`, allocated elsewhere (e.g. a Julia
/// `Array`), for fast copies, until `cumem_host_unregister(ptr)`:
/// `cuMemHostRegister(CU_MEMHOSTREGISTER_PORTABLE)` on a GPU; on the host device the
/// range is only recorded (`cumem_is_pinned` reports it). Returns
/// `CUMEM_ERROR_INVALID_VALUE`, changing nothing, for a null `ptr`, 0 bytes, or a range
/// that overflows or overlaps a registered range or a live pinned-pool block; the
/// driver's error as `CUMEM_ERROR_DEVICE` or `CUMEM_ERROR_OUT_OF_MEMORY`.
///
/// # Safety
/// `[ptr, ptr+bytes)` must be memory of this process that stays allocated until it is
/// unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_host_register(ptr: *mut c_void, bytes: u64) -> i32 {
    // SAFETY: the caller's guarantee, passed on.
    guard_pinned(|p| unsafe { p.register(ptr as u64, bytes) })
}

/// Undoes `cumem_host_register` of the range starting at `ptr`
/// (`cuMemHostUnregister`). Returns `CUMEM_ERROR_INVALID_VALUE`, changing nothing, when
/// no registered range starts at `ptr` (the message names the range it lies in, if any).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_host_unregister(ptr: *mut c_void) -> i32 {
    guard_pinned(|p| p.unregister(ptr as u64))
}

/// 1 when `ptr` lies in page-locked host memory: a live block of the pinned host pool, a
/// registered range, or (on a GPU) memory the driver knows as page-locked, whoever
/// locked it (`cuPointerGetAttribute`, as PyTorch's `is_pinned`); 0 otherwise (NULL
/// included); -1 when the engine cannot start (see `cumem_last_error`).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_is_pinned(ptr: *const c_void) -> i32 {
    let mut out = -1;
    guard_pinned(|p| {
        out = p.is_pinned(ptr as u64) as i32;
        Ok(())
    });
    out
}

/// Writes a snapshot of the pinned host pool's statistics to `*out`: the fields of
/// `cumem_get_stats`, for page-locked host memory (`limit_bytes` is
/// `CUMEM_PINNED_LIMIT`'s). Returns `CUMEM_ERROR_INVALID_VALUE` when `out` is null.
///
/// # Safety
/// `out` must be null or point to writable memory for one `cumem_stats_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_host_get_stats(out: *mut Stats) -> i32 {
    guard_pinned(|p| {
        if out.is_null() {
            return Err(null_err("out"));
        }
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { out.write(p.stats()) };
        Ok(())
    })
}

/// Resets the pinned host pool's counters to 0 and peaks to the current values (as
/// `cumem_reset_stats` for the device).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_host_reset_stats() {
    guard_pinned(|p| {
        p.reset_stats();
        Ok(())
    });
}

/// Unlocks and frees cached pinned host memory until at least `bytes` were released
/// (`UINT64_MAX`: all); live blocks are never touched. Returns the bytes released (0 on
/// error).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_host_reclaim(bytes: u64) -> u64 {
    let mut out = 0;
    guard_pinned(|p| {
        out = p.reclaim(bytes);
        Ok(())
    });
    out
}

/// Writes the number of host ranges registered with `cumem_host_register` and their
/// total size in bytes. Returns `CUMEM_ERROR_INVALID_VALUE` if either pointer is null.
///
/// # Safety
/// `count` and `bytes` must be null or writable for one `uint64_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_host_registered(count: *mut u64, bytes: *mut u64) -> i32 {
    guard_pinned(|p| {
        if count.is_null() || bytes.is_null() {
            return Err(null_err(if count.is_null() { "count" } else { "bytes" }));
        }
        let (n, b) = p.registered();
        // SAFETY: checked non-null; the caller guarantees they are writable.
        unsafe {
            *count = n;
            *bytes = b;
        }
        Ok(())
    })
}

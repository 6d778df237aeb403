//! The C functions of streams and events, stream-ordered allocation (`cumem_alloc_async`,
//! `cumem_record_stream`, `cumem_block_stream`) and the async copies. Stream and event
//! handles are unique across devices, so the functions that take only a handle act on
//! its own device.

use super::{CUMEM_ALLOC_GC_RETRY, CUMEM_ALLOC_NO_RECLAIM, CUMEM_ALLOC_RECLAIM_RETRY};
use super::{guard, host_len, null_err, out_flag, out_u64, tools};
use crate::engine::Engine;
use crate::engines::{open_engines, several_open};
use crate::error::{Error, Result};

/// Runs `f` on the engine of the device that `handle` (a stream or an event) belongs to:
/// the current device's first; when that one does not know the handle (`InvalidValue`,
/// nothing done) and other devices are open, each of them in turn (handles are unique
/// across devices, `device::new_handle`, so at most one knows it). So a stream or event
/// is synchronised, queried, recorded or destroyed on its own device whatever the calling
/// thread's current device is (a GC finalizer may run anywhere). The current device's
/// error is returned when no device knows the handle.
pub(super) fn on_handle_owner(f: impl Fn(&'static Engine) -> Result<()>) -> i32 {
    guard(|e| match f(e) {
        Err(Error::InvalidValue(m)) if several_open() => open_engines()
            .filter(|o| !std::ptr::eq(*o, e))
            .map(&f)
            .find(|r| !matches!(r, Err(Error::InvalidValue(_))))
            .unwrap_or(Err(Error::InvalidValue(m))),
        r => r,
    })
}

// ---- streams and events ----
//
// Handles are small integers (never reused); 0 is CUDA's legacy default stream, on which
// every other function of this header runs. On the host device, streams are emulated by
// worker threads with the same ordering (docs/design.md, "Streams").

/// Flag for `cumem_stream_create`: a blocking stream (CUDA's default flags: its work is
/// ordered with the legacy default stream's). Without it the stream is non-blocking
/// (`CU_STREAM_NON_BLOCKING`, as PyTorch's streams), so its work overlaps the default
/// stream's.
pub const CUMEM_STREAM_BLOCKING: u32 = 1;

/// Flag for `cumem_event_create`: no timing (`CU_EVENT_DISABLE_TIMING`), cheaper to
/// record and wait on; `cumem_event_elapsed` refuses such an event.
pub const CUMEM_EVENT_DISABLE_TIMING: u32 = 1;

/// Creates a stream of the current device into `*stream` (`cuStreamCreate`); `flags`: 0
/// or `CUMEM_STREAM_BLOCKING`. Returns `CUMEM_ERROR_INVALID_VALUE` for a null `stream` or
/// unknown flags, `CUMEM_ERROR_DEVICE` when the driver fails. Stream and event handles
/// are unique across devices: `cumem_stream_destroy`, `_synchronize`, `_query`,
/// `_wait_event` and the `cumem_event_*` functions act on the handle's own device,
/// whatever the calling thread's current device; `cumem_alloc_async` and the async
/// copies take a stream of the current device only (another's is an unknown stream).
///
/// # Safety
/// `stream` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_create(flags: u32, stream: *mut u64) -> i32 {
    guard(|e| {
        if flags & !CUMEM_STREAM_BLOCKING != 0 {
            return Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_stream_create")));
        }
        out_u64(stream, "stream", || e.stream_create(flags & CUMEM_STREAM_BLOCKING != 0))
    })
}

/// Waits for the work queued on `stream`, then destroys it; its pool's cache is
/// released. Live allocations made on it stay valid. Returns `CUMEM_ERROR_INVALID_VALUE`
/// for an unknown stream or 0 (the default stream cannot be destroyed).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_stream_destroy(stream: u64) -> i32 {
    on_handle_owner(|e| e.stream_destroy(stream))
}

/// Waits until the work queued on `stream` is done (`cuStreamSynchronize`). Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown stream, `CUMEM_ERROR_DEVICE` when the
/// device reports a failure (e.g. a kernel's fault).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_stream_synchronize(stream: u64) -> i32 {
    on_handle_owner(|e| e.device().stream_synchronize(stream))
}

/// Writes 1 into `*done` when the work queued on `stream` is done, else 0
/// (`cuStreamQuery`). Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown stream or a null
/// `done`.
///
/// # Safety
/// `done` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_query(stream: u64, done: *mut i32) -> i32 {
    on_handle_owner(|e| out_flag(done, "done", || e.device().stream_query(stream)))
}

/// Makes work queued on `stream` after this call wait until `event` (as last recorded)
/// has completed (`cuStreamWaitEvent`); the calling thread does not wait. An event never
/// recorded is complete. Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown handle.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_stream_wait_event(stream: u64, event: u64) -> i32 {
    on_handle_owner(|e| e.device().stream_wait_event(stream, event))
}

/// Creates an event into `*event` (`cuEventCreate`); `flags`: 0 (timing) or
/// `CUMEM_EVENT_DISABLE_TIMING`. Returns `CUMEM_ERROR_INVALID_VALUE` for a null `event`
/// or unknown flags.
///
/// # Safety
/// `event` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_event_create(flags: u32, event: *mut u64) -> i32 {
    guard(|e| {
        if flags & !CUMEM_EVENT_DISABLE_TIMING != 0 {
            return Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_event_create")));
        }
        out_u64(event, "event", || e.device().event_create(flags & CUMEM_EVENT_DISABLE_TIMING == 0))
    })
}

/// Destroys `event` (`cuEventDestroy`). Returns `CUMEM_ERROR_INVALID_VALUE` for an
/// unknown event.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_event_destroy(event: u64) -> i32 {
    on_handle_owner(|e| e.device().event_destroy(event))
}

/// Records `event` on `stream` (`cuEventRecord`): it completes when the work queued on
/// `stream` before it is done. Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown handle.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_event_record(event: u64, stream: u64) -> i32 {
    on_handle_owner(|e| e.device().event_record(event, stream))
}

/// Writes 1 into `*done` when `event` has completed (or was never recorded), else 0
/// (`cuEventQuery`). Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown event or a null
/// `done`.
///
/// # Safety
/// `done` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_event_query(event: u64, done: *mut i32) -> i32 {
    on_handle_owner(|e| out_flag(done, "done", || e.device().event_query(event)))
}

/// Waits until `event` has completed (`cuEventSynchronize`). Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown event.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_event_synchronize(event: u64) -> i32 {
    on_handle_owner(|e| e.device().event_synchronize(event))
}

/// Writes the time from `start` to `end`, both recorded and completed timing events, in
/// milliseconds into `*ms` (`cuEventElapsedTime`; resolution about 0.5 us on a GPU).
/// Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown event, one without timing, never
/// recorded or not completed, or a null `ms`.
///
/// # Safety
/// `ms` must be null or writable for one `float`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_event_elapsed(start: u64, end: u64, ms: *mut f32) -> i32 {
    on_handle_owner(|e| {
        if ms.is_null() {
            return Err(null_err("ms"));
        }
        let v = e.device().event_elapsed_ms(start, end)?;
        // SAFETY: checked non-null.
        unsafe { *ms = v };
        Ok(())
    })
}

/// As `cumem_alloc_ex`, on `stream` (0: the default stream, the same as
/// `cumem_alloc_ex`): the block comes from the stream's own pool and, once freed, is
/// reused at once by that stream only (its work is ordered), by other streams never
/// (PyTorch's per-stream pools). Work on other streams that uses it must be declared with
/// `cumem_record_stream`. Returns the errors of `cumem_alloc_ex`, and
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown stream.
///
/// # Safety
/// `ptr` must be null or point to writable memory for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_alloc_async(bytes: u64, stream: u64, ptr: *mut u64, flags: u32) -> i32 {
    guard(|e| {
        const KNOWN: u32 = CUMEM_ALLOC_NO_RECLAIM | CUMEM_ALLOC_GC_RETRY | CUMEM_ALLOC_RECLAIM_RETRY;
        if flags & !KNOWN != 0 {
            return Err(Error::InvalidValue(format!("unknown flags {flags:#x} for cumem_alloc_async")));
        }
        if flags & !CUMEM_ALLOC_NO_RECLAIM != 0 {
            tools::note_retries(e, flags)?;
        }
        out_u64(ptr, "ptr", || e.alloc_on(bytes, stream, flags & CUMEM_ALLOC_NO_RECLAIM == 0))
    })
}

/// Declares that work queued on `stream` uses the live allocation containing `ptr`
/// (PyTorch's `record_stream`): once freed, the block is reused only after an event
/// recorded on `stream` at the free has completed (polled on later allocations; waited
/// for on out of memory and by `cumem_reclaim`). Returns `CUMEM_ERROR_INVALID_VALUE` for
/// an address outside every live allocation or an unknown stream (nothing changes).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_record_stream(ptr: u64, stream: u64) -> i32 {
    guard(|e| e.record_stream(ptr, stream))
}

/// Writes the stream the live allocation containing `ptr` was made on (0: the default
/// stream) into `*stream`. Returns `CUMEM_ERROR_INVALID_VALUE` for an address outside
/// every live allocation or a null `stream`.
///
/// # Safety
/// `stream` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_block_stream(ptr: u64, stream: *mut u64) -> i32 {
    guard(|e| out_u64(stream, "stream", || e.block_stream(ptr)))
}

/// Queues a copy of `bytes` from host memory `src` to device address `dst` on `stream`
/// (`cuMemcpyHtoDAsync`) and returns. Checks as `cumem_copy_htod`; a block of another
/// stream records the use as `cumem_record_stream` does. From page-locked memory the
/// copy overlaps other work; from pageable memory CUDA copies before returning (the host
/// device always queues). A block of the pinned host pool (`cumem_host_alloc`) may be
/// freed at once: the pool keeps it from reuse and release until the copy has run (an
/// event on the stream, PyTorch's `recordEvent`). Returns the errors of
/// `cumem_copy_htod`, and `CUMEM_ERROR_INVALID_VALUE` for an unknown stream.
///
/// # Safety
/// `src` must stay readable for `bytes` bytes until the copy has run (synchronise the
/// stream or an event recorded after the copy; a block of the pinned host pool may be
/// freed at once).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_copy_htod_async(
    dst: u64,
    src: *const core::ffi::c_void,
    bytes: u64,
    stream: u64,
) -> i32 {
    guard(|e| {
        if bytes == 0 {
            return Ok(());
        }
        if src.is_null() {
            return Err(null_err("src"));
        }
        host_len(e, dst, bytes)?;
        // SAFETY: the caller's guarantee on `src`.
        unsafe { e.copy_htod_async(dst, src as *const u8, bytes, stream) }?;
        super::pinned::note_async_use(e, src as u64, stream)
    })
}

/// Queues a copy of `bytes` from device address `src` to host memory `dst` on `stream`
/// (`cuMemcpyDtoHAsync`), with the checks of `cumem_copy_htod_async`; a pinned host
/// block as `dst` is kept as there.
///
/// # Safety
/// `dst` must stay writable for `bytes` bytes until the copy has run (a block of the
/// pinned host pool may be freed at once).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_copy_dtoh_async(
    dst: *mut core::ffi::c_void,
    src: u64,
    bytes: u64,
    stream: u64,
) -> i32 {
    guard(|e| {
        if bytes == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(null_err("dst"));
        }
        host_len(e, src, bytes)?;
        // SAFETY: the caller's guarantee on `dst`.
        unsafe { e.copy_dtoh_async(dst as *mut u8, src, bytes, stream) }?;
        super::pinned::note_async_use(e, dst as u64, stream)
    })
}

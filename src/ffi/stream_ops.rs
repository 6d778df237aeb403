//! The C ABI of the memsets and device-to-device copies queued on a stream
//! ([`crate::engine::Engine::memset_async`], [`crate::engine::Engine::copy_dtod_async`]).
//! They act on the current device (`cumem_set_device`), whose stream `stream` must be.

use super::guard;

/// Queues setting `count` elements of `elsize` bytes (1, 2 or 4) at device address `dst`
/// to the low `elsize` bytes of `pattern` on `stream` (`cuMemsetD8Async`,
/// `cuMemsetD16Async`, `cuMemsetD32Async`; 0: the legacy default stream, the host device
/// then sets them before returning) and returns without waiting. A block of another
/// stream records the use as `cumem_record_stream` does. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an `elsize` other than 1, 2 or 4, a `dst` not aligned
/// to `elsize`, a range not inside one live allocation of the current device, or an
/// unknown stream (nothing is queued); `CUMEM_ERROR_DEVICE` when the driver fails.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_memset_async(dst: u64, pattern: u32, elsize: u32, count: u64, stream: u64) -> i32 {
    guard(|e| e.memset_async(dst, pattern, elsize, count, stream))
}

/// Queues a copy of `bytes` between device addresses of the current device on `stream`
/// (`cuMemcpyDtoDAsync`; the ranges may overlap; 0: the legacy default stream) and
/// returns without waiting. Checks and stream use as `cumem_memset_async`; for ranges on
/// two devices use `cumem_copy_peer`.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_copy_dtod_async(dst: u64, src: u64, bytes: u64, stream: u64) -> i32 {
    guard(|e| e.copy_dtod_async(dst, src, bytes, stream))
}

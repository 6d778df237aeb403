//! Memsets and device-to-device copies queued on a stream (`cuMemsetD*Async`,
//! `cuMemcpyDtoDAsync`): what `fill!` and `copyto!` between device arrays use, so that
//! they cost one driver call and no wait, as kernels do. The ranges are checked and the
//! use on another stream than the block's own recorded as for the asynchronous uploads
//! ([`Engine::copy_htod_async`]): a free of the block before the operation has run does
//! not hand its memory to another stream.

use super::Engine;
use crate::error::{Error, Result};

impl Engine {
    /// Queues setting `count` elements of `elsize` bytes (1, 2 or 4) at device address
    /// `dst` to the low `elsize` bytes of `pattern` on `stream` (`cuMemsetD8Async`,
    /// `cuMemsetD16Async`, `cuMemsetD32Async`; 0: the legacy default stream) and returns
    /// without waiting. `fill!(x::CuArray{Float32}, 1f0)` is `elsize` 4, `pattern`
    /// `0x3f800000`. Errors: [`Error::InvalidValue`] for an `elsize` other than 1, 2 or 4,
    /// a `dst` not aligned to `elsize`, a size that overflows, a range not inside one live
    /// allocation or an unknown stream (nothing is queued), or the device's error.
    pub fn memset_async(&self, dst: u64, pattern: u32, elsize: u32, count: u64, stream: u64) -> Result<()> {
        if !matches!(elsize, 1 | 2 | 4) {
            return Err(Error::InvalidValue(format!(
                "memset element size must be 1, 2 or 4 bytes, got {elsize}"
            )));
        }
        if !dst.is_multiple_of(elsize as u64) {
            return Err(Error::InvalidValue(format!(
                "memset of {elsize}-byte elements at {dst:#x}, which is not aligned to {elsize} bytes"
            )));
        }
        let bytes = count.checked_mul(elsize as u64).ok_or_else(|| {
            Error::InvalidValue(format!("memset of {count} elements of {elsize} bytes overflows"))
        })?;
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin_on_stream(dst, bytes, stream)?;
        // SAFETY: the range is inside a live allocation that stays out of other hands
        // until the memset has run (its use on `stream` is recorded); `dst` is aligned.
        unsafe { self.up.device().memset_async(dst, pattern, elsize, count, stream) }
    }

    /// Queues a copy of `bytes` between device addresses of this engine's device on
    /// `stream` (`cuMemcpyDtoDAsync`; the ranges may overlap) and returns without
    /// waiting. Errors: [`Error::InvalidValue`] when either range is not inside one live
    /// allocation or the stream is unknown (nothing is queued), or the device's error.
    /// A copy of a range onto itself (`dst == src`) is checked and queues nothing, as
    /// [`Engine::copy_dtod`].
    pub fn copy_dtod_async(&self, dst: u64, src: u64, bytes: u64, stream: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _dst = self.pin_on_stream(dst, bytes, stream)?;
        let _src = self.pin_on_stream(src, bytes, stream)?;
        if dst == src {
            return Ok(());
        }
        // SAFETY: both ranges are inside live allocations that stay out of other hands
        // until the copy has run.
        unsafe { self.up.device().copy_dtod_async(dst, src, bytes, stream) }
    }
}

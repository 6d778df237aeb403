//! The C functions of the device registry ([`crate::engines`]): the device count, the
//! calling thread's current device, which devices are open, and peer access.

use super::guard;
use crate::engines::{current_device, device_count, engine_at, is_open, set_device};
use crate::error::Error;

/// The number of devices the engine can drive: N for `CUMEM_DEVICE=host:N` (1 for
/// `host`, and for `auto` without a GPU), else CUDA's device count (as
/// `torch.cuda.device_count()`); -1 if the engine cannot start (see `cumem_last_error`).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_device_count() -> i32 {
    let mut out = -1;
    guard(|_| {
        out = device_count()? as i32;
        Ok(())
    });
    out
}

/// Makes `device` (0 to `cumem_device_count()` − 1) the calling OS thread's current
/// device, opening its engine on first use (on CUDA: retaining its primary context).
/// Calls without an address argument then act on it. Returns `CUMEM_ERROR_INVALID_VALUE`
/// for an ordinal out of range (the current device stays), `CUMEM_ERROR_DEVICE` when the
/// device cannot be opened.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_set_device(device: i32) -> i32 {
    guard(|_| {
        let i = usize::try_from(device)
            .map_err(|_| Error::InvalidValue(format!("there is no device {device}: ordinals start at 0")))?;
        set_device(i)?;
        Ok(())
    })
}

/// The calling OS thread's current device (0 until `cumem_set_device`). Never fails and
/// does not initialise the engine.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_get_device() -> i32 {
    current_device() as i32
}

/// 1 when `device`'s engine is open (it was made current, or is device 0), 0 when not yet,
/// -1 for an ordinal out of range or an engine that cannot start. Opens nothing beyond
/// device 0.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_device_is_open(device: i32) -> i32 {
    let mut out = -1;
    guard(|_| {
        if let Ok(i) = usize::try_from(device)
            && let Some(open) = is_open(i)?
        {
            out = open as i32;
        }
        Ok(())
    });
    out
}

/// 1 when copies from device `src` to device `dst` go directly (`CUMEM_COPY_PATH_PEER`;
/// on CUDA `cuDeviceCanAccessPeer`, and peer access is then enabled), 0 when they are
/// staged through host memory, -1 on error (an ordinal out of range, a device that cannot
/// be opened; see `cumem_last_error`). Opens both devices' engines. A device and itself: 1.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_can_access_peer(dst: i32, src: i32) -> i32 {
    let mut out = -1;
    guard(|_| {
        let idx = |d: i32| {
            usize::try_from(d)
                .map_err(|_| Error::InvalidValue(format!("there is no device {d}: ordinals start at 0")))
        };
        let (de, se) = (engine_at(idx(dst)?)?, engine_at(idx(src)?)?);
        out = (std::ptr::eq(de, se) || de.device().can_access_peer(se.device())?) as i32;
        Ok(())
    });
    out
}

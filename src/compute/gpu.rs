//! The GPU under the engine, as compute sees it: making its context current on the
//! calling thread, its facts (compute capability, SM count) and synchronising with it.

use crate::device::{Device, device_err};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::sync::OnceLock;

/// Facts about the device that kernels are compiled and sized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Compute capability, major (9 for an H100); 0 on the host device.
    pub cc_major: i32,
    /// Compute capability, minor; 0 on the host device.
    pub cc_minor: i32,
    /// Streaming multiprocessors; on the host device, the number of CPUs.
    pub sm_count: i32,
    /// Most threads in one block (1024 on every current GPU, and on the host device).
    pub max_threads: i32,
}

impl DeviceInfo {
    /// The compute capability as `10 * major + minor` (90 for 9.0).
    pub fn cc(&self) -> i32 {
        10 * self.cc_major + self.cc_minor
    }
}

/// Makes `dev`'s context current on this thread, without asking the driver anything
/// else: the launch path's one call before `cuLaunchKernel` ([`bind`] also reads the
/// `CUdevice`, a second driver call). Errors as [`bind`].
#[inline]
pub fn activate(dev: &dyn Device, what: &str) -> Result<()> {
    if dev.is_host() {
        return Err(Error::NotSupported(format!(
            "{what} needs a CUDA GPU, but the engine runs on the host device ({}; CUMEM_DEVICE)",
            dev.name()
        )));
    }
    dev.make_current()
}

/// Makes `dev`'s context current on this thread and returns its CUDA device. Errors:
/// [`Error::NotSupported`] on the host device (`what` says what needed a GPU, e.g.
/// `"loading a kernel"`), [`Error::Device`] when the driver fails.
pub fn bind(dev: &dyn Device, what: &str) -> Result<sys::CUdevice> {
    if dev.is_host() {
        return Err(Error::NotSupported(format!(
            "{what} needs a CUDA GPU, but the engine runs on the host device ({}; CUMEM_DEVICE)",
            dev.name()
        )));
    }
    dev.make_current()?;
    let mut d: sys::CUdevice = 0;
    // SAFETY: a context is current; `d` is a valid out-pointer.
    unsafe { sys::cuCtxGetDevice(&mut d) }.result().map_err(|e| device_err("cuCtxGetDevice", e))?;
    Ok(d)
}

/// The device's facts (cached after the first call on a GPU). On the host device:
/// compute capability 0.0, `sm_count` = the number of CPUs, `max_threads` = 1024.
/// Errors: [`Error::Device`] when the driver fails.
pub fn info(dev: &dyn Device) -> Result<DeviceInfo> {
    if dev.is_host() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        return Ok(DeviceInfo { cc_major: 0, cc_minor: 0, sm_count: cpus as i32, max_threads: 1024 });
    }
    // Facts per device ordinal, asked once each.
    static INFO: [OnceLock<DeviceInfo>; crate::config::MAX_DEVICES as usize] =
        [const { OnceLock::new() }; crate::config::MAX_DEVICES as usize];
    let slot = &INFO[(dev.ordinal() as usize).min(INFO.len() - 1)];
    if let Some(i) = slot.get() {
        return Ok(*i);
    }
    let d = bind(dev, "reading the device's facts")?;
    let attr = |a: sys::CUdevice_attribute, name: &str| {
        // SAFETY: `d` is a valid device.
        unsafe { result::device::get_attribute(d, a) }
            .map_err(|e| device_err(&format!("cuDeviceGetAttribute({name})"), e))
    };
    use sys::CUdevice_attribute::*;
    let i = DeviceInfo {
        cc_major: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major")?,
        cc_minor: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor")?,
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count")?,
        max_threads: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block")?,
    };
    Ok(*slot.get_or_init(|| i))
}

/// Waits until all work queued on the device, on every stream, is done
/// (`cuCtxSynchronize`; on the host device, the emulated streams' queues). Errors: [`Error::Device`], which is also how an earlier kernel's
/// fault (e.g. an illegal address) is reported.
pub fn synchronize(dev: &dyn Device) -> Result<()> {
    if dev.is_host() {
        return dev.synchronize_all();
    }
    dev.make_current()?;
    result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
}

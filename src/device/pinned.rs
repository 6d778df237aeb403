//! Page-locked ("pinned") host memory: the devices below the pinned host pool
//! (`crate::pinned`) and the registration of existing host memory.
//!
//! Copies between the GPU and page-locked memory run by DMA at the bus's speed; from
//! pageable memory the driver stages them through a pinned buffer of its own, at a
//! fraction of it. Page-locking is slow (the kernel pins every page: about a millisecond
//! per 100 MiB), so, as PyTorch's `CachingHostAllocator` (`pin_memory=True`) and RMM's
//! `pinned_memory_resource` under a pool do, the memory is cached by a pool: the pinned
//! pool is an [`crate::engine::Engine`] over one of these devices.
//!
//! - [`CudaPinnedDevice`]: `cuMemHostAlloc(CU_MEMHOSTALLOC_PORTABLE)` / `cuMemFreeHost`
//!   (portable: pinned for every CUDA context of the process, as PyTorch's
//!   `cudaHostAllocDefault` memory is for its contexts), and `cuMemHostRegister` /
//!   `cuMemHostUnregister` for memory allocated elsewhere.
//! - [`LockedHostDevice`]: without a GPU, page-aligned host memory, `mlock`ed when the
//!   process may lock that much (`RLIMIT_MEMLOCK`) and left unlocked otherwise (one
//!   debug message; the logic above is the same), so CI tests the pool and the C ABI.
//!
//! On both, the memory is the process's own: "device" addresses are host addresses, and
//! the copies of [`Device`] are `memcpy`.

use super::host::{HostDevice, physical_memory};
use super::{Device, device_err};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use cudarc::driver::{result, sys};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Registration of existing host memory as page-locked (`cuMemHostRegister`): what
/// `cumem_host_register` calls below the bookkeeping of [`crate::pinned::PinnedHost`],
/// which checks the ranges first (no overlap, no null, no empty range).
pub trait HostRegistrar: Send + Sync {
    /// Page-locks `[ptr, ptr+bytes)` for the GPU (`cuMemHostRegister_v2` with
    /// `CU_MEMHOSTREGISTER_PORTABLE`; nothing on the host device). Errors:
    /// [`Error::Device`] with the driver's message (e.g. the range is not mapped memory
    /// of the process), [`Error::OutOfMemory`] when the driver cannot lock that much.
    ///
    /// # Safety
    /// `[ptr, ptr+bytes)` must be memory of this process that stays allocated until
    /// [`HostRegistrar::unregister`].
    unsafe fn register(&self, ptr: u64, bytes: u64) -> Result<()>;
    /// Undoes [`HostRegistrar::register`] of the range starting at `ptr`
    /// (`cuMemHostUnregister`). Errors: [`Error::Device`] with the driver's message.
    ///
    /// # Safety
    /// `ptr` must be the start of a registered range.
    unsafe fn unregister(&self, ptr: u64) -> Result<()>;
    /// Whether the driver knows `ptr` as page-locked host memory, whoever locked it
    /// (`cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)` is
    /// `CU_MEMORYTYPE_HOST`, as PyTorch's `is_pinned` asks `cudaPointerGetAttributes`).
    /// False on the host device and for pageable memory.
    fn driver_pinned(&self, ptr: u64) -> bool {
        let _ = ptr;
        false
    }
}

/// Opens the pinned host memory that goes with the device engine: CUDA's for a GPU
/// (`gpu`, device 0's primary context, which the device engine also uses), the host
/// device's otherwise. Errors: [`Error::Device`] when `gpu` and the driver cannot be
/// opened.
pub fn open_pinned(gpu: bool) -> Result<(Box<dyn Device>, Box<dyn HostRegistrar>)> {
    if gpu {
        let d = CudaPinnedDevice::new(0)?;
        let r = d.registrar();
        Ok((Box::new(d), Box::new(r)))
    } else {
        Ok((Box::new(LockedHostDevice::new(None)), Box::new(NoRegistrar)))
    }
}

/// The registrar of the host device: the range is recorded by the pinned pool only
/// (there is no GPU to lock it for).
pub struct NoRegistrar;

impl HostRegistrar for NoRegistrar {
    unsafe fn register(&self, _ptr: u64, _bytes: u64) -> Result<()> {
        Ok(())
    }
    unsafe fn unregister(&self, _ptr: u64) -> Result<()> {
        Ok(())
    }
}

/// `(available, total)` bytes of the machine's memory (`MemAvailable`, `MemTotal` of
/// `/proc/meminfo`), what the CUDA pinned device reports as its `mem_info` and a
/// percentage `CUMEM_PINNED_LIMIT` is taken of.
pub fn host_memory() -> (u64, u64) {
    let total = physical_memory();
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(total);
    (avail.min(total), total)
}

// Copies on pinned memory: the memory is the process's own.
macro_rules! host_copies {
    () => {
        unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()> {
            // SAFETY: the caller guarantees `src` readable and `[dst, dst+bytes)` memory
            // of this device, which is host memory of this process.
            unsafe { std::ptr::copy(src, dst as *mut u8, bytes as usize) };
            Ok(())
        }

        unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()> {
            // SAFETY: as in `copy_htod`.
            unsafe { std::ptr::copy(src as *const u8, dst, bytes as usize) };
            Ok(())
        }

        unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
            // SAFETY: as in `copy_htod`; `copy` allows overlap.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes as usize) };
            Ok(())
        }

        unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
            // SAFETY: as in `copy_htod`.
            unsafe { std::ptr::write_bytes(dst as *mut u8, value, bytes as usize) };
            Ok(())
        }
    };
}

/// Page-locked host memory of the CUDA driver, in device 0's primary context (made
/// current on the calling thread for each driver call, as [`super::CudaDevice`] does).
pub struct CudaPinnedDevice {
    ctx: sys::CUcontext,
}

// SAFETY: a CUDA context handle may be used from any thread; the driver synchronises.
unsafe impl Send for CudaPinnedDevice {}
unsafe impl Sync for CudaPinnedDevice {}

/// Makes `ctx` current on this thread unless it already is (see `CudaDevice::bind`).
fn bind(ctx: sys::CUcontext) -> Result<()> {
    let current = result::ctx::get_current().map_err(|e| device_err("cuCtxGetCurrent", e))?;
    if current != Some(ctx) {
        // SAFETY: `ctx` is a retained primary context, valid for the process.
        unsafe { result::ctx::set_current(ctx) }.map_err(|e| device_err("cuCtxSetCurrent", e))?;
    }
    Ok(())
}

impl CudaPinnedDevice {
    /// Opens the driver and retains device `ordinal`'s primary context. Errors:
    /// [`Error::Device`] when libcuda, a driver or the GPU is missing.
    pub fn new(ordinal: i32) -> Result<CudaPinnedDevice> {
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Device("the CUDA driver library (libcuda.so) was not found".into()));
        }
        result::init().map_err(|e| device_err("cuInit", e))?;
        let dev = result::device::get(ordinal).map_err(|e| device_err("cuDeviceGet", e))?;
        // SAFETY: `dev` is a valid device; the primary context is kept for the process.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| device_err("cuDevicePrimaryCtxRetain", e))?;
        Ok(CudaPinnedDevice { ctx })
    }

    /// The registrar for `cuMemHostRegister` in the same context.
    pub fn registrar(&self) -> CudaRegistrar {
        CudaRegistrar { ctx: self.ctx }
    }
}

impl Device for CudaPinnedDevice {
    fn name(&self) -> &str {
        "pinned host memory (cuMemHostAlloc)"
    }

    fn is_host(&self) -> bool {
        true
    }

    fn alloc(&self, bytes: u64) -> Result<u64> {
        bind(self.ctx)?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; a plain page-locked allocation.
        match unsafe { sys::cuMemHostAlloc(&mut p, bytes as usize, sys::CU_MEMHOSTALLOC_PORTABLE) }.result() {
            Ok(()) => Ok(p as u64),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(Error::OutOfMemory(format!("cuMemHostAlloc of {} failed: {e}", format_bytes(bytes))))
            }
            Err(e) => Err(device_err("cuMemHostAlloc", e)),
        }
    }

    unsafe fn free(&self, ptr: u64, _bytes: u64) -> Result<()> {
        bind(self.ctx)?;
        // SAFETY: the caller guarantees `ptr` came from `alloc` and was not freed.
        unsafe { sys::cuMemFreeHost(ptr as *mut std::ffi::c_void) }
            .result()
            .map_err(|e| device_err("cuMemFreeHost", e))
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        Ok(host_memory())
    }

    host_copies!();
}

/// `cuMemHostRegister` in device 0's primary context (see [`CudaPinnedDevice`]).
pub struct CudaRegistrar {
    ctx: sys::CUcontext,
}

// SAFETY: as for `CudaPinnedDevice`.
unsafe impl Send for CudaRegistrar {}
unsafe impl Sync for CudaRegistrar {}

impl HostRegistrar for CudaRegistrar {
    unsafe fn register(&self, ptr: u64, bytes: u64) -> Result<()> {
        bind(self.ctx)?;
        // SAFETY: the caller guarantees the range is memory of the process.
        match unsafe {
            sys::cuMemHostRegister_v2(
                ptr as *mut std::ffi::c_void,
                bytes as usize,
                sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()
        {
            Ok(()) => Ok(()),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(Error::OutOfMemory(format!("cuMemHostRegister of {} failed: {e}", format_bytes(bytes))))
            }
            Err(e) => Err(device_err("cuMemHostRegister", e)),
        }
    }

    unsafe fn unregister(&self, ptr: u64) -> Result<()> {
        bind(self.ctx)?;
        // SAFETY: the caller guarantees `ptr` starts a registered range.
        unsafe { sys::cuMemHostUnregister(ptr as *mut std::ffi::c_void) }
            .result()
            .map_err(|e| device_err("cuMemHostUnregister", e))
    }

    fn driver_pinned(&self, ptr: u64) -> bool {
        if bind(self.ctx).is_err() {
            return false;
        }
        let mut kind: u32 = 0;
        // SAFETY: valid out-pointer of the attribute's type (an unsigned int); any
        // address may be asked about (pageable memory gives CUDA_ERROR_INVALID_VALUE).
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr,
            )
        };
        r == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
    }
}

/// Without a GPU: page-aligned host memory of a [`HostDevice`] (capacity: the machine's
/// physical memory), `mlock`ed where the process may lock it. A failed `mlock` (the
/// usual `RLIMIT_MEMLOCK` of 8 MiB or less in containers) leaves the memory unlocked,
/// logged once at debug level: nothing but the speed of a GPU copy depends on it, and
/// there is no GPU.
pub struct LockedHostDevice {
    inner: HostDevice,
    lock_failed: AtomicBool,
}

impl LockedHostDevice {
    /// A device of `capacity` bytes (default: physical memory).
    pub fn new(capacity: Option<u64>) -> LockedHostDevice {
        LockedHostDevice { inner: HostDevice::new(capacity), lock_failed: AtomicBool::new(false) }
    }
}

impl Device for LockedHostDevice {
    fn name(&self) -> &str {
        "page-locked host memory (no GPU)"
    }

    fn is_host(&self) -> bool {
        true
    }

    fn alloc(&self, bytes: u64) -> Result<u64> {
        let p = self.inner.alloc(bytes)?;
        // Once refused, not asked again: the limit rarely rises while a process runs.
        if !self.lock_failed.load(Relaxed) {
            // SAFETY: `[p, p+bytes)` was just allocated.
            if unsafe { libc::mlock(p as *const libc::c_void, bytes as usize) } != 0 {
                self.lock_failed.store(true, Relaxed);
                log::debug!(
                    "mlock of {} failed ({}); pinned host memory of the host device is not locked",
                    format_bytes(bytes),
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(p)
    }

    unsafe fn free(&self, ptr: u64, bytes: u64) -> Result<()> {
        // Unlock before the allocator reuses the pages (it may keep them mapped).
        // Unlocking unlocked pages succeeds, so whether this block was locked is not kept.
        // SAFETY: the caller guarantees `ptr` came from `alloc(bytes)`.
        unsafe { libc::munlock(ptr as *const libc::c_void, bytes as usize) };
        // SAFETY: passed on from the caller.
        unsafe { self.inner.free(ptr, bytes) }
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        self.inner.mem_info()
    }

    host_copies!();
}

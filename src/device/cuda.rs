//! `CudaDevice`: device memory from the CUDA driver API through `cudarc`'s thin `result`
//! layer (`cuMemAlloc_v2`, `cuMemFree_v2`, `cuMemGetInfo_v2`, `cuMemcpy*_v2`,
//! `cuMemsetD8_v2`), loaded dynamically at the CUDA 12.0 API level.

use super::{Device, device_err};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use cudarc::driver::{result, sys};

/// CUDA device `ordinal` through its primary context, made current on every thread
/// that calls (Julia finalizers run on any thread).
pub struct CudaDevice {
    ctx: sys::CUcontext,
    name: String,
}

// SAFETY: a CUDA context handle may be used from any thread; the driver synchronises.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl CudaDevice {
    /// Opens device `ordinal`: loads libcuda (checking first that it is present, since
    /// cudarc panics when it is not), `cuInit`, retains the primary context. Errors:
    /// [`Error::Device`] when the library, a driver or the GPU is missing.
    pub fn new(ordinal: i32) -> Result<CudaDevice> {
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Device("the CUDA driver library (libcuda.so) was not found".into()));
        }
        result::init().map_err(|e| device_err("cuInit", e))?;
        let count = result::device::get_count().map_err(|e| device_err("cuDeviceGetCount", e))?;
        if ordinal >= count {
            return Err(Error::Device(format!("no CUDA device {ordinal} ({count} present)")));
        }
        let dev = result::device::get(ordinal).map_err(|e| device_err("cuDeviceGet", e))?;
        let name = result::device::get_name(dev).map_err(|e| device_err("cuDeviceGetName", e))?;
        // SAFETY: `dev` is a valid device; the primary context is kept for the process.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| device_err("cuDevicePrimaryCtxRetain", e))?;
        let d = CudaDevice { ctx, name };
        d.bind()?;
        Ok(d)
    }

    /// Makes the context current on this thread unless it already is. The driver is
    /// asked each time (`cuCtxGetCurrent`, a thread-local read inside the driver), as
    /// cudarc does, rather than trusting a cache of our own: another library in the
    /// process (CUDA.jl, cuBLAS, a user's code) may have made its own context current on
    /// this thread since our last call.
    fn bind(&self) -> Result<()> {
        let current = result::ctx::get_current().map_err(|e| device_err("cuCtxGetCurrent", e))?;
        if current != Some(self.ctx) {
            // SAFETY: `ctx` is a retained primary context, valid for the process.
            unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| device_err("cuCtxSetCurrent", e))?;
        }
        Ok(())
    }
}

fn is_oom(e: &result::DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_host(&self) -> bool {
        false
    }

    fn make_current(&self) -> Result<()> {
        self.bind()
    }

    fn alloc(&self, bytes: u64) -> Result<u64> {
        self.bind()?;
        // SAFETY: a plain device allocation in the current context.
        match unsafe { result::malloc_sync(bytes as usize) } {
            Ok(p) => Ok(p),
            Err(e) if is_oom(&e) => {
                Err(Error::OutOfMemory(format!("cuMemAlloc of {} failed: {e}", format_bytes(bytes))))
            }
            Err(e) => Err(device_err("cuMemAlloc", e)),
        }
    }

    unsafe fn free(&self, ptr: u64, _bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees `ptr` came from `alloc` and was not freed.
        unsafe { result::free_sync(ptr) }.map_err(|e| device_err("cuMemFree", e))
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (f, t) = result::mem_get_info().map_err(|e| device_err("cuMemGetInfo", e))?;
        Ok((f as u64, t as u64))
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees `src` is readable for `bytes`.
        let s = unsafe { std::slice::from_raw_parts(src, bytes as usize) };
        // SAFETY: the caller guarantees `[dst, dst+bytes)` is device memory.
        unsafe { result::memcpy_htod_sync(dst, s) }.map_err(|e| device_err("cuMemcpyHtoD", e))
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees `dst` is writable for `bytes`.
        let d = unsafe { std::slice::from_raw_parts_mut(dst, bytes as usize) };
        // SAFETY: the caller guarantees `[src, src+bytes)` is device memory.
        unsafe { result::memcpy_dtoh_sync(d, src) }.map_err(|e| device_err("cuMemcpyDtoH", e))
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees both ranges are device memory.
        unsafe { result::memcpy_dtod_sync(dst, src, bytes as usize) }
            .map_err(|e| device_err("cuMemcpyDtoD", e))?;
        // cuMemcpyDtoD is asynchronous to the host for device memory: wait, so a
        // following free or host read sees the copy done.
        result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
    }

    unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees `[dst, dst+bytes)` is device memory.
        unsafe { result::memset_d8_sync(dst, value, bytes as usize) }
            .map_err(|e| device_err("cuMemsetD8", e))?;
        result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
    }
}

//! `CudaDevice`: device memory from the CUDA driver API through `cudarc`'s thin `result`
//! layer (`cuMemAlloc_v2`, `cuMemFree_v2`, `cuMemGetInfo_v2`, `cuMemcpy*_v2`,
//! `cuMemsetD8_v2`), loaded dynamically at the CUDA 12.0 API level, and its virtual
//! memory management (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`,
//! `cuMemUnmap`, `cuMemRelease`, `cuMemAddressFree`) through cudarc's `sys` layer.

use super::chunks::ChunkTable;
use super::{Device, device_err};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use cudarc::driver::{result, sys};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// CUDA device `ordinal` through its primary context, made current on every thread
/// that calls (Julia finalizers run on any thread).
pub struct CudaDevice {
    ctx: sys::CUcontext,
    name: String,
    dev: sys::CUdevice,
    ordinal: i32,
    /// The virtual-memory granularity, or why there is none; asked on first use.
    granularity: OnceLock<std::result::Result<u64, String>>,
    /// The physical allocations mapped, by first address: one per `vm_map` (one
    /// `cuMemCreate` of the whole range), so that ranges unmap and move as whole
    /// allocations, as `cuMemUnmap` takes whole mappings.
    handles: Mutex<ChunkTable<sys::CUmemGenericAllocationHandle>>,
    /// Source devices whose memory this context may read (`cuCtxEnablePeerAccess` done),
    /// and those that it may not (`cuDeviceCanAccessPeer` said no), asked once each.
    peers: Mutex<FxHashMap<i32, bool>>,
    /// Streams and events by CuMem handle (small integers, never reused, so a stale
    /// handle is an error rather than another stream): the driver's pointers as `u64`.
    streams: Mutex<FxHashMap<u64, u64>>,
    events: Mutex<FxHashMap<u64, u64>>,
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
        let d = CudaDevice {
            ctx,
            name,
            dev,
            ordinal,
            granularity: OnceLock::new(),
            handles: Mutex::new(ChunkTable::default()),
            peers: Mutex::new(FxHashMap::default()),
            streams: Mutex::new(FxHashMap::default()),
            events: Mutex::new(FxHashMap::default()),
        };
        d.bind()?;
        Ok(d)
    }

    /// Makes the context current on this thread unless it already is. The driver is
    /// asked each time (`cuCtxGetCurrent`, a thread-local read inside the driver), as
    /// cudarc does, rather than trusting a cache of our own: another library in the
    /// process (CUDA.jl, cuBLAS, a user's code) may have made its own context current on
    /// this thread since our last call.
    pub(super) fn bind(&self) -> Result<()> {
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

/// What a virtual-memory call failing with `CUDA_ERROR_NOT_SUPPORTED` means.
const NO_VMM: &str = "this GPU or driver does not support CUDA virtual memory management \
     (cuMemCreate/cuMemMap), which JULIA_CUDA_MEMORY_POOL=expandable needs; use the split pool";

/// The error of driver call `what`: out of memory, virtual memory unsupported, or other.
fn vm_err(what: &str, bytes: u64, e: result::DriverError) -> Error {
    if is_oom(&e) {
        Error::OutOfMemory(format!("{what} of {} failed: {e}", format_bytes(bytes)))
    } else if e.0 == sys::CUresult::CUDA_ERROR_NOT_SUPPORTED {
        Error::Device(format!("{what} failed: {e}: {NO_VMM}"))
    } else {
        device_err(what, e)
    }
}

impl CudaDevice {
    /// Physical memory pinned on this device, no export handle: what `cuMemCreate`
    /// allocates and `cuMemGetAllocationGranularity` is asked about.
    fn prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: a plain C struct for which all zeroes is valid (handle type none,
        // no flags); the fields that matter are set below.
        let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = self.ordinal;
        p
    }

    /// The granularity, asked once: VMM support (device attribute), then
    /// `cuMemGetAllocationGranularity` (the minimum; recommended is the same on current
    /// GPUs, 2 MiB).
    fn granule(&self) -> Result<u64> {
        self.granularity
            .get_or_init(|| {
                self.bind().map_err(|e| e.to_string())?;
                // SAFETY: `dev` is a valid device.
                let vmm = unsafe {
                    result::device::get_attribute(
                        self.dev,
                        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
                    )
                }
                .map_err(|e| format!("cuDeviceGetAttribute failed: {e}"))?;
                if vmm == 0 {
                    return Err(NO_VMM.to_string());
                }
                let prop = self.prop();
                let mut g: usize = 0;
                // SAFETY: valid out-pointer and property struct.
                unsafe {
                    sys::cuMemGetAllocationGranularity(
                        &mut g,
                        &prop,
                        sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                    )
                }
                .result()
                .map_err(|e| vm_err("cuMemGetAllocationGranularity", 0, e).to_string())?;
                let g = g as u64;
                if g == 0 || !g.is_power_of_two() {
                    return Err(format!("cuMemGetAllocationGranularity returned {g}, not a power of two"));
                }
                Ok(g)
            })
            .clone()
            .map_err(Error::Device)
    }

    /// Checks that `[addr, addr+bytes)` is a non-empty run of whole granules.
    fn check_granules(&self, addr: u64, bytes: u64) -> Result<u64> {
        let g = self.granule()?;
        if bytes == 0 || !addr.is_multiple_of(g) || !bytes.is_multiple_of(g) {
            return Err(Error::InvalidValue(format!(
                "{addr:#x}+{bytes} is not a whole number of {} granules",
                format_bytes(g)
            )));
        }
        Ok(g)
    }

    /// Unmaps and releases the allocations `chunks` (taken out of the table), carrying
    /// on past errors; returns the first.
    fn release_chunks(chunks: &[(u64, u64, sys::CUmemGenericAllocationHandle)]) -> Result<()> {
        let mut first = Ok(());
        for &(a, b, h) in chunks {
            // SAFETY: `a` is where `h` (b bytes) is mapped, by `vm_map` or a move.
            let r = unsafe { sys::cuMemUnmap(a, b as usize) }
                .result()
                .map_err(|e| device_err("cuMemUnmap", e))
                // SAFETY: `h` came from cuMemCreate; the driver releases it once unmapped
                // (also when the unmap failed: it is not used again).
                .and(unsafe { sys::cuMemRelease(h) }.result().map_err(|e| device_err("cuMemRelease", e)));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Takes the allocations that tile `[addr, addr+bytes)` out of the table. Errors:
    /// [`Error::InvalidValue`] (nothing taken) when the range cuts one or has a hole.
    fn take_chunks(
        &self,
        addr: u64,
        bytes: u64,
    ) -> Result<Vec<(u64, u64, sys::CUmemGenericAllocationHandle)>> {
        let mut handles = self.handles.lock();
        let whole = handles.tiling(addr, bytes)?;
        for &(a, _, _) in &whole {
            handles.remove(a);
        }
        Ok(whole)
    }
}

impl CudaDevice {
    pub(super) fn raw_stream(&self, s: u64) -> Result<sys::CUstream> {
        if s == 0 {
            return Ok(std::ptr::null_mut());
        }
        self.streams.lock().get(&s).map(|&p| p as sys::CUstream).ok_or_else(|| unknown("stream", s))
    }

    fn raw_event(&self, e: u64) -> Result<sys::CUevent> {
        self.events.lock().get(&e).map(|&p| p as sys::CUevent).ok_or_else(|| unknown("event", e))
    }

    fn handle(&self) -> u64 {
        super::new_handle()
    }
}

fn unknown(what: &str, h: u64) -> Error {
    Error::InvalidValue(format!("{h} is not a {what} of this device (never created, or destroyed)"))
}

/// `Ok(true)` for success, `Ok(false)` for `CUDA_ERROR_NOT_READY`, else the error.
fn ready(r: sys::CUresult, what: &str) -> Result<bool> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        e => Err(device_err(what, result::DriverError(e))),
    }
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

    fn ordinal(&self) -> u32 {
        self.ordinal as u32
    }

    fn cuda_handles(&self) -> Option<(usize, i32)> {
        Some((self.ctx as usize, self.dev))
    }

    /// `cuDeviceCanAccessPeer(this, src)`; when yes, peer access from this context to
    /// `src`'s is enabled here, once (`cuCtxEnablePeerAccess`), so the answer is the path
    /// [`Device::copy_from_peer`] takes.
    fn can_access_peer(&self, src: &dyn Device) -> Result<bool> {
        let Some((sctx, sdev)) = src.cuda_handles() else { return Ok(false) };
        if sdev == self.dev {
            return Ok(true);
        }
        let mut peers = self.peers.lock();
        if let Some(&ok) = peers.get(&sdev) {
            return Ok(ok);
        }
        let mut can = 0;
        // SAFETY: valid out-pointer and devices.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.dev, sdev) }
            .result()
            .map_err(|e| device_err("cuDeviceCanAccessPeer", e))?;
        if can != 0 {
            self.bind()?;
            // SAFETY: `sctx` is the source device's retained primary context.
            match unsafe { sys::cuCtxEnablePeerAccess(sctx as sys::CUcontext, 0) } {
                sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => return Err(device_err("cuCtxEnablePeerAccess", e.result().unwrap_err())),
            }
            log::info!("peer access enabled: device {} reads device {sdev}'s memory", self.ordinal);
        }
        peers.insert(sdev, can != 0);
        Ok(can != 0)
    }

    unsafe fn copy_from_peer(&self, dst: u64, src_dev: &dyn Device, src: u64, bytes: u64) -> Result<()> {
        if !self.can_access_peer(src_dev)? {
            return Err(Error::NotSupported(format!(
                "{} (device {}) cannot access device {}'s memory directly",
                self.name,
                self.ordinal,
                src_dev.ordinal()
            )));
        }
        let (sctx, _) = src_dev.cuda_handles().expect("a CUDA device (can_access_peer said so)");
        self.bind()?;
        // SAFETY: the caller guarantees both ranges; both contexts are retained.
        unsafe { sys::cuMemcpyPeer(dst, self.ctx, src, sctx as sys::CUcontext, bytes as usize) }
            .result()
            .map_err(|e| device_err("cuMemcpyPeer", e))?;
        // cuMemcpyPeer is asynchronous to the host: wait in both contexts, so a free or a
        // host write on either side afterwards cannot overtake it.
        result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))?;
        src_dev.make_current()?;
        result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
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

    fn vm_granularity(&self) -> Result<u64> {
        self.granule()
    }

    fn synchronize_all(&self) -> Result<()> {
        self.bind()?;
        result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
    }

    fn capture_begin(&self, s: u64) -> Result<()> {
        self.graph_capture_begin(s)
    }
    fn capture_end(&self, s: u64) -> Result<u64> {
        self.graph_capture_end(s)
    }
    fn graph_instantiate(&self, g: u64) -> Result<u64> {
        self.graph_instantiate_raw(g)
    }
    fn graph_launch(&self, e: u64, s: u64) -> Result<()> {
        self.graph_launch_raw(e, s)
    }
    fn graph_exec_update(&self, e: u64, g: u64) -> Result<()> {
        self.graph_exec_update_raw(e, g)
    }
    fn graph_destroy(&self, g: u64) -> Result<()> {
        self.graph_destroy_raw(g)
    }
    fn graph_exec_destroy(&self, e: u64) -> Result<()> {
        self.graph_exec_destroy_raw(e)
    }
    fn capture_dependencies(&self, s: u64) -> Result<Vec<u64>> {
        self.capture_dependencies_raw(s)
    }
    fn capture_set_dependencies(&self, s: u64, nodes: &[u64]) -> Result<()> {
        self.capture_set_dependencies_raw(s, nodes)
    }
    fn graph_info(&self, g: u64) -> Result<super::GraphInfo> {
        self.graph_info_raw(g)
    }
    fn graph_programmatic_edges(&self, g: u64, waits: &dyn Fn(u64) -> bool) -> Result<u64> {
        self.graph_programmatic_edges_raw(g, waits)
    }

    fn stream_create(&self, blocking: bool) -> Result<u64> {
        self.bind()?;
        let mut st: sys::CUstream = std::ptr::null_mut();
        let flags = if blocking { 0 } else { sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 };
        // SAFETY: valid out-pointer.
        unsafe { sys::cuStreamCreate(&mut st, flags) }
            .result()
            .map_err(|e| device_err("cuStreamCreate", e))?;
        let h = self.handle();
        self.streams.lock().insert(h, st as u64);
        Ok(h)
    }

    fn stream_destroy(&self, s: u64) -> Result<()> {
        let st = self.streams.lock().remove(&s).ok_or_else(|| unknown("stream", s))?;
        self.bind()?;
        // SAFETY: a stream of ours, now unreachable through its handle.
        unsafe { sys::cuStreamDestroy_v2(st as sys::CUstream) }
            .result()
            .map_err(|e| device_err("cuStreamDestroy", e))
    }

    fn stream_synchronize(&self, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: a live stream of ours or the legacy stream.
        unsafe { sys::cuStreamSynchronize(st) }.result().map_err(|e| device_err("cuStreamSynchronize", e))
    }

    fn stream_query(&self, s: u64) -> Result<bool> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: as above.
        ready(unsafe { sys::cuStreamQuery(st) }, "cuStreamQuery")
    }

    fn stream_raw(&self, s: u64) -> Result<u64> {
        self.raw_stream(s).map(|p| p as u64)
    }

    fn stream_wait_event(&self, s: u64, e: u64) -> Result<()> {
        let (st, ev) = (self.raw_stream(s)?, self.raw_event(e)?);
        self.bind()?;
        // SAFETY: a live stream and event of ours.
        unsafe { sys::cuStreamWaitEvent(st, ev, 0) }.result().map_err(|e| device_err("cuStreamWaitEvent", e))
    }

    fn event_create(&self, timing: bool) -> Result<u64> {
        self.bind()?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        let flags = if timing { 0 } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 };
        // SAFETY: valid out-pointer.
        unsafe { sys::cuEventCreate(&mut ev, flags) }.result().map_err(|e| device_err("cuEventCreate", e))?;
        let h = self.handle();
        self.events.lock().insert(h, ev as u64);
        Ok(h)
    }

    fn event_destroy(&self, e: u64) -> Result<()> {
        let ev = self.events.lock().remove(&e).ok_or_else(|| unknown("event", e))?;
        self.bind()?;
        // SAFETY: an event of ours, now unreachable through its handle.
        unsafe { sys::cuEventDestroy_v2(ev as sys::CUevent) }
            .result()
            .map_err(|e| device_err("cuEventDestroy", e))
    }

    fn event_record(&self, e: u64, s: u64) -> Result<()> {
        let (ev, st) = (self.raw_event(e)?, self.raw_stream(s)?);
        self.bind()?;
        // SAFETY: a live event and stream of ours.
        unsafe { sys::cuEventRecord(ev, st) }.result().map_err(|e| device_err("cuEventRecord", e))
    }

    fn event_query(&self, e: u64) -> Result<bool> {
        let ev = self.raw_event(e)?;
        self.bind()?;
        // SAFETY: a live event of ours.
        ready(unsafe { sys::cuEventQuery(ev) }, "cuEventQuery")
    }

    fn event_synchronize(&self, e: u64) -> Result<()> {
        let ev = self.raw_event(e)?;
        self.bind()?;
        // SAFETY: a live event of ours.
        unsafe { sys::cuEventSynchronize(ev) }.result().map_err(|e| device_err("cuEventSynchronize", e))
    }

    fn event_elapsed_ms(&self, start: u64, end: u64) -> Result<f32> {
        let (a, b) = (self.raw_event(start)?, self.raw_event(end)?);
        self.bind()?;
        let mut ms = 0f32;
        // SAFETY: valid out-pointer, live events of ours.
        match unsafe { sys::cuEventElapsedTime(&mut ms, a, b) } {
            sys::CUresult::CUDA_SUCCESS => Ok(ms),
            sys::CUresult::CUDA_ERROR_NOT_READY => {
                Err(Error::InvalidValue(format!("event {start} or {end} has not completed yet")))
            }
            sys::CUresult::CUDA_ERROR_INVALID_HANDLE => Err(Error::InvalidValue(format!(
                "event {start} or {end} was never recorded or was created without timing"
            ))),
            e => Err(device_err("cuEventElapsedTime", result::DriverError(e))),
        }
    }

    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: the caller keeps both ranges valid until the copy has run.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src as *const std::ffi::c_void, bytes as usize, st) }
            .result()
            .map_err(|e| device_err("cuMemcpyHtoDAsync", e))
    }

    unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: the caller keeps both ranges valid until the copy has run.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst as *mut std::ffi::c_void, src, bytes as usize, st) }
            .result()
            .map_err(|e| device_err("cuMemcpyDtoHAsync", e))
    }

    unsafe fn memset_async(&self, dst: u64, pattern: u32, elsize: u32, count: u64, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        let n = count as usize;
        // SAFETY: the caller keeps the range valid until the memset has run and aligns
        // `dst` to `elsize`.
        let (r, what) = unsafe {
            match elsize {
                1 => (sys::cuMemsetD8Async(dst, pattern as u8, n, st), "cuMemsetD8Async"),
                2 => (sys::cuMemsetD16Async(dst, pattern as u16, n, st), "cuMemsetD16Async"),
                _ => (sys::cuMemsetD32Async(dst, pattern, n, st), "cuMemsetD32Async"),
            }
        };
        r.result().map_err(|e| device_err(what, e))
    }

    unsafe fn copy_dtod_async(&self, dst: u64, src: u64, bytes: u64, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: the caller keeps both ranges valid until the copy has run.
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, st) }
            .result()
            .map_err(|e| device_err("cuMemcpyDtoDAsync", e))
    }

    fn vm_reserve(&self, bytes: u64) -> Result<u64> {
        let g = self.check_granules(0, bytes)?;
        self.bind()?;
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; no fixed address asked.
        unsafe { sys::cuMemAddressReserve(&mut base, bytes as usize, g as usize, 0, 0) }
            .result()
            .map_err(|e| vm_err("cuMemAddressReserve", bytes, e))?;
        Ok(base)
    }

    unsafe fn vm_release(&self, base: u64, bytes: u64) -> Result<()> {
        self.check_granules(base, bytes)?;
        self.bind()?;
        // SAFETY: the caller guarantees an unmapped range of `vm_reserve`.
        unsafe { sys::cuMemAddressFree(base, bytes as usize) }
            .result()
            .map_err(|e| device_err("cuMemAddressFree", e))
    }

    /// One physical allocation for the whole range: `cuMemCreate` of `bytes`, one
    /// `cuMemMap`, one `cuMemSetAccess` (three driver calls however many granules), so
    /// the range unmaps and moves only whole ([`Device::vm_unmap`]).
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> Result<()> {
        self.check_granules(addr, bytes)?;
        if !self.handles.lock().is_free(addr, bytes) {
            return Err(Error::InvalidValue(format!("{addr:#x}+{bytes} is mapped already")));
        }
        self.bind()?;
        let prop = self.prop();
        let mut h: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: valid out-pointer and property struct; `bytes` is whole granules.
        unsafe { sys::cuMemCreate(&mut h, bytes as usize, &prop, 0) }
            .result()
            .map_err(|e| vm_err("cuMemCreate", bytes, e))?;
        // SAFETY: `[addr, addr+bytes)` is reserved and unmapped; `h` a fresh allocation of
        // `bytes`.
        if let Err(e) = unsafe { sys::cuMemMap(addr, bytes as usize, 0, h, 0) }.result() {
            // SAFETY: `h` is mapped nowhere.
            unsafe { sys::cuMemRelease(h) };
            return Err(vm_err("cuMemMap", bytes, e));
        }
        let desc = sys::CUmemAccessDesc {
            location: prop.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the whole range is mapped; one descriptor.
        if let Err(e) = unsafe { sys::cuMemSetAccess(addr, bytes as usize, &desc, 1) }.result() {
            // Leave nothing mapped: the caller counts the range as unmapped.
            if let Err(u) = Self::release_chunks(&[(addr, bytes, h)]) {
                log::error!("undoing a failed mapping at {addr:#x}: {u}");
            }
            return Err(vm_err("cuMemSetAccess", bytes, e));
        }
        self.handles.lock().insert(addr, bytes, h)
    }

    /// The range must be whole allocations of `vm_map` (one or several neighbours):
    /// [`Error::InvalidValue`] otherwise, before anything is unmapped.
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> Result<()> {
        self.check_granules(addr, bytes)?;
        let chunks = self.take_chunks(addr, bytes)?;
        let synced = self.bind().and_then(|()| {
            // Kernels may still use the memory (frees are not stream-ordered here):
            // cuMemFree waits for the device implicitly, cuMemUnmap is not documented to.
            result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e))
        });
        // The memory is gone for the caller either way.
        let r = Self::release_chunks(&chunks);
        synced.and(r)
    }

    /// Whole allocations only (as `vm_unmap`); each is mapped at the same offset in `to`
    /// (`cuMemUnmap` + `cuMemMap` of its handle), one `cuMemSetAccess` over `to`.
    unsafe fn vm_move(&self, from: u64, to: u64, bytes: u64) -> Result<()> {
        self.check_granules(from, bytes)?;
        self.check_granules(to, bytes)?;
        if from.max(to) < from.min(to) + bytes {
            return Err(Error::InvalidValue(format!(
                "moving {bytes} bytes from {from:#x} onto itself at {to:#x}"
            )));
        }
        if !self.handles.lock().is_free(to, bytes) {
            return Err(Error::InvalidValue(format!("moving onto {to:#x}+{bytes}, which is mapped")));
        }
        let chunks = self.take_chunks(from, bytes)?;
        // As in `vm_unmap`: kernels may still use the memory at `from`.
        if let Err(e) = self
            .bind()
            .and_then(|()| result::ctx::synchronize().map_err(|e| device_err("cuCtxSynchronize", e)))
        {
            // Keep the contract: nothing of `from` stays mapped.
            let _ = Self::release_chunks(&chunks);
            return Err(e);
        }
        let mut moved: Vec<(u64, u64, sys::CUmemGenericAllocationHandle)> = Vec::new();
        let mut r = Ok(());
        for (k, &(a, b, h)) in chunks.iter().enumerate() {
            let at = to + (a - from);
            // SAFETY: `a` is where `h` is mapped (whole), unused.
            if let Err(e) = unsafe { sys::cuMemUnmap(a, b as usize) }.result() {
                // This one and those not moved yet are released where they are.
                let _ = Self::release_chunks(&chunks[k..]);
                r = Err(device_err("cuMemUnmap", e));
                break;
            }
            // SAFETY: `at` is reserved and unmapped; `h` is mapped nowhere now.
            if let Err(e) = unsafe { sys::cuMemMap(at, b as usize, 0, h, 0) }.result() {
                // SAFETY: `h` is mapped nowhere.
                unsafe { sys::cuMemRelease(h) };
                let _ = Self::release_chunks(&chunks[k + 1..]);
                r = Err(device_err("cuMemMap", e));
                break;
            }
            moved.push((at, b, h));
        }
        if r.is_ok() {
            let desc = sys::CUmemAccessDesc {
                location: self.prop().location,
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: the whole range `to` is mapped; one descriptor.
            r = unsafe { sys::cuMemSetAccess(to, bytes as usize, &desc, 1) }
                .result()
                .map_err(|e| vm_err("cuMemSetAccess", bytes, e));
        }
        if r.is_err() {
            // Leave nothing of either range mapped.
            let _ = Self::release_chunks(&moved);
            return r;
        }
        let mut handles = self.handles.lock();
        for (at, b, h) in moved {
            handles.insert(at, b, h)?;
        }
        Ok(())
    }
}

//! Devices: where memory comes from. The pools never call a device directly; they go
//! through [`crate::upstream::Upstream`], which adds the limit and the device counters.

mod chunks;
mod cuda;
mod cuda_graphs;
mod faulty;
mod host;
mod host_stream;
mod pinned;

pub use crate::config::FaultSpec;

/// The shape of a captured graph ([`Device::graph_info`]; C: `cumem_graph_info_t`, 64
/// bytes): what one replay runs and how much of it must run one after another.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphInfo {
    /// Nodes in all.
    pub nodes: u64,
    /// Kernel nodes (CuMem's kernels and the libraries', e.g. cuBLAS's).
    pub kernels: u64,
    /// Memory-copy nodes.
    pub memcpys: u64,
    /// Memset nodes.
    pub memsets: u64,
    /// Nodes of every other kind (host, empty, event, child-graph, memory nodes).
    pub others: u64,
    /// Dependency edges.
    pub edges: u64,
    /// Nodes on the longest dependency chain: the ones a replay runs one after another
    /// (equal to `nodes` for a graph captured as one chain).
    pub depth: u64,
    /// Of the edges, the programmatic ones (`CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`, CUDA
    /// 12.3): a kernel launched with programmatic dependent launch under capture (see
    /// `cumem_kernel_uses_pdl`) may start before the kernel it depends on ends, and waits
    /// for it in its `griddepcontrol.wait`. 0 on drivers older than CUDA 12.3.
    pub programmatic: u64,
}

pub use cuda::CudaDevice;
pub use faulty::FaultyDevice;
pub use host::{HOST_VM_GRANULE, HostDevice};
pub use pinned::{
    CudaPinnedDevice, CudaRegistrar, HostRegistrar, LockedHostDevice, NoRegistrar, host_memory, open_pinned,
};

use crate::config::{Config, DeviceChoice};
use crate::error::{Error, Result};

/// A new stream or event handle, unique in the process across every device (and never 0,
/// the default stream). Each device keeps its own table of handles; because no two
/// devices hand out the same number, a handle given to another device is refused as
/// unknown, never taken for one of that device's own, and the C ABI can find the device
/// a handle belongs to (src/ffi/streams.rs, `on_handle_owner`).
pub(crate) fn new_handle() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A source of device memory: CUDA's driver or host memory standing in for it.
///
/// Pointers are device addresses as `u64`. Implementations are thread-safe; the CUDA
/// device makes its context current on whichever thread calls.
pub trait Device: Send + Sync {
    /// A short description, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"`.
    fn name(&self) -> &str;
    /// True for the host device (memory readable through its address on the CPU).
    fn is_host(&self) -> bool;
    /// Obtains `bytes` (> 0) of memory aligned to at least 256 bytes. Errors:
    /// [`Error::OutOfMemory`] when the device is full, [`Error::Device`] otherwise.
    fn alloc(&self, bytes: u64) -> Result<u64>;
    /// Returns memory obtained by [`Device::alloc`] with the same `bytes`.
    ///
    /// # Safety
    /// `ptr` must come from `alloc(bytes)` of this device and not have been freed.
    unsafe fn free(&self, ptr: u64, bytes: u64) -> Result<()>;
    /// `(free, total)` bytes of the device, as `cuMemGetInfo`.
    fn mem_info(&self) -> Result<(u64, u64)>;
    /// Copies `bytes` from host memory `src` to device address `dst`.
    ///
    /// # Safety
    /// `src` must be readable for `bytes`; `[dst, dst+bytes)` must be device memory.
    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> Result<()>;
    /// Copies `bytes` from device address `src` to host memory `dst`.
    ///
    /// # Safety
    /// `dst` must be writable for `bytes`; `[src, src+bytes)` must be device memory.
    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> Result<()>;
    /// Copies `bytes` between device addresses (the ranges may overlap).
    ///
    /// # Safety
    /// Both ranges must be device memory.
    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()>;
    /// Sets `bytes` bytes at `dst` to `value`.
    ///
    /// # Safety
    /// `[dst, dst+bytes)` must be device memory.
    unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()>;
    /// Makes the device's CUDA context current on the calling thread, for callers that
    /// use the driver beyond this trait (kernels and cuBLAS, `crate::compute`). The host
    /// device has nothing to bind. Errors: [`Error::Device`] when `cuCtxSetCurrent` fails.
    fn make_current(&self) -> Result<()> {
        Ok(())
    }

    /// The device's ordinal: CUDA's device number, or the stand-in's index under
    /// `CUMEM_DEVICE=host:N` (0 for a single device).
    fn ordinal(&self) -> u32 {
        0
    }

    /// The CUDA primary context (as an address) and `CUdevice` behind this device, for
    /// peer copies between two CUDA devices; `None` on the host device.
    fn cuda_handles(&self) -> Option<(usize, i32)> {
        None
    }

    /// Whether [`Device::copy_from_peer`] can copy from `src`'s memory directly: on CUDA
    /// `cuDeviceCanAccessPeer` (an NVLink or PCIe peer path between the two GPUs); between
    /// host stand-ins always (one address space). Default: no. Errors: [`Error::Device`].
    fn can_access_peer(&self, src: &dyn Device) -> Result<bool> {
        let _ = src;
        Ok(false)
    }

    /// Copies `bytes` from `src` (memory of device `src_dev`) to `dst` (memory of this
    /// device) without passing through the host: on CUDA `cuCtxEnablePeerAccess` (once
    /// per pair) and `cuMemcpyPeer`, then both contexts synchronised; between host
    /// stand-ins a `memcpy`. Errors: [`Error::NotSupported`] when
    /// [`Device::can_access_peer`] is false (the default), [`Error::Device`].
    ///
    /// # Safety
    /// `[dst, dst+bytes)` must be memory of this device, `[src, src+bytes)` of `src_dev`.
    unsafe fn copy_from_peer(&self, dst: u64, src_dev: &dyn Device, src: u64, bytes: u64) -> Result<()> {
        let _ = (dst, src, bytes);
        Err(Error::NotSupported(format!(
            "{} cannot read the memory of {} directly",
            self.name(),
            src_dev.name()
        )))
    }

    /// Waits until all work queued on the device, on every stream, is done
    /// (`cuCtxSynchronize`). Errors: [`Error::Device`], also how a kernel's fault shows.
    fn synchronize_all(&self) -> Result<()> {
        Ok(())
    }

    // Streams and events. Handles are the device's own small integers, never reused; 0
    // is CUDA's legacy default stream, on which the synchronous calls above run. An
    // unknown handle is [`Error::InvalidValue`]; a device without streams answers
    // [`Error::NotSupported`] (the default).

    /// Creates a stream (`cuStreamCreate`): `blocking` false gives
    /// `CU_STREAM_NON_BLOCKING` (no implicit synchronisation with the legacy stream, as
    /// PyTorch's streams), true CUDA's default flags.
    fn stream_create(&self, blocking: bool) -> Result<u64> {
        let _ = blocking;
        Err(no_streams(self.name()))
    }
    /// Destroys stream `s` (`cuStreamDestroy`); work queued on it still runs.
    fn stream_destroy(&self, s: u64) -> Result<()> {
        let _ = s;
        Err(no_streams(self.name()))
    }
    /// Waits until the work queued on `s` is done (`cuStreamSynchronize`).
    fn stream_synchronize(&self, s: u64) -> Result<()> {
        let _ = s;
        Err(no_streams(self.name()))
    }
    /// Whether the work queued on `s` is done (`cuStreamQuery`).
    fn stream_query(&self, s: u64) -> Result<bool> {
        let _ = s;
        Err(no_streams(self.name()))
    }
    /// The driver's `CUstream` of `s` (0 for the legacy stream), for kernel launches.
    fn stream_raw(&self, s: u64) -> Result<u64> {
        let _ = s;
        Err(no_streams(self.name()))
    }
    /// Makes later work on `s` wait until event `e`, as last recorded, has completed
    /// (`cuStreamWaitEvent`); an event never recorded is complete.
    fn stream_wait_event(&self, s: u64, e: u64) -> Result<()> {
        let _ = (s, e);
        Err(no_streams(self.name()))
    }
    /// Queues a wait of `ns` nanoseconds on `s`: the deliberately slow operation of the
    /// ordering tests (host: a sleep on the stream's worker; CUDA: not here, the compute
    /// layer launches a spinning kernel).
    fn stream_sleep(&self, s: u64, ns: u64) -> Result<()> {
        let _ = (s, ns);
        Err(no_streams(self.name()))
    }
    // Graphs (stream capture). The defaults are those of a device whose operations are
    // recorded above it (the host device: the Julia package records and replays host
    // compute): a capture is a mark on a stream, graphs and executables are fresh handles
    // and a launch does nothing here. CudaDevice captures with the driver (cuda_graphs.rs).

    /// Starts capturing stream `s` (`cuStreamBeginCapture`, relaxed mode).
    fn capture_begin(&self, s: u64) -> Result<()> {
        self.stream_raw(s).map(drop)
    }
    /// Ends the capture of `s` (`cuStreamEndCapture`) and returns the device's graph.
    fn capture_end(&self, s: u64) -> Result<u64> {
        self.stream_raw(s).map(|_| new_handle())
    }
    /// Instantiates graph `g` (`cuGraphInstantiateWithFlags`, no flags).
    fn graph_instantiate(&self, g: u64) -> Result<u64> {
        let _ = g;
        Ok(new_handle())
    }
    /// Queues executable `e` on stream `s` (`cuGraphLaunch`).
    fn graph_launch(&self, e: u64, s: u64) -> Result<()> {
        let _ = e;
        self.stream_raw(s).map(drop)
    }
    /// Updates executable `e` from graph `g` (`cuGraphExecUpdate`): [`Error::InvalidValue`]
    /// when the topology differs.
    fn graph_exec_update(&self, e: u64, g: u64) -> Result<()> {
        let _ = (e, g);
        Ok(())
    }
    /// Destroys graph `g` (`cuGraphDestroy`).
    fn graph_destroy(&self, g: u64) -> Result<()> {
        let _ = g;
        Ok(())
    }
    /// Destroys executable `e` (`cuGraphExecDestroy`).
    fn graph_exec_destroy(&self, e: u64) -> Result<()> {
        let _ = e;
        Ok(())
    }
    /// The nodes that work queued next on `s`, which is being captured, will depend on
    /// (`cuStreamGetCaptureInfo`): right after an operation, its last nodes. Devices
    /// whose graphs are recorded above them (the host device) have no nodes: empty.
    fn capture_dependencies(&self, s: u64) -> Result<Vec<u64>> {
        self.stream_raw(s).map(|_| Vec::new())
    }
    /// Makes `nodes` (of [`Device::capture_dependencies`] of the same capture) the
    /// dependencies of the work queued next on `s` (`cuStreamUpdateCaptureDependencies`,
    /// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`); nothing on the host device.
    fn capture_set_dependencies(&self, s: u64, nodes: &[u64]) -> Result<()> {
        let _ = nodes;
        self.stream_raw(s).map(drop)
    }
    /// Graph `g`'s nodes by kind, its edges and its longest chain (`cuGraphGetNodes`,
    /// `cuGraphNodeGetType`, `cuGraphGetEdges`); all 0 on the host device, whose graphs
    /// hold no nodes here.
    fn graph_info(&self, g: u64) -> Result<GraphInfo> {
        let _ = g;
        Ok(GraphInfo::default())
    }
    /// Makes programmatic (CUDA 12.3 edge data: `CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`
    /// from `CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC`) every default edge of graph `g` from a
    /// kernel node into a kernel node whose `CUfunction` `waits` says starts with
    /// `griddepcontrol.wait`: the edges a capture set explicitly
    /// ([`Device::capture_set_dependencies`]) where a launch with programmatic dependent
    /// launch would have made them programmatic in the stream's order. Returns how many it
    /// changed; 0 on the host device. An edge the driver refuses to change is put back as
    /// it was (the graph stays correct, without the overlap there).
    fn graph_programmatic_edges(&self, g: u64, waits: &dyn Fn(u64) -> bool) -> Result<u64> {
        let _ = (g, waits);
        Ok(0)
    }
    /// Creates an event (`cuEventCreate`), with timing (for [`Device::event_elapsed_ms`])
    /// or without (`CU_EVENT_DISABLE_TIMING`, cheaper: the engine's own events).
    fn event_create(&self, timing: bool) -> Result<u64> {
        let _ = timing;
        Err(no_streams(self.name()))
    }
    /// Destroys event `e` (`cuEventDestroy`).
    fn event_destroy(&self, e: u64) -> Result<()> {
        let _ = e;
        Err(no_streams(self.name()))
    }
    /// Records `e` on stream `s` (`cuEventRecord`): it completes once the work queued
    /// on `s` before it is done.
    fn event_record(&self, e: u64, s: u64) -> Result<()> {
        let _ = (e, s);
        Err(no_streams(self.name()))
    }
    /// Whether `e` has completed (`cuEventQuery`); true if never recorded.
    fn event_query(&self, e: u64) -> Result<bool> {
        let _ = e;
        Err(no_streams(self.name()))
    }
    /// Waits until `e` has completed (`cuEventSynchronize`).
    fn event_synchronize(&self, e: u64) -> Result<()> {
        let _ = e;
        Err(no_streams(self.name()))
    }
    /// Milliseconds between two completed timing events (`cuEventElapsedTime`).
    fn event_elapsed_ms(&self, start: u64, end: u64) -> Result<f32> {
        let _ = (start, end);
        Err(no_streams(self.name()))
    }
    /// Queues a copy of `bytes` from host memory `src` to device address `dst` on
    /// stream `s` (`cuMemcpyHtoDAsync`) and returns; from pageable memory CUDA copies
    /// before returning, from page-locked memory later.
    ///
    /// # Safety
    /// `src` must stay readable, and `[dst, dst+bytes)` device memory, until the copy
    /// has run.
    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, s: u64) -> Result<()> {
        let _ = (dst, src, bytes, s);
        Err(no_streams(self.name()))
    }
    /// Queues a copy of `bytes` from device address `src` to host memory `dst` on
    /// stream `s` (`cuMemcpyDtoHAsync`).
    ///
    /// # Safety
    /// `dst` must stay writable, and `[src, src+bytes)` device memory, until the copy
    /// has run.
    unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, s: u64) -> Result<()> {
        let _ = (dst, src, bytes, s);
        Err(no_streams(self.name()))
    }

    /// Queues setting `count` elements of `elsize` bytes (1, 2 or 4) at `dst` to the low
    /// `elsize` bytes of `pattern` on stream `s` (`cuMemsetD8Async`, `cuMemsetD16Async`,
    /// `cuMemsetD32Async`) and returns; the host device runs it in the stream's order
    /// (at once on the default stream, as CUDA's legacy stream would have it done).
    ///
    /// # Safety
    /// `[dst, dst+count*elsize)` must be device memory until the memset has run; `dst`
    /// must be aligned to `elsize`, which must be 1, 2 or 4.
    unsafe fn memset_async(&self, dst: u64, pattern: u32, elsize: u32, count: u64, s: u64) -> Result<()> {
        let _ = (dst, pattern, elsize, count, s);
        Err(no_streams(self.name()))
    }
    /// Queues a copy of `bytes` between device addresses of this device on stream `s`
    /// (`cuMemcpyDtoDAsync`; the ranges may overlap) and returns.
    ///
    /// # Safety
    /// Both ranges must be device memory until the copy has run.
    unsafe fn copy_dtod_async(&self, dst: u64, src: u64, bytes: u64, s: u64) -> Result<()> {
        let _ = (dst, src, bytes, s);
        Err(no_streams(self.name()))
    }

    /// Virtual memory: the granule, in bytes (a power of two), to which every
    /// [`Device::vm_reserve`], [`Device::vm_map`] and [`Device::vm_unmap`] size and
    /// address are aligned: `cuMemGetAllocationGranularity` (2 MiB on current GPUs) on
    /// CUDA, 2 MiB on the host device so that its figures match a GPU's. Errors:
    /// [`Error::Device`] when the device cannot map memory on demand (the default).
    fn vm_granularity(&self) -> Result<u64> {
        Err(Error::Device(format!("{} does not support virtual memory management", self.name())))
    }

    /// Reserves `bytes` (a multiple of the granularity) of address space with no memory
    /// behind it (`cuMemAddressReserve`, host: `mmap(PROT_NONE)`). Returns its base,
    /// aligned to the granularity. Errors: [`Error::OutOfMemory`] when no address range
    /// is left, [`Error::Device`] otherwise.
    fn vm_reserve(&self, bytes: u64) -> Result<u64> {
        let _ = bytes;
        Err(Error::Device(format!("{} does not support virtual memory management", self.name())))
    }

    /// Returns an address range of [`Device::vm_reserve`] (`cuMemAddressFree`, host:
    /// `munmap`).
    ///
    /// # Safety
    /// `[base, base+bytes)` must be exactly one reserved range, with nothing mapped.
    unsafe fn vm_release(&self, base: u64, bytes: u64) -> Result<()> {
        let _ = (base, bytes);
        Ok(())
    }

    /// Backs `[addr, addr+bytes)` (granule-aligned, inside a reserved range, nothing
    /// mapped there) with one physical allocation readable and writable by this device
    /// (CUDA: one `cuMemCreate` of `bytes`, one `cuMemMap`, one `cuMemSetAccess`,
    /// however many granules; host: one `mprotect`). The allocation unmaps and moves only
    /// whole ([`Device::vm_unmap`]), so a caller that wants to give granules back one at
    /// a time maps them one at a time. On error nothing stays mapped. Errors:
    /// [`Error::OutOfMemory`] when the device is full, [`Error::InvalidValue`] when part
    /// of the range is mapped, [`Error::Device`] otherwise.
    ///
    /// # Safety
    /// The range must lie in a range reserved by this device and not be mapped.
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> Result<()> {
        let _ = (addr, bytes);
        Err(Error::Device(format!("{} does not support virtual memory management", self.name())))
    }

    /// Returns the physical memory behind `[addr, addr+bytes)` to the device, leaving
    /// the addresses reserved (`cuMemUnmap` + `cuMemRelease` per allocation after the
    /// device's work is done; host: `madvise(MADV_DONTNEED)` + `mprotect(PROT_NONE)`).
    /// The range must be whole allocations of [`Device::vm_map`] (one, or several that
    /// are neighbours), as `cuMemUnmap` takes whole mappings: a range that starts or ends
    /// inside one, or has a hole, fails with [`Error::InvalidValue`] and nothing is
    /// unmapped.
    ///
    /// # Safety
    /// The range must be mapped and no longer used.
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> Result<()> {
        let _ = (addr, bytes);
        Err(Error::Device(format!("{} does not support virtual memory management", self.name())))
    }

    /// Moves the physical memory behind `[from, from+bytes)` (whole allocations of
    /// [`Device::vm_map`], as for [`Device::vm_unmap`], no longer used; each keeps its
    /// extent at the same offset from `to`) to `[to, to+bytes)` (granule-aligned,
    /// reserved, not mapped), leaving `from` reserved and unmapped: what
    /// [`Device::vm_unmap`] of `from` and [`Device::vm_map`] of `to` do, without returning
    /// the memory to the device and obtaining it again. On CUDA, after the device's work
    /// is done, `cuMemUnmap` and `cuMemMap` of the same allocation handle per allocation
    /// and one `cuMemSetAccess`, no `cuMemRelease` / `cuMemCreate` (the physical allocation
    /// that the pool would release and create again); elsewhere (the default, the host
    /// device) `vm_unmap` then `vm_map`. The contents of the memory are not defined
    /// after the move. On error nothing of either range stays mapped (the memory of
    /// `from` is returned to the device). Errors: as [`Device::vm_unmap`] and
    /// [`Device::vm_map`].
    ///
    /// # Safety
    /// As [`Device::vm_unmap`] for `from` and [`Device::vm_map`] for `to`; the ranges do
    /// not overlap.
    unsafe fn vm_move(&self, from: u64, to: u64, bytes: u64) -> Result<()> {
        // SAFETY: the caller's guarantees, range by range.
        unsafe {
            self.vm_unmap(from, bytes)?;
            self.vm_map(to, bytes)
        }
    }
}

/// Opens device 0 of what `cfg.device` asks for (`CUMEM_DEVICE`). `Auto` takes CUDA
/// device 0 when libcuda loads and reports a GPU, else the host device with one logged
/// warning. With `CUMEM_FAULT` set (`cfg.fault`) the device is wrapped in a
/// [`FaultyDevice`]. Errors: [`Error::Device`] when `Cuda` is asked for and none is usable.
pub fn open(cfg: &Config) -> Result<Box<dyn Device>> {
    let dev = open_plain(cfg)?;
    Ok(wrap(cfg, dev))
}

/// Opens device `ordinal` of the kind that device 0 turned out to be: a host stand-in
/// (`host`, the `CUMEM_DEVICE=host:N` devices; `auto` without a GPU) or CUDA device
/// `ordinal`, wrapped as [`open`] does. Errors: [`Error::InvalidValue`] for an ordinal
/// past [`count`], [`Error::Device`] when the GPU cannot be opened.
pub fn open_ordinal(cfg: &Config, ordinal: u32, host: bool) -> Result<Box<dyn Device>> {
    let n = count(cfg, host)?;
    if ordinal >= n {
        return Err(Error::InvalidValue(format!(
            "there is no device {ordinal}: {n} device{} (ordinals 0 to {}; CUMEM_DEVICE)",
            if n == 1 { "" } else { "s" },
            n - 1
        )));
    }
    let dev: Box<dyn Device> = if host {
        Box::new(HostDevice::with_ordinal(
            cfg.host_capacity.map(|a| a.resolve(host::physical_memory())),
            ordinal,
        ))
    } else {
        Box::new(CudaDevice::new(ordinal as i32)?)
    };
    Ok(wrap(cfg, dev))
}

/// The number of devices: `N` of `CUMEM_DEVICE=host:N` (1 for `host`) when device 0 is a
/// host stand-in (`host`), else CUDA's device count (`cuDeviceGetCount`), at most
/// [`crate::config::MAX_DEVICES`]. Errors: [`Error::Device`] when the driver fails.
pub fn count(cfg: &Config, host: bool) -> Result<u32> {
    if host {
        return Ok(cfg.host_devices.max(1));
    }
    let n = cudarc::driver::result::device::get_count().map_err(|e| device_err("cuDeviceGetCount", e))?;
    Ok((n.max(0) as u32).min(crate::config::MAX_DEVICES))
}

fn wrap(cfg: &Config, dev: Box<dyn Device>) -> Box<dyn Device> {
    match cfg.fault {
        Some(spec) => {
            if dev.ordinal() == 0 {
                log::warn!("CUMEM_FAULT: device calls fail on purpose ({spec:?})");
            }
            Box::new(FaultyDevice::new(dev, spec))
        }
        None => dev,
    }
}

fn open_plain(cfg: &Config) -> Result<Box<dyn Device>> {
    let host = || -> Result<Box<dyn Device>> {
        Ok(Box::new(HostDevice::with_ordinal(
            cfg.host_capacity.map(|a| a.resolve(host::physical_memory())),
            0,
        )))
    };
    match cfg.device {
        DeviceChoice::Host => host(),
        DeviceChoice::Cuda => Ok(Box::new(CudaDevice::new(0)?)),
        DeviceChoice::Auto => match CudaDevice::new(0) {
            Ok(d) => Ok(Box::new(d)),
            Err(e) => {
                log::warn!("no usable CUDA GPU ({e}); CuMem uses host memory standing in for a GPU");
                host()
            }
        },
    }
}

fn no_streams(name: &str) -> Error {
    Error::NotSupported(format!("{name} has no streams"))
}

pub(crate) fn device_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Device(format!("{what} failed: {e}"))
}

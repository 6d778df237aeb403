//! Stream capture and CUDA graphs on [`CudaDevice`] through cudarc's `sys` layer
//! (`cuStreamBeginCapture_v2`, `cuStreamEndCapture`, `cuGraphInstantiateWithFlags`,
//! `cuGraphLaunch`, `cuGraphExecUpdate_v2`, `cuGraphDestroy`, `cuGraphExecDestroy`).
//! Graphs and executables are the driver's pointers as `u64`; the engine
//! (`src/engine/graphs.rs`) keeps them behind handles of its own.

use super::CudaDevice;
use crate::device::device_err;
use crate::error::{Error, Result};
use cudarc::driver::sys;

impl CudaDevice {
    /// `cuStreamBeginCapture` of stream `s` in relaxed mode: the engine must be able to
    /// grow the graph's pool (`cuMemAlloc`) and load kernels during the capture, which the
    /// stricter modes refuse (PyTorch's allocator switches to relaxed mode around its
    /// `cudaMalloc` for the same reason); the Julia package refuses the calls that would
    /// conflict with the capture (synchronisations, synchronous copies) before they reach
    /// the driver, and the driver still refuses those that necessarily conflict with it.
    pub(super) fn graph_capture_begin(&self, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: a live stream of ours.
        unsafe { sys::cuStreamBeginCapture_v2(st, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED) }
            .result()
            .map_err(|e| device_err("cuStreamBeginCapture", e))
    }

    /// `cuStreamEndCapture` of `s`: the captured graph, or the error that invalidated it.
    pub(super) fn graph_capture_end(&self, s: u64) -> Result<u64> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        let mut g: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: a live stream of ours under capture; valid out-pointer.
        unsafe { sys::cuStreamEndCapture(st, &mut g) }
            .result()
            .map_err(|e| device_err("cuStreamEndCapture (the capture was invalidated)", e))?;
        Ok(g as u64)
    }

    /// `cuGraphInstantiateWithFlags(g, 0)`.
    pub(super) fn graph_instantiate_raw(&self, g: u64) -> Result<u64> {
        self.bind()?;
        let mut e: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: `g` is a graph of ours (the engine checked the handle).
        unsafe { sys::cuGraphInstantiateWithFlags(&mut e, g as sys::CUgraph, 0) }
            .result()
            .map_err(|err| device_err("cuGraphInstantiateWithFlags", err))?;
        Ok(e as u64)
    }

    /// `cuGraphLaunch(e, s)`.
    pub(super) fn graph_launch_raw(&self, e: u64, s: u64) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        // SAFETY: an executable of ours and a live stream.
        unsafe { sys::cuGraphLaunch(e as sys::CUgraphExec, st) }
            .result()
            .map_err(|err| device_err("cuGraphLaunch", err))
    }

    /// `cuGraphExecUpdate_v2(e, g)`; a refused update (another topology) is
    /// [`Error::InvalidValue`] and leaves `e` as it was.
    pub(super) fn graph_exec_update_raw(&self, e: u64, g: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: zeroed plain-data out-record.
        let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
        // SAFETY: an executable and a graph of ours.
        match unsafe { sys::cuGraphExecUpdate_v2(e as sys::CUgraphExec, g as sys::CUgraph, &mut info) } {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            sys::CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE => Err(Error::InvalidValue(format!(
                "the graph cannot update the executable: its topology differs (cuGraphExecUpdate: {:?})",
                info.result
            ))),
            r => Err(device_err("cuGraphExecUpdate", r.result().unwrap_err())),
        }
    }

    /// `cuGraphDestroy(g)`.
    pub(super) fn graph_destroy_raw(&self, g: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: a graph of ours, no longer reachable through its handle.
        unsafe { sys::cuGraphDestroy(g as sys::CUgraph) }
            .result()
            .map_err(|err| device_err("cuGraphDestroy", err))
    }

    /// `cuGraphExecDestroy(e)`: an executable still running is freed by the driver when
    /// it completes, so no synchronisation (which would break a capture under way on this
    /// thread, where a finalizer may run).
    pub(super) fn graph_exec_destroy_raw(&self, e: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: an executable of ours, no longer reachable through its handle.
        unsafe { sys::cuGraphExecDestroy(e as sys::CUgraphExec) }
            .result()
            .map_err(|err| device_err("cuGraphExecDestroy", err))
    }
}

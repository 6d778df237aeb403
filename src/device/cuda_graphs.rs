//! Stream capture and CUDA graphs on [`CudaDevice`] through cudarc's `sys` layer
//! (`cuStreamBeginCapture_v2`, `cuStreamEndCapture`, `cuGraphInstantiateWithFlags`,
//! `cuGraphLaunch`, `cuGraphExecUpdate_v2`, `cuGraphDestroy`, `cuGraphExecDestroy`).
//! Graphs and executables are the driver's pointers as `u64`; the engine
//! (`src/engine/graphs.rs`) keeps them behind handles of its own.

use super::CudaDevice;
use super::GraphInfo;
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

/// `cuStreamGetCaptureInfo_v2`: (stream, status, id, graph, dependencies, count).
type CaptureInfoV2 = unsafe extern "C" fn(
    sys::CUstream,
    *mut i32,
    *mut u64,
    *mut sys::CUgraph,
    *mut *const sys::CUgraphNode,
    *mut usize,
) -> sys::CUresult;
/// `cuStreamGetCaptureInfo_v3` (CUDA 12.3): v2 with the edges' data (asked as null).
type CaptureInfoV3 = unsafe extern "C" fn(
    sys::CUstream,
    *mut i32,
    *mut u64,
    *mut sys::CUgraph,
    *mut *const sys::CUgraphNode,
    *mut *const std::ffi::c_void,
    *mut usize,
) -> sys::CUresult;
/// `cuStreamUpdateCaptureDependencies`: (stream, nodes, count, flags).
type UpdateDepsV1 = unsafe extern "C" fn(sys::CUstream, *mut sys::CUgraphNode, usize, u32) -> sys::CUresult;
/// `cuStreamUpdateCaptureDependencies_v2` (CUDA 12.3): with the edges' data (null: default edges).
type UpdateDepsV2 = unsafe extern "C" fn(
    sys::CUstream,
    *mut sys::CUgraphNode,
    *const std::ffi::c_void,
    usize,
    u32,
) -> sys::CUresult;
/// `cuGraphGetEdges`: (graph, from, to, count).
type GetEdgesV1 = unsafe extern "C" fn(
    sys::CUgraph,
    *mut sys::CUgraphNode,
    *mut sys::CUgraphNode,
    *mut usize,
) -> sys::CUresult;
/// `cuGraphGetEdges_v2` (CUDA 12.3): with the edges' data.
type GetEdgesV2 = unsafe extern "C" fn(
    sys::CUgraph,
    *mut sys::CUgraphNode,
    *mut sys::CUgraphNode,
    *mut EdgeData,
    *mut usize,
) -> sys::CUresult;

/// `CUgraphEdgeData` (cuda.h, CUDA 12.3; cudarc's bindings at the CUDA 12.0 level lack
/// it): how an edge's dependency is met. All zero: the default (full completion and
/// memory visibility of the upstream node).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct EdgeData {
    /// `CUgraphKernelNodePort` of the upstream node: 0 completion, 1 programmatic (every
    /// block triggered `griddepcontrol.launch_dependents` or exited), 2 launch order.
    from_port: u8,
    /// 0 (no node type defines another).
    to_port: u8,
    /// `CUgraphDependencyType`: 0 default, 1 programmatic.
    kind: u8,
    reserved: [u8; 5],
}

/// `CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`.
const DEPENDENCY_PROGRAMMATIC: u8 = 1;
/// `cuGraphAddDependencies_v2` and `cuGraphRemoveDependencies_v2` (CUDA 12.3): (graph,
/// from, to, edge data, count).
type DepsV2 = unsafe extern "C" fn(
    sys::CUgraph,
    *const sys::CUgraphNode,
    *const sys::CUgraphNode,
    *const EdgeData,
    usize,
) -> sys::CUresult;
/// `cuGraphKernelNodeGetParams_v2` (CUDA 12.0): (node, `CUDA_KERNEL_NODE_PARAMS_v2`).
type KernelParams =
    unsafe extern "C" fn(sys::CUgraphNode, *mut sys::CUDA_KERNEL_NODE_PARAMS) -> sys::CUresult;
/// `cuGraphGetNodes`: (graph, nodes, count).
type GetNodes = unsafe extern "C" fn(sys::CUgraph, *mut sys::CUgraphNode, *mut usize) -> sys::CUresult;
/// `cuGraphNodeGetType`: (node, type as the C enum's int).
type NodeType = unsafe extern "C" fn(sys::CUgraphNode, *mut i32) -> sys::CUresult;

/// The driver's entry points for capture dependencies and graph inspection, looked up by
/// name here: their signatures changed in CUDA 12.3 (edge data) and CUDA 13 drops
/// nothing but renames the defaults, so the oldest form the driver exports is taken and
/// the newer one otherwise, and an enum the driver writes is read as an `int` (cudarc's
/// bindings at the CUDA 12.0 level do not know CUDA 13's node types).
struct GraphFns {
    _lib: libloading::Library,
    info_v2: Option<CaptureInfoV2>,
    info_v3: Option<CaptureInfoV3>,
    update_v1: Option<UpdateDepsV1>,
    update_v2: Option<UpdateDepsV2>,
    edges_v1: Option<GetEdgesV1>,
    edges_v2: Option<GetEdgesV2>,
    nodes: Option<GetNodes>,
    node_type: Option<NodeType>,
    add_deps_v2: Option<DepsV2>,
    remove_deps_v2: Option<DepsV2>,
    kernel_params: Option<KernelParams>,
}

fn graph_fns() -> Result<&'static GraphFns> {
    static F: std::sync::OnceLock<Option<GraphFns>> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        // SAFETY: libcuda is already loaded by the device; this takes another reference.
        let lib = ["libcuda.so.1", "libcuda.so"]
            .iter()
            .find_map(|n| unsafe { libloading::Library::new(*n) }.ok())?;
        // SAFETY: each symbol is looked up with the signature of cuda.h for that name.
        unsafe {
            Some(GraphFns {
                info_v2: lib.get::<CaptureInfoV2>("cuStreamGetCaptureInfo_v2").ok().map(|s| *s),
                info_v3: lib.get::<CaptureInfoV3>("cuStreamGetCaptureInfo_v3").ok().map(|s| *s),
                update_v1: lib.get::<UpdateDepsV1>("cuStreamUpdateCaptureDependencies").ok().map(|s| *s),
                update_v2: lib.get::<UpdateDepsV2>("cuStreamUpdateCaptureDependencies_v2").ok().map(|s| *s),
                edges_v1: lib.get::<GetEdgesV1>("cuGraphGetEdges").ok().map(|s| *s),
                edges_v2: lib.get::<GetEdgesV2>("cuGraphGetEdges_v2").ok().map(|s| *s),
                nodes: lib.get::<GetNodes>("cuGraphGetNodes").ok().map(|s| *s),
                node_type: lib.get::<NodeType>("cuGraphNodeGetType").ok().map(|s| *s),
                add_deps_v2: lib.get::<DepsV2>("cuGraphAddDependencies_v2").ok().map(|s| *s),
                remove_deps_v2: lib.get::<DepsV2>("cuGraphRemoveDependencies_v2").ok().map(|s| *s),
                kernel_params: lib.get::<KernelParams>("cuGraphKernelNodeGetParams_v2").ok().map(|s| *s),
                _lib: lib,
            })
        }
    })
    .as_ref()
    .ok_or_else(|| Error::NotSupported("libcuda could not be opened for the graph entry points".into()))
}

fn missing(name: &str) -> Error {
    Error::NotSupported(format!("the driver has no {name} (CUDA 11.3 or later needed)"))
}

impl CudaDevice {
    /// The nodes that work queued next on `s`, under capture, will depend on
    /// (`cuStreamGetCaptureInfo`): right after an operation, its last nodes. Their edge
    /// data (CUDA 12.3) is read and dropped: without it the driver refuses the query
    /// (`CUDA_ERROR_LOSSY_QUERY`) when a dependency carries non-default data.
    pub(super) fn capture_dependencies_raw(&self, s: u64) -> Result<Vec<u64>> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        let f = graph_fns()?;
        let mut status = 0i32;
        let mut id = 0u64;
        let mut g: sys::CUgraph = std::ptr::null_mut();
        let mut deps: *const sys::CUgraphNode = std::ptr::null();
        let mut data: *const std::ffi::c_void = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: a live stream of ours; valid out-pointers.
        let r = unsafe {
            if let Some(v3) = f.info_v3 {
                v3(st, &mut status, &mut id, &mut g, &mut deps, &mut data, &mut n)
            } else if let Some(v2) = f.info_v2 {
                v2(st, &mut status, &mut id, &mut g, &mut deps, &mut n)
            } else {
                return Err(missing("cuStreamGetCaptureInfo"));
            }
        };
        r.result().map_err(|e| device_err("cuStreamGetCaptureInfo", e))?;
        // CU_STREAM_CAPTURE_STATUS_ACTIVE = 1
        if status != 1 {
            return Err(Error::InvalidValue(format!(
                "stream {s} is not being captured (capture status {status})"
            )));
        }
        if n == 0 || deps.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: the driver's array of `n` nodes, valid until the next call on the stream.
        Ok(unsafe { std::slice::from_raw_parts(deps, n) }.iter().map(|&p| p as u64).collect())
    }

    /// Makes `nodes` the dependencies of the work queued next on `s` under capture
    /// (`cuStreamUpdateCaptureDependencies`, `CU_STREAM_SET_CAPTURE_DEPENDENCIES`).
    pub(super) fn capture_set_dependencies_raw(&self, s: u64, nodes: &[u64]) -> Result<()> {
        let st = self.raw_stream(s)?;
        self.bind()?;
        let f = graph_fns()?;
        let mut v: Vec<sys::CUgraphNode> = nodes.iter().map(|&p| p as sys::CUgraphNode).collect();
        let p = v.as_mut_ptr(); // (non-null even when empty: count 0 makes the next node a root)
        const SET: u32 = 1; // CU_STREAM_SET_CAPTURE_DEPENDENCIES
        // SAFETY: a live stream under capture; nodes of its graph (the caller's, from
        // `capture_dependencies_raw` of the same capture).
        let r = unsafe {
            if let Some(v1) = f.update_v1 {
                v1(st, p, v.len(), SET)
            } else if let Some(v2) = f.update_v2 {
                v2(st, p, std::ptr::null(), v.len(), SET)
            } else {
                return Err(missing("cuStreamUpdateCaptureDependencies"));
            }
        };
        r.result().map_err(|e| device_err("cuStreamUpdateCaptureDependencies", e))
    }

    /// The nodes of graph `g` by kind, its edges (and how many are programmatic) and its
    /// longest chain (`cuGraphGetNodes`, `cuGraphNodeGetType`, `cuGraphGetEdges_v2` with
    /// the edges' data where the driver has it, which it needs once an edge is
    /// programmatic, else `cuGraphGetEdges`).
    pub(super) fn graph_info_raw(&self, g: u64) -> Result<GraphInfo> {
        self.bind()?;
        let f = graph_fns()?;
        let (nodes, kinds) = graph_nodes(f, g as sys::CUgraph)?;
        let n = nodes.len();
        let mut info = GraphInfo { nodes: n as u64, ..Default::default() };
        for &t in &kinds {
            match t {
                NODE_KERNEL => info.kernels += 1,
                1 => info.memcpys += 1, // CU_GRAPH_NODE_TYPE_MEMCPY
                2 => info.memsets += 1, // CU_GRAPH_NODE_TYPE_MEMSET
                _ => info.others += 1,
            }
        }
        let all = graph_edges(f, g as sys::CUgraph)?;
        info.programmatic = all.iter().filter(|e| e.2.kind == DEPENDENCY_PROGRAMMATIC).count() as u64;
        let index: rustc_hash::FxHashMap<u64, usize> =
            nodes.iter().enumerate().map(|(i, &p)| (p as u64, i)).collect();
        let edges: Vec<(usize, usize)> = all
            .iter()
            .filter_map(|(a, b, _)| Some((*index.get(&(*a as u64))?, *index.get(&(*b as u64))?)))
            .collect();
        info.edges = edges.len() as u64;
        info.depth = longest_chain(n, &edges);
        Ok(info)
    }

    /// See [`crate::device::Device::graph_programmatic_edges`]: each default edge of `g`
    /// from a kernel node into a kernel node whose function `waits` is removed and added
    /// back as programmatic (`cuGraphRemoveDependencies_v2`, `cuGraphAddDependencies_v2`;
    /// CUDA 12.3). Needs the drivers' v2 entry points, else changes nothing.
    pub(super) fn graph_programmatic_edges_raw(&self, g: u64, waits: &dyn Fn(u64) -> bool) -> Result<u64> {
        self.bind()?;
        let f = graph_fns()?;
        let (Some(add), Some(remove), Some(params), Some(_)) =
            (f.add_deps_v2, f.remove_deps_v2, f.kernel_params, f.edges_v2)
        else {
            return Ok(0);
        };
        let graph = g as sys::CUgraph;
        let (nodes, kinds) = graph_nodes(f, graph)?;
        let kernel: rustc_hash::FxHashMap<u64, bool> = nodes
            .iter()
            .zip(&kinds)
            .filter(|(_, t)| **t == NODE_KERNEL)
            .map(|(&node, _)| {
                // SAFETY: zeroed plain-data out-record; a kernel node of the graph.
                let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
                let ok = unsafe { params(node, &mut p) } == sys::CUresult::CUDA_SUCCESS;
                (node as u64, ok && !p.func.is_null() && waits(p.func as u64))
            })
            .collect();
        let mut changed = 0u64;
        for (a, b, d) in graph_edges(f, graph)? {
            let (Some(_), Some(&true)) = (kernel.get(&(a as u64)), kernel.get(&(b as u64))) else { continue };
            if d.kind != 0 || d.from_port != 0 {
                continue; // programmatic already (the capture of a PDL launch)
            }
            let prog = EdgeData {
                from_port: PORT_PROGRAMMATIC,
                kind: DEPENDENCY_PROGRAMMATIC,
                ..Default::default()
            };
            // SAFETY: an edge of the graph, removed and added back with one entry each.
            unsafe {
                remove(graph, &a, &b, &d, 1)
                    .result()
                    .map_err(|e| device_err("cuGraphRemoveDependencies_v2", e))?;
                if add(graph, &a, &b, &prog, 1) == sys::CUresult::CUDA_SUCCESS {
                    changed += 1;
                } else {
                    add(graph, &a, &b, &d, 1)
                        .result()
                        .map_err(|e| device_err("cuGraphAddDependencies_v2", e))?;
                }
            }
        }
        Ok(changed)
    }
}

/// `CU_GRAPH_NODE_TYPE_KERNEL`.
const NODE_KERNEL: i32 = 0;
/// `CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC`.
const PORT_PROGRAMMATIC: u8 = 1;

/// The nodes of `graph` and the type of each (`cuGraphGetNodes`, `cuGraphNodeGetType`).
fn graph_nodes(f: &GraphFns, graph: sys::CUgraph) -> Result<(Vec<sys::CUgraphNode>, Vec<i32>)> {
    let (get_nodes, node_type) = match (f.nodes, f.node_type) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(missing("cuGraphGetNodes")),
    };
    let mut n = 0usize;
    // SAFETY: a graph of ours; a count query.
    unsafe { get_nodes(graph, std::ptr::null_mut(), &mut n) }
        .result()
        .map_err(|e| device_err("cuGraphGetNodes", e))?;
    let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); n];
    if n > 0 {
        // SAFETY: room for `n` nodes.
        unsafe { get_nodes(graph, nodes.as_mut_ptr(), &mut n) }
            .result()
            .map_err(|e| device_err("cuGraphGetNodes", e))?;
    }
    nodes.truncate(n);
    let mut kinds = Vec::with_capacity(n);
    for &node in &nodes {
        let mut t = -1i32;
        // SAFETY: a node of the graph; an int out-pointer.
        unsafe { node_type(node, &mut t) }.result().map_err(|e| device_err("cuGraphNodeGetType", e))?;
        kinds.push(t);
    }
    Ok((nodes, kinds))
}

/// The edges of `graph` as (from, to, data) (`cuGraphGetEdges_v2` with the data, else
/// `cuGraphGetEdges` and default data).
fn graph_edges(
    f: &GraphFns,
    graph: sys::CUgraph,
) -> Result<Vec<(sys::CUgraphNode, sys::CUgraphNode, EdgeData)>> {
    let mut m = 0usize;
    let (mut from, mut to): (Vec<sys::CUgraphNode>, Vec<sys::CUgraphNode>) = (Vec::new(), Vec::new());
    let mut data: Vec<EdgeData> = Vec::new();
    for pass in 0..2 {
        if pass == 1 && m == 0 {
            // no edges (independent nodes): the driver refuses a second call with
            // arrays of room 0 (CUDA_ERROR_INVALID_VALUE, CUDA 13.0)
            break;
        }
        if pass == 1 {
            from = vec![std::ptr::null_mut(); m];
            to = vec![std::ptr::null_mut(); m];
            data = vec![EdgeData::default(); m];
        }
        let (pf, pt, pd) = if pass == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr())
        };
        // SAFETY: a graph of ours; a count query, then room for `m` edges (and their
        // data, 8 bytes each).
        let r = unsafe {
            if let Some(v2) = f.edges_v2 {
                v2(graph, pf, pt, pd, &mut m)
            } else if let Some(v1) = f.edges_v1 {
                v1(graph, pf, pt, &mut m)
            } else {
                return Err(missing("cuGraphGetEdges"));
            }
        };
        r.result().map_err(|e| device_err("cuGraphGetEdges", e))?;
    }
    from.truncate(m);
    to.truncate(m);
    data.resize(m, EdgeData::default());
    Ok(from.into_iter().zip(to).zip(data).map(|((a, b), d)| (a, b, d)).collect())
}

/// The number of nodes on the longest path of a DAG of `n` nodes with `edges` (from, to):
/// the length of the chain a replay cannot run side by side. 0 for no nodes; a cycle
/// (which a CUDA graph cannot have) counts each node once.
pub(crate) fn longest_chain(n: usize, edges: &[(usize, usize)]) -> u64 {
    let mut indeg = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        out[a].push(b);
        indeg[b] += 1;
    }
    let mut depth = vec![1u64; n];
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut best = 0u64;
    while let Some(i) = ready.pop() {
        best = best.max(depth[i]);
        for &j in &out[i] {
            depth[j] = depth[j].max(depth[i] + 1);
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.push(j);
            }
        }
    }
    if n > 0 { best.max(1) } else { 0 }
}

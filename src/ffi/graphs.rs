//! The C functions of CUDA graphs and graph-private pools (`src/engine/graphs.rs`):
//! capture of a stream into a graph whose allocations come from a pool of its own,
//! instantiation, launch, update, and the pools' figures. Graph, executable and pool
//! handles are unique in the process, so the functions that take only such a handle act
//! on its own device (a finalizer may run on any thread).

use super::streams::on_handle_owner;
use super::{copy_out, guard, null_err, out_flag, out_u64};
use crate::engine::{GraphInfo, GraphPoolInfo};

/// Creates a graph pool of the current device into `*pool`, holding one reference for
/// the caller (`cumem_graph_pool_release`). Captures given it allocate from it; several
/// graphs may share one pool when their replays do not overlap (PyTorch's
/// `graph_pool_handle`). Returns `CUMEM_ERROR_INVALID_VALUE` for a null `pool`.
///
/// # Safety
/// `pool` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_graph_pool_create(pool: *mut u64) -> i32 {
    guard(|e| out_u64(pool, "pool", || Ok(e.graph_pool_create())))
}

/// Gives back one reference to graph pool `pool`. When none is left (the handle, every
/// capture, graph and executable of the pool gone) its cached memory returns to the
/// device, and its live blocks return there when freed. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown or released pool.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_pool_release(pool: u64) -> i32 {
    on_handle_owner(|e| e.graph_pool_release(pool))
}

/// Starts capturing `stream` of the current device (`cuStreamBeginCapture`,
/// relaxed mode: the engine allocates and loads kernels during the capture): its work is recorded into a graph, not run, and its allocations
/// come from graph pool `pool` (0: a new pool) until `cumem_stream_end_capture`; the pool used
/// is written to `*pool_out`. Returns `CUMEM_ERROR_INVALID_VALUE` for the default stream
/// (0), a stream already captured, an unknown stream or pool, a null `pool_out`;
/// `CUMEM_ERROR_DEVICE` when the driver refuses. Nothing changes on error.
///
/// # Safety
/// `pool_out` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_begin_capture(stream: u64, pool: u64, pool_out: *mut u64) -> i32 {
    guard(|e| out_u64(pool_out, "pool_out", || e.capture_begin(stream, pool)))
}

/// Ends the capture of `stream` (`cuStreamEndCapture`) into `*graph`, a graph holding a
/// reference to the capture's pool. With programmatic dependent launch on (see
/// `cumem_set_pdl`), every default edge from a kernel node into a kernel that starts with
/// `griddepcontrol.wait` (see `cumem_kernel_uses_pdl`) is made programmatic
/// (`cuGraphRemoveDependencies_v2`, `cuGraphAddDependencies_v2`): the edges set with
/// `cumem_stream_set_capture_dependencies` get what the stream's order gives such a launch. Returns `CUMEM_ERROR_INVALID_VALUE` when `stream`
/// is not being captured or `graph` is null, `CUMEM_ERROR_DEVICE` when the capture was
/// invalidated (the capture is over then, and no graph is made).
///
/// # Safety
/// `graph` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_end_capture(stream: u64, graph: *mut u64) -> i32 {
    guard(|e| {
        if graph.is_null() {
            return Err(null_err("graph"));
        }
        out_u64(graph, "graph", || {
            let g = e.capture_end(stream)?;
            // Edges set as capture dependencies into kernels that start with
            // griddepcontrol.wait become programmatic, as the stream's order does for a
            // launch with programmatic dependent launch.
            if crate::compute::module::pdl_enabled()
                && let Err(err) = e.graph_programmatic_edges(g, &crate::compute::module::waits_for_grid)
            {
                let _ = e.graph_destroy(g);
                return Err(err);
            }
            Ok(g)
        })
    })
}

/// Writes 1 to `*capturing` when `stream` of the current device is being captured, else
/// 0. Returns `CUMEM_ERROR_INVALID_VALUE` for a null `capturing`.
///
/// # Safety
/// `capturing` must be null or writable for one `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_is_capturing(stream: u64, capturing: *mut i32) -> i32 {
    guard(|e| out_flag(capturing, "capturing", || Ok(e.is_capturing(stream))))
}

/// The graph pool of graph `graph` into `*pool`. Returns `CUMEM_ERROR_INVALID_VALUE` for
/// an unknown graph or a null `pool`.
///
/// # Safety
/// `pool` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_graph_pool_of(graph: u64, pool: *mut u64) -> i32 {
    guard(|e| out_u64(pool, "pool", || e.graph_pool_of(graph)))
}

/// Instantiates graph `graph` into executable `*exec` (`cuGraphInstantiateWithFlags`),
/// which holds a reference to the graph's pool. Returns `CUMEM_ERROR_INVALID_VALUE` for
/// an unknown graph or a null `exec`, `CUMEM_ERROR_DEVICE` when the driver refuses.
///
/// # Safety
/// `exec` must be null or writable for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_graph_instantiate(graph: u64, exec: *mut u64) -> i32 {
    guard(|e| out_u64(exec, "exec", || e.graph_instantiate(graph)))
}

/// Queues executable `exec` on `stream` (`cuGraphLaunch`; 0 is the legacy stream) and
/// returns. Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown executable or stream or a
/// stream under capture, `CUMEM_ERROR_DEVICE` when the launch fails.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_launch_async(exec: u64, stream: u64) -> i32 {
    guard(|e| e.graph_launch(exec, stream))
}

/// `cumem_graph_launch_async` on the legacy default stream.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_launch(exec: u64) -> i32 {
    guard(|e| e.graph_launch(exec, 0))
}

/// Updates executable `exec` to the parameters of graph `graph` (`cuGraphExecUpdate`),
/// which must have the same topology and pool. Returns `CUMEM_ERROR_INVALID_VALUE` for
/// unknown handles, another pool or a changed topology (the executable is unchanged).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_exec_update(exec: u64, graph: u64) -> i32 {
    guard(|e| e.graph_exec_update(exec, graph))
}

/// Destroys graph `graph` (`cuGraphDestroy`) and gives back its pool reference;
/// executables made from it stay valid. Returns `CUMEM_ERROR_INVALID_VALUE` for an
/// unknown graph.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_destroy(graph: u64) -> i32 {
    on_handle_owner(|e| e.graph_destroy(graph))
}

/// Destroys executable `exec` once the device's queued work is done
/// (`cuGraphExecDestroy`) and gives back its pool reference. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown executable.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_graph_exec_destroy(exec: u64) -> i32 {
    on_handle_owner(|e| e.graph_exec_destroy(exec))
}

/// The graph pools of the current device alive, by id: up to `capacity` records into
/// `pools` (`cumem_graph_pool_t`: id, reserved and allocated bytes, live blocks,
/// references, whether a capture fills it) and their number into `*count` (call with
/// `capacity` 0 to size the array). Returns `CUMEM_ERROR_INVALID_VALUE` for a null
/// `count`.
///
/// # Safety
/// `pools` must be null or writable for `capacity` records; `count` for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_graph_pools(pools: *mut GraphPoolInfo, capacity: u64, count: *mut u64) -> i32 {
    guard(|e| {
        if count.is_null() {
            return Err(null_err("count"));
        }
        let all = e.graph_pools();
        // SAFETY: the caller's guarantees; `count` checked non-null.
        unsafe {
            copy_out(&all, pools, capacity);
            *count = all.len() as u64;
        }
        Ok(())
    })
}

/// The nodes that the next operation queued on `stream` (under capture) will depend on
/// (`cuStreamGetCaptureInfo`): up to `capacity` node handles into `nodes` and their
/// number into `*count` (right after an operation: its last nodes; none on the host
/// device). With `cumem_stream_set_capture_dependencies` a capture's edges can follow the data
/// each operation reads and writes instead of the stream's order. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for a stream not under capture or a null `count`,
/// `CUMEM_ERROR_DEVICE` when the driver refuses.
///
/// # Safety
/// `nodes` must be null or writable for `capacity` values; `count` for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_capture_dependencies(
    stream: u64,
    nodes: *mut u64,
    capacity: u64,
    count: *mut u64,
) -> i32 {
    guard(|e| {
        if count.is_null() {
            return Err(null_err("count"));
        }
        let all = e.capture_dependencies(stream)?;
        // SAFETY: the caller's guarantees; `count` checked non-null.
        unsafe {
            copy_out(&all, nodes, capacity);
            *count = all.len() as u64;
        }
        Ok(())
    })
}

/// Makes the `count` nodes at `nodes` (of `cumem_stream_capture_dependencies` during the same
/// capture) the dependencies of the next operation queued on `stream`
/// (`cuStreamUpdateCaptureDependencies`, `CU_STREAM_SET_CAPTURE_DEPENDENCIES`); `count`
/// 0 makes it a root of the graph. Returns `CUMEM_ERROR_INVALID_VALUE` for a stream not
/// under capture or a null `nodes` with `count` > 0, `CUMEM_ERROR_DEVICE` for nodes the
/// driver refuses (nothing changes then).
///
/// # Safety
/// `nodes` must be null (with `count` 0) or readable for `count` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_stream_set_capture_dependencies(
    stream: u64,
    nodes: *const u64,
    count: u64,
) -> i32 {
    guard(|e| {
        let v: &[u64] = if count == 0 {
            &[]
        } else if nodes.is_null() {
            return Err(null_err("nodes"));
        } else {
            let n = usize::try_from(count)
                .map_err(|_| crate::error::Error::InvalidValue("count is too large".into()))?;
            // SAFETY: the caller guarantees `count` readable values.
            unsafe { std::slice::from_raw_parts(nodes, n) }
        };
        e.capture_set_dependencies(stream, v)
    })
}

/// Writes graph `graph`'s shape into `*info` (`cumem_graph_info_t`: nodes in all, kernel,
/// memcpy, memset and other nodes, edges, the nodes on its longest dependency chain,
/// which a replay runs one after another, and the programmatic edges among the edges,
/// those into kernels launched with programmatic dependent launch; `cuGraphGetNodes`,
/// `cuGraphNodeGetType`, `cuGraphGetEdges_v2` or `cuGraphGetEdges`). All 0 on the host
/// device, whose graphs are recorded above the engine. Returns `CUMEM_ERROR_INVALID_VALUE` for an unknown graph or a null `info`.
///
/// # Safety
/// `info` must be null or writable for one `cumem_graph_info_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_graph_info(graph: u64, info: *mut GraphInfo) -> i32 {
    on_handle_owner(|e| {
        if info.is_null() {
            return Err(null_err("info"));
        }
        let v = e.graph_info(graph)?;
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *info = v };
        Ok(())
    })
}

//! CUDA graphs and graph-private pools (PyTorch's `torch.cuda.graph` with
//! `graph_pool_handle`; CUDA.jl's `capture`/`instantiate`/`launch`).
//!
//! A *graph pool* is a pool id (a handle from [`crate::device::new_handle`], so never a
//! stream's) whose blocks live in per-shard stream pools keyed by that id, exactly as a
//! stream's do (`streams.rs`): a block freed into it is reused only by allocations made
//! for the same pool, never by code outside it. While a stream is being captured
//! ([`Engine::capture_begin`]), every allocation on that stream comes from the capture's
//! pool, so blocks freed inside the capture are reused later in the same capture (stream
//! order makes that safe) and none is handed to other code while the pool lives, which
//! is what keeps the addresses a graph's kernels were recorded with valid for every
//! replay. The pool is reference-counted: the handle of [`Engine::graph_pool_create`],
//! each capture under way, each captured graph and each executable holds one; when the
//! last goes, the pool's cache goes back to the device and its blocks still live return
//! to the device when freed (a destroyed stream's rule).
//!
//! The device does the capture itself (`cuStreamBeginCapture` ... `cuGraphLaunch` on
//! CUDA; on the host device graphs are handles whose operations the Julia package
//! records and replays, since host compute runs in Julia).

use super::Engine;
pub use crate::device::GraphInfo;
use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use std::sync::atomic::Ordering::Relaxed;

/// The engine's graph bookkeeping, behind one lock (graph calls are rare).
#[derive(Default)]
pub(super) struct Graphs {
    /// Graph pool id → number of references.
    pools: FxHashMap<u64, u64>,
    /// Streams under capture → their pool.
    captures: Vec<(u64, u64)>,
    /// Graph handle → (device graph, pool).
    graphs: FxHashMap<u64, (u64, u64)>,
    /// Executable handle → (device executable, pool).
    execs: FxHashMap<u64, (u64, u64)>,
}

/// The bit that marks a graph pool's id. Ids are [`crate::device::new_handle`]s (a counter
/// from 1, which never reaches it) with this bit set, so an id says by itself that it names
/// a graph pool: the allocation history records a graph pool's id as the `stream` of the
/// blocks allocated in it, and the timelines tell those blocks apart with
/// [`is_graph_pool_id`], without a table of pools that would grow with every graph made,
/// and also in a history saved by another process.
pub const GRAPH_POOL_ID_BIT: u64 = 1 << 62;

/// Whether `id` (e.g. an allocation event's `stream`) is a graph pool's id
/// ([`GRAPH_POOL_ID_BIT`]), alive or released.
pub fn is_graph_pool_id(id: u64) -> bool {
    id & GRAPH_POOL_ID_BIT != 0
}

fn new_graph_pool_id() -> u64 {
    crate::device::new_handle() | GRAPH_POOL_ID_BIT
}

/// The figures of one graph pool ([`Engine::graph_pool_info`]; C: `cumem_graph_pool_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphPoolInfo {
    /// The pool's id (as [`Engine::graph_pool_create`] returned it).
    pub id: u64,
    /// Bytes of device memory the pool holds: its live blocks and its cache.
    pub reserved_bytes: u64,
    /// Bytes of its live blocks (block sizes).
    pub allocated_bytes: u64,
    /// Number of its live blocks.
    pub active_blocks: u64,
    /// References: the pool handle, captures under way, graphs and executables.
    pub references: u64,
    /// Whether a capture into the pool is under way (1) or not (0).
    pub capturing: u32,
    /// Padding (0).
    pub reserved: u32,
}

fn unknown(what: &str, h: u64) -> Error {
    Error::InvalidValue(format!("unknown {what} {h} (never made, or already freed)"))
}

impl Engine {
    /// A new graph pool with one reference (the caller's, given back with
    /// [`Engine::graph_pool_release`]). Captures given its id allocate from it; several
    /// graphs may share it (their replays must then not overlap).
    pub fn graph_pool_create(&self) -> u64 {
        let id = new_graph_pool_id();
        self.graphs.lock().pools.insert(id, 1);
        id
    }

    /// Takes one more reference to graph pool `pool`. Errors: [`Error::InvalidValue`]
    /// for an unknown or released pool.
    pub fn graph_pool_retain(&self, pool: u64) -> Result<()> {
        let mut g = self.graphs.lock();
        *g.pools.get_mut(&pool).ok_or_else(|| unknown("graph pool", pool))? += 1;
        Ok(())
    }

    /// Gives back one reference to graph pool `pool`; at the last, the pool's cached
    /// memory returns to the device (at the next `reclaim` when a capture is under way)
    /// and its live blocks do when freed. Errors:
    /// [`Error::InvalidValue`] for an unknown or released pool (nothing changes).
    pub fn graph_pool_release(&self, pool: u64) -> Result<()> {
        let last = {
            let mut g = self.graphs.lock();
            let r = g.pools.get_mut(&pool).ok_or_else(|| unknown("graph pool", pool))?;
            *r -= 1;
            *r == 0 && g.pools.remove(&pool).is_some()
        };
        if last {
            for (i, shard) in self.shards.iter().enumerate() {
                let mut s = shard.state.lock();
                if let Some(p) = s.stream_pools.iter_mut().find(|p| p.stream == pool) {
                    p.dead = true;
                    // While a capture is under way, returning memory to the device
                    // (cuMemFree synchronises) would break it: the cache then goes at
                    // the next `reclaim`, which releases dead pools' caches.
                    if self.capturing.load(Relaxed) == 0 {
                        crate::pool::Pool::reclaim(&mut p.pool, u64::MAX, self.up.shard(i));
                    }
                }
            }
        }
        Ok(())
    }

    /// The pool that allocations on `stream` come from while it is captured.
    #[inline]
    pub(super) fn capture_pool(&self, stream: u64) -> Option<u64> {
        if self.capturing.load(Relaxed) == 0 || stream == 0 {
            return None;
        }
        self.graphs.lock().captures.iter().find(|c| c.0 == stream).map(|c| c.1)
    }

    /// Whether `id` is a graph pool alive.
    pub(super) fn is_graph_pool(&self, id: u64) -> bool {
        self.graphs.lock().pools.contains_key(&id)
    }

    /// Whether `stream` is being captured.
    pub fn is_capturing(&self, stream: u64) -> bool {
        self.capture_pool(stream).is_some()
    }

    /// Starts capturing `stream` (`cuStreamBeginCapture`, relaxed mode): its work is
    /// recorded, not run, and its allocations come from graph pool `pool` (0: a new pool,
    /// held by the capture alone) until [`Engine::capture_end`]. Returns the pool's id.
    /// Errors: [`Error::InvalidValue`] for the default stream (CUDA cannot capture the
    /// legacy stream), a stream already captured, an unknown stream or pool;
    /// [`Error::Device`]. Nothing changes on error.
    pub fn capture_begin(&self, stream: u64, pool: u64) -> Result<u64> {
        if stream == 0 {
            return Err(Error::InvalidValue(
                "the default stream cannot be captured; capture on a stream of your own".into(),
            ));
        }
        self.up.device().stream_raw(stream)?;
        let mut g = self.graphs.lock();
        if g.captures.iter().any(|c| c.0 == stream) {
            return Err(Error::InvalidValue(format!("stream {stream} is already being captured")));
        }
        let (pool, fresh) = if pool == 0 {
            (new_graph_pool_id(), true)
        } else if g.pools.contains_key(&pool) {
            (pool, false)
        } else {
            return Err(unknown("graph pool", pool));
        };
        self.up.device().capture_begin(stream)?;
        if fresh {
            g.pools.insert(pool, 1);
        } else {
            *g.pools.get_mut(&pool).expect("checked") += 1;
        }
        g.captures.push((stream, pool));
        self.capturing.fetch_add(1, Relaxed);
        Ok(pool)
    }

    /// Ends the capture of `stream` (`cuStreamEndCapture`) and returns the graph's
    /// handle, which holds the capture's reference to its pool. Errors:
    /// [`Error::InvalidValue`] when `stream` is not being captured; [`Error::Device`]
    /// when the capture was invalidated (then the capture is over, its pool reference
    /// given back, and no graph made).
    pub fn capture_end(&self, stream: u64) -> Result<u64> {
        let pool = {
            let mut g = self.graphs.lock();
            let k = g
                .captures
                .iter()
                .position(|c| c.0 == stream)
                .ok_or_else(|| Error::InvalidValue(format!("stream {stream} is not being captured")))?;
            let (_, pool) = g.captures.swap_remove(k);
            self.capturing.fetch_sub(1, Relaxed);
            pool
        };
        match self.up.device().capture_end(stream) {
            Ok(dg) => {
                let h = crate::device::new_handle();
                self.graphs.lock().graphs.insert(h, (dg, pool));
                Ok(h)
            }
            Err(e) => {
                let _ = self.graph_pool_release(pool);
                Err(e)
            }
        }
    }

    /// The pool of graph `graph`. Errors: [`Error::InvalidValue`] for an unknown graph.
    pub fn graph_pool_of(&self, graph: u64) -> Result<u64> {
        self.graphs.lock().graphs.get(&graph).map(|g| g.1).ok_or_else(|| unknown("graph", graph))
    }

    /// Makes an executable of graph `graph` (`cuGraphInstantiateWithFlags`); it holds a
    /// reference to the graph's pool. Errors: [`Error::InvalidValue`] for an unknown
    /// graph, [`Error::Device`].
    pub fn graph_instantiate(&self, graph: u64) -> Result<u64> {
        let (dg, pool) = *self.graphs.lock().graphs.get(&graph).ok_or_else(|| unknown("graph", graph))?;
        self.graph_pool_retain(pool)?;
        match self.up.device().graph_instantiate(dg) {
            Ok(de) => {
                let h = crate::device::new_handle();
                self.graphs.lock().execs.insert(h, (de, pool));
                Ok(h)
            }
            Err(e) => {
                let _ = self.graph_pool_release(pool);
                Err(e)
            }
        }
    }

    /// Queues executable `exec` on `stream` (`cuGraphLaunch`; 0 is the legacy stream).
    /// Errors: [`Error::InvalidValue`] for an unknown executable or stream, or a stream
    /// being captured; [`Error::Device`].
    pub fn graph_launch(&self, exec: u64, stream: u64) -> Result<()> {
        let de = self
            .graphs
            .lock()
            .execs
            .get(&exec)
            .map(|e| e.0)
            .ok_or_else(|| unknown("graph executable", exec))?;
        if self.is_capturing(stream) {
            return Err(Error::InvalidValue(format!(
                "cannot launch a graph on stream {stream} while it is captured"
            )));
        }
        self.up.device().graph_launch(de, stream)
    }

    /// Updates executable `exec` to the kernels' parameters of graph `graph`
    /// (`cuGraphExecUpdate`), which must have the same topology and the same pool (the
    /// executable's memory is that pool's). Errors: [`Error::InvalidValue`] for unknown
    /// handles, another pool or a changed topology (the executable is unchanged then).
    pub fn graph_exec_update(&self, exec: u64, graph: u64) -> Result<()> {
        let (de, dg) = {
            let g = self.graphs.lock();
            let e = *g.execs.get(&exec).ok_or_else(|| unknown("graph executable", exec))?;
            let gr = *g.graphs.get(&graph).ok_or_else(|| unknown("graph", graph))?;
            if e.1 != gr.1 {
                return Err(Error::InvalidValue(format!(
                    "graph {graph} was captured in pool {} but the executable uses pool {}; capture it in the executable's pool",
                    gr.1, e.1
                )));
            }
            (e.0, gr.0)
        };
        self.up.device().graph_exec_update(de, dg)
    }

    /// Destroys graph `graph` (`cuGraphDestroy`) and gives back its pool reference;
    /// executables made from it stay valid. Errors: [`Error::InvalidValue`] for an
    /// unknown graph.
    pub fn graph_destroy(&self, graph: u64) -> Result<()> {
        let (dg, pool) = self.graphs.lock().graphs.remove(&graph).ok_or_else(|| unknown("graph", graph))?;
        let r = self.up.device().graph_destroy(dg);
        self.graph_pool_release(pool)?;
        r
    }

    /// Destroys executable `exec` (`cuGraphExecDestroy`, after the work queued on the
    /// device is done) and gives back its pool reference. Errors:
    /// [`Error::InvalidValue`] for an unknown executable.
    pub fn graph_exec_destroy(&self, exec: u64) -> Result<()> {
        let (de, pool) =
            self.graphs.lock().execs.remove(&exec).ok_or_else(|| unknown("graph executable", exec))?;
        let r = self.up.device().graph_exec_destroy(de);
        self.graph_pool_release(pool)?;
        r
    }

    /// The graph pools alive (ids in creation order) with their figures: live and cached
    /// bytes over every shard, references, whether a capture fills it.
    pub fn graph_pools(&self) -> Vec<GraphPoolInfo> {
        let (mut out, capturing): (Vec<GraphPoolInfo>, Vec<u64>) = {
            let g = self.graphs.lock();
            (
                g.pools
                    .iter()
                    .map(|(&id, &r)| GraphPoolInfo { id, references: r, ..Default::default() })
                    .collect(),
                g.captures.iter().map(|c| c.1).collect(),
            )
        };
        out.sort_by_key(|p| p.id);
        if out.is_empty() {
            return out;
        }
        for shard in self.shards.iter() {
            let s = shard.state.lock();
            for info in out.iter_mut() {
                if let Some(p) = s.stream_pools.iter().find(|p| p.stream == info.id) {
                    info.reserved_bytes += crate::pool::Pool::cached_bytes(&p.pool);
                }
                for (&base, u) in s.stream_blocks.iter() {
                    if u.stream == info.id {
                        if let Some(b) = s.live.get(base) {
                            info.allocated_bytes += b.size;
                            info.active_blocks += 1;
                        }
                    }
                }
            }
        }
        for info in out.iter_mut() {
            info.reserved_bytes += info.allocated_bytes;
            info.capturing = capturing.contains(&info.id) as u32;
        }
        out
    }

    /// The nodes that the next operation queued on `stream`, which must be under capture,
    /// will depend on (`cuStreamGetCaptureInfo`): right after an operation, its last
    /// nodes. With [`Engine::capture_set_dependencies`] the Julia package rebuilds a
    /// capture's edges from the arrays each operation reads and writes, so independent
    /// operations of one stream become branches that a replay runs side by side. Empty
    /// on the host device (its graphs are recorded above the engine). Errors:
    /// [`Error::InvalidValue`] when `stream` is not being captured; [`Error::Device`].
    pub fn capture_dependencies(&self, stream: u64) -> Result<Vec<u64>> {
        if !self.is_capturing(stream) {
            return Err(Error::InvalidValue(format!("stream {stream} is not being captured")));
        }
        self.up.device().capture_dependencies(stream)
    }

    /// Makes `nodes` (nodes of the capture under way, from
    /// [`Engine::capture_dependencies`]) the dependencies of the next operation queued on
    /// `stream` (`cuStreamUpdateCaptureDependencies`, `CU_STREAM_SET_CAPTURE_DEPENDENCIES`);
    /// an empty list makes it a root of the graph. Errors: [`Error::InvalidValue`] when
    /// `stream` is not being captured; [`Error::Device`] for nodes the driver refuses
    /// (the dependencies are then unchanged).
    pub fn capture_set_dependencies(&self, stream: u64, nodes: &[u64]) -> Result<()> {
        if !self.is_capturing(stream) {
            return Err(Error::InvalidValue(format!("stream {stream} is not being captured")));
        }
        self.up.device().capture_set_dependencies(stream, nodes)
    }

    /// Graph `graph`'s nodes by kind, edges and longest chain ([`GraphInfo`]; all 0 on
    /// the host device). Errors: [`Error::InvalidValue`] for an unknown graph;
    /// [`Error::Device`].
    pub fn graph_info(&self, graph: u64) -> Result<GraphInfo> {
        let dg = self.graphs.lock().graphs.get(&graph).map(|g| g.0).ok_or_else(|| unknown("graph", graph))?;
        self.up.device().graph_info(dg)
    }

    /// Makes programmatic the default edges of graph `graph` from a kernel node into one
    /// whose function `waits` (see [`crate::device::Device::graph_programmatic_edges`]);
    /// returns how many. Errors: [`Error::InvalidValue`] for an unknown graph;
    /// [`Error::Device`].
    pub fn graph_programmatic_edges(&self, graph: u64, waits: &dyn Fn(u64) -> bool) -> Result<u64> {
        let dg = self.graphs.lock().graphs.get(&graph).map(|g| g.0).ok_or_else(|| unknown("graph", graph))?;
        self.up.device().graph_programmatic_edges(dg, waits)
    }

    /// The figures of graph pool `pool`. Errors: [`Error::InvalidValue`] for an unknown
    /// or released pool.
    pub fn graph_pool_info(&self, pool: u64) -> Result<GraphPoolInfo> {
        self.graph_pools().into_iter().find(|p| p.id == pool).ok_or_else(|| unknown("graph pool", pool))
    }
}

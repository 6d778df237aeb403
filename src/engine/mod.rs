//! The engine: a pool over the upstream layer, split into shards for threads, with the
//! live-allocation table, statistics, tracking, the out-of-memory retry and checked
//! copies. Everything the C ABI and Rust users call goes through [`Engine`].
//!
//! Each shard is one lock around a pool, the table of its live allocations and its
//! counters. A thread allocates from its home shard (threads are spread over shards in
//! order of first use); a free goes to the shard that owns the pointer, trying the home
//! shard first. So the cache-hit path is one uncontended lock, one hash-table operation
//! and one free-list operation, with no device call and no heap allocation.
//!
//! A copy checks its range where it pins the block (under the shard's lock), so a free on
//! another thread never releases memory a copy is writing ([`Engine::copy_htod`]).
//!
//! In front of the shards, each thread has a cache of small freed blocks per engine
//! ([`crate::thread_cache`]): a cache hit and the free of a block it handed out take no
//! lock at all. Blocks handed out from a thread cache are live in that cache's table;
//! everything that must see all live blocks or all cached memory (a free or copy on
//! another thread, statistics, reclaim, the out-of-memory retry, drop) claims the caches
//! first.
//!
//! Streams (PyTorch's `CUDACachingAllocator` model): an allocation on a stream other than
//! the legacy default stream comes from a pool of that stream's own, in the home shard
//! ([`Engine::alloc_on`]); freed, the block is reused at once by that stream only, whose
//! work is ordered. A block used on other streams ([`Engine::record_stream`], or an async
//! copy on another stream) is not reused at all until events recorded on those streams at
//! the free have completed; they are polled on the shard's next allocation. Programs
//! that use no streams pay one emptiness test per allocation and per free.
//!
//! The [`Engine`]'s methods are `impl` blocks in files by concern (as cudarc's
//! `driver/safe/` does); this file holds the shards, construction, alloc and free, the
//! out-of-memory retry, reclaim and the statistics:
//! - `streams.rs`: per-stream pools, pending frees, `record_stream`, the async copies;
//! - `copies.rs`: pins, range checks, the copies and memset, [`copy_between`] devices;
//! - `graphs.rs`: graph-private pools, stream capture, graphs and their executables;
//! - `caches.rs`: the thread caches' hits and frees and the claims of all caches;
//! - [`tools`]: the memory tools (history, snapshot, leaks, limits, compaction).

use crate::config::{Config, PoolKind};
use crate::device::{self, Device};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::history::{self, Event, EventKind};
use crate::live::{LiveBlock, LiveTable};
use crate::pool::{AnyPool, Block, MAX_REQUEST, MAX_SIZE, Pool};
use crate::snapshot::{BlockInfo, SegmentInfo};
use crate::stats::{self, Peaks, ShardStats, Stats};
use crate::sync::ShardMutex;
use crate::thread_cache::{self, Registry, ThreadCache};
use crate::tracking::{self, Origin, Outstanding};
use crate::upstream::Upstream;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

mod caches;
mod copies;
mod graphs;
mod stream_ops;
mod streams;
pub mod tools;

use copies::Pin;
pub use copies::{CopyPath, STAGING_CHUNK, copy_between};
pub use graphs::{GRAPH_POOL_ID_BIT, GraphInfo, GraphPoolInfo, is_graph_pool_id};
use streams::{PendingFree, StreamPool, StreamUse};

struct ShardState {
    pool: AnyPool,
    live: LiveTable,
    stats: ShardStats,
    /// Blocks of this shard that copies are using. Empty except while a copy runs, so
    /// a free pays one emptiness test for it; a few entries at most (one per copying
    /// thread), so a vector searched linearly beats a hash map.
    pins: Vec<Pin>,
    /// Pools of the streams other than the default stream that allocated in this shard.
    stream_pools: Vec<StreamPool>,
    /// Live (or pinned) blocks that belong to another stream than the default one or
    /// were used on other streams, by address. Empty unless streams are used.
    stream_blocks: FxHashMap<u64, StreamUse>,
    /// Blocks freed while other streams may still use them: back to their pool once
    /// every event has completed.
    pending: Vec<PendingFree>,
    /// Completed events of the engine's own (no timing), for reuse.
    spare_events: Vec<u64>,
    /// The bypass of thread caches that do not pay ([`ThreadCache::bypassed`]), scored
    /// here while the calling thread's cache is bypassed (a shard is mostly one
    /// thread's; the score only steers, either state is correct): the size of the last
    /// block freed to the pool, and how many more requests asked for that size than for
    /// another. Kept under the lock the paths hold anyway, so that a bypassed request
    /// pays no thread-local lookup for it.
    bypass_last_free: u64,
    bypass_score: u32,
}

/// One shard, on cache lines of its own so shards do not slow each other down.
#[repr(align(128))]
struct Shard {
    state: ShardMutex<ShardState>,
    /// The shard's live requested and allocated bytes, published after every change
    /// under the lock, for the exact peaks of a thread-cache hit (see
    /// [`Engine::tc_engine_wide`]).
    totals: [AtomicU64; 2],
}

impl Shard {
    #[inline]
    fn publish(&self, s: &ShardState) {
        self.totals[0].store(s.stats.requested, Relaxed);
        self.totals[1].store(s.stats.allocated, Relaxed);
    }
}

/// The memory manager. Thread-safe; one per process behind the C ABI, any number in
/// Rust programs and tests.
pub struct Engine {
    cfg: Config,
    up: Upstream,
    shards: Box<[Shard]>,
    /// Bit i set once shard i has served an allocation.
    used_shards: AtomicU64,
    peaks: Peaks,
    start: Instant,
    /// The thread caches; None when they are off (`CUMEM_THREAD_CACHE=0`, `CUMEM_DEBUG`
    /// ≥ 1, whose origins they do not record, or the `none` pool, which caches nothing).
    tc: Option<Registry>,
    /// Largest block the thread caches hold ([`PoolKind::thread_cache_max_size`]; 0 when
    /// `tc` is None).
    tc_max: u64,
    /// The thread caches bypass themselves where they do not pay
    /// ([`ThreadCache::bypassed`]): `expandable`, whose pool takes cached blocks back
    /// before every request that reaches it.
    tc_adaptive: bool,
    /// Cap on cached bytes (`set_cache_limit`); `u64::MAX` when there is none.
    cache_limit: AtomicU64,
    /// `reserved` when trimming the cache to `cache_limit` last released nothing (the
    /// cache is in partly used segments): no new attempt until reserved changes.
    futile_trim: AtomicU64,
    /// Leak marks: per shard, the last allocation number at the mark (mark 0: start).
    marks: parking_lot::Mutex<Vec<Box<[u64]>>>,
    /// The mark of the last `checkpoint`, and the allocated and reserved bytes then.
    checkpoint: parking_lot::Mutex<(u64, u64, u64)>,
    /// [`HOOK_RECORD`] | [`HOOK_CACHE_LIMIT`]: what the public alloc and free must do
    /// beyond allocating and freeing. One relaxed load per call decides, so the memory
    /// tools cost a predictable branch while off.
    hooks: AtomicU32,
    /// Graph pools, captures, graphs and executables (`graphs.rs`).
    graphs: parking_lot::Mutex<graphs::Graphs>,
    /// Number of captures under way: allocations look for a capture only when it is not 0.
    capturing: AtomicU64,
}

/// [`Engine`]'s `hooks`: the history records.
const HOOK_RECORD: u32 = 1;
/// [`Engine`]'s `hooks`: a cache cap is set.
const HOOK_CACHE_LIMIT: u32 = 2;

/// A placeholder for the block an allocation writes out.
const NO_BLOCK: Block = Block { ptr: 0, size: 0, hit: false };

/// Where the inner alloc and free paths put what only the history needs (the block's
/// size and hit; a freed block's request and size): a variable on the recorded paths,
/// `()` on the others, whose code is then that of a plain alloc or free (a generic
/// out-parameter rather than a returned value: returning it cost the pair ~25
/// instructions under callgrind).
trait Sink<T> {
    fn put(&mut self, v: T);
}

impl<T> Sink<T> for () {
    #[inline(always)]
    fn put(&mut self, _: T) {}
}

impl Sink<Block> for Block {
    #[inline(always)]
    fn put(&mut self, v: Block) {
        *self = v;
    }
}

impl Sink<(u64, u64)> for (u64, u64) {
    #[inline(always)]
    fn put(&mut self, v: (u64, u64)) {
        *self = v;
    }
}

/// What [`Engine::checkpoint`] returns: the change since the previous checkpoint (or
/// the start), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointDelta {
    /// Change in `allocated_bytes`.
    pub allocated: i64,
    /// Change in `reserved_bytes`.
    pub reserved: i64,
}

/// A snapshot of every segment and block (see [`Engine::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Segments by address.
    pub segments: Vec<SegmentInfo>,
    /// Blocks, those of each segment together in address order (see
    /// [`SegmentInfo::first_block`]).
    pub blocks: Vec<BlockInfo>,
}

/// The default number of shards: the machine's parallelism rounded up to a power of two,
/// at most 16.
pub fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).next_power_of_two().min(16)
}

impl Engine {
    /// Opens the device `cfg` asks for and builds an engine over it. Errors: those of
    /// [`device::open`], and [`Error::Device`] if the device's memory cannot be read to
    /// resolve a percentage limit.
    pub fn new(cfg: Config) -> Result<Engine> {
        let dev = device::open(&cfg)?;
        Engine::with_device(cfg, dev, default_shards())
    }

    /// An engine over device `ordinal` ([`device::open_ordinal`]: a host stand-in when
    /// `host`, else CUDA device `ordinal`), with its own pool, statistics and limit
    /// (`JULIA_CUDA_MEMORY_LIMIT` applies to each device). Errors: those of
    /// [`device::open_ordinal`] and [`Engine::with_device`].
    pub fn open(cfg: Config, ordinal: u32, host: bool) -> Result<Engine> {
        let dev = device::open_ordinal(&cfg, ordinal, host)?;
        Engine::with_device(cfg, dev, default_shards())
    }

    /// The ordinal of the engine's device.
    pub fn ordinal(&self) -> u32 {
        self.up.device().ordinal()
    }

    /// An engine over `device` with `shards` shards (rounded up to a power of two,
    /// 1 to 64). Errors: [`Error::Device`] if a percentage limit cannot be resolved, or
    /// if the expandable pool is asked for on a device without virtual memory management.
    pub fn with_device(cfg: Config, device: Box<dyn Device>, shards: usize) -> Result<Engine> {
        if cfg.pool == PoolKind::Expandable {
            device.vm_granularity()?;
        }
        let limit = match cfg.limit {
            None => None,
            Some(a) => Some(a.resolve(device.mem_info()?.1)),
        };
        let n = shards.clamp(1, 64).next_power_of_two();
        let shards = (0..n)
            .map(|_| Shard {
                state: ShardMutex::new(ShardState {
                    pool: AnyPool::new(cfg.pool),
                    live: LiveTable::default(),
                    stats: ShardStats::default(),
                    pins: Vec::new(),
                    stream_pools: Vec::new(),
                    stream_blocks: FxHashMap::default(),
                    pending: Vec::new(),
                    spare_events: Vec::new(),
                    bypass_last_free: 0,
                    bypass_score: 0,
                }),
                totals: [AtomicU64::new(0), AtomicU64::new(0)],
            })
            .collect();
        // Per pool kind, the largest block a thread cache holds
        // ([`PoolKind::thread_cache_max_size`]): 64 KiB for `expandable`, whose pool also
        // takes the thread's cached blocks back before every request that reaches it
        // (`Pool::serves_at_once`), so that best fit sees them merged.
        let tc_max = cfg.pool.thread_cache_max_size();
        let tc = (cfg.thread_cache && cfg.debug == 0 && tc_max > 0).then(Registry::new);
        let tc_max = if tc.is_some() { tc_max } else { 0 };
        let tc_adaptive = cfg.pool == PoolKind::Expandable && tc.is_some();
        log::info!(
            "{} pool on {} (device {}), limit {}, {n} shards, thread caches {}",
            cfg.pool.name(),
            device.name(),
            device.ordinal(),
            limit.map_or("none".into(), format_bytes),
            match &tc {
                None => "off",
                Some(r) if r.uses_membarrier() => "on",
                Some(_) => "on (fenced: no membarrier)",
            }
        );
        Ok(Engine {
            up: Upstream::new(device, limit),
            cfg,
            shards,
            used_shards: AtomicU64::new(0),
            peaks: Peaks::default(),
            start: Instant::now(),
            tc,
            tc_max,
            tc_adaptive,
            cache_limit: AtomicU64::new(u64::MAX),
            futile_trim: AtomicU64::new(u64::MAX),
            marks: parking_lot::Mutex::new(vec![vec![0; n].into_boxed_slice()]),
            checkpoint: parking_lot::Mutex::new((0, 0, 0)),
            hooks: AtomicU32::new(0),
            graphs: parking_lot::Mutex::new(graphs::Graphs::default()),
            capturing: AtomicU64::new(0),
        })
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The pool kind.
    pub fn pool_kind(&self) -> PoolKind {
        self.cfg.pool
    }

    /// The device below the pool.
    pub fn device(&self) -> &dyn Device {
        self.up.device()
    }

    /// `(free, total)` bytes of the device (`cuMemGetInfo`). Errors: [`Error::Device`].
    pub fn device_memory(&self) -> Result<(u64, u64)> {
        self.up.device().mem_info()
    }

    #[inline]
    fn home(&self) -> usize {
        tracking::thread_index() as usize & (self.shards.len() - 1)
    }

    /// Allocates `bytes` of device memory and returns its address, aligned to at least
    /// 256 bytes. 0 bytes gives the null address 0. On out of memory (device full or
    /// `JULIA_CUDA_MEMORY_LIMIT` reached) all cached memory is released and the request
    /// retried once (`num_alloc_retries`). Errors: [`Error::OutOfMemory`] with the
    /// request, reserved, cached, limit and device free/total bytes (counted in
    /// `num_ooms`), also at once, without touching the cache, for requests above
    /// [`MAX_REQUEST`] (2^48 bytes, more than any device holds; CUDA.jl and PyTorch report
    /// those as out of memory too); [`Error::InvalidValue`] above [`MAX_SIZE`] (2^63 − 1),
    /// sizes no signed 64-bit count (Julia's `Int`, C's `ssize_t`) can express.
    #[inline]
    pub fn alloc(&self, bytes: u64) -> Result<u64> {
        if self.hooks.load(Relaxed) & HOOK_RECORD != 0 {
            return self.alloc_recorded(bytes, true, 0);
        }
        self.alloc_with(bytes, true, &mut ())
    }

    /// As [`Engine::alloc`], but on out of memory returns [`Error::OutOfMemory`] at once,
    /// keeping the cache and counting nothing in `num_ooms`: for callers with a recovery
    /// ladder of their own (the Julia package runs its GC first and reclaims last, as
    /// CUDA.jl does).
    #[inline]
    pub fn try_alloc(&self, bytes: u64) -> Result<u64> {
        if self.hooks.load(Relaxed) & HOOK_RECORD != 0 {
            return self.alloc_recorded(bytes, false, 0);
        }
        self.alloc_with(bytes, false, &mut ())
    }

    /// An allocation while the history records: times the call and records an alloc
    /// event (or an OOM event for a failure counted in `num_ooms`).
    #[cold]
    #[inline(never)]
    fn alloc_recorded(&self, bytes: u64, retry: bool, stream: u64) -> Result<u64> {
        let h = self.up.history();
        let mut origin = history::take_next_origin();
        if origin == 0 && self.cfg.debug >= 2 {
            origin = h.capture_origin();
        }
        let t0 = h.now();
        let mut b = NO_BLOCK;
        let r = if stream == 0 {
            self.alloc_with(bytes, retry, &mut b)
        } else {
            self.alloc_stream_with(bytes, stream, retry, &mut b)
        };
        let duration_ns = h.now().saturating_sub(t0);
        let thread = tracking::thread_index();
        match &r {
            Ok(p) if *p != 0 => h.record(
                self.home(),
                Event {
                    time_ns: t0,
                    duration_ns,
                    addr: b.ptr,
                    requested_bytes: bytes,
                    size_bytes: b.size,
                    origin,
                    kind: EventKind::Alloc as u32,
                    thread,
                    device: self.ordinal(),
                    hit: b.hit as u32,
                    stream,
                    ..Event::default()
                },
            ),
            Err(e) if e.is_oom() && retry => h.record(
                self.home(),
                Event {
                    time_ns: t0,
                    duration_ns,
                    requested_bytes: bytes,
                    origin,
                    kind: EventKind::Oom as u32,
                    thread,
                    device: self.ordinal(),
                    stream,
                    ..Event::default()
                },
            ),
            _ => {}
        }
        if r.is_err() {
            // The caller's ladder retries (the Julia package after a GC): keep its origin.
            history::restore_next_origin(origin);
        }
        r
    }

    /// Allocates, writing the block to `out` (size and hit for the history; a local the
    /// optimizer removes on the unrecorded path).
    #[inline]
    fn alloc_with<S: Sink<Block>>(&self, bytes: u64, retry: bool, out: &mut S) -> Result<u64> {
        // The calling thread's cache first, then the size: a bypassed cache is none
        // (`expandable`, where requests miss the caches), and testing the size first was
        // a branch that followed the workload's sizes, mispredicted about 0.5 times per
        // request on encoder_infer_varlen (callgrind's branch simulation,
        // bench/results/host-2026-11-29-exp15); whether the cache is bypassed changes
        // rarely. A request of 0 bytes looks up no cache (as before).
        let tc = if bytes != 0 { self.thread_cache() } else { None };
        // One test for "1 byte to MAX_CACHED_SIZE" (0 wraps around).
        if let Some(t) = tc
            && bytes.wrapping_sub(1) < self.tc_max
            && let Some(ptr) = self.tc_alloc(t, bytes, out)
        {
            return Ok(ptr);
        }
        if bytes == 0 {
            return Ok(0);
        }
        if bytes > MAX_REQUEST {
            return self.alloc_beyond_capacity(bytes, retry);
        }
        if tc.is_some() {
            self.adopt_exited();
        }
        let home = self.home();
        match self.alloc_in(home, bytes, 0, tc, out) {
            Err(e) if e.is_oom() && retry => self.alloc_retry(home, bytes, 0, e, tc, out),
            r => r,
        }
    }

    #[inline]
    fn alloc_in<S: Sink<Block>>(
        &self,
        home: usize,
        bytes: u64,
        stream: u64,
        tc: Option<&ThreadCache>,
        out: &mut S,
    ) -> Result<u64> {
        let origin = (self.cfg.debug > 0)
            .then(|| Origin::capture(self.start.elapsed().as_nanos() as u64, self.cfg.debug >= 2));
        // Entered before the shard lock, never the other way round (thread_cache's lock
        // order).
        let mut owner = tc.filter(|t| t.home == home).map(ThreadCache::enter);
        let shard = &self.shards[home];
        let mut s = shard.state.lock();
        if let Some(o) = owner.as_mut()
            && stream == 0
            && !s.pool.serves_at_once(bytes)
        {
            // The pool will merge its free blocks and search: let it see this thread's
            // cached blocks too, as it would without thread caches.
            let pool = &mut s.pool;
            o.take_blocks(|p, size| pool.free(p, size, self.up.shard(home)));
            if self.tc_adaptive && o.cache().score_miss(o) {
                self.bypass_cache(o, &mut s, shard);
            }
        }
        if !s.pending.is_empty() {
            self.process_pending(&mut s, home, false);
        }
        let r = if stream == 0 {
            s.pool.alloc(bytes, self.up.shard(home))
        } else {
            self.stream_pool(&mut s, stream).alloc(bytes, self.up.shard(home))
        };
        let block = match r {
            Ok(b) => b,
            Err(e) => {
                s.stats.on_failed_alloc();
                return Err(e);
            }
        };
        let seq = s.stats.on_alloc(bytes, block.size, block.hit);
        s.live.insert(block.ptr, LiveBlock { requested: bytes, size: block.size, seq, origin });
        if self.tc_adaptive && stream == 0 && tc.is_none() {
            // The calling thread's cache is bypassed (or the thread is exiting): a hit,
            // had the block of the last free been cached, scores up, any other request
            // down; at BYPASS_LEAVE the caller's cache is used again.
            if block.size == s.bypass_last_free {
                s.bypass_score += 1;
                if s.bypass_score >= thread_cache::BYPASS_LEAVE {
                    s.bypass_score = 0;
                    self.end_bypass(home);
                }
            } else {
                s.bypass_score = s.bypass_score.saturating_sub(1);
            }
        }
        if stream != 0 {
            s.stream_blocks.insert(block.ptr, StreamUse { stream, uses: Vec::new() });
        }
        shard.publish(&s);
        let (req, alloc, folded) = (s.stats.requested, s.stats.allocated, s.stats.fold(&self.peaks));
        drop(s);
        let bit = 1u64 << home;
        if self.used_shards.load(Relaxed) & bit == 0 {
            self.used_shards.fetch_or(bit, Relaxed);
        }
        // The shard's bytes changed: the cache's window no longer covers its hits.
        let tc_live = owner.as_mut().map_or((0, 0), |o| {
            o.window.close();
            (o.stats.requested, o.stats.allocated)
        });
        drop(owner);
        if let Some((req, alloc)) = self.engine_wide(home, req, alloc, folded, || tc_live) {
            self.peaks.raise(req, alloc, self.up.reserved());
        }
        out.put(block);
        Ok(block.ptr)
    }

    /// Engine-wide requested and allocated bytes for the peaks, after shard `home`
    /// changed to `req`/`alloc`: exact while it is the only shard in use (any
    /// single-threaded program; with thread caches, while the calling thread is the only
    /// one with a cache, whose live bytes `tc_live` gives); otherwise the folded sums when
    /// this change was folded (within [`stats::FOLD_BYTES`] per other shard or thread
    /// cache), and None (no peak update) when not.
    #[inline]
    fn engine_wide(
        &self,
        home: usize,
        req: u64,
        alloc: u64,
        folded: Option<(u64, u64)>,
        tc_live: impl FnOnce() -> (u64, u64),
    ) -> Option<(u64, u64)> {
        if self.used_shards.load(Relaxed) & !(1u64 << home) != 0 {
            return folded;
        }
        match &self.tc {
            None => Some((req, alloc)),
            Some(r) if r.single_thread() => {
                let (r, a) = tc_live();
                Some((req + r, alloc + a))
            }
            Some(_) => folded,
        }
    }

    #[cold]
    fn alloc_beyond_capacity(&self, bytes: u64, count: bool) -> Result<u64> {
        if bytes > MAX_SIZE {
            return Err(Error::InvalidValue(format!(
                "allocation of {bytes} bytes exceeds the largest size CuMem's arithmetic handles \
                 ({MAX_SIZE} bytes)"
            )));
        }
        let why = Error::OutOfMemory(format!(
            "more than any device holds (the largest request CuMem passes on is {})",
            format_bytes(MAX_REQUEST)
        ));
        if count { Err(self.oom(self.home(), bytes, why)) } else { Err(why) }
    }

    #[cold]
    fn alloc_retry<S: Sink<Block>>(
        &self,
        home: usize,
        bytes: u64,
        stream: u64,
        first: Error,
        tc: Option<&ThreadCache>,
        out: &mut S,
    ) -> Result<u64> {
        let reserved_at_failure = self.up.reserved();
        let released = self.reclaim(u64::MAX);
        // Retry when memory came back: released by this reclaim, or by another thread's
        // (which may have emptied the cache between the failure and this reclaim).
        let err = if released > 0 || self.up.reserved() < reserved_at_failure {
            self.shards[home].state.lock().stats.on_retry();
            log::info!(
                "out of memory for {bytes} bytes ({first}); released {released} cached bytes and retrying"
            );
            match self.alloc_in(home, bytes, stream, tc, out) {
                Err(e) if e.is_oom() => e,
                r => return r,
            }
        } else {
            first
        };
        Err(self.oom(home, bytes, err))
    }

    /// Counts an out-of-memory failure of `bytes` in `num_ooms` and makes its error, with
    /// the state of the engine and the device.
    #[cold]
    fn oom(&self, home: usize, bytes: u64, err: Error) -> Error {
        self.shards[home].state.lock().stats.on_oom();
        let s = self.stats();
        let (free, total) = self.device_memory().unwrap_or((0, 0));
        let msg = format!(
            "cannot allocate {}: {}; reserved {}, allocated {}, cached {}, limit {}, device free {} of {}",
            crate::format::format_bytes_exact(bytes),
            match err {
                Error::OutOfMemory(m) => m,
                e => e.to_string(),
            },
            format_bytes(s.reserved_bytes),
            format_bytes(s.allocated_bytes),
            format_bytes(s.cached_bytes),
            self.up.limit().map_or("none".into(), format_bytes),
            format_bytes(free),
            format_bytes(total),
        );
        log::info!("{msg}"); // the caller gets the error; it may yet recover
        Error::OutOfMemory(msg)
    }

    /// Returns the allocation at `ptr` to the pool. Freeing 0 does nothing. Errors:
    /// [`Error::InvalidValue`] for an address that is not a live allocation of this
    /// engine (never allocated, already freed, or inside a block); nothing changes then.
    #[inline]
    pub fn free(&self, ptr: u64) -> Result<()> {
        if self.hooks.load(Relaxed) != 0 {
            return self.free_hooked(ptr);
        }
        self.free_with(ptr, &mut ())
    }

    /// A free while the history records or a cache cap is set: times the call and
    /// records a free event; releases cache above the cap.
    #[cold]
    #[inline(never)]
    fn free_hooked(&self, ptr: u64) -> Result<()> {
        let hooks = self.hooks.load(Relaxed);
        let h = self.up.history();
        let t0 = if hooks & HOOK_RECORD != 0 { h.now() } else { 0 };
        let mut freed = (0, 0);
        let r = self.free_with(ptr, &mut freed);
        if r.is_ok() && ptr != 0 && hooks & HOOK_RECORD != 0 {
            let (requested_bytes, size_bytes) = freed;
            let duration_ns = h.now().saturating_sub(t0);
            h.record(
                self.home(),
                Event {
                    time_ns: t0,
                    duration_ns,
                    addr: ptr,
                    requested_bytes,
                    size_bytes,
                    kind: EventKind::Free as u32,
                    thread: tracking::thread_index(),
                    device: self.ordinal(),
                    ..Event::default()
                },
            );
        }
        // The cache cap (`set_cache_limit`): cached ≤ reserved, so while reserved is
        // within the cap there is nothing to check.
        if r.is_ok() && hooks & HOOK_CACHE_LIMIT != 0 && self.up.reserved() > self.cache_limit.load(Relaxed) {
            self.trim_cache();
        }
        r
    }

    /// Frees `ptr`, writing the block's requested bytes and size to `out` (for the
    /// history; a local the optimizer removes on the unrecorded path).
    #[inline]
    fn free_with<S: Sink<(u64, u64)>>(&self, ptr: u64, out: &mut S) -> Result<()> {
        if ptr == 0 {
            return Ok(());
        }
        let tc = self.thread_cache();
        if let Some(tc) = tc
            && self.tc_free(tc, ptr, out)
        {
            return Ok(());
        }
        let home = self.home();
        if self.free_in(home, ptr, tc, out) {
            return Ok(());
        }
        let mut bits = self.used_shards.load(Relaxed) & !(1u64 << home);
        while bits != 0 {
            if self.free_in_other(bits.trailing_zeros() as usize, ptr, tc, out) {
                return Ok(());
            }
            bits &= bits - 1;
        }
        if self.tc.is_some() {
            if self.free_claimed(ptr, out) {
                return Ok(());
            }
            // The claim handed the caches of exited threads to their shards (this
            // thread's own, if it is exiting): look there once more.
            let mut bits = self.used_shards.load(Relaxed);
            while bits != 0 {
                if self.free_in_other(bits.trailing_zeros() as usize, ptr, tc, out) {
                    return Ok(());
                }
                bits &= bits - 1;
            }
        }
        Err(Error::InvalidValue(format!(
            "free of {ptr:#x}, which is not a live allocation (never allocated by CuMem, or already freed)"
        )))
    }

    /// [`Engine::free_in`] for shards other than the home shard, out of line so that the
    /// home shard's stays inlined in `free`.
    #[inline(never)]
    fn free_in_other<S: Sink<(u64, u64)>>(
        &self,
        i: usize,
        ptr: u64,
        tc: Option<&ThreadCache>,
        out: &mut S,
    ) -> bool {
        self.free_in(i, ptr, tc, out)
    }

    /// Frees `ptr` if shard `i` holds it live; a block of the calling thread's home shard
    /// goes into its thread cache `tc` when that has room.
    #[inline(always)]
    fn free_in<S: Sink<(u64, u64)>>(
        &self,
        i: usize,
        ptr: u64,
        tc: Option<&ThreadCache>,
        out: &mut S,
    ) -> bool {
        // Entered before the shard lock: never the other way round (thread_cache's
        // lock order).
        let mut owner = tc.filter(|t| t.home == i).map(ThreadCache::enter);
        let shard = &self.shards[i];
        let mut s = shard.state.lock();
        let Some(live) = s.live.remove(ptr) else {
            return false;
        };
        if !s.pins.is_empty() || !s.stream_blocks.is_empty() {
            self.free_maybe_pinned(&mut s, i, ptr, live.size);
        } else if !owner.as_mut().is_some_and(|o| o.push(ptr, live.size, self.tc_max)) {
            s.pool.free(ptr, live.size, self.up.shard(i));
            if self.tc_adaptive && tc.is_none() {
                s.bypass_last_free = live.size;
            }
        }
        s.stats.on_free(live.requested, live.size);
        shard.publish(&s);
        let (req, alloc, folded) = (s.stats.requested, s.stats.allocated, s.stats.fold(&self.peaks));
        drop(s);
        let tc_live = owner.as_mut().map_or((0, 0), |o| {
            o.window.close();
            (o.stats.requested, o.stats.allocated)
        });
        drop(owner);
        if let Some((_, alloc)) = self.engine_wide(i, req, alloc, folded, || tc_live) {
            self.peaks.raise_cached(alloc, self.up.reserved());
        }
        // Consume the origin explicitly: left to scope end, its drop glue is an
        // out-of-line call even when tracking is off.
        if let Some(o) = live.origin {
            drop(o);
        }
        out.put((live.requested, live.size));
        true
    }

    /// Releases cached memory to the device (whole segments only) until at least
    /// `bytes` were released or nothing is cached; `u64::MAX` releases everything.
    /// Every thread's cache is emptied into its shard's pool first. Returns the bytes
    /// released (CUDA.jl's `reclaim`).
    pub fn reclaim(&self, bytes: u64) -> u64 {
        self.with_caches(|cs| cs.iter_mut().for_each(|c| self.return_blocks(c)));
        let mut released = 0;
        for (i, shard) in self.shards.iter().enumerate() {
            if released >= bytes {
                break;
            }
            let mut s = shard.state.lock();
            released += s.pool.reclaim(bytes - released, self.up.shard(i));
            if !s.stream_pools.is_empty() || !s.pending.is_empty() {
                released += self.reclaim_streams(&mut s, i, bytes.saturating_sub(released));
            }
        }
        if released > 0 {
            log::debug!("reclaimed {}", format_bytes(released));
        }
        released
    }

    /// A snapshot of the statistics (exact when no other thread is allocating). Thread
    /// caches are read under a claim; with the pools that split segments (split,
    /// expandable) their cached blocks go back to the pools first, so that
    /// `inactive_split_bytes` counts them.
    pub fn stats(&self) -> Stats {
        let splits = matches!(self.cfg.pool, PoolKind::Split | PoolKind::Expandable);
        self.with_caches(|cs| {
            if splits {
                cs.iter_mut().for_each(|c| self.return_blocks(c));
            }
            stats::snapshot(
                |add| {
                    for shard in self.shards.iter() {
                        let s = shard.state.lock();
                        let streams: u64 = s.stream_pools.iter().map(|p| p.pool.inactive_split_bytes()).sum();
                        add(&s.stats, s.pool.inactive_split_bytes() + streams);
                    }
                    for c in cs.iter() {
                        add(&c.state.stats, 0);
                    }
                },
                &self.peaks,
                self.up.stats(),
                self.up.reserved(),
                self.up.limit(),
            )
        })
    }

    /// Calls into the device's memory functions since creation or the last
    /// [`Engine::reset_stats`]: allocations, frees and the virtual memory's reserve,
    /// release, map, unmap and move, one per call however many bytes or granules it
    /// covers (where `num_device_allocations` / `num_device_frees` of [`Engine::stats`]
    /// count the expandable pool's granules). What a pool's steady state costs in
    /// driver calls: the replay benchmark reports it per pass.
    pub fn device_calls(&self) -> u64 {
        self.up.stats().device_calls()
    }

    /// Resets counters to 0 and peaks to the current values (PyTorch's
    /// `reset_peak_memory_stats` and `reset_accumulated_memory_stats` together; see
    /// `stats::reset`).
    pub fn reset_stats(&self) {
        self.with_caches(|cs| {
            stats::reset(
                |reset| {
                    for shard in self.shards.iter() {
                        reset(&mut shard.state.lock().stats);
                    }
                    for c in cs.iter_mut() {
                        reset(&mut c.state.stats);
                    }
                },
                &self.peaks,
                self.up.stats(),
                self.up.reserved(),
            )
        });
    }

    /// Every live allocation, by address. Origins and frames are filled at
    /// `CUMEM_DEBUG` 1 and 2 (backtraces are resolved here, each distinct frame once).
    pub fn outstanding(&self) -> Vec<Outstanding> {
        // Blocks live in thread caches join their shards' tables (they carry no origin:
        // thread caches are off when tracking is on).
        self.with_caches(|cs| cs.iter_mut().for_each(|c| self.migrate_live(c)));
        let mut out = Vec::new();
        let mut sym = tracking::Symbolizer::default();
        for shard in self.shards.iter() {
            let s = shard.state.lock();
            for (ptr, l) in s.live.iter() {
                out.push(Outstanding {
                    ptr,
                    requested: l.requested,
                    size: l.size,
                    at_ns: l.origin.as_ref().map(|o| o.at_ns),
                    thread: l.origin.as_ref().map(|o| (o.thread, o.thread_name.clone())),
                    frames: l
                        .origin
                        .as_ref()
                        .and_then(|o| o.backtrace.as_ref())
                        .map(|bt| sym.frames(bt))
                        .unwrap_or_default(),
                });
            }
        }
        out.sort_by_key(|o| o.ptr);
        out
    }
}

impl Drop for Engine {
    /// Returns all device memory, live allocations included.
    fn drop(&mut self) {
        if let Err(e) = self.up.device().synchronize_all() {
            log::warn!("dropping the engine: {e}");
        }
        self.with_caches(|cs| cs.iter_mut().for_each(|c| self.adopt(c)));
        if let Some(r) = &self.tc {
            r.mark_dead();
        }
        for (i, shard) in self.shards.iter().enumerate() {
            let mut s = shard.state.lock();
            let live: Vec<(u64, u64)> = s.live.drain().map(|(p, l)| (p, l.size)).collect();
            for (p, size) in live {
                let stream = s.stream_blocks.remove(&p).map_or(0, |u| u.stream);
                self.free_to_pool(&mut s, i, stream, p, size);
            }
            for p in std::mem::take(&mut s.pending) {
                s.spare_events.extend(p.events);
                self.free_to_pool(&mut s, i, p.stream, p.ptr, p.size);
            }
            for e in std::mem::take(&mut s.spare_events) {
                let _ = self.up.device().event_destroy(e);
            }
            s.pool.reclaim(u64::MAX, self.up.shard(i));
            for p in s.stream_pools.iter_mut() {
                p.pool.reclaim(u64::MAX, self.up.shard(i));
            }
        }
    }
}

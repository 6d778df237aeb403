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

use crate::config::{Config, PoolKind};
use crate::device::{self, Device};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::history::{self, Event, EventKind};
use crate::live::{LiveBlock, LiveTable};
use crate::pool::{AnyPool, Block, MAX_REQUEST, MAX_SIZE, MIN_BLOCK, Pool, round_up};
use crate::snapshot::{BlockInfo, SegmentInfo};
use crate::stats::{self, Peaks, ShardStats, Stats};
use crate::sync::ShardMutex;
use crate::thread_cache::{self, Claimed, Registry, TcState, ThreadCache};
use crate::tracking::{self, Origin, Outstanding};
use crate::upstream::Upstream;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

mod stream_ops;
pub mod tools;

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
}

/// The pool of one stream.
struct StreamPool {
    stream: u64,
    pool: AnyPool,
    /// The stream was destroyed: its pool serves no one and keeps no cache.
    dead: bool,
}

/// The stream a block belongs to and the other streams it was used on.
#[derive(Default)]
struct StreamUse {
    stream: u64,
    uses: Vec<u64>,
}

/// A freed block waiting for the events recorded on the streams that used it.
struct PendingFree {
    ptr: u64,
    size: u64,
    stream: u64,
    events: Vec<u64>,
}

/// The copies using one block, and whether it was freed meanwhile.
struct Pin {
    /// The block's address.
    base: u64,
    /// Copies in flight.
    count: u32,
    /// The block's size once it was freed while pinned (0 while live): the last unpin
    /// hands it to the pool.
    freed_size: u64,
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
}

/// [`Engine`]'s `hooks`: the history records.
const HOOK_RECORD: u32 = 1;
/// [`Engine`]'s `hooks`: a cache cap is set.
const HOOK_CACHE_LIMIT: u32 = 2;

/// [`crate::pool::binned_class_size`] of 1 to [`thread_cache::MAX_CACHED_SIZE`] bytes, whose classes
/// are powers of two (MAX_BIN, 128 MiB, is above): the next power of two of at least
/// MIN_BLOCK, without `binned_class_size`'s tests for larger sizes and for zero.
#[inline(always)]
fn small_class_size(bytes: u64) -> u64 {
    let x = (bytes - 1) | (MIN_BLOCK - 1);
    // SAFETY: x ≥ MIN_BLOCK − 1 > 0.
    2 << unsafe { std::num::NonZeroU64::new_unchecked(x) }.ilog2()
}

#[cfg(test)]
#[test]
fn small_class_size_is_binneds() {
    for bytes in 1..=thread_cache::MAX_CACHED_SIZE {
        assert_eq!(small_class_size(bytes), crate::pool::binned_class_size(bytes), "{bytes}");
    }
}

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

    /// The ordinal of the engine's device (0 unless several devices are in use).
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
                }),
                totals: [AtomicU64::new(0), AtomicU64::new(0)],
            })
            .collect();
        let tc = (cfg.thread_cache
            && cfg.debug == 0
            && matches!(
                cfg.pool,
                PoolKind::Binned | PoolKind::Split | PoolKind::Expandable | PoolKind::Simple
            ))
        .then(Registry::new);
        log::info!(
            "CuMem engine: {} pool on {} (device {}), limit {}, {n} shards, thread caches {}",
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
            cache_limit: AtomicU64::new(u64::MAX),
            futile_trim: AtomicU64::new(u64::MAX),
            marks: parking_lot::Mutex::new(vec![vec![0; n].into_boxed_slice()]),
            checkpoint: parking_lot::Mutex::new((0, 0, 0)),
            hooks: AtomicU32::new(0),
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
        // One test for "1 byte to MAX_CACHED_SIZE" (0 wraps around).
        if bytes.wrapping_sub(1) < thread_cache::MAX_CACHED_SIZE
            && let Some(tc) = self.thread_cache()
            && let Some(ptr) = self.tc_alloc(tc, bytes, out)
        {
            return Ok(ptr);
        }
        if bytes == 0 {
            return Ok(0);
        }
        if bytes > MAX_REQUEST {
            return self.alloc_beyond_capacity(bytes, retry);
        }
        let tc = self.thread_cache();
        if tc.is_some() {
            self.adopt_exited();
        }
        let home = self.home();
        match self.alloc_in(home, bytes, 0, tc, out) {
            Err(e) if e.is_oom() && retry => self.alloc_retry(home, bytes, 0, e, tc, out),
            r => r,
        }
    }

    /// As [`Engine::alloc`] (`retry` true) or [`Engine::try_alloc`] (false), on stream
    /// `stream` (0: the legacy default stream, the same as `alloc`): the block comes from
    /// that stream's pool, and once freed is reused by that stream at once and by no
    /// other (PyTorch's per-stream pools). Work queued on `stream` may use it in stream
    /// order without synchronising; use on another stream must be declared with
    /// [`Engine::record_stream`]. Errors: those of `alloc`, and [`Error::InvalidValue`]
    /// for an unknown stream.
    pub fn alloc_on(&self, bytes: u64, stream: u64, retry: bool) -> Result<u64> {
        if stream == 0 {
            return if retry { self.alloc(bytes) } else { self.try_alloc(bytes) };
        }
        self.up.device().stream_raw(stream)?;
        if self.hooks.load(Relaxed) & HOOK_RECORD != 0 {
            return self.alloc_recorded(bytes, retry, stream);
        }
        self.alloc_stream_with(bytes, stream, retry, &mut ())
    }

    /// [`Engine::alloc_on`] for a stream other than the default one, writing the block
    /// to `out` (for the history).
    fn alloc_stream_with<S: Sink<Block>>(
        &self,
        bytes: u64,
        stream: u64,
        retry: bool,
        out: &mut S,
    ) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        if bytes > MAX_REQUEST {
            return self.alloc_beyond_capacity(bytes, retry);
        }
        // The cache is not used for the stream's blocks; the call registers the thread
        // (so that another thread's cache knows its view of the totals is not exact) and
        // lets the shard path close the cache's peak window.
        let tc = self.thread_cache();
        let home = self.home();
        match self.alloc_in(home, bytes, stream, tc, out) {
            Err(e) if e.is_oom() && retry => self.alloc_retry(home, bytes, stream, e, tc, out),
            r => r,
        }
    }

    /// The calling thread's cache, if thread caches are on (None also while the thread
    /// exits).
    #[inline]
    fn thread_cache(&self) -> Option<&ThreadCache> {
        // Stream-aware allocation: thread caches serve the default stream only; the check
        // of the stream goes here, the one place where a call chooses its thread cache.
        self.tc.as_ref()?.current(|| self.home())
    }

    /// The size of the block a thread cache serves `bytes` (1 to
    /// [`thread_cache::MAX_CACHED_SIZE`]) with: the size the pool's own cache hit would
    /// hand out.
    #[inline]
    fn tc_size(&self, bytes: u64) -> u64 {
        debug_assert!(bytes > 0 && bytes <= thread_cache::MAX_CACHED_SIZE);
        match self.cfg.pool {
            PoolKind::Binned => small_class_size(bytes),
            _ => round_up(bytes, MIN_BLOCK),
        }
    }

    /// A hit in the calling thread's cache: no lock, no atomic read-modify-write, and no
    /// peak update while the cache's live bytes stay inside its [`PeakWindow`].
    #[inline]
    fn tc_alloc<S: Sink<Block>>(&self, tc: &ThreadCache, bytes: u64, out: &mut S) -> Option<u64> {
        let size = self.tc_size(bytes);
        let mut st = tc.enter();
        let ptr = st.pop(size)?;
        // Numbered when it moves to a shard (`migrate_live`): leak checks move every
        // cache's live blocks first.
        st.live.insert(ptr, bytes, size);
        st.stats.on_cache_alloc(bytes, size);
        if !st.window.covers_rise(st.stats.requested, st.stats.allocated) {
            self.tc_peaks(tc.home, &mut st);
        }
        drop(st);
        out.put(Block { ptr, size, hit: true });
        Some(ptr)
    }

    /// The free of a block the calling thread's cache handed out (false if it did not,
    /// changing nothing): back into the cache, or to the home shard's pool when the cache
    /// is full.
    #[inline]
    fn tc_free<S: Sink<(u64, u64)>>(&self, tc: &ThreadCache, ptr: u64, out: &mut S) -> bool {
        let mut st = tc.enter();
        let Some((requested, size)) = st.live.remove(ptr) else {
            return false;
        };
        st.stats.on_free(requested, size);
        let cached = st.push_small(ptr, size);
        if !st.window.covers_fall(st.stats.requested, st.stats.allocated) {
            self.tc_peaks(tc.home, &mut st);
        }
        drop(st);
        if !cached {
            self.shards[tc.home].state.lock().pool.free(ptr, size, self.up.shard(tc.home));
        }
        out.put((requested, size));
        true
    }

    /// A thread cache's live bytes left its [`PeakWindow`]: folds them into the
    /// engine-wide sums if they moved by more than [`stats::FOLD_BYTES`], raises the
    /// peaks, and reopens the window. Exact while the cache's thread is the only one
    /// with a cache and its home shard the only shard in use (the engine-wide bytes are
    /// then the shard's published totals plus the cache's), else from the folded sums
    /// as for a shard ([`Engine::engine_wide`]). Runs inside the cache (it takes no lock).
    #[cold]
    #[inline(never)]
    fn tc_peaks(&self, home: usize, st: &mut TcState) {
        let folded = st.stats.fold(&self.peaks);
        let exact = self.used_shards.load(Relaxed) & !(1u64 << home) == 0
            && self.tc.as_ref().is_some_and(Registry::single_thread);
        let totals = if exact {
            let t = &self.shards[home].totals;
            Some((t[0].load(Relaxed) + st.stats.requested, t[1].load(Relaxed) + st.stats.allocated))
        } else {
            folded
        };
        if let Some((req, alloc)) = totals {
            self.peaks.raise(req, alloc, self.up.reserved());
        }
        st.window.reopen(&st.stats, exact);
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
            "cannot allocate {} ({bytes} bytes): {}; reserved {}, allocated {}, cached {}, limit {}, device free {} of {}",
            format_bytes(bytes),
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
        } else if !owner.as_mut().is_some_and(|o| o.push(ptr, live.size)) {
            s.pool.free(ptr, live.size, self.up.shard(i));
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

    /// Runs `f` with every thread cache claimed (none when they are off), after handing
    /// the contents of those whose threads exited to their home shards. The caller must
    /// hold no shard lock and not be inside its own cache.
    /// Every claim also settles each cache's derived hit count and closes its peak
    /// window (a claim may move live bytes between a cache and a shard, or reset the
    /// peaks).
    fn with_caches<R>(&self, f: impl FnOnce(&mut [Claimed<'_>]) -> R) -> R {
        match &self.tc {
            None => f(&mut []),
            Some(reg) => reg.claim_all(|cs| {
                for c in cs.iter_mut() {
                    c.state.stats.settle_cache_hits();
                    c.state.window.close();
                    if c.exited {
                        self.adopt(c);
                    }
                }
                f(cs)
            }),
        }
    }

    /// Empties every thread cache into its home shard: cached blocks back to the pool,
    /// live blocks into the shard's table (numbered anew for leak checks). The memory
    /// tools that list blocks (snapshot, leak marks and checks, compact) call it first.
    pub(crate) fn flush_thread_caches(&self) {
        self.with_caches(|cs| {
            cs.iter_mut().for_each(|c| {
                self.return_blocks(c);
                self.migrate_live(c);
            })
        });
    }

    /// Hands everything a claimed cache holds (cached blocks, live blocks and their
    /// statistics) to its home shard.
    fn adopt(&self, c: &mut Claimed<'_>) {
        self.return_blocks(c);
        let shard = &self.shards[c.tc.home];
        let mut s = shard.state.lock();
        for (p, requested, size) in c.state.live.drain() {
            let seq = s.stats.next_seq();
            s.live.insert(p, LiveBlock { requested, size, seq, origin: None });
        }
        s.stats.absorb(&mut c.state.stats);
        shard.publish(&s);
    }

    /// Returns a claimed cache's cached blocks to its home shard's pool.
    fn return_blocks(&self, c: &mut Claimed<'_>) {
        let i = c.tc.home;
        let mut s = None;
        c.state.take_blocks(|p, size| {
            s.get_or_insert_with(|| self.shards[i].state.lock()).pool.free(p, size, self.up.shard(i))
        });
    }

    /// Moves a claimed cache's live blocks into its home shard's table (for copies: a
    /// pinned block must be live in a shard).
    fn migrate_live(&self, c: &mut Claimed<'_>) {
        if c.state.live.is_empty() {
            return;
        }
        let shard = &self.shards[c.tc.home];
        let mut s = shard.state.lock();
        let st = &mut *c.state;
        for (p, requested, size) in st.live.drain() {
            st.stats.transfer_to(&mut s.stats, requested, size);
            let seq = s.stats.next_seq();
            s.live.insert(p, LiveBlock { requested, size, seq, origin: None });
        }
        shard.publish(&s);
    }

    /// Moves the live block at `ptr` from the calling thread's cache, if it is there,
    /// into the home shard's table (the copies' common case: the thread that allocated a
    /// block fills it).
    fn migrate_own(&self, tc: &ThreadCache, ptr: u64) {
        let mut st = tc.enter();
        let Some((requested, size)) = st.live.remove(ptr) else {
            return;
        };
        st.window.close();
        let shard = &self.shards[tc.home];
        let mut s = shard.state.lock();
        st.stats.transfer_to(&mut s.stats, requested, size);
        let seq = s.stats.next_seq();
        s.live.insert(ptr, LiveBlock { requested, size, seq, origin: None });
        shard.publish(&s);
    }

    /// Caches of exited threads are handed to their shards (cheap to test; called on a
    /// thread cache's miss).
    #[inline]
    fn adopt_exited(&self) {
        if self.tc.as_ref().is_some_and(Registry::has_exited) {
            self.with_caches(|_| ());
        }
    }

    /// The free of a block that another thread's cache handed out (found by claiming the
    /// caches); false if no cache holds `ptr` live.
    #[cold]
    fn free_claimed<S: Sink<(u64, u64)>>(&self, ptr: u64, out: &mut S) -> bool {
        let found = self.with_caches(|cs| {
            cs.iter_mut().find_map(|c| {
                let (requested, size) = c.state.live.remove(ptr)?;
                c.state.stats.on_free(requested, size);
                let folded = c.state.stats.fold(&self.peaks);
                Some((c.tc.home, requested, size, folded))
            })
        });
        let Some((i, requested, size, folded)) = found else {
            return false;
        };
        out.put((requested, size));
        self.shards[i].state.lock().pool.free(ptr, size, self.up.shard(i));
        if let Some((_, alloc)) = folded {
            self.peaks.raise_cached(alloc, self.up.reserved());
        }
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

    /// The stream part of [`Engine::reclaim`]: waits for the pending frees (PyTorch's
    /// `synchronize_and_free_events` on out of memory), then releases the cache of the
    /// streams' pools, each after waiting for its stream (memory of a segment being
    /// released may still be read by work queued on it).
    #[cold]
    fn reclaim_streams(&self, s: &mut ShardState, i: usize, bytes: u64) -> u64 {
        self.process_pending(s, i, true);
        let mut released = s.pool.reclaim(bytes, self.up.shard(i));
        for p in s.stream_pools.iter_mut() {
            if released >= bytes {
                break;
            }
            if p.pool.cached_bytes() > 0 {
                if !p.dead {
                    let _ = self.up.device().stream_synchronize(p.stream);
                }
                released += p.pool.reclaim(bytes - released, self.up.shard(i));
            }
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

    /// A free while some copy holds a pin in shard `i`: a pinned block goes to the pool
    /// only when its last copy ends (see [`Engine::pin`]).
    #[cold]
    fn free_maybe_pinned(&self, s: &mut ShardState, i: usize, ptr: u64, size: u64) {
        match s.pins.iter_mut().find(|p| p.base == ptr) {
            Some(pin) => pin.freed_size = size,
            None => self.return_block(s, i, ptr, size),
        }
    }

    /// Hands a freed block back: to its stream's pool at once when no other stream used
    /// it, else to the pending list behind one event per stream that used it.
    fn return_block(&self, s: &mut ShardState, i: usize, ptr: u64, size: u64) {
        let Some(u) = s.stream_blocks.remove(&ptr) else {
            s.pool.free(ptr, size, self.up.shard(i));
            return;
        };
        if u.uses.is_empty() {
            self.free_to_pool(s, i, u.stream, ptr, size);
            return;
        }
        let mut events = Vec::with_capacity(u.uses.len());
        for st in u.uses {
            let ev = match s.spare_events.pop() {
                Some(e) => Ok(e),
                None => self.up.device().event_create(false),
            };
            match ev.and_then(|e| self.up.device().event_record(e, st).map(|()| e)) {
                Ok(e) => events.push(e),
                // A stream destroyed meanwhile had its work waited for (Engine::stream_destroy);
                // otherwise wait here rather than reuse memory the stream may still read.
                Err(err) => {
                    if let Err(e2) = self.up.device().stream_synchronize(st) {
                        log::debug!("free of {ptr:#x}: no event on stream {st} ({err}), no wait ({e2})");
                    }
                }
            }
        }
        s.pending.push(PendingFree { ptr, size, stream: u.stream, events });
    }

    /// Frees a block into the pool of `stream` (a dead stream's pool keeps no cache).
    fn free_to_pool(&self, s: &mut ShardState, i: usize, stream: u64, ptr: u64, size: u64) {
        if stream == 0 {
            s.pool.free(ptr, size, self.up.shard(i));
            return;
        }
        match s.stream_pools.iter_mut().find(|p| p.stream == stream) {
            Some(p) => {
                p.pool.free(ptr, size, self.up.shard(i));
                if p.dead {
                    p.pool.reclaim(u64::MAX, self.up.shard(i));
                }
            }
            None => {
                debug_assert!(false, "block {ptr:#x} of stream {stream} without its pool");
                log::error!("block {ptr:#x} of stream {stream} has no pool; it is leaked");
            }
        }
    }

    /// The pool of `stream` in this shard, made on first use.
    fn stream_pool<'s>(&self, s: &'s mut ShardState, stream: u64) -> &'s mut AnyPool {
        let k = match s.stream_pools.iter().position(|p| p.stream == stream) {
            Some(k) => k,
            None => {
                s.stream_pools.push(StreamPool { stream, pool: AnyPool::new(self.cfg.pool), dead: false });
                s.stream_pools.len() - 1
            }
        };
        &mut s.stream_pools[k].pool
    }

    /// Returns the pending blocks whose events have all completed (`wait`: waits for
    /// them all) to their pools (PyTorch's `process_events`).
    #[cold]
    fn process_pending(&self, s: &mut ShardState, i: usize, wait: bool) {
        let dev = self.up.device();
        let mut k = 0;
        while k < s.pending.len() {
            let done = s.pending[k].events.iter().all(|&e| {
                if wait { dev.event_synchronize(e).is_ok() } else { dev.event_query(e).unwrap_or(false) }
            });
            if done {
                let p = s.pending.swap_remove(k);
                s.spare_events.extend(p.events);
                self.free_to_pool(s, i, p.stream, p.ptr, p.size);
            } else {
                k += 1;
            }
        }
    }

    /// Declares that work queued on `stream` uses the live allocation containing `addr`
    /// (PyTorch's `Tensor.record_stream`): when the block is freed, it is reused only
    /// once the work queued on `stream` before the free is done. Use on the block's own
    /// stream needs no declaration. Errors: [`Error::InvalidValue`] for an address not
    /// inside a live allocation or an unknown stream; nothing changes then.
    pub fn record_stream(&self, addr: u64, stream: u64) -> Result<()> {
        self.pin_on_stream(addr, 1, stream).map(drop)
    }

    /// Pins `addr..addr + bytes` (inside one live allocation) and records that `stream`
    /// uses its block. Errors: an unknown stream, or the range of [`Engine::pin`].
    fn pin_on_stream(&self, addr: u64, bytes: u64, stream: u64) -> Result<Pinned<'_>> {
        self.up.device().stream_raw(stream)?;
        let pin = self.pin(addr, bytes)?;
        self.note_use(pin.shard, pin.base, stream);
        Ok(pin)
    }

    /// Records that `stream` uses the block at `base` of shard `i` (pinned by the caller).
    fn note_use(&self, i: usize, base: u64, stream: u64) {
        let mut s = self.shards[i].state.lock();
        let u = s.stream_blocks.entry(base).or_default();
        if u.stream != stream && !u.uses.contains(&stream) {
            u.uses.push(stream);
        }
    }

    /// The stream an allocation belongs to (0 for the default stream). Errors:
    /// [`Error::InvalidValue`] for an address not inside a live allocation.
    pub fn block_stream(&self, addr: u64) -> Result<u64> {
        let pin = self.pin(addr, 1)?;
        let s = self.shards[pin.shard].state.lock();
        Ok(s.stream_blocks.get(&pin.base).map_or(0, |u| u.stream))
    }

    /// Creates a stream (see [`Device::stream_create`]; CuMem's are non-blocking unless
    /// `blocking`). Errors: [`Error::NotSupported`] on a device without streams,
    /// [`Error::Device`].
    pub fn stream_create(&self, blocking: bool) -> Result<u64> {
        self.up.device().stream_create(blocking)
    }

    /// Waits for the work queued on `stream`, destroys it, and drops the cache of its
    /// pools (they serve no other stream). Blocks of the stream still live stay valid
    /// and return to the device when freed. Errors: [`Error::InvalidValue`] for an
    /// unknown stream or the default stream (0), which cannot be destroyed.
    pub fn stream_destroy(&self, stream: u64) -> Result<()> {
        if stream == 0 {
            return Err(Error::InvalidValue("the default stream cannot be destroyed".into()));
        }
        let dev = self.up.device();
        dev.stream_synchronize(stream)?;
        dev.stream_destroy(stream)?;
        for (i, shard) in self.shards.iter().enumerate() {
            let mut s = shard.state.lock();
            if let Some(p) = s.stream_pools.iter_mut().find(|p| p.stream == stream) {
                p.dead = true;
                p.pool.reclaim(u64::MAX, self.up.shard(i));
            }
        }
        Ok(())
    }

    /// Checks that `[addr, addr+bytes)` lies inside one live allocation. Errors:
    /// [`Error::InvalidValue`] naming the range and, if found, the allocation it leaves.
    /// The answer may be stale as soon as it is returned (another thread may free the
    /// block); the copies check and pin in one step instead.
    pub fn check_range(&self, addr: u64, bytes: u64) -> Result<()> {
        self.pin(addr, bytes).map(drop)
    }

    /// Whether `addr` lies inside a live allocation of this engine (used to find the
    /// device that owns an address when several are in use).
    pub fn owns(&self, addr: u64) -> bool {
        addr != 0 && self.pin(addr, 1).is_ok()
    }

    /// Checks that `[addr, addr+bytes)` lies inside one live allocation and pins that
    /// block until the returned guard drops: a free of a pinned block takes effect for
    /// the caller at once (the address is no longer live, statistics count it freed) but
    /// the block reaches the pool, and so the device, only when its last pin goes. So a
    /// copy racing a free writes into memory that was live when it was checked and that
    /// nothing else can own before the copy ends. Errors as [`Engine::check_range`].
    ///
    /// The block is found under its shard's lock: first as a block base (the usual copy
    /// target) in the home shard and then in the other shards in use; an address inside
    /// a block goes through the upstream's segment map and the pool's `block_base`.
    ///
    /// A block live in a thread cache moves into its shard's table first: the calling
    /// thread's own block at once, any other after a claim of all caches when the search
    /// fails.
    fn pin(&self, addr: u64, bytes: u64) -> Result<Pinned<'_>> {
        if let Some(tc) = self.thread_cache() {
            self.migrate_own(tc, addr);
        }
        match self.pin_search(addr, bytes) {
            Err(_) if self.tc.is_some() => {
                self.with_caches(|cs| cs.iter_mut().for_each(|c| self.migrate_live(c)));
                self.pin_search(addr, bytes)
            }
            r => r,
        }
    }

    /// [`Engine::pin`]'s search of the shards.
    fn pin_search(&self, addr: u64, bytes: u64) -> Result<Pinned<'_>> {
        let bad = |why: String| Err(Error::InvalidValue(format!("device range {addr:#x}+{bytes} {why}")));
        let Some(end) = addr.checked_add(bytes) else {
            return bad("overflows 64 bits".into());
        };
        let home = self.home();
        let mut bits = self.used_shards.load(Relaxed) | (1u64 << home);
        let mut i = home;
        loop {
            if let Some(r) = self.pin_in(i, addr, addr, end) {
                return r;
            }
            bits &= !(1u64 << i);
            if bits == 0 {
                break;
            }
            i = bits.trailing_zeros() as usize;
        }
        let Some((seg_base, seg)) = self.up.segment_containing(addr) else {
            return bad("is not inside any allocation of CuMem".into());
        };
        let base = {
            let s = self.shards[seg.shard].state.lock();
            let mut base = s.pool.block_base(addr, seg_base);
            // The segment may belong to one of the shard's stream pools.
            for p in s.stream_pools.iter() {
                if s.live.get(base).is_some() {
                    break;
                }
                base = p.pool.block_base(addr, seg_base);
            }
            base
        };
        match self.pin_in(seg.shard, base, addr, end) {
            Some(r) => r,
            None => bad(format!("is inside freed or cached memory (block {base:#x})")),
        }
    }

    /// Pins the live block at `base` of shard `i` if `[addr, end)` lies inside it; None
    /// if no live block of shard `i` starts at `base`.
    fn pin_in(&self, i: usize, base: u64, addr: u64, end: u64) -> Option<Result<Pinned<'_>>> {
        let mut s = self.shards[i].state.lock();
        let requested = s.live.get(base)?.requested;
        if end > base + requested {
            return Some(Err(Error::InvalidValue(format!(
                "device range {addr:#x}+{} crosses the end of the allocation of {requested} bytes at {base:#x} by {} bytes",
                end - addr,
                end - (base + requested)
            ))));
        }
        match s.pins.iter_mut().find(|p| p.base == base) {
            Some(pin) => pin.count += 1,
            None => s.pins.push(Pin { base, count: 1, freed_size: 0 }),
        }
        Some(Ok(Pinned { engine: self, shard: i, base }))
    }

    /// Drops one pin of the block at `base` in shard `i`; the last one of a block freed
    /// meanwhile hands it to the pool.
    fn unpin(&self, i: usize, base: u64) {
        let mut s = self.shards[i].state.lock();
        let Some(k) = s.pins.iter().position(|p| p.base == base) else {
            debug_assert!(false, "unpin of {base:#x}, which is not pinned");
            return;
        };
        s.pins[k].count -= 1;
        if s.pins[k].count == 0 {
            let freed = s.pins.swap_remove(k).freed_size;
            if freed != 0 {
                self.return_block(&mut s, i, base, freed);
            }
        }
    }

    /// Uploads `src` to device address `dst`. Errors: [`Error::InvalidValue`] when the
    /// destination is not inside one live allocation (nothing is written), or the
    /// device's error. A concurrent free of the block waits for the copy to end before
    /// the memory is reused (see [`Engine::pin`]).
    pub fn copy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let _pin = self.pin(dst, src.len() as u64)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().copy_htod(dst, src.as_ptr(), src.len() as u64) }
    }

    /// Downloads `dst.len()` bytes from device address `src`. Errors as
    /// [`Engine::copy_htod`].
    pub fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let _pin = self.pin(src, dst.len() as u64)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().copy_dtoh(dst.as_mut_ptr(), src, dst.len() as u64) }
    }

    /// Copies `bytes` between device addresses (overlap allowed). Errors as
    /// [`Engine::copy_htod`], for either range.
    pub fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _dst = self.pin(dst, bytes)?;
        let _src = self.pin(src, bytes)?;
        // SAFETY: both ranges are inside live allocations, pinned until the copy ends.
        unsafe { self.up.device().copy_dtod(dst, src, bytes) }
    }

    /// Queues an upload of `bytes` from host memory `src` to device address `dst` on
    /// `stream` (`cuMemcpyHtoDAsync`) and returns. The destination is checked as by
    /// [`Engine::copy_htod`]; when its block belongs to another stream, the use is
    /// recorded as by [`Engine::record_stream`], so a free of the block before the copy
    /// has run does not hand the memory to anyone else. Errors as `copy_htod`, and
    /// [`Error::InvalidValue`] for an unknown stream.
    ///
    /// # Safety
    /// `src` must stay readable for `bytes` until the copy has run (synchronise
    /// `stream` or wait for an event recorded after it); page-locked memory lets the
    /// copy overlap other work, pageable memory is copied before the call returns.
    pub unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, bytes: u64, stream: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin_on_stream(dst, bytes, stream)?;
        // SAFETY: the range is inside a live allocation that stays out of other hands
        // until the copy has run (the use on `stream` is recorded); the caller vouches
        // for `src`.
        unsafe { self.up.device().copy_htod_async(dst, src, bytes, stream) }
    }

    /// Queues a download of `bytes` from device address `src` to host memory `dst` on
    /// `stream` (`cuMemcpyDtoHAsync`); checks and use as [`Engine::copy_htod_async`].
    ///
    /// # Safety
    /// `dst` must stay writable for `bytes` until the copy has run.
    pub unsafe fn copy_dtoh_async(&self, dst: *mut u8, src: u64, bytes: u64, stream: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin_on_stream(src, bytes, stream)?;
        // SAFETY: as in copy_htod_async.
        unsafe { self.up.device().copy_dtoh_async(dst, src, bytes, stream) }
    }

    /// Sets `bytes` bytes at `dst` to `value`. Errors as [`Engine::copy_htod`].
    pub fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _pin = self.pin(dst, bytes)?;
        // SAFETY: the range is inside a live allocation, pinned until the copy ends.
        unsafe { self.up.device().memset(dst, value, bytes) }
    }
}

/// How [`copy_between`] moved the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum CopyPath {
    /// Both ranges are on one device: a device-to-device copy.
    Same = 0,
    /// Directly between two devices (CUDA peer access: `cuMemcpyPeer` over NVLink or
    /// PCIe; host stand-ins: one `memcpy`).
    Peer = 1,
    /// Staged through host memory: downloaded from the source device and uploaded to the
    /// destination, in chunks of [`STAGING_CHUNK`] bytes.
    Host = 2,
}

/// The size of the host buffer a staged copy between devices goes through.
pub const STAGING_CHUNK: u64 = 64 << 20;

/// Copies `bytes` from `src` (an address of `src_e`'s device) to `dst` (of `dst_e`'s
/// device), both ranges checked and pinned as for [`Engine::copy_dtod`]. On one engine
/// this is [`Engine::copy_dtod`] ([`CopyPath::Same`]). Between two devices: a peer copy
/// when the destination can read the source's memory directly
/// ([`crate::device::Device::can_access_peer`]; CUDA enables peer access on first use,
/// as PyTorch's `tensor.to("cuda:1")` does) and `staged` is false ([`CopyPath::Peer`]);
/// otherwise staged through a host buffer ([`CopyPath::Host`]). Returns the path taken.
/// Errors as [`Engine::copy_htod`], for either range, and the devices' errors.
pub fn copy_between(
    dst_e: &Engine,
    dst: u64,
    src_e: &Engine,
    src: u64,
    bytes: u64,
    staged: bool,
) -> Result<CopyPath> {
    if std::ptr::eq(dst_e, src_e) {
        dst_e.copy_dtod(dst, src, bytes)?;
        return Ok(CopyPath::Same);
    }
    let _dst = dst_e.pin(dst, bytes)?;
    let _src = src_e.pin(src, bytes)?;
    if bytes == 0 {
        return Ok(if staged { CopyPath::Host } else { CopyPath::Peer });
    }
    let (dd, sd) = (dst_e.device(), src_e.device());
    if !staged && dd.can_access_peer(sd)? {
        // SAFETY: both ranges are inside live allocations of their devices, pinned.
        unsafe { dd.copy_from_peer(dst, sd, src, bytes) }?;
        return Ok(CopyPath::Peer);
    }
    let mut buf = vec![0u8; bytes.min(STAGING_CHUNK) as usize];
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(STAGING_CHUNK);
        // SAFETY: `buf` holds at least `n` bytes; the device ranges are pinned.
        unsafe {
            sd.copy_dtoh(buf.as_mut_ptr(), src + done, n)?;
            dd.copy_htod(dst + done, buf.as_ptr(), n)?;
        }
        done += n;
    }
    Ok(CopyPath::Host)
}

/// A pin of one block (see [`Engine::pin`]), dropped when the copy ends, also on panic.
struct Pinned<'a> {
    engine: &'a Engine,
    shard: usize,
    base: u64,
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.engine.unpin(self.shard, self.base);
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

//! Thread caches: per thread and per engine, a few recently freed blocks of each small
//! size and the table of the blocks handed out from them, in front of the shard lock
//! (the magazines of general-purpose allocators: tcmalloc's and jemalloc's thread caches,
//! glibc's tcache). A cache-hit alloc+free pair of the owning thread takes no lock and no
//! atomic read-modify-write: it pops a block, enters it in the cache's own live table,
//! and on free removes it and pushes it back, all in memory only its thread writes; the
//! peaks are touched only when the cache's live bytes leave their window
//! ([`crate::stats::PeakWindow`]).
//!
//! # Other threads
//!
//! Another thread may need a cache's contents: to free a block handed out from it, to pin
//! it for a copy, to read exact statistics, to release cached memory (`reclaim`, the
//! out-of-memory retry), or when the engine is dropped. It *claims* the caches
//! ([`Registry::claim_all`]): it takes each cache's gate, sets its `claimed` flag, and
//! waits until the owner is outside its cache (`active` false). The owner marks itself
//! active with a plain store and then reads `claimed`; the store→load order that this
//! handshake (Dekker's) needs is paid by the claimer alone, with one
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` per claim (which runs a full barrier on
//! every running thread of the process, as `folly::asymmetricHeavyBarrier` and userspace
//! RCU do), so the owner needs only a compiler fence. Where `membarrier` is not available
//! (kernels before 4.14, some sandboxes) the owner uses a full fence instead: correct, a
//! few ns slower. An owner that finds its cache claimed waits for the gate and tries
//! again. So a claim costs microseconds, and frees of another thread's cache-served blocks
//! are slower than before (see docs/design.md); a thread's own pairs never claim.
//!
//! Lock order: registry list → gates → shard locks. The owner never enters its cache
//! while holding a shard lock (a claimer may hold the gate and wait for that shard).
//!
//! # Bounds
//!
//! Only blocks of at most [`MAX_CACHED_SIZE`] are cached, at most [`BLOCKS_PER_SIZE`] of
//! one size and [`MAX_CACHED_BYTES`] in all per thread and engine. The blocks count as
//! cached (reserved, not allocated) in the statistics. When a thread exits, its cache is
//! marked exited and the engine hands its blocks and live entries to the thread's home
//! shard at its next slow-path call (a cache miss, statistics, reclaim).

use crate::live::LiveSizes;
use crate::stats::{PeakWindow, ShardStats};
use lock_api::RawMutex as _;
use parking_lot::{Mutex, RawMutex};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence, fence};
use std::sync::{Arc, OnceLock};

/// Largest block size a thread cache holds (bytes), defined in [`crate::config`] beside
/// each pool kind's own limit (`PoolKind::thread_cache_max_size`).
pub use crate::config::MAX_CACHED_SIZE;
/// Blocks of one size a thread cache holds at most.
pub const BLOCKS_PER_SIZE: usize = 8;
/// Bytes a thread cache holds at most (per thread and engine).
pub const MAX_CACHED_BYTES: u64 = 4 << 20;
/// Slots of the direct-mapped table of sizes (a power of two).
const SLOTS: usize = 64;
const _: () = assert!(SLOTS <= 64, "TcState::filled has a bit per slot");

/// The cached blocks of one size.
#[derive(Clone, Copy)]
struct Bin {
    size: u64,
    len: u32,
    ptrs: [u64; BLOCKS_PER_SIZE],
}

/// A thread cache's contents: written by its thread, or by a claimer while claimed.
pub(crate) struct TcState {
    /// Blocks handed out from this cache and not freed yet, with their requested bytes
    /// and size (the rest of the engine's live blocks are in the shards' tables).
    pub live: LiveSizes,
    /// Requested/allocated bytes of `live`, and the counts of this cache's allocations
    /// and frees (its hits are derived: [`ShardStats::settle_cache_hits`]), folded into
    /// the engine's sums as a shard's are.
    pub stats: ShardStats,
    /// Where `stats`' live bytes may move without a peak update or a fold.
    pub window: PeakWindow,
    /// Bytes of the cached blocks.
    held: u64,
    /// Bit `k` set: bin `k` may hold blocks (set by a push, cleared only when the cache
    /// is emptied), so that emptying visits the bins in use and not all [`SLOTS`].
    filled: u64,
    bins: [Bin; SLOTS],
}

#[inline]
fn slot(size: u64) -> usize {
    ((size >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

impl TcState {
    fn new() -> TcState {
        TcState {
            live: LiveSizes::default(),
            stats: ShardStats::default(),
            window: PeakWindow::CLOSED,
            bins: [Bin { size: 0, len: 0, ptrs: [0; BLOCKS_PER_SIZE] }; SLOTS],
            held: 0,
            filled: 0,
        }
    }

    /// A cached block of exactly `size` bytes, if any.
    #[inline]
    pub fn pop(&mut self, size: u64) -> Option<u64> {
        // SAFETY: `slot` is below SLOTS (the top bits of a product), and `len` at most
        // BLOCKS_PER_SIZE (checked in `push_small`).
        let b = unsafe { self.bins.get_unchecked_mut(slot(size)) };
        if b.size != size || b.len == 0 {
            return None;
        }
        b.len -= 1;
        self.held -= size;
        Some(unsafe { *b.ptrs.get_unchecked(b.len as usize) })
    }

    /// Caches the free block `ptr` of `size` bytes; false (nothing changes) when the size
    /// is above `max` (the engine's pool kind's limit, at most [`MAX_CACHED_SIZE`]:
    /// `crate::config::PoolKind::thread_cache_max_size`), its slot holds another size, or
    /// a bound is reached.
    #[inline]
    pub fn push(&mut self, ptr: u64, size: u64, max: u64) -> bool {
        debug_assert!(max <= MAX_CACHED_SIZE);
        size <= max && self.push_small(ptr, size)
    }

    /// [`TcState::push`] of a block known to be at most [`MAX_CACHED_SIZE`] (one this
    /// cache handed out).
    #[inline(always)]
    pub fn push_small(&mut self, ptr: u64, size: u64) -> bool {
        debug_assert!(size <= MAX_CACHED_SIZE);
        if self.held + size > MAX_CACHED_BYTES {
            return false;
        }
        // SAFETY: as in `pop`.
        let k = slot(size);
        let b = unsafe { self.bins.get_unchecked_mut(k) };
        // An empty bin keeps its last size, so a thread's usual sizes skip the reset.
        if b.size != size {
            if b.len != 0 {
                return false;
            }
            b.size = size;
        }
        if b.len as usize == BLOCKS_PER_SIZE {
            return false;
        }
        unsafe { *b.ptrs.get_unchecked_mut(b.len as usize) = ptr };
        b.len += 1;
        self.held += size;
        self.filled |= 1 << k;
        true
    }

    /// Empties the cache, calling `f(address, size)` for each cached block.
    ///
    /// The test for an empty cache is inlined at the call (most requests that reach the
    /// pool find nothing cached: a call for it was 4 instructions a replay event); the
    /// emptying is not.
    #[inline(always)]
    pub fn take_blocks(&mut self, f: impl FnMut(u64, u64)) {
        if self.held != 0 {
            self.take_held(f);
        }
    }

    /// [`TcState::take_blocks`] of a cache that holds blocks.
    #[inline(never)]
    fn take_held(&mut self, mut f: impl FnMut(u64, u64)) {
        let mut filled = std::mem::take(&mut self.filled);
        while filled != 0 {
            let b = &mut self.bins[filled.trailing_zeros() as usize];
            filled &= filled - 1;
            b.ptrs[..b.len as usize].iter().for_each(|&p| f(p, b.size));
            b.len = 0;
        }
        self.held = 0;
    }

    /// Bytes of the cached blocks.
    #[cfg(test)]
    pub fn held_bytes(&self) -> u64 {
        self.held
    }
}

/// One thread's cache for one engine. Shared (`Arc`) between the thread's local storage
/// and the engine's registry.
pub(crate) struct ThreadCache {
    /// The shard whose pool every cached block belongs to (the thread's home shard).
    pub home: usize,
    active: AtomicBool,
    claimed: AtomicBool,
    exited: AtomicBool,
    /// Full fence on the owner's side (no `membarrier`).
    owner_fence: bool,
    /// Held by a claimer for the whole claim.
    gate: RawMutex,
    state: UnsafeCell<TcState>,
    /// The adaptive bypass ([`ThreadCache::bypassed`]), its score and the cache's hit
    /// count at the last request that reached the pool. Written and read by the owner
    /// only (atomics, relaxed, only so that the cache can be shared: plain moves on x86).
    bypass: AtomicBool,
    score: AtomicU32,
    hits_seen: AtomicU64,
}

/// The score a cache starts with and returns to when it leaves the bypass: this many
/// more requests reaching the pool than cache hits send it into the bypass.
pub const BYPASS_START: u32 = 64;
/// The score a bypassed cache leaves the bypass at: this many more requests whose size
/// is the owner's last free (a hit, had the block been cached) than others.
pub const BYPASS_LEAVE: u32 = 16;

// SAFETY: `state` is accessed only by the owning thread between `enter` and the guard's
// drop, or by a claimer holding `gate` after the owner was seen inactive with `claimed`
// set (see the module documentation for why the two never overlap).
unsafe impl Sync for ThreadCache {}
unsafe impl Send for ThreadCache {}

/// The owner inside its cache; leaving it (drop) lets a claimer in.
pub(crate) struct Owner<'a>(&'a ThreadCache);

impl std::ops::Deref for Owner<'_> {
    type Target = TcState;
    #[inline]
    fn deref(&self) -> &TcState {
        // SAFETY: see `ThreadCache`'s Sync implementation.
        unsafe { &*self.0.state.get() }
    }
}

impl std::ops::DerefMut for Owner<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut TcState {
        // SAFETY: see `ThreadCache`'s Sync implementation.
        unsafe { &mut *self.0.state.get() }
    }
}

impl<'a> Owner<'a> {
    /// The cache the owner is inside.
    #[inline(always)]
    pub fn cache(&self) -> &'a ThreadCache {
        self.0
    }
}

impl Drop for Owner<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.active.store(false, Ordering::Release);
    }
}

impl ThreadCache {
    fn new(home: usize, owner_fence: bool) -> ThreadCache {
        ThreadCache {
            home,
            active: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            owner_fence,
            gate: RawMutex::INIT,
            state: UnsafeCell::new(TcState::new()),
            bypass: AtomicBool::new(false),
            score: AtomicU32::new(BYPASS_START),
            hits_seen: AtomicU64::new(0),
        }
    }

    /// Whether the owner goes past this cache to the pool: the adaptive bypass of the
    /// pools that take the cached blocks back before every request that reaches them
    /// (`expandable`, whose best fit must see freed blocks merged). There a block cached
    /// at a free waits only until the owner's next request that misses, so the cache hits
    /// only where a block of a size just freed is asked for again (the pair benchmark:
    /// every request), and on an allocation trace most requests miss and pay the cache's
    /// checks, its live table and the hand-back on top of the pool's work
    /// (bertlike_infer_varlen_lognormal_seed102: 451 warm instructions an event with the
    /// cache, 379 without; callgrind, bench/results/host-2026-11-29-exp14). So each
    /// request that reaches the pool past the cache scores the cache's hits since the
    /// last such request up (to [`BYPASS_START`]) and itself one down
    /// ([`ThreadCache::score_miss`]: the hits are counted by the cache's statistics, so
    /// a hit pays nothing for it); at 0 the cache, empty of cached blocks, hands its live
    /// blocks to the shard and is bypassed: [`Registry::current`] answers None, and
    /// every path is the engine's path without thread caches. While bypassed, a request
    /// for the size of the last block freed to the shard's pool scores one up, any other
    /// one down (not below 0; the engine keeps this score in the shard, under the lock
    /// its paths hold), and at [`BYPASS_LEAVE`] the cache is used again
    /// ([`Registry::end_bypass`]).
    #[inline(always)]
    pub fn bypassed(&self) -> bool {
        self.bypass.load(Ordering::Relaxed)
    }

    /// A request that reached the pool past the (not bypassed) cache `st` (owner only,
    /// inside it): scores the cache's hits since the last one up and this one down.
    /// Returns true when the score reached 0 (the caller bypasses the cache:
    /// [`Registry::start_bypass`]).
    #[inline(always)]
    pub fn score_miss(&self, st: &TcState) -> bool {
        let hits = st.stats.allocations.wrapping_sub(self.hits_seen.load(Ordering::Relaxed));
        self.hits_seen.store(st.stats.allocations, Ordering::Relaxed);
        let s =
            (self.score.load(Ordering::Relaxed) as u64).saturating_add(hits).min(BYPASS_START as u64) as u32;
        let s = s.saturating_sub(1);
        self.score.store(s, Ordering::Relaxed);
        s == 0
    }

    /// Enters the cache as its owner (only the owning thread may call this, and never
    /// while it holds a shard lock). Waits while another thread has it claimed.
    #[inline]
    pub fn enter(&self) -> Owner<'_> {
        loop {
            self.active.store(true, Ordering::Relaxed);
            if self.owner_fence {
                fence(Ordering::SeqCst);
            } else {
                // The claimer's membarrier orders this store before the load below.
                compiler_fence(Ordering::SeqCst);
            }
            if !self.claimed.load(Ordering::Acquire) {
                return Owner(self);
            }
            self.active.store(false, Ordering::Release);
            self.wait_claim();
        }
    }

    #[cold]
    fn wait_claim(&self) {
        let g = self.gate.lock();
        // SAFETY: locked just above by this thread.
        unsafe { self.gate.unlock(g) };
    }
}

/// A claimed cache: its state, for the claimer.
pub(crate) struct Claimed<'a> {
    /// The cache.
    pub tc: &'a ThreadCache,
    /// Its contents.
    pub state: &'a mut TcState,
    /// Its thread has exited: the engine adopts what it holds.
    pub exited: bool,
}

/// What a thread cache and its engine share beyond the engine's lifetime.
struct Shared {
    /// The engine was dropped: its caches are empty and unused.
    dead: AtomicBool,
    /// Caches whose threads exited, not yet adopted.
    exited: AtomicUsize,
    /// Caches in the registry: of running threads, and of exited threads until they are
    /// adopted (their live blocks still count, unseen by the other threads' caches).
    caches: AtomicUsize,
}

/// One engine's thread caches.
pub(crate) struct Registry {
    id: u64,
    shared: Arc<Shared>,
    list: Mutex<Vec<Arc<ThreadCache>>>,
    owner_fence: bool,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The most recently used (engine id, cache) of this thread: no destructor, so reading
/// it costs no registration check. Id `u64::MAX` once the thread's caches are gone.
struct Last {
    id: Cell<u64>,
    /// Null while the cache is bypassed ([`ThreadCache::bypassed`]).
    tc: Cell<*const ThreadCache>,
    /// The cache, bypassed or not.
    real: Cell<*const ThreadCache>,
}

/// Every cache of this thread, one per engine used.
struct Caches(RefCell<Vec<(u64, Arc<ThreadCache>, Arc<Shared>)>>);

thread_local! {
    static LAST: Last = const {
        Last { id: Cell::new(0), tc: Cell::new(std::ptr::null()), real: Cell::new(std::ptr::null()) }
    };
    static CACHES: Caches = const { Caches(RefCell::new(Vec::new())) };
}

impl Drop for Caches {
    /// Thread exit: each cache is marked exited for its engine to adopt.
    fn drop(&mut self) {
        let _ = LAST.try_with(|l| {
            l.id.set(u64::MAX);
            l.tc.set(std::ptr::null());
            l.real.set(std::ptr::null());
        });
        for (_, tc, shared) in self.0.borrow_mut().drain(..) {
            let g = tc.gate.lock(); // no claim in progress
            tc.exited.store(true, Ordering::Release);
            // SAFETY: locked just above.
            unsafe { tc.gate.unlock(g) };
            if !shared.dead.load(Ordering::Acquire) {
                shared.exited.fetch_add(1, Ordering::Release);
            }
        }
    }
}

/// `membarrier(2)` commands (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Whether this process may use `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
/// (registered once, on first use).
fn membarrier_registered() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
    })
}

impl Registry {
    /// An empty registry for a new engine.
    pub fn new() -> Registry {
        Registry {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shared: Arc::new(Shared {
                dead: AtomicBool::new(false),
                exited: AtomicUsize::new(0),
                caches: AtomicUsize::new(0),
            }),
            list: Mutex::new(Vec::new()),
            owner_fence: !membarrier_registered(),
        }
    }

    /// Whether `membarrier` serves the claims (false: the owners fence instead).
    pub fn uses_membarrier(&self) -> bool {
        !self.owner_fence
    }

    /// The calling thread's cache for this engine, made on first use with `home` as its
    /// shard; None while the thread is exiting (its caches are gone) or while the cache
    /// is bypassed ([`ThreadCache::bypassed`]: a null pointer in the thread's record,
    /// so the test costs nothing beside the record's). Never call it while holding a
    /// shard lock (a first use takes the registry's lock).
    #[inline]
    pub fn current(&self, home: impl FnOnce() -> usize) -> Option<&ThreadCache> {
        let hit = LAST.with(|l| (l.id.get() == self.id).then(|| l.tc.get()));
        match hit {
            // SAFETY: LAST points at a cache that this thread's CACHES holds an Arc of
            // until the thread exits (when LAST is cleared), or is null.
            Some(p) => unsafe { p.as_ref() },
            None => self.current_slow(home()),
        }
    }

    /// The calling thread's cache for this engine if it is bypassed (to end the bypass:
    /// [`Registry::end_bypass`]).
    #[inline]
    pub fn bypassed(&self) -> Option<&ThreadCache> {
        let p = LAST.with(|l| (l.id.get() == self.id && l.tc.get().is_null()).then(|| l.real.get()))?;
        // SAFETY: as in `current`.
        unsafe { p.as_ref() }
    }

    /// Bypasses the calling thread's cache `tc` (owner only, inside it, with no block
    /// cached and its live blocks handed to the shard).
    pub fn start_bypass(&self, tc: &ThreadCache, st: &TcState) {
        debug_assert!(st.held == 0 && st.live.is_empty());
        tc.bypass.store(true, Ordering::Relaxed);
        LAST.with(|l| {
            if l.id.get() == self.id {
                l.tc.set(std::ptr::null());
            }
        });
    }

    /// Ends the bypass of the calling thread's cache `tc` (owner only).
    pub fn end_bypass(&self, tc: &ThreadCache) {
        tc.score.store(BYPASS_START, Ordering::Relaxed);
        tc.bypass.store(false, Ordering::Relaxed);
        LAST.with(|l| {
            if l.id.get() == self.id {
                l.tc.set(l.real.get());
            }
        });
    }

    #[cold]
    fn current_slow(&self, home: usize) -> Option<&ThreadCache> {
        if LAST.with(|l| l.id.get()) == u64::MAX {
            return None;
        }
        let p = CACHES
            .try_with(|c| {
                let mut c = c.0.borrow_mut();
                // Caches of engines since dropped are dead weight.
                c.retain(|(_, _, s)| !s.dead.load(Ordering::Acquire));
                if let Some((_, tc, _)) = c.iter().find(|(id, _, _)| *id == self.id) {
                    return Arc::as_ptr(tc);
                }
                let tc = Arc::new(ThreadCache::new(home, self.owner_fence));
                self.list.lock().push(tc.clone());
                self.shared.caches.fetch_add(1, Ordering::Relaxed);
                let p = Arc::as_ptr(&tc);
                c.push((self.id, tc, self.shared.clone()));
                p
            })
            .ok()?;
        // SAFETY: as in `current` (p is not null).
        let tc = unsafe { &*p };
        LAST.with(|l| {
            l.id.set(self.id);
            l.tc.set(if tc.bypassed() { std::ptr::null() } else { p });
            l.real.set(p);
        });
        (!tc.bypassed()).then_some(tc)
    }

    /// Whether the calling thread's cache is the only one (so, with one shard in use,
    /// its view of the totals is exact). A cache of an exited thread counts until it is
    /// adopted.
    #[inline]
    pub fn single_thread(&self) -> bool {
        self.shared.caches.load(Ordering::Relaxed) <= 1
    }

    /// Whether caches of exited threads wait to be adopted.
    #[inline]
    pub fn has_exited(&self) -> bool {
        self.shared.exited.load(Ordering::Relaxed) != 0
    }

    /// Claims every cache and runs `f` on them; caches of exited threads come with
    /// `exited` set and are dropped from the registry after `f` (which must have emptied
    /// them). The calling thread must not be inside its own cache or hold a shard lock.
    pub fn claim_all<R>(&self, f: impl FnOnce(&mut [Claimed<'_>]) -> R) -> R {
        let mut list = self.list.lock();
        let mut guards = Vec::with_capacity(list.len());
        for tc in list.iter() {
            guards.push(tc.gate.lock());
            tc.claimed.store(true, Ordering::Relaxed);
        }
        // Make every owner that may have missed `claimed` visible as active (the
        // caller's own cache and those of exited threads have no owner running).
        let own = LAST.try_with(|l| l.real.get()).unwrap_or(std::ptr::null());
        if list.iter().any(|tc| !std::ptr::eq(Arc::as_ptr(tc), own) && !tc.exited.load(Ordering::Acquire)) {
            self.heavy_barrier();
        }
        for tc in list.iter() {
            let mut spins = 0u32;
            while tc.active.load(Ordering::Acquire) {
                spins += 1;
                if spins < 100 { std::hint::spin_loop() } else { std::thread::yield_now() }
            }
        }
        // Which threads had exited when claimed: exactly those are adopted by `f` and
        // dropped below (a thread may exit once the gates open again; its cache stays
        // for the next claim).
        let exited: Vec<bool> = list.iter().map(|tc| tc.exited.load(Ordering::Acquire)).collect();
        let r = {
            let mut claimed: Vec<Claimed<'_>> = list
                .iter()
                .zip(&exited)
                .map(|(tc, &exited)| Claimed {
                    tc,
                    // SAFETY: claimed with the owner outside (module documentation); one
                    // &mut per cache, living only inside this block.
                    state: unsafe { &mut *tc.state.get() },
                    exited,
                })
                .collect();
            // Release the caches even if `f` panics (the C ABI catches panics and the
            // owners would otherwise wait for ever).
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut claimed)))
        };
        let before = list.len();
        for (tc, g) in list.iter().zip(guards) {
            tc.claimed.store(false, Ordering::Release);
            // SAFETY: locked above by this thread.
            unsafe { tc.gate.unlock(g) };
        }
        let mut k = 0;
        list.retain(|_| {
            k += 1;
            !exited[k - 1]
        });
        let adopted = before - list.len();
        if adopted > 0 {
            self.shared.exited.fetch_sub(adopted, Ordering::Relaxed);
            self.shared.caches.fetch_sub(adopted, Ordering::Relaxed);
        }
        r.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    /// The engine is going away: its caches are never used again.
    pub fn mark_dead(&self) {
        self.shared.dead.store(true, Ordering::Release);
    }

    fn heavy_barrier(&self) {
        if self.owner_fence {
            fence(Ordering::SeqCst);
        } else {
            // SAFETY: as in `membarrier_registered`.
            let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
            // Registered at start, so this cannot fail (membarrier(2)); if it did, the
            // claim would not be safe.
            assert_eq!(r, 0, "membarrier failed after registration: {}", std::io::Error::last_os_error());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_bounded_and_exact() {
        let mut s = TcState::new();
        assert_eq!(s.pop(4096), None);
        for i in 0..BLOCKS_PER_SIZE as u64 {
            assert!(s.push(0x10000 + i * 4096, 4096, MAX_CACHED_SIZE));
        }
        assert!(!s.push(0x90000, 4096, MAX_CACHED_SIZE), "more than BLOCKS_PER_SIZE");
        assert!(!s.push(0x90000, MAX_CACHED_SIZE + 512, MAX_CACHED_SIZE), "too large");
        assert!(!s.push(0x90000, 8192, 4096), "above the engine's limit");
        assert!(s.push(0x90000, 8192, 8192));
        assert_eq!(s.pop(8192), Some(0x90000));
        assert_eq!(s.held_bytes(), 4096 * BLOCKS_PER_SIZE as u64);
        assert_eq!(s.pop(4096), Some(0x10000 + (BLOCKS_PER_SIZE as u64 - 1) * 4096), "LIFO");
        assert_eq!(s.pop(8192), None);
        let mut big = TcState::new();
        let mut n = 0;
        while big.push(0x100000 * (n + 1), MAX_CACHED_SIZE - 512 * n, MAX_CACHED_SIZE) {
            n += 1;
        }
        assert!(big.held_bytes() <= MAX_CACHED_BYTES);
        let mut blocks = 0;
        big.take_blocks(|_, _| blocks += 1);
        assert_eq!(blocks, n);
        assert_eq!(big.held_bytes(), 0);
    }
}

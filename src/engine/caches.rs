//! The engine's side of the per-thread caches ([`crate::thread_cache`]): the lock-free
//! hit and free in the calling thread's cache, their peaks, and the claims of all caches
//! that hand cached and live blocks to the shards (for frees and copies on other
//! threads, statistics, reclaim, the memory tools and drop).

use super::{Engine, Sink};
use crate::config::PoolKind;
use crate::live::LiveBlock;
use crate::pool::{Block, MIN_BLOCK, Pool, round_up};
use crate::thread_cache::{self, Claimed, Owner, Registry, TcState, ThreadCache};
use std::sync::atomic::Ordering::Relaxed;

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

impl Engine {
    /// The calling thread's cache, if thread caches are on (None also while the thread
    /// exits).
    #[inline]
    pub(super) fn thread_cache(&self) -> Option<&ThreadCache> {
        // Stream-aware allocation: thread caches serve the default stream only; the check
        // of the stream goes here, the one place where a call chooses its thread cache.
        // A bypassed cache ([`ThreadCache::bypassed`]; `expandable` only) is none: it
        // holds no block, cached or live, so every path is the one without thread caches.
        self.tc.as_ref()?.current(|| self.home())
    }

    /// Ends the bypass of the calling thread's cache, if it is bypassed and its home is
    /// `home` (its requests to the pool ask for the sizes it just freed:
    /// [`ThreadCache::bypassed`]). Rare, out of line; takes no lock.
    #[cold]
    #[inline(never)]
    pub(super) fn end_bypass(&self, home: usize) {
        if let Some(reg) = &self.tc
            && let Some(tc) = reg.bypassed()
            && tc.home == home
        {
            reg.end_bypass(tc);
        }
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
    pub(super) fn tc_alloc<S: Sink<Block>>(&self, tc: &ThreadCache, bytes: u64, out: &mut S) -> Option<u64> {
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
    pub(super) fn tc_free<S: Sink<(u64, u64)>>(&self, tc: &ThreadCache, ptr: u64, out: &mut S) -> bool {
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

    /// Bypasses the calling thread's cache `o` (its score reached 0:
    /// [`ThreadCache::bypassed`]), inside it and holding its home shard's lock `s`, with
    /// its cached blocks just handed back: its live blocks move into the shard's table
    /// (numbered anew, as a claim's migration does), so that their frees find them there
    /// while the cache is bypassed. Out of line: once per change of the workload's
    /// pattern.
    #[cold]
    #[inline(never)]
    pub(super) fn bypass_cache(&self, o: &mut Owner<'_>, s: &mut super::ShardState, shard: &super::Shard) {
        let st: &mut TcState = o;
        for (p, requested, size) in st.live.drain() {
            st.stats.transfer_to(&mut s.stats, requested, size);
            let seq = s.stats.next_seq();
            s.live.insert(p, LiveBlock { requested, size, seq, origin: None });
        }
        shard.publish(s);
        st.window.close();
        if let Some(reg) = &self.tc {
            reg.start_bypass(o.cache(), o);
        }
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

    /// Runs `f` with every thread cache claimed (none when they are off), after handing
    /// the contents of those whose threads exited to their home shards. The caller must
    /// hold no shard lock and not be inside its own cache.
    /// Every claim also settles each cache's derived hit count and closes its peak
    /// window (a claim may move live bytes between a cache and a shard, or reset the
    /// peaks).
    pub(super) fn with_caches<R>(&self, f: impl FnOnce(&mut [Claimed<'_>]) -> R) -> R {
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
    pub(super) fn adopt(&self, c: &mut Claimed<'_>) {
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
    pub(super) fn return_blocks(&self, c: &mut Claimed<'_>) {
        let i = c.tc.home;
        let mut s = None;
        c.state.take_blocks(|p, size| {
            s.get_or_insert_with(|| self.shards[i].state.lock()).pool.free(p, size, self.up.shard(i))
        });
    }

    /// Moves a claimed cache's live blocks into its home shard's table (for copies: a
    /// pinned block must be live in a shard).
    pub(super) fn migrate_live(&self, c: &mut Claimed<'_>) {
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
    pub(super) fn migrate_own(&self, tc: &ThreadCache, ptr: u64) {
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
    pub(super) fn adopt_exited(&self) {
        if self.tc.as_ref().is_some_and(Registry::has_exited) {
            self.with_caches(|_| ());
        }
    }

    /// The free of a block that another thread's cache handed out (found by claiming the
    /// caches); false if no cache holds `ptr` live.
    #[cold]
    pub(super) fn free_claimed<S: Sink<(u64, u64)>>(&self, ptr: u64, out: &mut S) -> bool {
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
}

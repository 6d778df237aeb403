//! Statistics, named as PyTorch's `torch.cuda.memory_stats` and docs/contract.md: the
//! snapshot [`Stats`] (the C ABI's `cumem_stats_t`), and every counter and peak behind
//! it, with their one [`reset`]. Each layer holds the part it updates: a shard its
//! [`ShardStats`] under its lock, the engine the [`Peaks`], the upstream layer the
//! [`DeviceStats`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of the engine's statistics. Byte counts are in bytes, times in ns.
///
/// Current values are exact whenever no other thread is allocating. Peaks are exact while
/// one thread allocates (one engine shard in use, as in any single-threaded program);
/// with several threads allocating concurrently each thread's shard reports its changes
/// in steps of 1 MiB (so that threads never share a written cache line on the hot path),
/// and `peak_requested_bytes`, `peak_allocated_bytes` and `peak_cached_bytes` may then
/// miss up to 1 MiB per such thread.
///
/// Invariants (checked by the tests after every operation, at quiescence):
/// `requested_bytes ≤ allocated_bytes ≤ reserved_bytes`,
/// `cached_bytes = reserved_bytes − allocated_bytes`, and with nothing live and after a
/// full reclaim, `reserved_bytes = 0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Sum of the sizes callers asked for, live (PyTorch's "requested"/"active").
    pub requested_bytes: u64,
    /// Sum of block sizes handed out (after rounding), live.
    pub allocated_bytes: u64,
    /// Bytes held by the pool, free for reuse (`reserved − allocated`).
    pub cached_bytes: u64,
    /// Bytes currently obtained from the device.
    pub reserved_bytes: u64,
    /// Free bytes inside segments that are partly in use and so cannot be released.
    pub inactive_split_bytes: u64,
    /// High-water mark of `requested_bytes` since start or the last reset.
    pub peak_requested_bytes: u64,
    /// High-water mark of `allocated_bytes`.
    pub peak_allocated_bytes: u64,
    /// High-water mark of `cached_bytes`.
    pub peak_cached_bytes: u64,
    /// High-water mark of `reserved_bytes`.
    pub peak_reserved_bytes: u64,
    /// Successful allocations of at least one byte, since start or the last reset.
    pub num_allocations: u64,
    /// Successful frees of a non-null pointer, since start or the last reset. A block
    /// allocated before a reset and freed after it counts here but not in
    /// `num_allocations` (as PyTorch's `allocation`/`freed` counts), so after a reset with
    /// live blocks `num_frees` may exceed `num_allocations`; the live bytes are
    /// `requested_bytes`/`allocated_bytes`, which a reset never changes.
    pub num_frees: u64,
    /// Allocations served from cached memory, without calling the device.
    pub num_cache_hits: u64,
    /// Allocations that called the device (including failed ones).
    pub num_cache_misses: u64,
    /// Calls to the device's allocation function that succeeded.
    pub num_device_allocations: u64,
    /// Calls to the device's free function.
    pub num_device_frees: u64,
    /// Time spent in device allocation calls, ns.
    pub device_alloc_ns: u64,
    /// Time spent in device free calls, ns.
    pub device_free_ns: u64,
    /// Allocations retried after releasing cached memory on out of memory (PyTorch's
    /// `num_alloc_retries`).
    pub num_alloc_retries: u64,
    /// Allocations that failed with out of memory after the retry (PyTorch's `num_ooms`).
    pub num_ooms: u64,
    /// `JULIA_CUDA_MEMORY_LIMIT` in bytes; 0 when there is none.
    pub limit_bytes: u64,
    /// `num_cache_hits / (num_cache_hits + num_cache_misses)`; 0 before any allocation.
    pub cache_hit_rate: f64,
    /// `(reserved − allocated) / reserved`; 0 when nothing is reserved.
    pub fragmentation_ratio: f64,
    /// Device frees that reported an error (the segment is counted as released either
    /// way; the error is also logged). Added last, so the layout of the fields above is
    /// that of earlier versions.
    pub num_device_free_errors: u64,
    /// Allocations a caller retried after a garbage collection (the Julia package's
    /// `GC.gc(false)` and `GC.gc(true)` rungs), reported by `cumem_alloc_ex`'s
    /// `CUMEM_ALLOC_GC_RETRY` flag.
    pub num_gc_retries: u64,
    /// Allocations a caller made in the rung that releases the cache and in its waits for
    /// other threads' frees (`CUMEM_ALLOC_RECLAIM_RETRY`).
    pub num_reclaim_retries: u64,
}

/// Counts of events, per shard (PyTorch's accumulated counts).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    /// `allocations` when the statistics were last reset (`num_allocations` is the
    /// difference, so the shard's allocation count itself is never reset).
    allocations_at_reset: u64,
    num_frees: u64,
    num_cache_hits: u64,
    num_cache_misses: u64,
    num_alloc_retries: u64,
    num_ooms: u64,
    num_gc_retries: u64,
    num_reclaim_retries: u64,
}

/// A shard adds its byte counts to the engine-wide sums once they have moved by more
/// than this since its last addition (Linux's `percpu_counter` scheme), so threads
/// allocating and freeing on their own shards never write shared memory on the hot path.
pub(crate) const FOLD_BYTES: u64 = 1 << 20;

/// One engine shard's statistics: plain integers, updated under the shard's lock.
#[derive(Debug, Default)]
pub(crate) struct ShardStats {
    /// Live requested and allocated bytes of the shard.
    pub requested: u64,
    pub allocated: u64,
    /// The part of `requested`/`allocated` already added to [`Peaks`]'s sums.
    folded_requested: u64,
    folded_allocated: u64,
    /// Successful allocations of the shard since it started, never reset.
    pub allocations: u64,
    /// The number of the shard's newest live block, never reset: leak checks number live
    /// blocks with it. Allocations take the next number, and so do blocks a thread cache
    /// handed out when they move into the shard's table (the engine moves them before
    /// every leak mark and check, so a block still in a thread cache is newer than every
    /// mark).
    pub seq: u64,
    counters: Counters,
}

impl ShardStats {
    /// A block of `size` bytes was handed out for `requested` bytes (`hit`: from the
    /// cache). Returns its number in the shard ([`ShardStats::allocations`]).
    #[inline]
    pub fn on_alloc(&mut self, requested: u64, size: u64, hit: bool) -> u64 {
        self.requested += requested;
        self.allocated += size;
        self.allocations += 1;
        self.seq += 1;
        if hit {
            self.counters.num_cache_hits += 1;
        } else {
            self.counters.num_cache_misses += 1;
        }
        self.seq
    }

    /// A thread cache handed out a block of `size` bytes for `requested` bytes. A cache
    /// counts neither hits (every allocation of a cache is one: [`ShardStats::settle_cache_hits`]
    /// derives them) nor block numbers (a block gets one when it moves into a shard).
    #[inline(always)]
    pub fn on_cache_alloc(&mut self, requested: u64, size: u64) {
        self.requested += requested;
        self.allocated += size;
        self.allocations += 1;
    }

    /// A thread cache's hits: all its allocations since the last reset. Called on a
    /// claimed cache before its statistics are read, reset or absorbed.
    pub fn settle_cache_hits(&mut self) {
        self.counters.num_cache_hits = self.allocations - self.counters.allocations_at_reset;
    }

    /// A fresh number for a live block that moves into this shard's table (see
    /// [`ShardStats::seq`]).
    #[inline]
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// An allocation failed in the pool (it called the device, or tried to).
    #[inline]
    pub fn on_failed_alloc(&mut self) {
        self.counters.num_cache_misses += 1;
    }

    /// A block of `size` bytes, handed out for `requested` bytes, was freed.
    #[inline]
    pub fn on_free(&mut self, requested: u64, size: u64) {
        self.requested -= requested;
        self.allocated -= size;
        self.counters.num_frees += 1;
    }

    /// An allocation is retried after the cache was released.
    pub fn on_retry(&mut self) {
        self.counters.num_alloc_retries += 1;
    }

    /// An allocation failed with out of memory after the retry.
    pub fn on_oom(&mut self) {
        self.counters.num_ooms += 1;
    }

    /// A caller's ladder retried an allocation, after a GC (`gc`) or in its reclaim rung.
    pub fn on_ladder_retry(&mut self, gc: bool) {
        if gc {
            self.counters.num_gc_retries += 1;
        } else {
            self.counters.num_reclaim_retries += 1;
        }
    }

    /// Folds this shard's change since the last fold into `peaks`' engine-wide sums if it
    /// exceeds [`FOLD_BYTES`]; returns the new engine-wide `(requested, allocated)` if it
    /// did.
    #[inline]
    pub fn fold(&mut self, peaks: &Peaks) -> Option<(u64, u64)> {
        // Differences as two's complement: |d| ≤ FOLD_BYTES iff d + FOLD_BYTES ≤ 2·FOLD_BYTES.
        let dr = self.requested.wrapping_sub(self.folded_requested);
        let da = self.allocated.wrapping_sub(self.folded_allocated);
        if (dr.wrapping_add(FOLD_BYTES) | da.wrapping_add(FOLD_BYTES)) <= 2 * FOLD_BYTES {
            return None;
        }
        (self.folded_requested, self.folded_allocated) = (self.requested, self.allocated);
        let r = peaks.sums[0].fetch_add(dr, Relaxed).wrapping_add(dr);
        let a = peaks.sums[1].fetch_add(da, Relaxed).wrapping_add(da);
        Some((r, a))
    }

    /// Moves a live block of `size` bytes, handed out for `requested`, from these
    /// statistics to `to` (a thread cache's block entered in a shard's table): the
    /// engine-wide sums they were folded into do not change, so neither does what is
    /// left to fold.
    pub fn transfer_to(&mut self, to: &mut ShardStats, requested: u64, size: u64) {
        self.requested -= requested;
        self.allocated -= size;
        self.folded_requested = self.folded_requested.wrapping_sub(requested);
        self.folded_allocated = self.folded_allocated.wrapping_sub(size);
        to.requested += requested;
        to.allocated += size;
        to.folded_requested = to.folded_requested.wrapping_add(requested);
        to.folded_allocated = to.folded_allocated.wrapping_add(size);
    }

    /// Adds every byte count and counter of `other` (an exited thread's cache) to these,
    /// leaving `other` empty.
    pub fn absorb(&mut self, other: &mut ShardStats) {
        let o = std::mem::take(other);
        self.requested += o.requested;
        self.allocated += o.allocated;
        self.folded_requested = self.folded_requested.wrapping_add(o.folded_requested);
        self.folded_allocated = self.folded_allocated.wrapping_add(o.folded_allocated);
        self.allocations += o.allocations;
        let (c, d) = (&mut self.counters, o.counters);
        c.allocations_at_reset += d.allocations_at_reset;
        c.num_gc_retries += d.num_gc_retries;
        c.num_reclaim_retries += d.num_reclaim_retries;
        c.num_frees += d.num_frees;
        c.num_cache_hits += d.num_cache_hits;
        c.num_cache_misses += d.num_cache_misses;
        c.num_alloc_retries += d.num_alloc_retries;
        c.num_ooms += d.num_ooms;
    }

    /// Adds this shard's current bytes and counts to `st`.
    pub fn add_to(&self, st: &mut Stats) {
        st.requested_bytes += self.requested;
        st.allocated_bytes += self.allocated;
        let c = &self.counters;
        st.num_allocations += self.allocations - c.allocations_at_reset;
        st.num_frees += c.num_frees;
        st.num_cache_hits += c.num_cache_hits;
        st.num_cache_misses += c.num_cache_misses;
        st.num_alloc_retries += c.num_alloc_retries;
        st.num_ooms += c.num_ooms;
        st.num_gc_retries += c.num_gc_retries;
        st.num_reclaim_retries += c.num_reclaim_retries;
    }
}

/// The range of a thread cache's live bytes (requested and allocated) within which its
/// hits and frees need neither a peak update nor a fold, so that the cache-hit pair tests
/// two bounds per operation instead of computing engine-wide totals.
///
/// Why this is exact. While the calling thread is the only one with a cache and only its
/// home shard is in use, the engine-wide bytes are the home shard's `S` plus the cache's
/// `T`. Each time `T` leaves the window, the engine raises the peaks from `S + T` and
/// widens the window to include `T`; so the peaks of requested and allocated bytes are at
/// least `S + hi`, and that of cached bytes at least `reserved − S − lo`. While `S` and
/// `reserved` stay as they were, any `T` inside the window is covered. Everything that
/// changes them on that thread (its shard path) or resets the peaks (`reset_stats`, and
/// every other claim) [closes](PeakWindow::close) the window, so the next operation
/// recomputes. With several threads or shards the peaks come from the folded sums, and
/// the window is the fold's own range ([`FOLD_BYTES`] either side of the folded value):
/// leaving it is exactly when [`ShardStats::fold`] would fold. Both kinds of window are
/// within the fold range, so the folded sums stay within [`FOLD_BYTES`] per cache in any
/// mode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeakWindow {
    hi_requested: u64,
    hi_allocated: u64,
    lo_requested: u64,
    lo_allocated: u64,
}

impl Default for PeakWindow {
    fn default() -> Self {
        PeakWindow::CLOSED
    }
}

impl PeakWindow {
    /// A window no value is inside: the next operation recomputes.
    pub(crate) const CLOSED: PeakWindow =
        PeakWindow { hi_requested: 0, hi_allocated: 0, lo_requested: u64::MAX, lo_allocated: u64::MAX };

    /// Whether live bytes that rose to `requested`/`allocated` (an allocation) are inside.
    #[inline(always)]
    pub fn covers_rise(&self, requested: u64, allocated: u64) -> bool {
        requested <= self.hi_requested && allocated <= self.hi_allocated
    }

    /// Whether live bytes that fell to `requested`/`allocated` (a free) are inside.
    #[inline(always)]
    pub fn covers_fall(&self, requested: u64, allocated: u64) -> bool {
        requested >= self.lo_requested && allocated >= self.lo_allocated
    }

    /// Closes the window (the rest of the engine changed, or the peaks were reset).
    #[inline]
    pub fn close(&mut self) {
        *self = PeakWindow::CLOSED;
    }

    /// Reopens the window around `s`'s live bytes after the peaks were raised from them:
    /// `exact`, widened to include them (set to them if closed); else the fold range
    /// only. Call after [`ShardStats::fold`], which leaves the live bytes within
    /// [`FOLD_BYTES`] of the folded ones.
    pub fn reopen(&mut self, s: &ShardStats, exact: bool) {
        let (r, a) = (s.requested, s.allocated);
        if !exact {
            *self = PeakWindow {
                hi_requested: u64::MAX,
                hi_allocated: u64::MAX,
                lo_requested: 0,
                lo_allocated: 0,
            };
        } else if self.hi_requested < self.lo_requested {
            *self = PeakWindow { hi_requested: r, hi_allocated: a, lo_requested: r, lo_allocated: a };
        } else {
            self.hi_requested = self.hi_requested.max(r);
            self.hi_allocated = self.hi_allocated.max(a);
            self.lo_requested = self.lo_requested.min(r);
            self.lo_allocated = self.lo_allocated.min(a);
        }
        // The fold range, in two's complement: a cache's folded bytes may be below zero
        // (blocks it handed out moved to a shard), never below −FOLD_BYTES after a fold.
        let top = |f: u64| f.wrapping_add(FOLD_BYTES);
        let bottom = |f: u64| {
            let b = f.wrapping_sub(FOLD_BYTES);
            if (b as i64) < 0 { 0 } else { b }
        };
        self.hi_requested = self.hi_requested.min(top(s.folded_requested));
        self.hi_allocated = self.hi_allocated.min(top(s.folded_allocated));
        self.lo_requested = self.lo_requested.max(bottom(s.folded_requested));
        self.lo_allocated = self.lo_allocated.max(bottom(s.folded_allocated));
    }
}

/// The engine-wide peaks of requested, allocated and cached bytes, and the folded sums
/// they are taken from when several shards are in use.
#[derive(Debug, Default)]
pub(crate) struct Peaks {
    /// Engine-wide requested and allocated bytes, up to [`FOLD_BYTES`] per shard behind.
    sums: [AtomicU64; 2],
    requested: AtomicU64,
    allocated: AtomicU64,
    cached: AtomicU64,
}

impl Peaks {
    /// Engine-wide allocated bytes as folded so far (up to [`FOLD_BYTES`] per shard
    /// behind the exact sum): a cheap estimate that moves in steps of about 1 MiB.
    #[inline]
    pub fn folded_allocated(&self) -> u64 {
        self.sums[1].load(Relaxed)
    }

    /// Raises the peaks to engine-wide `requested` and `allocated` bytes with `reserved`
    /// bytes obtained from the device.
    #[inline]
    pub fn raise(&self, requested: u64, allocated: u64, reserved: u64) {
        bump(&self.requested, requested);
        bump(&self.allocated, allocated);
        self.raise_cached(allocated, reserved);
    }

    /// Raises the peak of cached bytes (a free changes only that one).
    #[inline]
    pub fn raise_cached(&self, allocated: u64, reserved: u64) {
        bump(&self.cached, reserved.saturating_sub(allocated));
    }
}

#[inline]
fn bump(peak: &AtomicU64, v: u64) {
    if v > peak.load(Relaxed) {
        peak.fetch_max(v, Relaxed);
    }
}

/// What the upstream layer counts of device calls, and the peak of reserved bytes.
#[derive(Debug, Default)]
pub(crate) struct DeviceStats {
    peak_reserved: AtomicU64,
    num_device_allocations: AtomicU64,
    num_device_frees: AtomicU64,
    device_alloc_ns: AtomicU64,
    device_free_ns: AtomicU64,
    num_device_free_errors: AtomicU64,
    /// Calls into the device's memory functions (allocation, free, and the virtual
    /// memory's reserve, release, map, unmap and move), one per call however many
    /// granules it covers.
    device_calls: AtomicU64,
}

impl DeviceStats {
    /// One call into the device's memory functions was made.
    #[inline]
    pub fn on_device_call(&self) {
        self.device_calls.fetch_add(1, Relaxed);
    }

    /// Calls into the device's memory functions since start or the last reset.
    pub fn device_calls(&self) -> u64 {
        self.device_calls.load(Relaxed)
    }

    /// Device allocations and frees counted so far (for tests).
    #[cfg(test)]
    pub fn counts(&self) -> (u64, u64) {
        (self.num_device_allocations.load(Relaxed), self.num_device_frees.load(Relaxed))
    }

    /// A device allocation took `ns`; `reserved` is the reserved total with it if it
    /// succeeded (None if it failed).
    pub fn on_device_alloc(&self, ns: u64, reserved: Option<u64>) {
        self.device_alloc_ns.fetch_add(ns, Relaxed);
        if let Some(r) = reserved {
            self.num_device_allocations.fetch_add(1, Relaxed);
            self.peak_reserved.fetch_max(r, Relaxed);
        }
    }

    /// A device free took `ns`.
    pub fn on_device_free(&self, ns: u64) {
        self.device_free_ns.fetch_add(ns, Relaxed);
        self.num_device_frees.fetch_add(1, Relaxed);
    }

    /// A device free reported an error.
    pub fn on_device_free_error(&self) {
        self.num_device_free_errors.fetch_add(1, Relaxed);
    }

    /// The peak of reserved bytes since start or the last reset.
    pub fn peak_reserved(&self) -> u64 {
        self.peak_reserved.load(Relaxed)
    }
}

/// A snapshot of every statistic: the shards' (under their locks, by `for_each_shard`),
/// the engine-wide peaks and the device counters, with `reserved` bytes obtained from
/// the device and a `limit` on them.
pub(crate) fn snapshot(
    for_each_shard: impl FnOnce(&mut dyn FnMut(&ShardStats, u64)),
    peaks: &Peaks,
    device: &DeviceStats,
    reserved: u64,
    limit: Option<u64>,
) -> Stats {
    let mut st = Stats::default();
    for_each_shard(&mut |s, inactive_split| {
        s.add_to(&mut st);
        st.inactive_split_bytes += inactive_split;
    });
    st.reserved_bytes = reserved;
    st.cached_bytes = reserved.saturating_sub(st.allocated_bytes);
    st.peak_requested_bytes = peaks.requested.load(Relaxed).max(st.requested_bytes);
    st.peak_allocated_bytes = peaks.allocated.load(Relaxed).max(st.allocated_bytes);
    st.peak_cached_bytes = peaks.cached.load(Relaxed).max(st.cached_bytes);
    st.peak_reserved_bytes = device.peak_reserved.load(Relaxed);
    st.num_device_allocations = device.num_device_allocations.load(Relaxed);
    st.num_device_frees = device.num_device_frees.load(Relaxed);
    st.device_alloc_ns = device.device_alloc_ns.load(Relaxed);
    st.device_free_ns = device.device_free_ns.load(Relaxed);
    st.num_device_free_errors = device.num_device_free_errors.load(Relaxed);
    st.limit_bytes = limit.unwrap_or(0);
    st.derive();
    st
}

/// The one reset of the statistics (PyTorch's `reset_peak_memory_stats` and
/// `reset_accumulated_memory_stats` together): every count goes to 0 and every peak to
/// the current value; current values (requested, allocated, cached, reserved bytes) stay.
/// `for_each_shard` hands over each shard's statistics under its lock.
pub(crate) fn reset(
    for_each_shard: impl FnOnce(&mut dyn FnMut(&mut ShardStats)),
    peaks: &Peaks,
    device: &DeviceStats,
    reserved: u64,
) {
    let (mut requested, mut allocated) = (0, 0);
    for_each_shard(&mut |s| {
        s.counters = Counters { allocations_at_reset: s.allocations, ..Counters::default() };
        requested += s.requested;
        allocated += s.allocated;
    });
    peaks.requested.store(requested, Relaxed);
    peaks.allocated.store(allocated, Relaxed);
    peaks.cached.store(reserved.saturating_sub(allocated), Relaxed);
    device.peak_reserved.store(reserved, Relaxed);
    for c in [
        &device.num_device_allocations,
        &device.num_device_frees,
        &device.device_alloc_ns,
        &device.device_free_ns,
        &device.num_device_free_errors,
        &device.device_calls,
    ] {
        c.store(0, Relaxed);
    }
}

impl Stats {
    /// Fills the derived fields (`cache_hit_rate`, `fragmentation_ratio`).
    fn derive(&mut self) {
        let lookups = self.num_cache_hits + self.num_cache_misses;
        self.cache_hit_rate = if lookups == 0 { 0.0 } else { self.num_cache_hits as f64 / lookups as f64 };
        self.fragmentation_ratio = if self.reserved_bytes == 0 {
            0.0
        } else {
            self.reserved_bytes.saturating_sub(self.allocated_bytes) as f64 / self.reserved_bytes as f64
        };
    }
}

//! The engine's memory tools (answers to "where did my memory go?"): the allocation
//! history, the snapshot of segments and blocks, leak checks and checkpoints, run-time
//! limits on reserved and cached memory, and compaction. None of them is on the hot path
//! except the tests the hooks in `engine/mod.rs` make (one relaxed load each).

use super::{CheckpointDelta, Engine, Snapshot};
use crate::config::Amount;
use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::history::{Event, MAX_ENTRIES};
use crate::pool::Pool;
use crate::snapshot::{BlockInfo, BlockState, Compaction, Leak, PoolSegment, SegmentInfo};
use std::sync::atomic::Ordering::Relaxed;

/// Which retry of a caller's out-of-memory ladder [`Engine::note_retry`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// An allocation retried after a garbage collection (`num_gc_retries`).
    Gc,
    /// An allocation retried in the rung that releases the cache (`num_reclaim_retries`).
    Reclaim,
}

impl Engine {
    /// Starts (`enabled`) or stops recording the allocation history (PyTorch's
    /// `torch.cuda.memory._record_memory_history`). Starting drops the events recorded
    /// before and keeps at most `max_entries` events per shard (the latest); stopping
    /// keeps the events readable. Errors: [`Error::InvalidValue`] when enabling with
    /// `max_entries` 0 or above 2^24 (nothing changes).
    pub fn record_memory_history(&self, enabled: bool, max_entries: u64) -> Result<()> {
        if enabled && !(1..=MAX_ENTRIES).contains(&max_entries) {
            return Err(Error::InvalidValue(format!(
                "max_entries must be in 1..={MAX_ENTRIES} to record the memory history, got {max_entries}"
            )));
        }
        self.up.history().set_enabled(enabled, max_entries);
        if enabled {
            self.hooks.fetch_or(super::HOOK_RECORD, Relaxed);
        } else {
            self.hooks.fetch_and(!super::HOOK_RECORD, Relaxed);
        }
        Ok(())
    }

    /// Whether the allocation history is recording.
    pub fn recording_memory_history(&self) -> bool {
        self.hooks.load(Relaxed) & super::HOOK_RECORD != 0
    }

    /// The recorded events in time order (the latest `max_entries` over all shards), times
    /// in ns since the engine started. Empty if recording never started.
    pub fn memory_events(&self) -> Vec<Event> {
        self.up.history().events()
    }

    /// The native stack of origin `id` (an event's, snapshot block's or leak's), innermost
    /// frame first, one `name at file:line` per line; None for 0, unknown ids and
    /// caller-given ids (bit 63 set).
    pub fn origin_text(&self, id: u64) -> Option<String> {
        self.up.history().origin_text(id)
    }

    /// Every segment the engine holds and every block in them (PyTorch's
    /// `torch.cuda.memory_snapshot()`), with the live table's requested bytes and origins.
    /// At quiescence the sums equal [`Engine::stats`]: segment sizes `reserved_bytes`,
    /// active block sizes `allocated_bytes` and their requests `requested_bytes`, inactive
    /// splits `inactive_split_bytes`, cached plus inactive splits `cached_bytes`.
    pub fn snapshot(&self) -> Snapshot {
        self.flush_thread_caches();
        let mut snap = Snapshot::default();
        let mut segs: Vec<(u32, PoolSegment, Vec<BlockInfo>)> = Vec::new();
        for (i, shard) in self.shards.iter().enumerate() {
            let s = shard.state.lock();
            let owned = self.up.segments_of(i);
            let mut pool_segs = Vec::new();
            s.pool.snapshot(&owned, &mut pool_segs);
            for ps in pool_segs {
                let blocks = ps
                    .blocks
                    .iter()
                    .map(|b| {
                        let mut info = BlockInfo {
                            addr: b.addr,
                            size: b.size,
                            state: b.state as u32,
                            ..BlockInfo::default()
                        };
                        if b.state == BlockState::Active {
                            match s.live.get(b.addr) {
                                Some(l) => {
                                    info.requested = l.requested;
                                    info.origin = self.origin_of(l.origin.as_deref());
                                }
                                None => info.state = BlockState::Cached as u32,
                            }
                        }
                        info
                    })
                    .collect();
                segs.push((i as u32, ps, blocks));
            }
        }
        segs.sort_by_key(|(_, ps, _)| ps.addr);
        for (k, (shard, ps, blocks)) in segs.into_iter().enumerate() {
            snap.segments.push(SegmentInfo {
                addr: ps.addr,
                size: ps.size,
                first_block: snap.blocks.len() as u64,
                num_blocks: blocks.len() as u64,
                shard,
                ..SegmentInfo::default()
            });
            snap.blocks.extend(blocks.into_iter().map(|b| BlockInfo { segment: k as u32, ..b }));
        }
        snap
    }

    /// An origin id for a tracked block (its native stack interned; 0 below level 2).
    fn origin_of(&self, o: Option<&crate::tracking::Origin>) -> u64 {
        match o.and_then(|o| o.backtrace.as_ref()) {
            Some(bt) => self.up.history().intern(bt.clone()),
            None => 0,
        }
    }

    /// A leak mark: a number for [`Engine::leaks_since`], which lists the allocations
    /// made after this call that are still live. Mark 0 is the engine's start.
    pub fn leak_mark(&self) -> u64 {
        self.flush_thread_caches();
        let now: Box<[u64]> = self.shards.iter().map(|s| s.state.lock().stats.seq).collect();
        let mut marks = self.marks.lock();
        marks.push(now);
        (marks.len() - 1) as u64
    }

    /// The live allocations made after leak mark `mark` (see [`Engine::leak_mark`]), by
    /// address. Allocations of every thread count. Errors: [`Error::InvalidValue`] for a
    /// mark that was never returned.
    pub fn leaks_since(&self, mark: u64) -> Result<Vec<Leak>> {
        let seqs = {
            let marks = self.marks.lock();
            match marks.get(mark as usize) {
                Some(m) => m.clone(),
                None => return Err(Error::InvalidValue(format!("unknown leak mark {mark}"))),
            }
        };
        self.flush_thread_caches();
        let mut out = Vec::new();
        for (i, shard) in self.shards.iter().enumerate() {
            let s = shard.state.lock();
            for (addr, l) in s.live.iter().filter(|(_, l)| l.seq > seqs[i]) {
                out.push(Leak {
                    addr,
                    requested_bytes: l.requested,
                    size_bytes: l.size,
                    seq: l.seq,
                    origin: self.origin_of(l.origin.as_deref()),
                    thread: l.origin.as_ref().map_or(u32::MAX, |o| o.thread),
                    shard: i as u32,
                });
            }
        }
        out.sort_by_key(|l| l.addr);
        Ok(out)
    }

    /// The live allocations made since the last [`Engine::checkpoint`] (or the start).
    pub fn check_memory_leaks(&self) -> Vec<Leak> {
        let mark = self.checkpoint.lock().0;
        self.leaks_since(mark).unwrap_or_default()
    }

    /// Sets a checkpoint: [`Engine::check_memory_leaks`] then lists the allocations made
    /// after it. Returns the change of allocated and reserved bytes since the previous
    /// checkpoint (or the start).
    pub fn checkpoint(&self) -> CheckpointDelta {
        let mark = self.leak_mark();
        let st = self.stats();
        let mut c = self.checkpoint.lock();
        let delta = CheckpointDelta {
            allocated: st.allocated_bytes as i64 - c.1 as i64,
            reserved: st.reserved_bytes as i64 - c.2 as i64,
        };
        *c = (mark, st.allocated_bytes, st.reserved_bytes);
        delta
    }

    /// Changes the cap on reserved bytes at run time (None: no cap), as
    /// `JULIA_CUDA_MEMORY_LIMIT` sets it at start. A cap below what is reserved releases
    /// cached memory (whole free segments) down to it; memory in partly used segments
    /// stays reserved, and no more is obtained until reserved falls below the cap.
    /// Errors: [`Error::InvalidValue`] when live memory (`allocated_bytes`) exceeds the
    /// new cap, or for a cap of 0 bytes; nothing changes then.
    pub fn set_memory_limit(&self, limit: Option<u64>) -> Result<()> {
        let Some(l) = limit else {
            self.up.set_limit(None);
            return Ok(());
        };
        if l == 0 {
            return Err(Error::InvalidValue(
                "a memory limit of 0 bytes allows nothing; use no limit instead".into(),
            ));
        }
        let allocated = self.stats().allocated_bytes;
        if allocated > l {
            return Err(Error::InvalidValue(format!(
                "cannot lower the memory limit to {} ({l} bytes): {} ({allocated} bytes) are live; free memory first",
                format_bytes(l),
                format_bytes(allocated)
            )));
        }
        self.up.set_limit(Some(l));
        let reserved = self.up.reserved();
        if reserved > l {
            self.reclaim(reserved - l);
        }
        log::info!("memory limit set to {}", format_bytes(l));
        Ok(())
    }

    /// [`Engine::set_memory_limit`] with an amount as `JULIA_CUDA_MEMORY_LIMIT` takes it
    /// (bytes, or a share of the device's total memory). Errors: those of
    /// `set_memory_limit`, and [`Error::Device`] when the device's memory cannot be read.
    pub fn set_memory_limit_amount(&self, a: Amount) -> Result<()> {
        let total = match a {
            Amount::Bytes(_) => 0,
            Amount::Fraction(_) => self.device_memory()?.1,
        };
        self.set_memory_limit(Some(a.resolve(total)))
    }

    /// Caps reserved bytes at `fraction` (in (0, 1]) of the device's total memory
    /// (PyTorch's `set_per_process_memory_fraction`). Errors: [`Error::InvalidValue`] for
    /// a fraction outside (0, 1], and those of [`Engine::set_memory_limit`].
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<()> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::InvalidValue(format!("memory fraction must be in (0, 1], got {fraction}")));
        }
        self.set_memory_limit_amount(Amount::Fraction(fraction))
    }

    /// Reserved bytes ÷ the limit, or ÷ the device's total memory when there is none (0
    /// when that cannot be read). Above 1 only after a limit was lowered below what
    /// partly used segments hold.
    pub fn memory_pressure(&self) -> f64 {
        let reserved = self.up.reserved() as f64;
        match self.up.limit() {
            Some(l) => reserved / l as f64,
            None => match self.device_memory() {
                Ok((_, total)) if total > 0 => reserved / total as f64,
                _ => 0.0,
            },
        }
    }

    /// Caps cached bytes (None: no cap): a free that leaves more than `bytes` cached
    /// returns cached memory (whole free segments) to the device until the cap holds or
    /// nothing more can go. Applies at once to what is cached now.
    pub fn set_cache_limit(&self, bytes: Option<u64>) {
        self.cache_limit.store(bytes.unwrap_or(u64::MAX), Relaxed);
        self.futile_trim.store(u64::MAX, Relaxed);
        if bytes.is_some() {
            self.hooks.fetch_or(super::HOOK_CACHE_LIMIT, Relaxed);
        } else {
            self.hooks.fetch_and(!super::HOOK_CACHE_LIMIT, Relaxed);
        }
        self.trim_cache();
    }

    /// The cap on cached bytes, if any.
    pub fn cache_limit(&self) -> Option<u64> {
        let c = self.cache_limit.load(Relaxed);
        (c != u64::MAX).then_some(c)
    }

    /// Releases cached memory above the cache cap. The exact check locks every shard, so
    /// it is skipped while reserved bytes and the folded estimate of allocated bytes (which
    /// moves in ~1 MiB steps, see `stats::FOLD_BYTES`) are what they were at a trim that
    /// could release nothing (the cache then lies in partly used segments): frees do not
    /// rescan the pools in vain, and a segment that becomes wholly free is released at the
    /// latest once live memory has moved by about 1 MiB per shard.
    #[cold]
    #[inline(never)]
    pub(super) fn trim_cache(&self) {
        let cap = self.cache_limit.load(Relaxed);
        let reserved = self.up.reserved();
        let key = reserved ^ self.peaks.folded_allocated().rotate_left(32);
        if cap == u64::MAX || reserved <= cap || self.futile_trim.load(Relaxed) == key {
            return;
        }
        let cached = self.stats().cached_bytes;
        if cached <= cap || self.reclaim(cached - cap) == 0 {
            self.futile_trim
                .store(self.up.reserved() ^ self.peaks.folded_allocated().rotate_left(32), Relaxed);
        }
    }

    /// Merges what the pools can merge (deferred frees of split and expandable), returns
    /// every whole free segment (idle granules for expandable) to the device, and reports
    /// the bytes released and `fragmentation_ratio` before and after.
    pub fn compact(&self) -> Compaction {
        let before = self.stats().fragmentation_ratio;
        let released_bytes = self.reclaim(u64::MAX);
        Compaction {
            released_bytes,
            fragmentation_before: before,
            fragmentation_after: self.stats().fragmentation_ratio,
        }
    }

    /// Counts one retry of a caller's out-of-memory ladder (`num_gc_retries` or
    /// `num_reclaim_retries` of the statistics): the Julia package retries after its GC
    /// runs and in its last rung, which the engine cannot see.
    pub fn note_retry(&self, kind: Retry) {
        self.shards[self.home()].state.lock().stats.on_ladder_retry(kind == Retry::Gc);
    }
}

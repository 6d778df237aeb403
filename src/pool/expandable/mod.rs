//! `expandable`: blocks carved out of reserved address ranges that physical memory backs
//! only where blocks lie, after PyTorch's expandable segments
//! (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, `ExpandableSegment` in
//! `c10/cuda/CUDACachingAllocator.cpp`).
//!
//! # What PyTorch does, and what is kept
//!
//! PyTorch reserves address space for 1⅛ × the GPU's memory per stream and pool
//! (`cuMemAddressReserve`) and maps physical memory into it in pages (`cuMemCreate` +
//! `cuMemMap` + `cuMemSetAccess`; 2 MiB pages for small requests, 20 MiB for large) as
//! the segment grows at its end; blocks are carved and merged as in its ordinary
//! segments, and whole free pages are unmapped (and their physical memory released) only
//! when memory runs out or at `empty_cache`. Its notes and pull requests name the costs:
//! mapping and unmapping cost time in proportion to the number of physical allocations,
//! unmapping synchronises with the GPU, and a map that fails half-way used to leak
//! handles (rolled back since).
//!
//! This pool keeps the address-space idea and changes the policy:
//!
//! - Arenas per engine shard for requests up to 1 MiB and for larger ones (as
//!   PyTorch's small and large pools, so that small blocks do not pin granules among
//!   large ones), each a reserved range of 1⅛ × the device's memory (or of the request,
//!   if larger), taken on the first request, another one when no free range of the
//!   arenas fits (their addresses are fragmented), and given back when a reclaim leaves
//!   one empty.
//! - A block goes to the smallest free range of the arena that fits (lowest address
//!   among equals), among the 16 smallest the one whose place needs the fewest granules
//!   mapped: its start, its end, or a granule-aligned place over idle granules inside it
//!   (a long free range left by large blocks that were freed and merged keeps mapped
//!   granules in its middle). The granules (the device's granularity, 2 MiB) the block
//!   touches are mapped if they are not. Freed blocks merge with their free neighbours;
//!   there are no segment boundaries to stop them.
//! - Granules no block touches stay mapped (cached) and are unmapped lazily, highest
//!   address first: at `reclaim`, when the device or `JULIA_CUDA_MEMORY_LIMIT` refuses a
//!   mapping, and before mapping more would lift reserved memory above its all-time
//!   high-water mark *and* above 1⅛ × the most bytes the pool ever had in use
//!   ([`HEADROOM`], a release threshold relative to the workload, where
//!   cudaMallocAsync's is absolute). So the peak is at most 1⅛ × the peak in use unless
//!   the blocks themselves touch more granules, and cached memory in the wrong place
//!   never raises the peak beyond that; a warm pass whose layout moves (inference with
//!   batch shapes that change) finds the granules it comes back to still mapped and
//!   makes no device calls while its fragmentation stays within the headroom.
//! - Every granule is its own physical allocation, so any granule can be unmapped
//!   alone; failed mappings leave nothing mapped ([`crate::device::Device::vm_map`]).
//!
//! Reserved bytes are mapped bytes: the reserved address space costs no memory.
//!
//! # Structure
//!
//! Frees are deferred as in `split`: a freed block waits on the quick list of its size
//! and is handed out again by the next request of that size; a request no quick list
//! serves first merges every quick-listed block, so it sees all free memory. The
//! arenas ([`arena`]) keep blocks and free ranges as nodes linked to their address
//! neighbours (merging costs no search), free ranges in split's size-class index by
//! (size, address) (best fit is a bit scan and a short binary search), and a bitmap of
//! mapped granules; a granule is idle when it lies wholly inside a free range. The alloc
//! and free paths keep no count of idle bytes: statistics and unmapping count them when
//! they need them, over the free ranges a granule long or longer (few), so a miss costs
//! the merge of the blocks freed since the last one, a best-fit search and a carve.

mod arena;
#[cfg(test)]
mod tests;

use super::split::SMALL_SIZE;
use super::split::quick::QuickLists;
use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::{Error, Result};
use crate::snapshot::PoolSegment;
use crate::upstream::ShardUpstream;
use arena::Arena;
use rustc_hash::FxHashMap;

/// Mapped memory may grow to 1/`HEADROOM` above the pool's peak of bytes in use before
/// idle granules are unmapped to make room for new ones (as cudaMallocAsync's release
/// threshold, but relative): 1/8 is above the fragmentation that the best-fit placement
/// leaves on the variable-shape inference traces (1.10–1.12 × live, host device), so
/// their warm passes make no device calls, and below the memory of PyTorch's expandable
/// segments and of cudaMallocAsync there (1.14–1.18 × live on the H100).
const HEADROOM: u64 = 8;

/// The pool on reserved address ranges with lazily mapped granules.
pub struct ExpandablePool {
    /// The reserved ranges, in the order they were taken.
    arenas: Vec<Arena>,
    /// Address → node (in its arena) of every block in use or on a quick list.
    used: FxHashMap<u64, u32>,
    /// The quick lists, split's: the blocks freed since the last flush, by size, LIFO.
    quick: QuickLists,
    /// Bytes of blocks in use (not quick-listed).
    used_bytes: u64,
    /// The most bytes of blocks in use there ever were (`used_bytes`'s peak): what
    /// [`HEADROOM`] is measured against.
    peak_used: u64,
}

impl Default for ExpandablePool {
    fn default() -> Self {
        ExpandablePool {
            arenas: Vec::new(),
            used: FxHashMap::default(),
            quick: QuickLists::new(),
            used_bytes: 0,
            peak_used: 0,
        }
    }
}

impl ExpandablePool {
    /// Bytes mapped in all arenas.
    fn mapped_bytes(&self) -> u64 {
        self.arenas.iter().map(|a| a.mapped_bytes).sum()
    }

    /// The index of the arena holding `addr` (a block of this pool).
    fn arena_of(&self, addr: u64) -> usize {
        self.arenas.iter().position(|a| a.contains(addr)).expect("a block lies in an arena")
    }

    /// The arena, free range (node) and address for a block of `size` among the arenas
    /// for small (`large` false) or large requests ([`Arena::place`]); a new arena if
    /// none fits.
    /// Returns the arena, the node, the address and the number of granules to map (0: the
    /// place is mapped already).
    fn place(&mut self, size: u64, large: bool, up: ShardUpstream<'_>) -> Result<(usize, u32, u64, usize)> {
        // The arena whose place needs the fewest granules mapped (the first among equals).
        let mut best: Option<(usize, u32, u64, usize)> = None;
        for (k, a) in self.arenas.iter().enumerate() {
            if a.large == large
                && let Some((i, addr, n)) = a.place(size)
                && best.is_none_or(|b| n < b.3)
            {
                best = Some((k, i, addr, n));
                if n == 0 {
                    break;
                }
            }
        }
        if let Some(b) = best {
            return Ok(b);
        }
        let gran = up.vm_granularity()?;
        let total = up.device_total()?;
        // 1⅛ × the device's memory, as PyTorch: room for fragmentation of the addresses
        // while the memory itself can never exceed the device.
        let bytes = total.saturating_add(total / 8).max(size).min(super::MAX_REQUEST).next_multiple_of(gran);
        let base = up.vm_reserve(bytes)?;
        self.arenas.push(Arena::new(base, bytes, gran, large));
        Ok((self.arenas.len() - 1, 0, base, 1))
    }

    /// Merges every quick-listed block into the free ranges.
    fn flush(&mut self) {
        let mut quick = std::mem::take(&mut self.quick);
        quick.flush(|p| self.release(p));
        self.quick = quick;
    }

    /// Returns block `ptr` to its arena's free ranges.
    fn release(&mut self, ptr: u64) {
        let i = self.used.remove(&ptr).expect("a block of this pool");
        let k = self.arena_of(ptr);
        self.arenas[k].give_back(i);
    }

    /// Unmaps granules no block touches, the large arenas' first (longer runs), until
    /// `target` bytes are unmapped or none is left. Returns the bytes unmapped.
    fn unmap_idle(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        let mut done = 0;
        for large in [true, false] {
            for a in self.arenas.iter_mut().filter(|a| a.large == large) {
                if done >= target {
                    return done;
                }
                done += a.unmap_idle(target - done, |addr, bytes| up.vm_unmap(addr, bytes));
            }
        }
        done
    }

    /// Maps the granule runs `runs` of arena `k`, first unmapping idle granules if
    /// mapping would lift reserved memory above its all-time peak, and all of them if
    /// the device or the limit refuses. On error, the runs mapped so far stay mapped.
    fn map(&mut self, k: usize, runs: &[(u64, u64)], up: ShardUpstream<'_>) -> Result<()> {
        let need: u64 = runs.iter().map(|r| r.1).sum();
        // Growth above the all-time peak of reserved memory first unmaps idle granules,
        // so that cached memory in the wrong place does not raise the peak; but mapped
        // memory may first grow to 1/HEADROOM above the most bytes this pool ever had in
        // use, so that a workload whose layout moves (sizes that change from batch to
        // batch) keeps the granules it keeps coming back to, with no device calls.
        let room = (self.peak_used + self.peak_used / HEADROOM).saturating_sub(self.mapped_bytes());
        let excess = up.growth_excess(need).saturating_sub(room);
        if excess > 0 {
            self.unmap_idle(excess, up);
        }
        for &(addr, bytes) in runs {
            if let Err(e) = up.vm_map(addr, bytes) {
                if !matches!(e, Error::OutOfMemory(_)) || self.unmap_idle(u64::MAX, up) == 0 {
                    return Err(e);
                }
                up.vm_map(addr, bytes)?;
            }
            self.arenas[k].set_mapped(addr, bytes);
        }
        Ok(())
    }

    /// A request that no quick list serves. Kept out of line so that the hit path stays
    /// small where the engine inlines it.
    #[inline(never)]
    fn alloc_miss(&mut self, size: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let large = size > SMALL_SIZE;
        self.flush();
        let (k, i, addr, n) = self.place(size, large, up)?;
        let a = &mut self.arenas[k];
        let b = a.carve(i, addr, size);
        // `place` counted the granules to map: none (the common warm case) needs no look.
        let runs = if n == 0 { Vec::new() } else { a.unmapped_runs(addr, size) };
        if !runs.is_empty()
            && let Err(e) = self.map(k, &runs, up)
        {
            self.arenas[k].give_back(b);
            return Err(e);
        }
        self.used.insert(addr, b);
        self.used_bytes += size;
        self.peak_used = self.peak_used.max(self.used_bytes);
        Ok(Block { ptr: addr, size, hit: runs.is_empty() })
    }
}

impl Pool for ExpandablePool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        if let Some(ptr) = self.quick.pop(size) {
            self.used_bytes += size;
            self.peak_used = self.peak_used.max(self.used_bytes);
            return Ok(Block { ptr, size, hit: true });
        }
        self.alloc_miss(size, up)
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        self.used_bytes -= size;
        if !self.quick.push(ptr, size) {
            // The slot holds another size's list: merge this block at once.
            self.release(ptr);
        }
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        self.flush();
        if target == 0 {
            return 0;
        }
        let released = self.unmap_idle(target, up);
        // An arena left with no block and nothing mapped gives its addresses back.
        self.arenas.retain(|a| {
            let keep = a.mapped_bytes > 0 || !a.is_empty();
            if !keep {
                up.vm_release(a.base, a.size);
            }
            keep
        });
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.mapped_bytes() - self.used_bytes
    }

    /// Free bytes (quick-listed blocks included) in granules that a block touches.
    fn inactive_split_bytes(&self) -> u64 {
        let idle: u64 = self.arenas.iter().map(|a| a.idle_bytes()).sum();
        self.mapped_bytes() - idle - self.used_bytes
    }

    fn serves_at_once(&self, bytes: u64) -> bool {
        self.quick.holds(round_up(bytes, MIN_BLOCK))
    }

    /// Segments are the runs of mapped granules (reserved bytes are mapped bytes);
    /// quick-listed blocks and free bytes in granules a block touches are inactive splits,
    /// free bytes of idle granules cached (as `inactive_split_bytes` and `cached_bytes`
    /// count them).
    fn snapshot(&self, _owned: &[(u64, u64)], out: &mut Vec<PoolSegment>) {
        let quick: rustc_hash::FxHashSet<u64> = self.quick.blocks().map(|b| b.0).collect();
        let mut arenas: Vec<&Arena> = self.arenas.iter().collect();
        arenas.sort_by_key(|a| a.base);
        for a in arenas {
            a.snapshot(&quick, out);
        }
    }

    fn block_base(&self, addr: u64, seg_base: u64) -> Option<u64> {
        if self.used.contains_key(&addr) {
            return Some(addr);
        }
        // A walk of the arena (copies into the middle of a block are rare); an arena of
        // another pool of the shard is not ours to answer for.
        let arena = self.arenas.iter().find(|a| a.contains(addr))?;
        Some(arena.block_around(addr).unwrap_or(seg_base))
    }
}

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
//!   among equals) if the granules at its start are mapped; else to the first tight fit
//!   (at most twice its size) with a mapped place, else to the smallest *mapped piece*
//!   that holds it (a free range cut to one run of its mapped granules: best fit by what
//!   is mapped, so long mapped runs stay whole for long blocks), and only if no mapped
//!   place exists, among the 16 best fits to the one whose place needs the fewest
//!   granules mapped: its start, its end, or a granule-aligned place over idle granules
//!   inside it (a long free range left by large blocks that were freed and merged keeps
//!   mapped granules in its middle). The granules (the device's granularity, 2 MiB) the block
//!   touches are mapped if they are not. Freed blocks merge with their free neighbours
//!   at once (there are no segment boundaries to stop them, and no deferred frees: see
//!   below).
//! - Granules no block touches stay mapped (cached). They are unmapped (their memory
//!   returned to the device) only at `reclaim` and when the device or
//!   `JULIA_CUDA_MEMORY_LIMIT` refuses a mapping. Before mapping more would lift
//!   reserved memory above its all-time high-water mark *and* above 1⅛ × the most bytes
//!   the pool ever had in use ([`HEADROOM`], a release threshold relative to the
//!   workload, where cudaMallocAsync's is absolute), idle granules' memory is *moved*
//!   to where it is needed ([`crate::device::Device::vm_move`]: on CUDA `cuMemUnmap` and
//!   `cuMemMap` of the same physical allocation, no `cuMemRelease` / `cuMemCreate`),
//!   lowest free range first ([`arena::Arena::unmap_idle`] says why). So the peak is at
//!   most 1⅛ × the peak in use unless the blocks themselves touch more granules, cached
//!   memory in the wrong place never raises the peak beyond that, and the pool creates
//!   physical memory only while its reserved peak grows: in the replays of `data/`, a
//!   warm pass creates none. A warm pass whose layout moves (inference with batch shapes
//!   that change) finds the granules it comes back to still mapped and makes no device
//!   calls while its fragmentation stays within the headroom. encoder_infer_varlen did
//!   not until placement by mapped pieces (above; 18.8 device calls a warm pass → 0.2, 0
//!   in the last, host device). random_seed1 (sizes log-uniform from 256 B to 64 MiB)
//!   did not (about 33 calls a warm pass at 1.131 × live): its layout cycles through
//!   more places than the headroom holds, so memory moved away is wanted back where it
//!   was. Never moving (PyTorch's policy) removes those calls (1.1365 × live, best anchor
//!   1.143) but costs encoder_infer_varlen 1.18 (best anchor 1.138), whose cold pass
//!   needs its moves and never wants memory back where it moved it from. So the pool
//!   moves until a mapping wants memory where one of the last [`MOVED_AWAY`] moves took
//!   it from, and from then on grows instead ([`ExpandablePool::moves_off`]):
//!   random_seed1 0 device calls in its last warm pass at 1.1365, every other trace
//!   unchanged (bench/results/host-2026-11-28-exp12b; exp12, host-2026-11-27-memory2,
//!   host-2026-11-27-expandable).
//!
//! # Why no deferred frees
//!
//! Until 2026-11-27 freed blocks waited on `split`'s quick lists (one per size, LIFO) and
//! were merged only when a request missed them. A quick-list hit hands out the block just
//! freed, wherever best fit would have put the request; on the inference traces those
//! placements pin holes that the next batch's larger blocks cannot use. Replayed with no
//! unmapping at all (host device, peak mapped ÷ peak live), deferred frees reach 1.109 on
//! bertlike_infer_varlen where merging at once reaches 1.058 (PyTorch's expandable
//! segments: 1.077, whose best fit also merges at once); gpt2_train 1.0047 → 1.0033,
//! resnet50_train 1.0129 / 1.0132 → 1.0162 / 1.0162 (cold / warm), the others unchanged.
//! And the lists saved little: 91 % of the varlen traces' requests missed them.
//! - Growth in bulk: the granules a block needs are mapped in physical allocations of
//!   several granules, one device call each ([`MIN_CHUNK`], [`CHUNK_SHARE`]; on CUDA one
//!   `cuMemCreate`, one `cuMemMap` and one `cuMemSetAccess` per allocation, where one
//!   allocation per granule took two calls per granule: gpt2_train's first pass 4 155
//!   mappings → 769 → 454). CUDA unmaps and releases only whole allocations, so the pool gives
//!   back or moves an allocation only when all of its granules are idle; the allocations
//!   are kept small enough that this costs no peak on the traces (an allocation per
//!   whole run did: see [`CHUNK_SHARE`]). Failed mappings leave nothing mapped
//!   ([`crate::device::Device::vm_map`]).
//!
//! Reserved bytes are mapped bytes: the reserved address space costs no memory.
//!
//! # Structure
//!
//! Every request is a best-fit search and a carve, every free a merge, so both are kept
//! to a few list and table operations. The arenas ([`arena`]) keep blocks and free
//! ranges as nodes linked to their address neighbours (merging costs no search), free
//! ranges on a list per size class threaded through the nodes ([`free_lists`]: indexing
//! costs a few stores, best fit a bit scan and a look at a few entries; a carve or merge
//! that leaves a range in its class does not touch the lists), and a bitmap of mapped
//! granules; a granule is idle when it lies wholly inside a free range. The alloc and
//! free paths keep no count of idle bytes: statistics and unmapping count them when they
//! need them, over the free ranges a granule long or longer (few). A block in use is
//! found from its address by its arena (a look at the few arenas' ranges) and the arena's
//! block map, an array indexed by the address's 512 B (small blocks) or 1 MiB unit (large
//! ones): no second hash table beside the engine's live table (one was 28 instructions
//! per event, bertlike_infer_varlen). Warm instructions per event (callgrind, encoder_infer_varlen): 796 with the
//! quick lists and sorted size-class vectors, 580 with a gathered and sorted candidate
//! list on placement's slow path, 503 (bench/results/host-2026-11-27-expandable), 433
//! without the second address table and with the node slab's bounds checks and `Vec`
//! upkeep gone (bench/results/host-2026-11-28-exp11: 1.37–1.69 × binned's on the replay
//! traces), 446 with the search of mapped pieces, which removes the warm passes'
//! device calls (bench/results/host-2026-11-28-exp12), 435 without thread caches in
//! front of the pool and with free lists by quarter octave
//! (bench/results/host-2026-11-28-exp13), 518 with them again (exp13b), 451 with
//! thread caches that bypass themselves while they miss and a lone free range of the
//! next class taken without a walk (bench/results/host-2026-11-29-exp14), 449.5 now, with
//! the address links written by selects (bench/results/host-2026-11-29-exp15); binned's
//! 261.

mod arena;
mod free_lists;
mod node;
#[cfg(test)]
mod tests;

use super::split::SMALL_SIZE;
use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::{Error, Result};
use crate::snapshot::PoolSegment;
use crate::upstream::ShardUpstream;
use arena::Arena;

/// Mapped memory may grow to 1/`HEADROOM` above the pool's peak of bytes in use before
/// idle granules are unmapped to make room for new ones (as cudaMallocAsync's release
/// threshold, but relative): 1/8 is above the fragmentation that best fit leaves on
/// bertlike_infer_varlen (1.058 × live with no unmapping, host device), so its warm
/// passes make no device calls, and below the memory of PyTorch's expandable segments
/// and of cudaMallocAsync on the inference traces (1.08–1.18 × live on the H100).
/// encoder_infer_varlen, whose layout reaches 1.18 × live unbounded, is held at 1.116
/// by it (its cold pass moves memory; its warm passes, since placement by mapped pieces,
/// make no device calls).
const HEADROOM: u64 = 8;

/// Mappings are cut into physical allocations of at most 1/`CHUNK_SHARE` of the pool's
/// mapped memory, and at most [`MIN_CHUNK`] granules below that: growth in bulk (one
/// device call per allocation, each on CUDA one `cuMemCreate` of its granules, one
/// `cuMemMap`, one `cuMemSetAccess`, where one granule per call used to take two calls per
/// granule), while idle memory stays in pieces small enough to be given up or moved (an
/// allocation goes only whole, and one that a block still touches stays). Host device,
/// `cumem-bench replay` (bench/results/host-2026-11-28-expandable): whole runs as one
/// allocation cost encoder_infer_varlen 1.130 → 1.153 and random_seed1 1.127 → 1.151
/// peak reserved ÷ peak live (idle granules pinned by a block in their allocation); 4
/// granules keep them at 1.133 and 1.129, below every anchor, with gpt2_train's cold
/// mappings 4 155 → 769 calls. 1/64 instead of 1/256 (bench/results/host-2026-11-28-exp10):
/// first-pass device calls gpt2_train 769 → 454, resnet50_train 616 → 323, random_seed1
/// 726 → 685, at 1.1324 warm (was 1.1303; best anchor 1.143), its warm calls 34.8 → 26.2
/// per pass (33.6 with a 16 GiB host device: they follow the arena's size, not a gain to
/// count on); every other trace's peaks and calls unchanged. 1/32 raised
/// encoder_infer_varlen to 1.141 (best anchor 1.138), 8 granules or 1/128 to 1.147
/// warm, 16 granules or 1/32 to 1.158.
const CHUNK_SHARE: u64 = 64;

/// The largest physical allocation while 1/[`CHUNK_SHARE`] of the mapped memory is less:
/// 4 granules (8 MiB).
const MIN_CHUNK: u64 = 4;

/// How many of the last ranges whose memory [`ExpandablePool::map`] moved away or gave up
/// the pool remembers: a mapping of one of them again means the layout cycles through
/// more places than the headroom holds, and moving stops ([`ExpandablePool::moves_off`]).
/// On random_seed1 the first such mapping comes in its cold pass; on encoder_infer_varlen,
/// whose moves the headroom needs, none comes with the last 64 or 1 024 remembered, nor on
/// any other trace measured (bench/results/host-2026-11-28-exp12b).
const MOVED_AWAY: usize = 64;

/// The pool on reserved address ranges with lazily mapped granules.
#[derive(Default)]
pub struct ExpandablePool {
    /// The reserved ranges, in the order they were taken.
    arenas: Vec<Arena>,
    /// The index of the first arena for small (entry 0) and for large requests (entry 1),
    /// `arenas.len()` where there is none ([`ExpandablePool::index_kinds`]): the alloc
    /// and free paths go to their kind's arena by an array index instead of testing the
    /// arenas in turn. Which kind a request is follows the workload, so that test was a
    /// branch the processor mispredicted on traces that mix sizes: on random_seed1 (sizes
    /// log-uniform from 256 B to 64 MiB) about 0.75 of an alloc+free pair (callgrind's
    /// branch simulation, bench/results/host-2026-11-29-exp14b).
    first: [usize; 2],
    /// Bytes of blocks in use.
    used_bytes: u64,
    /// The most bytes of blocks in use there ever were (`used_bytes`'s peak): what
    /// [`HEADROOM`] is measured against.
    peak_used: u64,
    /// The last [`MOVED_AWAY`] ranges (address, bytes) whose memory a mapping moved away
    /// or gave up, oldest first.
    moved_away: std::collections::VecDeque<(u64, u64)>,
    /// Set once a mapping wants memory where it was moved away from: from then on the pool
    /// grows instead of moving (PyTorch's policy), up to the union of the places its
    /// layout visits; only the device or the limit refusing a mapping, and `reclaim`,
    /// still unmap idle granules.
    moves_off: bool,
}

impl ExpandablePool {
    /// Bytes mapped in all arenas.
    fn mapped_bytes(&self) -> u64 {
        self.arenas.iter().map(|a| a.mapped_bytes).sum()
    }

    /// The index of the arena holding `addr` (a block of this pool): a look at the few
    /// arenas' ranges.
    #[inline]
    fn arena_of(&self, addr: u64) -> usize {
        let mut k = 0;
        while !self.arenas[k].contains(addr) {
            k += 1;
        }
        k
    }

    /// [`ExpandablePool::arena_of`] for a block of `size` bytes: its kind's first arena
    /// when that holds it (there is mostly one arena of each kind), found by an index.
    #[inline]
    fn arena_for(&self, addr: u64, size: u64) -> usize {
        let k = self.first[(size > SMALL_SIZE) as usize];
        if k < self.arenas.len() && self.arenas[k].contains(addr) {
            return k;
        }
        self.arena_of(addr)
    }

    /// Sets [`ExpandablePool::first`] after arenas were added or removed.
    fn index_kinds(&mut self) {
        for (large, first) in [false, true].into_iter().zip(self.first.iter_mut()) {
            *first = self.arenas.iter().position(|a| a.large == large).unwrap_or(self.arenas.len());
        }
    }

    /// The arena, free range (node) and address for a block of `size` among the arenas
    /// for small (`large` false) or large requests ([`Arena::place`]); a new arena if
    /// none fits.
    /// Returns the arena, the node, the address and the number of granules to map (0: the
    /// place is mapped already).
    #[inline]
    fn place(&mut self, size: u64, large: bool, up: ShardUpstream<'_>) -> Result<(usize, u32, u64, usize)> {
        // The common case: the kind's first arena has a mapped place (it would end the
        // search below at once).
        let k = self.first[large as usize];
        if k < self.arenas.len()
            && let Some((i, addr, 0)) = self.arenas[k].place(size)
        {
            return Ok((k, i, addr, 0));
        }
        self.place_slow(size, large, up)
    }

    /// [`ExpandablePool::place`] when the first arena of the kind has no mapped place: the
    /// arena whose place needs the fewest granules mapped (the first among equals), else a
    /// new arena. Out of line.
    #[inline(never)]
    fn place_slow(
        &mut self,
        size: u64,
        large: bool,
        up: ShardUpstream<'_>,
    ) -> Result<(usize, u32, u64, usize)> {
        let mut best: Option<(usize, u32, u64, usize)> = None;
        for k in 0..self.arenas.len() {
            let a = &mut self.arenas[k];
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
        self.new_arena(size, large, up)
    }

    /// A new arena for a block of `size` that no arena's free ranges hold ([`ExpandablePool::place`]'s
    /// rare path, out of line).
    #[cold]
    #[inline(never)]
    fn new_arena(
        &mut self,
        size: u64,
        large: bool,
        up: ShardUpstream<'_>,
    ) -> Result<(usize, u32, u64, usize)> {
        let gran = up.vm_granularity()?;
        let total = up.device_total()?;
        // 1⅛ × the device's memory, as PyTorch: room for fragmentation of the addresses
        // while the memory itself can never exceed the device.
        let bytes = total.saturating_add(total / 8).max(size).min(super::MAX_REQUEST).next_multiple_of(gran);
        let base = up.vm_reserve(bytes)?;
        self.arenas.push(Arena::new(base, bytes, gran, large));
        self.index_kinds();
        Ok((self.arenas.len() - 1, 0, base, 1))
    }

    /// Returns block `ptr` to its arena's free ranges.
    #[inline]
    fn release(&mut self, ptr: u64, size: u64) {
        let k = self.arena_for(ptr, size);
        let a = &mut self.arenas[k];
        let i = a.block_node(ptr);
        a.give_back(i);
    }

    /// Takes granules no block touches out of the arenas (the large arenas' first:
    /// longer runs), handing each run to `f(addr, bytes)`, until `target` bytes are taken
    /// or none is left. Returns the bytes taken.
    fn take_idle(&mut self, target: u64, mut f: impl FnMut(u64, u64)) -> u64 {
        let mut done = 0;
        for large in [true, false] {
            for a in self.arenas.iter_mut().filter(|a| a.large == large) {
                if done >= target {
                    return done;
                }
                done += a.unmap_idle(target - done, &mut f);
            }
        }
        done
    }

    /// Unmaps granules no block touches ([`ExpandablePool::take_idle`]). Returns the
    /// bytes unmapped.
    fn unmap_idle(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        self.take_idle(target, |addr, bytes| up.vm_unmap(addr, bytes))
    }

    /// Maps the granule runs `runs` of arena `k`, cut into physical allocations of at
    /// most [`MIN_CHUNK`] granules or 1/[`CHUNK_SHARE`] of the mapped memory, one device
    /// call each (on CUDA one `cuMemCreate` of its granules, one `cuMemMap`, one
    /// `cuMemSetAccess`). If mapping would lift reserved memory above its all-time peak
    /// (and above the [`HEADROOM`]), idle allocations' memory is moved there instead
    /// ([`ShardUpstream::vm_move`]: no physical memory released and obtained again), each
    /// whole onto a run it fits in, lowest free range first; idle allocations taken that
    /// fit nowhere are unmapped. If the device or the limit refuses a mapping, every idle
    /// allocation is unmapped and the mapping tried once more. On error, the allocations
    /// mapped fresh for these runs are unmapped again (memory moved here stays, idle).
    fn map(&mut self, k: usize, runs: &[(u64, u64)], up: ShardUpstream<'_>) -> Result<()> {
        let need: u64 = runs.iter().map(|r| r.1).sum();
        // Growth above the all-time peak of reserved memory first takes idle granules,
        // so that cached memory in the wrong place does not raise the peak; but mapped
        // memory may first grow to 1/HEADROOM above the most bytes this pool ever had in
        // use, so that a workload whose layout moves (sizes that change from batch to
        // batch) keeps the granules it keeps coming back to, with no device calls.
        let room = (self.peak_used + self.peak_used / HEADROOM).saturating_sub(self.mapped_bytes());
        let over = up.growth_excess(need);
        let mut excess = if self.moves_off { 0 } else { over.saturating_sub(room) };
        // Memory wanted back where a move took it from: the layout cycles through more
        // places than the headroom holds, and moving would go on at every pass (random_seed1:
        // about 33 device calls a warm pass at 1.131 × live; never moving: none, at 1.1365,
        // bench/results/host-2026-11-28-exp12b). Stop moving.
        if excess > 0
            && runs.iter().any(|&(a, b)| self.moved_away.iter().any(|&(m, n)| a < m + n && m < a + b))
        {
            self.moves_off = true;
            excess = 0;
        }
        let mut idle: Vec<(u64, u64)> = Vec::new();
        if excess > 0 {
            self.take_idle(excess, |addr, bytes| idle.push((addr, bytes)));
            // In address order onto the runs (neighbours stay neighbours).
            idle.sort_unstable();
        }
        // The runs' granules, onto the idle allocations' memory where one fits whole.
        let mut rest: Vec<(u64, u64)> = Vec::new();
        for &(addr, bytes) in runs.iter() {
            let end = addr + bytes;
            let mut at = addr;
            while at < end {
                let Some(pos) = idle.iter().position(|c| c.1 <= end - at) else {
                    rest.push((at, end - at));
                    break;
                };
                let (from, have) = idle.remove(pos);
                self.remember_moved(from, have);
                match up.vm_move(from, at, have) {
                    Ok(()) => self.arenas[k].set_mapped(at, have),
                    // The memory of `from` is gone; `at` is mapped below.
                    Err(_) => rest.push((at, have)),
                }
                at += have;
            }
        }
        // Idle allocations that fit nowhere are unmapped.
        for (from, have) in idle {
            self.remember_moved(from, have);
            up.vm_unmap(from, have);
        }
        let gran = self.arenas[k].granule();
        let mut fresh: Vec<(u64, u64)> = Vec::new();
        for (addr, bytes) in rest {
            let piece = (MIN_CHUNK * gran).max(self.mapped_bytes() / CHUNK_SHARE / gran * gran);
            let mut at = addr;
            while at < addr + bytes {
                let n = piece.min(addr + bytes - at);
                let mut r = up.vm_map(at, n);
                if let Err(e) = &r
                    && matches!(e, Error::OutOfMemory(_))
                    && self.unmap_idle(u64::MAX, up) > 0
                {
                    r = up.vm_map(at, n);
                }
                if let Err(e) = r {
                    // The allocations mapped for this request so far go back too: a
                    // request that fails leaves no memory obtained for it.
                    for (a, b) in fresh {
                        up.vm_unmap(a, b);
                        self.arenas[k].set_unmapped(a, b);
                    }
                    return Err(e);
                }
                self.arenas[k].set_mapped(at, n);
                fresh.push((at, n));
                at += n;
            }
        }
        Ok(())
    }

    /// Remembers that the memory of `[addr, addr+bytes)` was moved away or given up
    /// ([`MOVED_AWAY`]).
    fn remember_moved(&mut self, addr: u64, bytes: u64) {
        if self.moved_away.len() == MOVED_AWAY {
            self.moved_away.pop_front();
        }
        self.moved_away.push_back((addr, bytes));
    }

    /// Places, carves and maps a block of `size` bytes (a multiple of [`MIN_BLOCK`]).
    /// The warm case (the place is mapped: `place` counted no granule to map) touches
    /// no list of runs: building and dropping an empty `Vec` here was 8 instructions a
    /// replay event (callgrind, bench/results/host-2026-11-29-exp14).
    #[inline]
    fn alloc_block(&mut self, size: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let large = size > SMALL_SIZE;
        let (k, i, addr, n) = self.place(size, large, up)?;
        let b = self.arenas[k].carve(i, addr, size);
        let hit = n == 0 || self.map_block(k, b, addr, size, up)?;
        self.used_bytes += size;
        self.peak_used = self.peak_used.max(self.used_bytes);
        Ok(Block { ptr: addr, size, hit })
    }

    /// Maps the granules that block `b` (just carved at `addr`, `size` bytes, in arena
    /// `k`) touches and that are not mapped ([`ExpandablePool::map`]); on error gives
    /// the block back. Returns whether nothing needed mapping (a hit). Out of line:
    /// warm passes come here rarely.
    #[cold]
    #[inline(never)]
    fn map_block(&mut self, k: usize, b: u32, addr: u64, size: u64, up: ShardUpstream<'_>) -> Result<bool> {
        let runs = self.arenas[k].unmapped_runs(addr, size);
        if !runs.is_empty()
            && let Err(e) = self.map(k, &runs, up)
        {
            self.arenas[k].give_back(b);
            return Err(e);
        }
        Ok(runs.is_empty())
    }
}

impl Pool for ExpandablePool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        self.alloc_block(round_up(bytes, MIN_BLOCK), up)
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        self.used_bytes -= size;
        self.release(ptr, size);
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        if target == 0 {
            return 0;
        }
        let released = self.unmap_idle(target, up);
        // Nothing releasable left: the layout whose memory was moved away and wanted back
        // is gone with it (its places are unmapped, or hold blocks in use), so the pool
        // forgets the moves and may move again. Otherwise a workload that thrashed once
        // would grow without moving (up to the union of the places its layout visits:
        // encoder_infer_varlen 1.18 × live where moving holds it at 1.11) for the rest of
        // the process, `empty_cache` and new workloads after it included.
        if released < target {
            self.moves_off = false;
            self.moved_away.clear();
        }
        // An arena left with no block and nothing mapped gives its addresses back.
        self.arenas.retain(|a| {
            let keep = a.mapped_bytes > 0 || !a.is_empty();
            if !keep {
                up.vm_release(a.base, a.size);
            }
            keep
        });
        self.index_kinds();
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.mapped_bytes() - self.used_bytes
    }

    /// Free bytes that reclaim cannot give back: in granules a block touches, or in idle
    /// granules of a physical allocation that a block touches elsewhere (CUDA releases an
    /// allocation whole).
    fn inactive_split_bytes(&self) -> u64 {
        let releasable: u64 = self.arenas.iter().map(|a| a.releasable_bytes()).sum();
        self.mapped_bytes() - releasable - self.used_bytes
    }

    /// Never: every request searches and merges (there are no lists of freed blocks to
    /// hit), so the engine hands this pool the calling thread's cached blocks (at most
    /// [`crate::config::EXPANDABLE_THREAD_CACHE_MAX`] each) before every request that
    /// misses its thread cache: best fit then sees every freed block merged with its
    /// neighbours, and the replayed traces' peaks are those without thread caches to the
    /// byte (bench/results/host-2026-11-28-exp13b; a cached block left unmerged while
    /// the pool maps raised bertlike_infer_varlen_seed101 from 1.0575 to 1.0646 × live).
    /// Where those caches miss most requests (allocation traces), they bypass themselves
    /// (`crate::thread_cache::ThreadCache::bypassed`; bench/results/host-2026-11-29-exp14).
    fn serves_at_once(&self, _bytes: u64) -> bool {
        false
    }

    /// Segments are the runs of mapped granules (reserved bytes are mapped bytes); free
    /// bytes in granules a block touches are inactive splits, free bytes of idle granules
    /// cached (as `inactive_split_bytes` and `cached_bytes` count them).
    fn snapshot(&self, _owned: &[(u64, u64)], out: &mut Vec<PoolSegment>) {
        let mut arenas: Vec<&Arena> = self.arenas.iter().collect();
        arenas.sort_by_key(|a| a.base);
        for a in arenas {
            a.snapshot(out);
        }
    }

    fn block_base(&self, addr: u64, seg_base: u64) -> Option<u64> {
        // An arena of another pool of the shard is not ours to answer for.
        let arena = self.arenas.iter().find(|a| a.contains(addr))?;
        if arena.is_block_start(addr) {
            return Some(addr);
        }
        // A walk of the arena (copies into the middle of a block are rare).
        Some(arena.block_around(addr).unwrap_or(seg_base))
    }
}

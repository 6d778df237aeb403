//! `split`: blocks carved out of larger device segments, after PyTorch's caching
//! allocator (`c10/cuda/CUDACachingAllocator.cpp`), with a placement policy that keeps
//! peak reserved memory low and a structure that keeps cache misses cheap.
//!
//! # What PyTorch does, and what is kept
//!
//! Sizes are rounded up to 512 B. Requests up to 1 MiB ("small") come from 2 MiB
//! segments, requests up to 10 MiB ("medium") from 20 MiB segments, larger ones ("big")
//! from segments of their own size rounded up to 2 MiB (`kSmallBuffer`, `kLargeBuffer`,
//! `kMinLargeAlloc`, `kRoundLarge`). A request takes the free block that fits best by
//! (size, address); the rest of the block is split off when it is worth keeping (at
//! least 512 B in a small segment, more than 1 MiB in a larger one). Freed blocks merge
//! with free neighbours, and only wholly free segments go back to the device. Small
//! requests never take blocks of larger segments (two pools, as PyTorch's).
//!
//! # Peak reserved memory
//!
//! Before a pool grows above the all-time high-water mark of reserved memory, it first
//! returns wholly free segments (largest first, the fewest device calls), so cached
//! memory that does not fit never raises the peak ([`ShardUpstream::growth_excess`]). That
//! only works if free memory is in *whole* segments: a free block inside a segment that
//! also holds a live block (a "hole") cannot go back. PyTorch's placement pins segments
//! freely (a 12 MiB tensor carved out of a free 786 MiB segment keeps all of it), so the
//! traces in `data/` reserve 7–22 % above their live peak with it. This pool
//! avoids creating holes where it can:
//!
//! - Holes first: a medium or big request takes the best-fitting hole before a whole
//!   free segment, unless a whole segment fits as well (see below) and is smaller.
//! - A whole free segment is taken only when it fits: at most 1/8 larger than the
//!   request, or no larger than the segment the request would get anyway (in the spirit
//!   of PyTorch's `max_split_size`, which keeps large blocks from small requests).
//! - Medium requests stay in medium segments: they neither take holes of big segments
//!   (a 3 MiB tensor in the hole of a 60 MiB segment keeps the segment from becoming
//!   whole again) nor split big segments.
//! - Otherwise the pool grows, releasing whole segments first as above. A small request
//!   that would lift the peak takes a hole of a large segment instead, if there is one.
//!
//! Strictness costs device calls when a workload repeats with a layout that no longer
//! fits the cache, so it is relaxed for sizes that recur:
//!
//! - A size is *recurring* once it has been requested before through the slow path (a
//!   medium size: 8 times before, since in a workload of arbitrary sizes medium sizes
//!   also repeat by chance, 512 B apart). A recurring medium request may also use the holes
//!   and whole free segments of big segments, as a big request does.
//! - Once the high-water mark has held while the pool served as many bytes as the mark
//!   itself (a *steady* state: the workload runs in the memory it already has, as a
//!   training loop from its second iteration), a recurring request may also split a
//!   whole segment of any size, as PyTorch does, instead of releasing and allocating.
//!
//! On the traces (host device, peak reserved ÷ peak live, cold): gpt2_train ≈1.02–1.04,
//! random_seed1 ≈1.06–1.08, resnet50_train ≈1.03, against PyTorch's 1.07/1.22/1.21;
//! replaying them again finds nearly everything in the cache.
//!
//! # Structure
//!
//! Blocks are nodes in a slab, linked to their address neighbours within the segment,
//! so merging costs no search. Free blocks are indexed by (size, address) in size
//! classes of 1/8 octave, each a sorted vector, with a bitmap of non-empty classes: an
//! exact best fit costs a bit scan and a binary search over a few entries, where a
//! B-tree costs several cache misses per operation. Five such indexes hold the free
//! blocks of small segments, and the holes and whole segments of medium and of big
//! segments, so each rule above is one lookup.
//!
//! Frees are deferred: a freed block goes onto the quick list of its size (LIFO) and is
//! merged only when a request misses, so a loop that frees and reallocates the same
//! sizes is served by one array probe and a pop; a miss still sees fully merged free
//! memory before it searches or grows, so fragmentation matches eager merging. The
//! quick lists live in a direct-mapped table of [`quick::QUICK_SLOTS`] slots keyed by size; a
//! free whose slot holds another size's list is merged at once. A quick hit hands out
//! exactly the block that was freed, of the size that was requested.

pub(super) mod fit_index;
pub(super) mod quick;
mod segments;
#[cfg(test)]
pub(super) mod tests;

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::snapshot::{BlockState, PoolBlock, PoolSegment};
use crate::upstream::ShardUpstream;
use fit_index::{FitIndex, smaller};
use quick::QuickLists;
use rustc_hash::FxHashMap;
use segments::{Kind, NIL, Node, Seg, State};

/// Requests up to this size are "small" and come from [`SMALL_SEGMENT`] segments.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Segment size for small requests (PyTorch's `kSmallBuffer`).
pub const SMALL_SEGMENT: u64 = 2 << 20;
/// Requests below this size (and above [`SMALL_SIZE`]) are "medium" and come from
/// [`LARGE_SEGMENT`] segments (PyTorch's `kMinLargeAlloc`).
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Segment size for medium requests (PyTorch's `kLargeBuffer`).
pub const LARGE_SEGMENT: u64 = 20 << 20;
/// Granularity of segments for big requests (PyTorch's `kRoundLarge`).
pub const ROUND_LARGE: u64 = 2 << 20;
/// A whole free segment fits a request if it is at most `request >> FIT_SHIFT` larger
/// (1/8), or no larger than the segment the request would be given.
const FIT_SHIFT: u32 = 3;
/// A medium size is recurring after this many earlier slow-path requests (a big size
/// after one).
const MEDIUM_RECURRING: u8 = 8;
/// Sizes remembered for recurrence; past this many the memory starts over.
const MAX_REMEMBERED: usize = 1 << 16;

// The free-block indexes (`SplitPool::indexes`).
const SMALL: usize = 0;
const MEDIUM_HOLES: usize = 1;
const MEDIUM_WHOLE: usize = 2;
const BIG_HOLES: usize = 3;
const BIG_WHOLE: usize = 4;

/// Segment-splitting pool with best fit and merging of neighbours.
pub struct SplitPool {
    nodes: Vec<Node>,
    dead_nodes: Vec<u32>,
    segs: Vec<Seg>,
    free_segs: Vec<u32>,
    /// Segment base → index in `segs`.
    seg_at: FxHashMap<u64, u32>,
    /// Address → node of every block in use or on a quick list.
    node_at: FxHashMap<u64, u32>,
    /// The free blocks: [`SMALL`], [`MEDIUM_HOLES`], [`MEDIUM_WHOLE`], [`BIG_HOLES`],
    /// [`BIG_WHOLE`].
    indexes: [FitIndex; 5],
    /// The quick lists: blocks freed since the last flush, by size.
    quick: QuickLists,
    /// Bytes of blocks in use, bytes of segments held, and the highest `reserved` of
    /// this pool (never reset: the "steady state" rule uses it).
    used_bytes: u64,
    reserved: u64,
    peak_reserved: u64,
    /// Bytes handed out since `peak_reserved` last rose.
    served: u64,
    /// Slow-path requests per large size (in units of 512 B), saturating.
    slow_requests: FxHashMap<u32, u8>,
}

impl Default for SplitPool {
    fn default() -> Self {
        SplitPool {
            nodes: Vec::new(),
            dead_nodes: Vec::new(),
            segs: Vec::new(),
            free_segs: Vec::new(),
            seg_at: FxHashMap::default(),
            node_at: FxHashMap::default(),
            indexes: Default::default(),
            quick: QuickLists::new(),
            used_bytes: 0,
            reserved: 0,
            peak_reserved: 0,
            served: 0,
            slow_requests: FxHashMap::default(),
        }
    }
}

/// The segment size for a request of `size` (already rounded to 512 B).
pub fn segment_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_SEGMENT
    } else if size < MIN_LARGE_ALLOC {
        LARGE_SEGMENT
    } else {
        round_up(size, ROUND_LARGE)
    }
}

impl SplitPool {
    fn index_insert(&mut self, i: u32) {
        let n = &self.nodes[i as usize];
        self.indexes[n.index()].insert(n.size, n.addr, i);
    }

    fn index_remove(&mut self, i: u32) {
        let n = &self.nodes[i as usize];
        self.indexes[n.index()].remove(n.size, n.addr);
    }

    fn tree_free_bytes(&self) -> u64 {
        self.indexes.iter().map(|x| x.bytes).sum()
    }

    /// Counts a slow-path request of a large `size`; true if the size is recurring.
    fn recurring(&mut self, size: u64, medium: bool) -> bool {
        if self.slow_requests.len() >= MAX_REMEMBERED {
            self.slow_requests.clear();
        }
        // Sizes of 2 TiB and more share a key: they are not what recurs.
        let n = self.slow_requests.entry((size / MIN_BLOCK).min(u32::MAX as u64) as u32).or_default();
        *n = n.saturating_add(1);
        *n > if medium { MEDIUM_RECURRING } else { 1 }
    }

    /// A small request: the best fit in small segments, else, if growing would lift the
    /// peak, the best-fitting hole of a large segment (already pinned), else growth.
    fn alloc_small(&mut self, size: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let mut found = self.indexes[SMALL].best_fit(size);
        if found.is_none() && up.growth_excess(SMALL_SEGMENT) > 0 {
            found =
                smaller(self.indexes[MEDIUM_HOLES].best_fit(size), self.indexes[BIG_HOLES].best_fit(size));
        }
        let (i, hit) = match found {
            Some((_, _, i)) => (i, true),
            None => (self.grow(SMALL_SEGMENT, Kind::Small, up)?, false),
        };
        let used = self.take(i, size);
        Ok(Block { ptr: self.nodes[i as usize].addr, size: used, hit })
    }

    /// A medium or big request, by the rules of the module documentation.
    fn alloc_large(&mut self, size: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let medium = size < MIN_LARGE_ALLOC;
        let recurring = self.recurring(size, medium);
        let steady = self.served >= self.peak_reserved;
        let (hole, whole) = if medium && !recurring {
            (self.indexes[MEDIUM_HOLES].best_fit(size), self.indexes[MEDIUM_WHOLE].best_fit(size))
        } else {
            (
                smaller(self.indexes[MEDIUM_HOLES].best_fit(size), self.indexes[BIG_HOLES].best_fit(size)),
                smaller(self.indexes[MEDIUM_WHOLE].best_fit(size), self.indexes[BIG_WHOLE].best_fit(size)),
            )
        };
        let fit = size + (size >> FIT_SHIFT).max(segment_size(size) - size);
        let pick = match (hole, whole) {
            (_, Some(w)) if w.0 <= fit && hole.is_none_or(|h| w.0 < h.0) => Some(w.2),
            (Some(h), _) => Some(h.2),
            (None, Some(w)) if recurring && steady => Some(w.2),
            _ => None,
        };
        let (i, hit) = match pick {
            Some(i) => (i, true),
            None => {
                let kind = if medium { Kind::Medium } else { Kind::Big };
                (self.grow(segment_size(size), kind, up)?, false)
            }
        };
        let used = self.take(i, size);
        Ok(Block { ptr: self.nodes[i as usize].addr, size: used, hit })
    }
}

impl SplitPool {
    /// Merges every quick-listed block into the indexes.
    fn flush(&mut self) {
        let mut quick = std::mem::take(&mut self.quick);
        quick.flush(|p| self.release(self.node_at[&p]));
        self.quick = quick;
    }

    /// A request that no quick list serves. Kept out of line so that the hit path stays
    /// small where the engine inlines it.
    #[inline(never)]
    fn alloc_miss(&mut self, size: u64, up: ShardUpstream<'_>) -> Result<Block> {
        self.flush();
        if size <= SMALL_SIZE { self.alloc_small(size, up) } else { self.alloc_large(size, up) }
    }
}

impl Pool for SplitPool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        self.served += size;
        if let Some(ptr) = self.quick.pop(size) {
            self.used_bytes += size;
            return Ok(Block { ptr, size, hit: true });
        }
        self.alloc_miss(size, up)
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        self.used_bytes -= size;
        if !self.quick.push(ptr, size) {
            // The slot holds another size's list: merge this block at once.
            self.release(self.node_at[&ptr]);
        }
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        self.flush();
        if target == 0 {
            return 0;
        }
        let mut whole: Vec<(u64, u64, u32)> = self
            .segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.first != NIL && self.nodes[s.first as usize].state == State::Free)
            .filter(|(_, s)| self.nodes[s.first as usize].size == s.size)
            .map(|(i, s)| (s.size, s.base, i as u32))
            .collect();
        // Largest first: the fewest device calls for the bytes asked.
        whole.sort_unstable_by(|a, b| b.cmp(a));
        let mut released = 0;
        for (size, base, s) in whole {
            if released >= target {
                break;
            }
            let i = self.segs[s as usize].first;
            self.index_remove(i);
            self.kill(i);
            self.segs[s as usize].first = NIL;
            self.free_segs.push(s);
            self.seg_at.remove(&base);
            up.free(base, size);
            self.reserved -= size;
            released += size;
        }
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.tree_free_bytes() + self.quick.bytes()
    }

    fn inactive_split_bytes(&self) -> u64 {
        // Free bytes per segment, quick-listed blocks included: a segment all of whose
        // blocks are free is not partly in use, whether or not they are merged yet.
        let mut free: FxHashMap<u32, u64> = FxHashMap::default();
        for &(size, _, i) in self.indexes.iter().flat_map(FitIndex::iter) {
            *free.entry(self.nodes[i as usize].seg).or_default() += size;
        }
        for (p, size) in self.quick.blocks() {
            *free.entry(self.nodes[self.node_at[&p] as usize].seg).or_default() += size;
        }
        free.iter().filter(|&(&s, &f)| f < self.segs[s as usize].size).map(|(_, &f)| f).sum()
    }

    fn serves_at_once(&self, bytes: u64) -> bool {
        self.quick.holds(round_up(bytes, MIN_BLOCK))
    }

    fn snapshot(&self, _owned: &[(u64, u64)], out: &mut Vec<PoolSegment>) {
        let quick: rustc_hash::FxHashSet<u64> = self.quick.blocks().map(|b| b.0).collect();
        let mut segs: Vec<&segments::Seg> = self.segs.iter().filter(|s| s.first != NIL).collect();
        segs.sort_by_key(|s| s.base);
        for seg in segs {
            let mut blocks = Vec::new();
            let mut i = seg.first;
            while i != NIL {
                let n = &self.nodes[i as usize];
                let free = n.state == State::Free || quick.contains(&n.addr);
                let state = if free { BlockState::Cached } else { BlockState::Active };
                blocks.push(PoolBlock { addr: n.addr, size: n.size, state });
                i = n.next;
            }
            // Free blocks of a segment that is not wholly free are inactive splits (as
            // `inactive_split_bytes` counts them).
            if blocks.iter().any(|b| b.state == BlockState::Active) {
                for b in blocks.iter_mut().filter(|b| b.state == BlockState::Cached) {
                    b.state = BlockState::InactiveSplit;
                }
            }
            out.push(PoolSegment { addr: seg.base, size: seg.size, blocks });
        }
    }

    fn block_base(&self, addr: u64, seg_base: u64) -> Option<u64> {
        // Walk the segment's blocks (copies into the middle of a block are rare); a
        // segment of another pool of the shard is not ours to answer for.
        let &s = self.seg_at.get(&seg_base)?;
        if self.node_at.contains_key(&addr) {
            return Some(addr);
        }
        let mut i = self.segs[s as usize].first;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if addr < n.addr + n.size {
                return Some(n.addr);
            }
            i = n.next;
        }
        Some(seg_base)
    }
}

#[cfg(test)]
impl SplitPool {
    /// Checks the structure: blocks tile each segment with consistent links, no two free
    /// neighbours, the indexes hold exactly the free blocks (sorted, in their classes,
    /// bitmaps and byte counts right), the address map exactly the blocks in use, the
    /// quick lists blocks in use of their size, and every counter agrees.
    pub(crate) fn check(&self) {
        let (mut free_bytes, mut entries) = ([0u64; 5], [0usize; 5]);
        let (mut in_use, mut in_use_bytes, mut reserved, mut live_nodes) = (0, 0, 0, 0);
        for (s, seg) in self.segs.iter().enumerate() {
            if seg.first == NIL {
                assert!(self.free_segs.contains(&(s as u32)));
                continue;
            }
            reserved += seg.size;
            assert_eq!(self.seg_at.get(&seg.base), Some(&(s as u32)));
            let kind = self.nodes[seg.first as usize].kind;
            match kind {
                Kind::Small => assert_eq!(seg.size, SMALL_SEGMENT),
                Kind::Medium => assert_eq!(seg.size, LARGE_SEGMENT),
                Kind::Big => assert_eq!(seg.size % ROUND_LARGE, 0),
            }
            let (mut at, mut i, mut prev, mut prev_free) = (seg.base, seg.first, NIL, false);
            while i != NIL {
                let n = &self.nodes[i as usize];
                live_nodes += 1;
                assert_eq!((n.addr, n.seg, n.prev, n.kind), (at, s as u32, prev, kind), "node {i}");
                assert!(n.size >= MIN_BLOCK && n.size.is_multiple_of(MIN_BLOCK));
                match n.state {
                    State::Free => {
                        assert!(!prev_free, "two free neighbours at {at:#x}");
                        assert!(
                            self.indexes[n.index()].contains(n.size, n.addr, i),
                            "free block {at:#x} not indexed"
                        );
                        assert!(!self.node_at.contains_key(&n.addr));
                        free_bytes[n.index()] += n.size;
                        entries[n.index()] += 1;
                    }
                    State::Used => {
                        assert_eq!(self.node_at.get(&n.addr), Some(&i));
                        in_use += 1;
                        in_use_bytes += n.size;
                    }
                    State::Dead => panic!("dead node {i} in segment {s}"),
                }
                prev_free = n.state == State::Free;
                at += n.size;
                prev = i;
                i = n.next;
            }
            assert_eq!(at, seg.base + seg.size, "blocks do not tile segment {s}");
        }
        for (x, ix) in self.indexes.iter().enumerate() {
            assert_eq!(ix.bytes, free_bytes[x], "index {x} bytes");
            assert_eq!(ix.iter().count(), entries[x], "index {x} holds other blocks");
            for (c, v) in ix.classes.iter().enumerate() {
                assert_eq!(ix.bits[c / 64] >> (c % 64) & 1 == 1, !v.is_empty(), "index {x} class {c} bit");
                assert!(v.iter().all(|e| fit_index::class(e.0) == c));
                assert!(v.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
            }
        }
        assert_eq!(self.node_at.len(), in_use);
        for (p, size) in self.quick.check() {
            assert_eq!(self.nodes[self.node_at[&p] as usize].size, size);
        }
        assert_eq!(self.used_bytes + self.quick.bytes(), in_use_bytes);
        assert_eq!(reserved, self.reserved);
        assert!(self.peak_reserved >= self.reserved);
        assert_eq!(live_nodes + self.dead_nodes.len(), self.nodes.len());
        assert!(self.dead_nodes.iter().all(|&d| self.nodes[d as usize].state == State::Dead));
        assert_eq!(self.seg_at.len() + self.free_segs.len(), self.segs.len());
    }
}

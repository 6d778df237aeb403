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
//! memory that does not fit never raises the peak ([`Upstream::growth_excess`]). That
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
//! quick lists live in a direct-mapped table of [`QUICK_SLOTS`] slots keyed by size; a
//! free whose slot holds another size's list is merged at once. A quick hit hands out
//! exactly the block that was freed, of the size that was requested.

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::Upstream;
use rustc_hash::FxHashMap;

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
/// Slots of the direct-mapped quick-list table (a power of two).
pub const QUICK_SLOTS: usize = 512;

/// No node.
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Handed out, or freed onto a quick list and not merged yet.
    Used,
    /// Free and in an index.
    Free,
    /// A slab slot not in use.
    Dead,
}

/// What a segment serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Small,
    Medium,
    Big,
}

/// A block: a run of a segment, free or not.
#[derive(Clone, Copy, Debug)]
struct Node {
    addr: u64,
    size: u64,
    /// The blocks before and after this one in its segment (NIL at the ends).
    prev: u32,
    next: u32,
    /// Index of the segment in `SplitPool::segs`.
    seg: u32,
    state: State,
    kind: Kind,
}

impl Node {
    /// A free node that is its segment's only block.
    #[inline]
    fn whole(&self) -> bool {
        self.prev == NIL && self.next == NIL
    }

    /// The index a free node belongs in.
    #[inline]
    fn index(&self) -> usize {
        match self.kind {
            Kind::Small => SMALL,
            Kind::Medium if self.whole() => MEDIUM_WHOLE,
            Kind::Medium => MEDIUM_HOLES,
            Kind::Big if self.whole() => BIG_WHOLE,
            Kind::Big => BIG_HOLES,
        }
    }
}

/// A device segment. A released one has `first == NIL` and waits in `free_segs`.
#[derive(Clone, Copy, Debug)]
struct Seg {
    base: u64,
    size: u64,
    /// Its first block.
    first: u32,
}

// The free-block indexes.
const SMALL: usize = 0;
const MEDIUM_HOLES: usize = 1;
const MEDIUM_WHOLE: usize = 2;
const BIG_HOLES: usize = 3;
const BIG_WHOLE: usize = 4;

/// Size classes of 1/8 octave from 512 B to 2^48 B.
const CLASSES: usize = 320;

/// The class of a block size (≥ 512): 8 classes per power of two.
#[inline]
fn class(size: u64) -> usize {
    let lg = 63 - size.leading_zeros() as usize;
    (lg - 9) * 8 + ((size >> (lg - 3)) & 7) as usize
}

/// Free blocks by (size, address): exact best fit over size classes, each a vector
/// sorted by (size, address), with a bitmap of the non-empty classes.
#[derive(Default)]
struct FitIndex {
    /// (size, address, node); empty until the first insert.
    classes: Vec<Vec<(u64, u64, u32)>>,
    bits: [u64; CLASSES / 64],
    bytes: u64,
}

impl FitIndex {
    fn insert(&mut self, size: u64, addr: u64, node: u32) {
        if self.classes.is_empty() {
            self.classes.resize_with(CLASSES, Vec::new);
        }
        let c = class(size);
        let v = &mut self.classes[c];
        let i = v.partition_point(|e| (e.0, e.1) < (size, addr));
        v.insert(i, (size, addr, node));
        self.bits[c / 64] |= 1 << (c % 64);
        self.bytes += size;
    }

    fn remove(&mut self, size: u64, addr: u64) {
        let c = class(size);
        let v = &mut self.classes[c];
        let i = v.partition_point(|e| (e.0, e.1) < (size, addr));
        debug_assert!(
            v.get(i).is_some_and(|e| (e.0, e.1) == (size, addr)),
            "{size} at {addr:#x} not indexed"
        );
        v.remove(i);
        if v.is_empty() {
            self.bits[c / 64] &= !(1 << (c % 64));
        }
        self.bytes -= size;
    }

    /// The smallest (size, address, node) with size ≥ `size`.
    #[inline]
    fn best_fit(&self, size: u64) -> Option<(u64, u64, u32)> {
        if self.bytes == 0 {
            return None;
        }
        let c = class(size);
        if self.bits[c / 64] & (1 << (c % 64)) != 0 {
            let v = &self.classes[c];
            let i = v.partition_point(|e| e.0 < size);
            if i < v.len() {
                return Some(v[i]);
            }
        }
        // Every block of a higher class is larger: the first one of the next class.
        let c = c + 1;
        let mut w = c / 64;
        let mut mask = !0u64 << (c % 64);
        while w < self.bits.len() {
            let b = self.bits[w] & mask;
            if b != 0 {
                return Some(self.classes[w * 64 + b.trailing_zeros() as usize][0]);
            }
            w += 1;
            mask = !0;
        }
        None
    }

    fn iter(&self) -> impl Iterator<Item = &(u64, u64, u32)> {
        self.classes.iter().flatten()
    }
}

/// The smaller of two candidates by (size, address).
fn smaller(a: Option<(u64, u64, u32)>, b: Option<(u64, u64, u32)>) -> Option<(u64, u64, u32)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if (y.0, y.1) < (x.0, x.1) { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// A quick list: the addresses of the blocks of one size freed since the last flush,
/// LIFO. Its slot is free for another size while it is empty.
#[derive(Default)]
struct QuickList {
    size: u64,
    ptrs: Vec<u64>,
    /// In `SplitPool::touched`.
    touched: bool,
}

#[inline]
fn quick_slot(size: u64) -> usize {
    ((size >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - QUICK_SLOTS.trailing_zeros())) as usize
}

/// Segment-splitting pool with best fit and merging of neighbours.
pub struct SplitPool {
    nodes: Vec<Node>,
    dead_nodes: Vec<u32>,
    segs: Vec<Seg>,
    free_segs: Vec<u32>,
    /// Segment base → index in `segs`.
    seg_of: FxHashMap<u64, u32>,
    /// Address → node of every block in use or on a quick list.
    used: FxHashMap<u64, u32>,
    idx: [FitIndex; 5],
    quick: Box<[QuickList]>,
    /// Slots of the quick lists filled since the last flush.
    touched: Vec<usize>,
    quick_bytes: u64,
    /// Bytes of blocks in use, segments held, and the high-water mark of the latter.
    used_bytes: u64,
    reserved: u64,
    high_water: u64,
    /// Bytes handed out since the high-water mark last rose.
    served: u64,
    /// Slow-path requests per large size (in units of 512 B), saturating.
    seen: FxHashMap<u32, u8>,
}

impl Default for SplitPool {
    fn default() -> Self {
        SplitPool {
            nodes: Vec::new(),
            dead_nodes: Vec::new(),
            segs: Vec::new(),
            free_segs: Vec::new(),
            seg_of: FxHashMap::default(),
            used: FxHashMap::default(),
            idx: Default::default(),
            quick: (0..QUICK_SLOTS).map(|_| QuickList::default()).collect(),
            touched: Vec::new(),
            quick_bytes: 0,
            used_bytes: 0,
            reserved: 0,
            high_water: 0,
            served: 0,
            seen: FxHashMap::default(),
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
    fn new_node(&mut self, n: Node) -> u32 {
        if let Some(i) = self.dead_nodes.pop() {
            self.nodes[i as usize] = n;
            i
        } else {
            self.nodes.push(n);
            (self.nodes.len() - 1) as u32
        }
    }

    fn kill(&mut self, i: u32) {
        self.nodes[i as usize].state = State::Dead;
        self.dead_nodes.push(i);
    }

    fn index_insert(&mut self, i: u32) {
        let n = &self.nodes[i as usize];
        self.idx[n.index()].insert(n.size, n.addr, i);
    }

    fn index_remove(&mut self, i: u32) {
        let n = &self.nodes[i as usize];
        self.idx[n.index()].remove(n.size, n.addr);
    }

    fn tree_free_bytes(&self) -> u64 {
        self.idx.iter().map(|x| x.bytes).sum()
    }

    /// Merges every quick-listed block into the indexes.
    fn flush(&mut self) {
        if self.quick_bytes == 0 {
            return;
        }
        let mut touched = std::mem::take(&mut self.touched);
        for &q in &touched {
            let mut ptrs = std::mem::take(&mut self.quick[q].ptrs);
            for &p in &ptrs {
                self.release(self.used[&p]);
            }
            ptrs.clear();
            self.quick[q] = QuickList { size: 0, ptrs, touched: false }; // keeps the capacity
        }
        touched.clear();
        self.touched = touched;
        self.quick_bytes = 0;
    }

    /// Merges block `right` into its left neighbour `left` (both free, unindexed).
    fn absorb(&mut self, left: u32, right: u32) {
        let r = self.nodes[right as usize];
        let l = &mut self.nodes[left as usize];
        l.size += r.size;
        l.next = r.next;
        if r.next != NIL {
            self.nodes[r.next as usize].prev = left;
        }
        self.kill(right);
    }

    /// Marks block `i` free, merges it with free neighbours and indexes the result.
    fn release(&mut self, mut i: u32) {
        let n = self.nodes[i as usize];
        self.used.remove(&n.addr);
        self.nodes[i as usize].state = State::Free;
        if n.next != NIL && self.nodes[n.next as usize].state == State::Free {
            self.index_remove(n.next);
            self.absorb(i, n.next);
        }
        if n.prev != NIL && self.nodes[n.prev as usize].state == State::Free {
            self.index_remove(n.prev);
            self.absorb(n.prev, i);
            i = n.prev;
        }
        self.index_insert(i);
    }

    /// Hands out free block `i` for a request of `size`, splitting off the rest when it
    /// is worth keeping. Returns the size of the block handed out.
    fn take(&mut self, i: u32, size: u64) -> u64 {
        self.index_remove(i);
        let n = self.nodes[i as usize];
        let rest = n.size - size;
        let keep = if n.kind == Kind::Small { rest >= MIN_BLOCK } else { rest > SMALL_SIZE };
        if keep {
            let j = self.new_node(Node {
                addr: n.addr + size,
                size: rest,
                prev: i,
                next: n.next,
                seg: n.seg,
                state: State::Free,
                kind: n.kind,
            });
            if n.next != NIL {
                self.nodes[n.next as usize].prev = j;
            }
            let me = &mut self.nodes[i as usize];
            me.size = size;
            me.next = j;
            self.index_insert(j);
        }
        let me = &mut self.nodes[i as usize];
        me.state = State::Used;
        let (addr, used) = (me.addr, me.size);
        self.used.insert(addr, i);
        self.used_bytes += used;
        used
    }

    /// Obtains a segment of `size` bytes, first releasing whole free segments if it
    /// would lift reserved memory above its all-time high-water mark. Returns its node.
    fn grow(&mut self, size: u64, kind: Kind, up: &Upstream, shard: usize) -> Result<u32> {
        self.reclaim(up.growth_excess(size), up);
        let base = up.alloc(size, shard)?;
        self.reserved += size;
        if self.reserved > self.high_water {
            self.high_water = self.reserved;
            self.served = 0;
        }
        let seg = Seg { base, size, first: NIL };
        let s = match self.free_segs.pop() {
            Some(s) => {
                self.segs[s as usize] = seg;
                s
            }
            None => {
                self.segs.push(seg);
                (self.segs.len() - 1) as u32
            }
        };
        let i =
            self.new_node(Node { addr: base, size, prev: NIL, next: NIL, seg: s, state: State::Free, kind });
        self.segs[s as usize].first = i;
        self.seg_of.insert(base, s);
        self.index_insert(i);
        Ok(i)
    }

    /// Counts a slow-path request of a large `size`; true if the size is recurring.
    fn recurring(&mut self, size: u64, medium: bool) -> bool {
        if self.seen.len() >= MAX_REMEMBERED {
            self.seen.clear();
        }
        // Sizes of 2 TiB and more share a key: they are not what recurs.
        let n = self.seen.entry((size / MIN_BLOCK).min(u32::MAX as u64) as u32).or_default();
        *n = n.saturating_add(1);
        *n > if medium { MEDIUM_RECURRING } else { 1 }
    }

    /// A small request: the best fit in small segments, else, if growing would lift the
    /// peak, the best-fitting hole of a large segment (already pinned), else growth.
    fn alloc_small(&mut self, size: u64, up: &Upstream, shard: usize) -> Result<Block> {
        let mut found = self.idx[SMALL].best_fit(size);
        if found.is_none() && up.growth_excess(SMALL_SEGMENT) > 0 {
            found = smaller(self.idx[MEDIUM_HOLES].best_fit(size), self.idx[BIG_HOLES].best_fit(size));
        }
        let (i, hit) = match found {
            Some((_, _, i)) => (i, true),
            None => (self.grow(SMALL_SEGMENT, Kind::Small, up, shard)?, false),
        };
        let used = self.take(i, size);
        Ok(Block { ptr: self.nodes[i as usize].addr, size: used, hit })
    }

    /// A medium or big request, by the rules of the module documentation.
    fn alloc_large(&mut self, size: u64, up: &Upstream, shard: usize) -> Result<Block> {
        let medium = size < MIN_LARGE_ALLOC;
        let recurring = self.recurring(size, medium);
        let steady = self.served >= self.high_water;
        let (hole, whole) = if medium && !recurring {
            (self.idx[MEDIUM_HOLES].best_fit(size), self.idx[MEDIUM_WHOLE].best_fit(size))
        } else {
            (
                smaller(self.idx[MEDIUM_HOLES].best_fit(size), self.idx[BIG_HOLES].best_fit(size)),
                smaller(self.idx[MEDIUM_WHOLE].best_fit(size), self.idx[BIG_WHOLE].best_fit(size)),
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
                (self.grow(segment_size(size), kind, up, shard)?, false)
            }
        };
        let used = self.take(i, size);
        Ok(Block { ptr: self.nodes[i as usize].addr, size: used, hit })
    }
}

impl SplitPool {
    /// A request that no quick list serves. Kept out of line so that the hit path stays
    /// small where the engine inlines it.
    #[inline(never)]
    fn alloc_miss(&mut self, size: u64, up: &Upstream, shard: usize) -> Result<Block> {
        self.flush();
        if size <= SMALL_SIZE { self.alloc_small(size, up, shard) } else { self.alloc_large(size, up, shard) }
    }
}

impl Pool for SplitPool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: &Upstream, shard: usize) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        self.served += size;
        let q = &mut self.quick[quick_slot(size)];
        if q.size == size
            && let Some(ptr) = q.ptrs.pop()
        {
            self.quick_bytes -= size;
            self.used_bytes += size;
            return Ok(Block { ptr, size, hit: true });
        }
        self.alloc_miss(size, up, shard)
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: &Upstream) {
        self.used_bytes -= size;
        let slot = quick_slot(size);
        let q = &mut self.quick[slot];
        if q.ptrs.is_empty() {
            q.size = size;
            if !q.touched {
                q.touched = true;
                self.touched.push(slot);
            }
        } else if q.size != size {
            // The slot holds another size's list: merge this block at once.
            self.release(self.used[&ptr]);
            return;
        }
        q.ptrs.push(ptr);
        self.quick_bytes += size;
    }

    fn reclaim(&mut self, target: u64, up: &Upstream) -> u64 {
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
            self.seg_of.remove(&base);
            up.free(base, size);
            self.reserved -= size;
            released += size;
        }
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.tree_free_bytes() + self.quick_bytes
    }

    fn inactive_split_bytes(&self) -> u64 {
        // Free bytes per segment, quick-listed blocks included: a segment all of whose
        // blocks are free is not partly in use, whether or not they are merged yet.
        let mut free: FxHashMap<u32, u64> = FxHashMap::default();
        for &(size, _, i) in self.idx.iter().flat_map(FitIndex::iter) {
            *free.entry(self.nodes[i as usize].seg).or_default() += size;
        }
        for q in self.quick.iter() {
            for p in &q.ptrs {
                *free.entry(self.nodes[self.used[p] as usize].seg).or_default() += q.size;
            }
        }
        free.iter().filter(|&(&s, &f)| f < self.segs[s as usize].size).map(|(_, &f)| f).sum()
    }

    fn block_base(&self, addr: u64, seg_base: u64) -> u64 {
        if self.used.contains_key(&addr) {
            return addr;
        }
        // Walk the segment's blocks (copies into the middle of a block are rare).
        let Some(&s) = self.seg_of.get(&seg_base) else {
            return seg_base;
        };
        let mut i = self.segs[s as usize].first;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if addr < n.addr + n.size {
                return n.addr;
            }
            i = n.next;
        }
        seg_base
    }
}

#[cfg(test)]
impl FitIndex {
    fn contains(&self, size: u64, addr: u64, node: u32) -> bool {
        self.classes.get(class(size)).is_some_and(|v| {
            v.binary_search_by_key(&(size, addr), |e| (e.0, e.1)).is_ok_and(|i| v[i].2 == node)
        })
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
            assert_eq!(self.seg_of.get(&seg.base), Some(&(s as u32)));
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
                            self.idx[n.index()].contains(n.size, n.addr, i),
                            "free block {at:#x} not indexed"
                        );
                        assert!(!self.used.contains_key(&n.addr));
                        free_bytes[n.index()] += n.size;
                        entries[n.index()] += 1;
                    }
                    State::Used => {
                        assert_eq!(self.used.get(&n.addr), Some(&i));
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
        for (x, ix) in self.idx.iter().enumerate() {
            assert_eq!(ix.bytes, free_bytes[x], "index {x} bytes");
            assert_eq!(ix.iter().count(), entries[x], "index {x} holds other blocks");
            for (c, v) in ix.classes.iter().enumerate() {
                assert_eq!(ix.bits[c / 64] >> (c % 64) & 1 == 1, !v.is_empty(), "index {x} class {c} bit");
                assert!(v.iter().all(|e| class(e.0) == c));
                assert!(v.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
            }
        }
        assert_eq!(self.used.len(), in_use);
        let mut quick = 0;
        for (slot, q) in self.quick.iter().enumerate() {
            for p in &q.ptrs {
                let n = &self.nodes[self.used[p] as usize];
                assert_eq!((n.size, quick_slot(n.size)), (q.size, slot));
                quick += n.size;
            }
            assert!(q.ptrs.is_empty() || (q.touched && self.touched.contains(&slot)));
        }
        assert_eq!(quick, self.quick_bytes);
        assert_eq!(self.used_bytes + self.quick_bytes, in_use_bytes);
        assert_eq!(reserved, self.reserved);
        assert!(self.high_water >= self.reserved);
        assert_eq!(live_nodes + self.dead_nodes.len(), self.nodes.len());
        assert!(self.dead_nodes.iter().all(|&d| self.nodes[d as usize].state == State::Dead));
        assert_eq!(self.seg_of.len() + self.free_segs.len(), self.segs.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::HostDevice;
    use std::collections::BTreeMap;

    const MIB: u64 = 1 << 20;

    fn upstream() -> Upstream {
        Upstream::new(Box::new(HostDevice::new(Some(8 << 30))), None)
    }

    /// xorshift64*
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Writes a tag at both ends of a block, so that overlapping blocks are caught.
    fn tag(ptr: u64, bytes: u64, v: u8) {
        // SAFETY: the block is live host memory of at least `bytes` bytes.
        unsafe {
            *(ptr as *mut u8) = v;
            *((ptr + bytes - 1) as *mut u8) = v;
        }
    }

    fn tagged(ptr: u64, bytes: u64) -> (u8, u8) {
        // SAFETY: as in `tag`.
        unsafe { (*(ptr as *const u8), *((ptr + bytes - 1) as *const u8)) }
    }

    #[test]
    fn random_operations_keep_the_structure() {
        for seed in 1..=4u64 {
            let up = upstream();
            let mut pool = SplitPool::default();
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            // Live blocks: address → (requested, block size, tag).
            let mut live: BTreeMap<u64, (u64, u64, u8)> = BTreeMap::new();
            // A few sizes that recur, as in a training loop; the rest log-uniform.
            let recurring = [3000, 4096, 700 * 1024, 3 * MIB + 5, 12 * MIB, 40 * MIB];
            for step in 0..6000u64 {
                match rng.below(100) {
                    0..=52 if live.len() < 150 => {
                        let bytes = if rng.below(2) == 0 {
                            recurring[rng.below(recurring.len() as u64) as usize]
                        } else {
                            1 + (1u64 << rng.below(27)) + rng.below(1 << 16)
                        };
                        let Ok(b) = pool.alloc(bytes, &up, 0) else {
                            pool.check();
                            continue;
                        };
                        assert!(b.ptr.is_multiple_of(MIN_BLOCK));
                        assert!(b.size >= round_up(bytes, MIN_BLOCK) && b.size.is_multiple_of(MIN_BLOCK));
                        // At most 1 MiB is kept in a block rather than split off.
                        assert!(b.size <= round_up(bytes, MIN_BLOCK) + MIB, "{bytes} bytes got {}", b.size);
                        if let Some((&p, &(_, s, _))) = live.range(..=b.ptr).next_back() {
                            assert!(p + s <= b.ptr, "step {step}: {:#x} overlaps {p:#x}+{s}", b.ptr);
                        }
                        if let Some((&p, _)) = live.range(b.ptr..).next() {
                            assert!(
                                b.ptr + b.size <= p,
                                "step {step}: {:#x}+{} overlaps {p:#x}",
                                b.ptr,
                                b.size
                            );
                        }
                        let t = step as u8;
                        tag(b.ptr, bytes, t);
                        live.insert(b.ptr, (bytes, b.size, t));
                    }
                    0..=94 if !live.is_empty() => {
                        let k = rng.below(live.len() as u64) as usize;
                        let (&p, &(bytes, size, t)) = live.iter().nth(k).unwrap();
                        assert_eq!(tagged(p, bytes), (t, t), "step {step}: block {p:#x} was overwritten");
                        // An address inside the block belongs to it.
                        let inner = p + rng.below(size);
                        let seg = up.segment_containing(inner).expect("inside a segment").0;
                        assert_eq!(pool.block_base(inner, seg), p);
                        live.remove(&p);
                        pool.free(p, size, &up);
                    }
                    _ => {
                        let target = if rng.below(4) == 0 { u64::MAX } else { rng.below(64 * MIB) };
                        let before = up.reserved();
                        let released = pool.reclaim(target, &up);
                        assert_eq!(up.reserved(), before - released);
                    }
                }
                pool.check();
                let used: u64 = live.values().map(|v| v.1).sum();
                assert_eq!(up.reserved(), used + pool.cached_bytes(), "step {step}");
                assert!(pool.inactive_split_bytes() <= pool.cached_bytes());
            }
            for (p, (bytes, size, t)) in std::mem::take(&mut live) {
                assert_eq!(tagged(p, bytes), (t, t));
                pool.free(p, size, &up);
            }
            pool.reclaim(u64::MAX, &up);
            pool.check();
            assert_eq!(up.reserved(), 0, "seed {seed}: whole free segments were not all released");
        }
    }

    #[test]
    fn neighbours_merge_and_only_whole_segments_go_back() {
        let up = upstream();
        let mut pool = SplitPool::default();
        let k = 256 * 1024;
        let [a, b, c] = [0; 3].map(|_| pool.alloc(k, &up, 0).unwrap().ptr);
        assert_eq!((b, c), (a + k, a + 2 * k), "carved in order from one 2 MiB segment");
        assert_eq!(up.reserved(), SMALL_SEGMENT);
        pool.free(a, k, &up);
        pool.free(c, k, &up);
        pool.check();
        // b keeps the segment: nothing goes back, and its free parts are inactive split.
        assert_eq!(pool.reclaim(u64::MAX, &up), 0);
        pool.check();
        assert_eq!(pool.inactive_split_bytes(), SMALL_SEGMENT - k);
        assert_eq!(pool.idx[SMALL].iter().count(), 2, "a alone, c merged with the tail");
        // Freeing b merges all three with the tail: one free block, the whole segment,
        // which counts as cached but not as split, merged or not.
        pool.free(b, k, &up);
        assert_eq!(pool.inactive_split_bytes(), 0);
        pool.check();
        let m = pool.alloc(SMALL_SIZE, &up, 0).unwrap();
        assert_eq!((m.ptr, m.hit), (a, true), "served from the merged block");
        pool.free(a, SMALL_SIZE, &up);
        assert_eq!(pool.reclaim(1, &up), SMALL_SEGMENT);
        pool.check();
        assert_eq!((up.reserved(), pool.cached_bytes()), (0, 0));
    }

    #[test]
    fn quick_hits_return_the_freed_block_and_misses_merge_first() {
        let up = upstream();
        let mut pool = SplitPool::default();
        let a = pool.alloc(5000, &up, 0).unwrap();
        assert_eq!((a.size, a.hit), (5120, false));
        pool.free(a.ptr, a.size, &up);
        let b = pool.alloc(5100, &up, 0).unwrap();
        assert_eq!((b.ptr, b.size, b.hit), (a.ptr, 5120, true));
        // A miss merges the quick-listed blocks before it searches: the freed 5 KiB
        // and the rest of the segment form one block again.
        pool.free(b.ptr, b.size, &up);
        let c = pool.alloc(6000, &up, 0).unwrap();
        assert_eq!((c.ptr, c.hit), (a.ptr, true));
        pool.check();
        assert_eq!(pool.idx[SMALL].iter().count(), 1);
    }

    #[test]
    fn block_base_finds_the_block_around_an_address() {
        let up = upstream();
        let mut pool = SplitPool::default();
        let a = pool.alloc(3 * MIB, &up, 0).unwrap();
        let b = pool.alloc(4 * MIB, &up, 0).unwrap();
        assert_eq!(b.ptr, a.ptr + 3 * MIB);
        let seg = up.segment_containing(a.ptr).unwrap().0;
        assert_eq!(seg, a.ptr);
        for (addr, base) in [
            (a.ptr, a.ptr),
            (a.ptr + 3 * MIB - 1, a.ptr),
            (b.ptr + 1, b.ptr),
            (b.ptr + 4 * MIB, b.ptr + 4 * MIB),
        ] {
            assert_eq!(pool.block_base(addr, seg), base, "{:#x}", addr - seg);
        }
    }

    #[test]
    fn a_new_big_size_does_not_pin_a_much_larger_free_segment() {
        let up = upstream();
        let mut pool = SplitPool::default();
        let a = pool.alloc(100 * MIB, &up, 0).unwrap();
        pool.free(a.ptr, a.size, &up);
        // 12 MiB would fit in the free 100 MiB segment, but a new size does not split
        // it: growing by 12 MiB would lift the peak, so the free segment goes back.
        let b = pool.alloc(12 * MIB, &up, 0).unwrap();
        assert!(!b.hit);
        assert_eq!(up.reserved(), 12 * MIB);
        assert_eq!(up.peak_reserved(), 100 * MIB);
        pool.free(b.ptr, b.size, &up);
        pool.reclaim(u64::MAX, &up);
        pool.check();
    }

    #[test]
    fn a_recurring_size_splits_a_segment_once_the_peak_holds() {
        let up = upstream();
        let mut pool = SplitPool::default();
        let b = pool.alloc(12 * MIB, &up, 0).unwrap(); // 12 MiB is now recurring
        let a = pool.alloc(100 * MIB, &up, 0).unwrap();
        pool.free(a.ptr, a.size, &up);
        // Serve more than the high-water mark from the cache: a steady state.
        for _ in 0..2 {
            let x = pool.alloc(100 * MIB, &up, 0).unwrap();
            assert_eq!((x.ptr, x.hit), (a.ptr, true));
            pool.free(x.ptr, x.size, &up);
        }
        pool.reclaim(0, &up); // merges the quick lists, releases nothing
        let c = pool.alloc(12 * MIB, &up, 0).unwrap();
        assert_eq!((c.ptr, c.size, c.hit), (a.ptr, 12 * MIB, true), "split off the free segment");
        assert_eq!(up.reserved(), 112 * MIB);
        pool.check();
        for blk in [b, c] {
            pool.free(blk.ptr, blk.size, &up);
        }
        assert_eq!(pool.reclaim(u64::MAX, &up), 112 * MIB);
    }

    #[test]
    fn size_classes_are_monotone_and_fine() {
        let mut last = 0;
        for size in (MIN_BLOCK..64 * MIB).step_by(4096).chain([1 << 47, (1 << 48) - 512]) {
            let c = class(size);
            assert!(c >= last && c < CLASSES);
            last = c;
        }
        // Within a class, sizes differ by less than 1/8.
        assert_eq!(class(8 * MIB), class(9 * MIB - 512));
        assert_ne!(class(8 * MIB), class(9 * MIB));
    }
}

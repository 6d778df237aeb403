//! `split`: blocks carved out of larger device segments, after PyTorch's caching
//! allocator (`c10/cuda/CUDACachingAllocator.cpp`): sizes rounded to 512 B; requests up
//! to 1 MiB come from 2 MiB segments, requests up to 10 MiB from 20 MiB segments, larger
//! ones from segments of their own size rounded to 2 MiB; best fit by (size, address);
//! the remainder of a block is split off when it is worth keeping; on free, neighbours
//! merge; only whole free segments go back to the device.
//!
//! Freeing is deferred: a freed block first goes onto a per-size LIFO ("quick list") and
//! is merged into the address-ordered structure only when a request misses every quick
//! list. A training loop that frees and re-allocates the same sizes is then served by a
//! hash lookup and a pop (no tree operations), while a miss still sees fully coalesced
//! free memory before it searches or grows, so fragmentation matches eager merging.

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::Upstream;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// Requests up to this size are "small" and come from [`SMALL_SEGMENT`] segments.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Segment size for small requests (PyTorch's `kSmallBuffer`).
pub const SMALL_SEGMENT: u64 = 2 << 20;
/// Requests below this size come from [`LARGE_SEGMENT`] segments (PyTorch's `kMinLargeAlloc`).
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Segment size for medium requests (PyTorch's `kLargeBuffer`).
pub const LARGE_SEGMENT: u64 = 20 << 20;
/// Granularity of segments for requests of [`MIN_LARGE_ALLOC`] and more (PyTorch's `kRoundLarge`).
pub const ROUND_LARGE: u64 = 2 << 20;

#[derive(Debug, Clone, Copy)]
struct Info {
    size: u64,
    /// Base address of the segment this block lies in.
    seg: u64,
    free: bool,
}

/// Segment-splitting pool with best fit and merging of neighbours.
#[derive(Default)]
pub struct SplitPool {
    /// Every block not in a quick list, free or in use, by address.
    blocks: BTreeMap<u64, Info>,
    /// Segment base → segment size.
    segments: FxHashMap<u64, u64>,
    /// Free blocks of small and large segments, by (size, address).
    free_small: BTreeSet<(u64, u64)>,
    free_large: BTreeSet<(u64, u64)>,
    /// Deferred frees: block size → addresses. These blocks count as in use in `blocks`.
    quick: FxHashMap<u64, Vec<u64>>,
    quick_bytes: u64,
    /// Bytes in `free_small` and `free_large`.
    tree_free_bytes: u64,
}

impl SplitPool {
    fn free_set(&mut self, seg_size: u64) -> &mut BTreeSet<(u64, u64)> {
        if seg_size == SMALL_SEGMENT { &mut self.free_small } else { &mut self.free_large }
    }

    /// Moves every quick-listed block into the tree, merging with free neighbours.
    fn flush(&mut self) {
        if self.quick_bytes == 0 {
            return;
        }
        let quick = std::mem::take(&mut self.quick);
        for (_, ptrs) in quick {
            for ptr in ptrs {
                self.release(ptr);
            }
        }
        self.quick_bytes = 0;
    }

    /// Marks block `ptr` free and merges it with free neighbours of its segment.
    fn release(&mut self, ptr: u64) {
        let Info { size, seg, .. } = self.blocks[&ptr];
        let seg_size = self.segments[&seg];
        self.tree_free_bytes += size;
        let (mut base, mut total) = (ptr, size);
        let next = ptr + size;
        if let Some(n) = self.blocks.get(&next).copied().filter(|n| n.free && n.seg == seg) {
            self.free_set(seg_size).remove(&(n.size, next));
            self.blocks.remove(&next);
            total += n.size;
        }
        if ptr != seg {
            let (&pbase, &prev) =
                self.blocks.range(..ptr).next_back().expect("a segment starts with a block");
            if prev.free {
                self.free_set(seg_size).remove(&(prev.size, pbase));
                self.blocks.remove(&ptr);
                base = pbase;
                total += prev.size;
            }
        }
        self.blocks.insert(base, Info { size: total, seg, free: true });
        self.free_set(seg_size).insert((total, base));
    }

    /// Takes free block `(bsize, ptr)` for a request of `size`, splitting off the rest
    /// when it is worth keeping (PyTorch: > 512 B in small segments, > 1 MiB in large).
    fn take(&mut self, bsize: u64, ptr: u64, size: u64) -> u64 {
        let seg = self.blocks[&ptr].seg;
        let seg_size = self.segments[&seg];
        self.free_set(seg_size).remove(&(bsize, ptr));
        self.tree_free_bytes -= bsize;
        let rest = bsize - size;
        let keep = if seg_size == SMALL_SEGMENT { rest >= MIN_BLOCK } else { rest > SMALL_SIZE };
        let used = if keep { size } else { bsize };
        self.blocks.insert(ptr, Info { size: used, seg, free: false });
        if keep {
            self.blocks.insert(ptr + size, Info { size: rest, seg, free: true });
            self.free_set(seg_size).insert((rest, ptr + size));
            self.tree_free_bytes += rest;
        }
        used
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

impl Pool for SplitPool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: &Upstream, shard: usize) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        if let Some(ptr) = self.quick.get_mut(&size).and_then(|v| v.pop()) {
            self.quick_bytes -= size;
            return Ok(Block { ptr, size, hit: true });
        }
        self.flush();
        let small = size <= SMALL_SIZE;
        let set = if small { &self.free_small } else { &self.free_large };
        if let Some(&(bsize, ptr)) = set.range((size, 0)..).next() {
            // A small request never takes a block of a large segment and vice versa
            // (PyTorch keeps two pools); a large free block is split for any large request.
            let used = self.take(bsize, ptr, size);
            return Ok(Block { ptr, size: used, hit: true });
        }
        let seg_size = segment_size(size);
        self.reclaim(up.growth_excess(seg_size), up);
        let seg = up.alloc(seg_size, shard)?;
        self.segments.insert(seg, seg_size);
        self.blocks.insert(seg, Info { size: seg_size, seg, free: true });
        self.free_set(seg_size).insert((seg_size, seg));
        self.tree_free_bytes += seg_size;
        let used = self.take(seg_size, seg, size);
        Ok(Block { ptr: seg, size: used, hit: false })
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: &Upstream) {
        self.quick.entry(size).or_default().push(ptr);
        self.quick_bytes += size;
    }

    fn reclaim(&mut self, target: u64, up: &Upstream) -> u64 {
        self.flush();
        let mut whole: Vec<(u64, u64)> = self
            .segments
            .iter()
            .filter(|&(&seg, &size)| self.blocks.get(&seg).is_some_and(|b| b.free && b.size == size))
            .map(|(&seg, &size)| (size, seg))
            .collect();
        // Largest first: the fewest device calls for the bytes asked.
        whole.sort_unstable_by(|a, b| b.cmp(a));
        let mut released = 0;
        for (size, seg) in whole {
            if released >= target {
                break;
            }
            self.free_set(size).remove(&(size, seg));
            self.blocks.remove(&seg);
            self.segments.remove(&seg);
            self.tree_free_bytes -= size;
            up.free(seg, size);
            released += size;
        }
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.tree_free_bytes + self.quick_bytes
    }

    fn inactive_split_bytes(&self) -> u64 {
        // Free bytes per segment, deferred (quick-listed) frees included: a segment all
        // of whose blocks are free is not partly in use, whether or not it is merged yet.
        let mut free: FxHashMap<u64, u64> = FxHashMap::default();
        for &(size, addr) in self.free_small.iter().chain(&self.free_large) {
            *free.entry(self.blocks[&addr].seg).or_default() += size;
        }
        for (&size, ptrs) in &self.quick {
            for addr in ptrs {
                *free.entry(self.blocks[addr].seg).or_default() += size;
            }
        }
        free.iter().filter(|&(seg, &f)| f < self.segments[seg]).map(|(_, &f)| f).sum()
    }

    fn block_base(&self, addr: u64, seg_base: u64) -> u64 {
        self.blocks.range(seg_base..=addr).next_back().map_or(seg_base, |(&b, _)| b)
    }
}

#[cfg(test)]
impl SplitPool {
    /// Checks the structure: blocks tile each segment, no two free neighbours, the free
    /// sets hold exactly the free blocks, counters agree.
    pub(crate) fn check(&self) {
        let mut free_bytes = 0;
        for (&seg, &size) in &self.segments {
            let mut at = seg;
            let mut prev_free = false;
            while at < seg + size {
                let b = self.blocks[&at];
                assert_eq!(b.seg, seg);
                assert!(!(b.free && prev_free), "two free neighbours at {at:#x}");
                let set = if size == SMALL_SEGMENT { &self.free_small } else { &self.free_large };
                assert_eq!(set.contains(&(b.size, at)), b.free);
                if b.free {
                    free_bytes += b.size;
                }
                prev_free = b.free;
                at += b.size;
            }
            assert_eq!(at, seg + size);
        }
        assert_eq!(free_bytes, self.tree_free_bytes);
        assert_eq!(
            self.free_small.len() + self.free_large.len(),
            self.blocks.values().filter(|b| b.free).count()
        );
        assert_eq!(self.quick_bytes, self.quick.iter().map(|(s, v)| s * v.len() as u64).sum::<u64>());
    }
}

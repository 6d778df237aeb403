//! `simple`: freed blocks are cached whole; a request takes the smallest cached block
//! that fits and is at most [`MAX_OVERSIZE`] times the request, else goes to the device
//! (CUDA.jl 2.x's `SimplePool`).
//!
//! The free blocks are kept by size, each size a stack of addresses (the last freed
//! first), in a `BTreeMap` over the distinct sizes. A cache hit is then a search among
//! the distinct sizes (one, in a loop of equal arrays) and a `Vec::pop`, whatever the
//! number of cached blocks: with one ordered set of `(size, address)` pairs (the first
//! version) each hit walked and rebalanced a tree of every cached block, O(log n), and
//! Julia's loop of GC-freed arrays, which caches 16 384 blocks of one size, paid it on
//! every allocation. A size whose stack empties keeps its entry (and its `Vec`'s
//! capacity), so that a size in use costs no map insert or heap allocation per pair;
//! empty entries are dropped once they outnumber the others (see [`SimplePool::free`]).
//!
//! Thread caches serve this pool as they serve binned, split and expandable: a thread
//! cache hands out a block of exactly the rounded request size, which is the best fit
//! there is, and [`Pool::serves_at_once`] is false here, so a request the thread cache
//! does not serve first returns the thread's cached blocks to the pool, and the pool's
//! best-fit search sees every free block of the thread, as without thread caches.

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::ShardUpstream;
use std::collections::BTreeMap;

/// A cached block is reused for a request only if it is at most this many times as
/// large, so a small request never pins a large block.
pub const MAX_OVERSIZE: u64 = 2;

/// Whole-block cache, best fit by size, the last freed block of a size first.
#[derive(Default)]
pub struct SimplePool {
    /// Free blocks by size.
    free: BTreeMap<u64, Vec<u64>>,
    /// Entries of `free` whose stack is empty.
    empty: usize,
    cached: u64,
}

impl Pool for SimplePool {
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        // Best fit: the smallest size with a free block, within MAX_OVERSIZE.
        for (&bsize, stack) in self.free.range_mut(size..=size.saturating_mul(MAX_OVERSIZE)) {
            if let Some(ptr) = stack.pop() {
                if stack.is_empty() {
                    self.empty += 1;
                }
                self.cached -= bsize;
                return Ok(Block { ptr, size: bsize, hit: true });
            }
        }
        Ok(Block { ptr: up.alloc(size)?, size, hit: false })
    }

    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        self.cached += size;
        if let Some(stack) = self.free.get_mut(&size) {
            if stack.is_empty() {
                self.empty -= 1;
            }
            stack.push(ptr);
            return;
        }
        // A new size. Empty entries slow the best-fit search down (it steps over them):
        // drop them when they outnumber the others, so each search steps over at most
        // as many empty sizes as there are sizes with blocks (amortised O(1) per free).
        if self.empty > 16 && self.empty * 2 > self.free.len() {
            self.free.retain(|_, s| !s.is_empty());
            self.empty = 0;
        }
        self.free.insert(size, vec![ptr]);
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        let mut released = 0;
        // Largest first: the fewest device calls for the bytes asked.
        while released < target {
            let Some(mut last) = self.free.last_entry() else {
                break;
            };
            let size = *last.key();
            match last.get_mut().pop() {
                Some(ptr) => {
                    up.free(ptr, size);
                    self.cached -= size;
                    released += size;
                    if last.get().is_empty() {
                        last.remove();
                    }
                }
                None => {
                    last.remove();
                    self.empty -= 1;
                }
            }
        }
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.cached
    }

    /// False: a request the calling thread's cache does not serve sees that cache's
    /// blocks in this pool first (see the module documentation).
    fn serves_at_once(&self, _bytes: u64) -> bool {
        false
    }

    fn caches(&self, addr: u64, size: u64) -> bool {
        self.free.get(&size).is_some_and(|l| l.contains(&addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::HostDevice;
    use crate::upstream::Upstream;

    /// Best fit among sizes within MAX_OVERSIZE, the last freed of a size first, empty
    /// sizes skipped and pruned, and reclaim largest first.
    #[test]
    fn best_fit_lifo_and_reclaim_order() {
        let up = Upstream::new(Box::new(HostDevice::new(None)), None);
        let mut p = SimplePool::default();
        let a: Vec<Block> =
            [4096, 4096, 8192, 20480].iter().map(|&n| p.alloc(n, up.shard(0)).unwrap()).collect();
        assert!(a.iter().all(|b| !b.hit));
        for b in &a {
            p.free(b.ptr, b.size, up.shard(0));
        }
        assert_eq!(p.cached_bytes(), 36864);
        // 3000 rounds to 3072: the best fit is 4096 (the last freed first), not 8192.
        let mut live = vec![p.alloc(3000, up.shard(0)).unwrap()];
        assert_eq!(live[0], Block { ptr: a[1].ptr, size: 4096, hit: true });
        live.push(p.alloc(4000, up.shard(0)).unwrap());
        assert_eq!(live[1].ptr, a[0].ptr);
        // No 4096 left (an empty entry now): 8192 is within 2x of 4096.
        live.push(p.alloc(4096, up.shard(0)).unwrap());
        assert_eq!(live[2].ptr, a[2].ptr);
        // 20480 is more than twice 8192: a new block.
        let fresh = p.alloc(8192, up.shard(0)).unwrap();
        assert!(!fresh.hit);
        assert_eq!(p.cached_bytes(), 20480);
        // Many distinct sizes freed and taken again: the empty entries are pruned.
        let many: Vec<Block> = (1..=64).map(|k| p.alloc(k * 65536, up.shard(0)).unwrap()).collect();
        for b in &many {
            p.free(b.ptr, b.size, up.shard(0));
        }
        for b in &many {
            assert_eq!(p.alloc(b.size, up.shard(0)).unwrap().ptr, b.ptr);
        }
        p.free(fresh.ptr, fresh.size, up.shard(0)); // into its emptied size
        assert_eq!((p.empty, p.free.len()), (65, 67));
        let small = p.alloc(100, up.shard(0)).unwrap();
        p.free(small.ptr, small.size, up.shard(0)); // a new size: the empty ones go
        assert_eq!((p.empty, p.free.len()), (0, 3));
        for b in &many {
            p.free(b.ptr, b.size, up.shard(0));
        }
        // Reclaim releases the largest first.
        let before = p.cached_bytes();
        assert_eq!(p.reclaim(1, up.shard(0)), 64 * 65536);
        assert_eq!(p.cached_bytes(), before - 64 * 65536);
        assert_eq!(p.reclaim(u64::MAX, up.shard(0)), before - 64 * 65536);
        assert_eq!((p.cached_bytes(), p.empty, p.free.len()), (0, 0, 0));
        // The blocks still held go back, and the device holds nothing (LeakSanitizer
        // reported them under `make sanitize`).
        for b in live {
            p.free(b.ptr, b.size, up.shard(0));
        }
        p.reclaim(u64::MAX, up.shard(0));
        assert_eq!(up.reserved(), 0, "segments leaked");
    }
}

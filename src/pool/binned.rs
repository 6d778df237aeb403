//! `binned` (the default): power-of-two size classes from 512 B to 128 MiB, each with a
//! LIFO free list, as CUDA.jl 2.x's `BinnedPool`. Unlike CUDA.jl, which frees blocks
//! above 128 MiB straight back to the device, larger requests are rounded to 2 MiB and
//! cached too, reused by a request they exceed by at most 1/8.

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::ShardUpstream;
use std::collections::BTreeMap;

/// Largest binned class (CUDA.jl's `MAX_POOL`).
pub const MAX_BIN: u64 = 128 << 20;
/// Granularity of blocks above [`MAX_BIN`].
pub const LARGE_ROUND: u64 = 2 << 20;
const NUM_BINS: usize = (MAX_BIN.trailing_zeros() - MIN_BLOCK.trailing_zeros() + 1) as usize;

/// Size-class free lists plus a best-fit cache of large blocks.
pub struct BinnedPool {
    bins: [Vec<u64>; NUM_BINS],
    /// Blocks above `MAX_BIN`, by size.
    large: BTreeMap<u64, Vec<u64>>,
    cached: u64,
}

impl Default for BinnedPool {
    fn default() -> Self {
        BinnedPool { bins: std::array::from_fn(|_| Vec::new()), large: BTreeMap::new(), cached: 0 }
    }
}

/// The class of a block size `size` ≤ [`MAX_BIN`] (a power of two ≥ 512): 0 for 512 B.
#[inline]
fn bin(size: u64) -> usize {
    (size.trailing_zeros() - MIN_BLOCK.trailing_zeros()) as usize
}

/// The size a request of `bytes` is served with.
#[inline]
pub fn class_size(bytes: u64) -> u64 {
    if bytes <= MAX_BIN { bytes.max(MIN_BLOCK).next_power_of_two() } else { round_up(bytes, LARGE_ROUND) }
}

impl Pool for BinnedPool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = class_size(bytes);
        if size <= MAX_BIN {
            if let Some(ptr) = self.bins[bin(size)].pop() {
                self.cached -= size;
                return Ok(Block { ptr, size, hit: true });
            }
        } else if let Some((&bsize, list)) = self.large.range_mut(size..=size + size / 8).next() {
            let ptr = list.pop().expect("empty lists are removed");
            if list.is_empty() {
                self.large.remove(&bsize);
            }
            self.cached -= bsize;
            return Ok(Block { ptr, size: bsize, hit: true });
        }
        Ok(Block { ptr: up.alloc(size)?, size, hit: false })
    }

    #[inline]
    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        if size <= MAX_BIN {
            self.bins[bin(size)].push(ptr);
        } else {
            self.large.entry(size).or_default().push(ptr);
        }
        self.cached += size;
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        let mut released = 0;
        // Largest blocks first: the fewest device calls for the bytes asked.
        while released < target {
            let Some(mut e) = self.large.last_entry() else {
                break;
            };
            let size = *e.key();
            let ptr = e.get_mut().pop().expect("empty lists are removed");
            if e.get().is_empty() {
                e.remove();
            }
            up.free(ptr, size);
            released += size;
        }
        for (i, list) in self.bins.iter_mut().enumerate().rev() {
            let size = MIN_BLOCK << i;
            while released < target {
                let Some(ptr) = list.pop() else { break };
                up.free(ptr, size);
                released += size;
            }
            if list.is_empty() {
                *list = Vec::new(); // give the list's own memory back too
            }
        }
        self.cached -= released;
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.cached
    }

    fn caches(&self, addr: u64, size: u64) -> bool {
        if size <= MAX_BIN && size.is_power_of_two() && size >= MIN_BLOCK {
            self.bins[bin(size)].contains(&addr)
        } else {
            self.large.get(&size).is_some_and(|l| l.contains(&addr))
        }
    }
}

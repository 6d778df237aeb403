//! `simple`: freed blocks are cached whole; a request takes the smallest cached block
//! that fits and is at most [`MAX_OVERSIZE`] times the request, else goes to the device
//! (CUDA.jl 2.x's `SimplePool`).

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::ShardUpstream;
use std::collections::BTreeSet;

/// A cached block is reused for a request only if it is at most this many times as
/// large, so a small request never pins a large block.
pub const MAX_OVERSIZE: u64 = 2;

/// Whole-block cache, best fit by (size, address).
#[derive(Default)]
pub struct SimplePool {
    free: BTreeSet<(u64, u64)>,
    cached: u64,
}

impl Pool for SimplePool {
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        if let Some(&(bsize, ptr)) = self.free.range((size, 0)..).next()
            && bsize <= size * MAX_OVERSIZE
        {
            self.free.remove(&(bsize, ptr));
            self.cached -= bsize;
            return Ok(Block { ptr, size: bsize, hit: true });
        }
        Ok(Block { ptr: up.alloc(size)?, size, hit: false })
    }

    fn free(&mut self, ptr: u64, size: u64, _up: ShardUpstream<'_>) {
        self.free.insert((size, ptr));
        self.cached += size;
    }

    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        let mut released = 0;
        // Largest first: the fewest device calls for the bytes asked.
        while released < target {
            let Some((size, ptr)) = self.free.pop_last() else {
                break;
            };
            up.free(ptr, size);
            self.cached -= size;
            released += size;
        }
        released
    }

    fn cached_bytes(&self) -> u64 {
        self.cached
    }
}

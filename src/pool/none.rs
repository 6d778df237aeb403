//! `none`: no caching. Every request goes to the device and every free goes straight
//! back (CUDA.jl 2.x's `NoPool`). Useful as a baseline and to find use-after-free bugs.

use super::{Block, MIN_BLOCK, Pool, round_up};
use crate::error::Result;
use crate::upstream::ShardUpstream;

/// The pool that caches nothing.
#[derive(Default)]
pub struct NoPool;

impl Pool for NoPool {
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        let size = round_up(bytes, MIN_BLOCK);
        Ok(Block { ptr: up.alloc(size)?, size, hit: false })
    }

    fn free(&mut self, ptr: u64, size: u64, up: ShardUpstream<'_>) {
        up.free(ptr, size);
    }

    fn reclaim(&mut self, _target: u64, _up: ShardUpstream<'_>) -> u64 {
        0
    }

    fn cached_bytes(&self) -> u64 {
        0
    }
}

//! The caching pools, one module each behind one interface ([`Pool`]), in the manner of
//! CUDA.jl 2.x's `src/pool/*.jl`. A pool only decides which device memory serves a
//! request; statistics, tracking, the limit and the out-of-memory retry are the engine's
//! and the upstream layer's, shared by all pools.
//!
//! Each engine shard owns one pool instance and calls it under the shard's lock, so the
//! pools themselves take `&mut self` and hold no locks.

mod binned;
mod expandable;
mod none;
mod simple;
mod split;

pub use binned::{BinnedPool, class_size as binned_class_size};
pub use expandable::ExpandablePool;
pub use none::NoPool;
pub use simple::SimplePool;
pub use split::SplitPool;

use crate::config::PoolKind;
use crate::error::Result;
use crate::snapshot::{BlockState, PoolBlock, PoolSegment};
use crate::upstream::ShardUpstream;

/// Granularity of block sizes and minimum block (PyTorch's `kMinBlockSize`): every block
/// size is a multiple of 512 bytes, so every pointer handed out is 512-byte aligned
/// (segments from the device are at least that aligned).
pub const MIN_BLOCK: u64 = 512;

/// Largest request the engine passes to a pool (256 TiB, beyond any device), so that
/// rounding a size up can never overflow 64 bits. Larger requests are out of memory.
pub const MAX_REQUEST: u64 = 1 << 48;

/// Largest size the engine accepts at all (2^63 − 1, the largest signed 64-bit count);
/// larger ones are invalid values rather than out of memory.
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// A block handed out by a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Device address.
    pub ptr: u64,
    /// Size of the block in bytes (≥ the request; what `allocated_bytes` counts).
    pub size: u64,
    /// True when served from the cache, false when the device was called.
    pub hit: bool,
}

/// The interface every pool implements (CUDA.jl 2.x's `alloc`/`free`/`reclaim`/`cached`).
pub trait Pool: Send {
    /// Serves a request of `bytes` (1 ≤ bytes ≤ [`MAX_REQUEST`]). Segments come from
    /// `up.alloc`, `up` being the upstream as this pool's shard sees it. Errors: out of memory from the upstream; no block is handed
    /// out then (the pool may have released cached memory trying to make room).
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block>;
    /// Takes back a block this pool handed out, `size` being [`Block::size`]. The
    /// engine has already checked that `ptr` is live.
    fn free(&mut self, ptr: u64, size: u64, up: ShardUpstream<'_>);
    /// Returns cached memory to the device, whole segments only, until at least
    /// `target` bytes were released or nothing is left. Returns the bytes released.
    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64;
    /// Bytes held by the pool and free for reuse.
    fn cached_bytes(&self) -> u64;
    /// Free bytes inside segments that are partly in use (PyTorch's
    /// `inactive_split_bytes`); 0 for pools that never split.
    fn inactive_split_bytes(&self) -> u64 {
        0
    }
    /// Whether a request of `bytes` would be served from a list of freed blocks without
    /// any search or merge (a pool that merges free blocks first on a miss says no
    /// otherwise). The engine returns the calling thread's cached blocks to such a pool
    /// before a request that misses, so that the miss sees all of them merged.
    fn serves_at_once(&self, bytes: u64) -> bool {
        let _ = bytes;
        true
    }
    /// The base of the block containing `addr`, which lies in the segment at `seg_base`
    /// of this pool's shard; None when the segment is not this pool's (a shard holds a
    /// pool per stream besides its default one, and their segments share the shard's
    /// record). Pools whose blocks are whole segments return `seg_base` (the block is the
    /// segment, whichever of the shard's pools holds it).
    fn block_base(&self, addr: u64, seg_base: u64) -> Option<u64> {
        let _ = addr;
        Some(seg_base)
    }
    /// Whether the free block at `addr` of `size` bytes is in this pool's cache: for
    /// pools whose blocks are whole segments, which cannot tell their segments from the
    /// other pools' of the shard in [`Pool::snapshot`], the snapshot's attribution of a
    /// cached segment to its stream's pool. The default (a pool that caches nothing, or
    /// lists only its own segments) says no.
    fn caches(&self, addr: u64, size: u64) -> bool {
        let _ = (addr, size);
        false
    }
    /// This pool's segments and their blocks, for `memory_snapshot`, appended to `out`.
    /// `owned` lists the upstream segments (base, size) of this pool's shard. Blocks the
    /// pool handed out are [`BlockState::Active`]; free ones [`BlockState::Cached`], or
    /// [`BlockState::InactiveSplit`] exactly when [`Pool::inactive_split_bytes`] counts
    /// them. The default, for pools whose blocks are whole segments: each segment one
    /// block, marked active (the engine marks the ones that are not live cached).
    fn snapshot(&self, owned: &[(u64, u64)], out: &mut Vec<PoolSegment>) {
        for &(addr, size) in owned {
            out.push(PoolSegment {
                addr,
                size,
                blocks: vec![PoolBlock { addr, size, state: BlockState::Active }],
            });
        }
    }
}

/// One of the pools, dispatched by `match` rather than through a `dyn Pool` so
/// that each pool's cache-hit path inlines into the engine's (a virtual call and the
/// register spills around it were a tenth of an alloc+free pair).
pub enum AnyPool {
    /// [`NoPool`].
    None(NoPool),
    /// [`SimplePool`].
    Simple(SimplePool),
    /// [`BinnedPool`].
    Binned(BinnedPool),
    /// [`SplitPool`].
    Split(SplitPool),
    /// [`ExpandablePool`].
    Expandable(ExpandablePool),
}

impl AnyPool {
    /// A fresh, empty pool of the given kind.
    pub fn new(kind: PoolKind) -> AnyPool {
        match kind {
            PoolKind::None => AnyPool::None(NoPool),
            PoolKind::Simple => AnyPool::Simple(SimplePool::default()),
            PoolKind::Binned => AnyPool::Binned(BinnedPool::default()),
            PoolKind::Split => AnyPool::Split(SplitPool::default()),
            PoolKind::Expandable => AnyPool::Expandable(ExpandablePool::default()),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPool::None($p) => $e,
            AnyPool::Simple($p) => $e,
            AnyPool::Binned($p) => $e,
            AnyPool::Split($p) => $e,
            AnyPool::Expandable($p) => $e,
        }
    };
}

impl Pool for AnyPool {
    #[inline]
    fn alloc(&mut self, bytes: u64, up: ShardUpstream<'_>) -> Result<Block> {
        dispatch!(self, p => p.alloc(bytes, up))
    }
    #[inline(always)]
    fn free(&mut self, ptr: u64, size: u64, up: ShardUpstream<'_>) {
        dispatch!(self, p => p.free(ptr, size, up))
    }
    fn reclaim(&mut self, target: u64, up: ShardUpstream<'_>) -> u64 {
        dispatch!(self, p => p.reclaim(target, up))
    }
    fn cached_bytes(&self) -> u64 {
        dispatch!(self, p => p.cached_bytes())
    }
    fn inactive_split_bytes(&self) -> u64 {
        dispatch!(self, p => p.inactive_split_bytes())
    }
    fn block_base(&self, addr: u64, seg_base: u64) -> Option<u64> {
        dispatch!(self, p => p.block_base(addr, seg_base))
    }
    #[inline]
    fn serves_at_once(&self, bytes: u64) -> bool {
        dispatch!(self, p => p.serves_at_once(bytes))
    }

    fn snapshot(&self, owned: &[(u64, u64)], out: &mut Vec<PoolSegment>) {
        dispatch!(self, p => p.snapshot(owned, out))
    }
    fn caches(&self, addr: u64, size: u64) -> bool {
        dispatch!(self, p => p.caches(addr, size))
    }
}

/// `n` rounded up to a multiple of `m` (a power of two). Callers keep `n` ≤
/// [`MAX_REQUEST`], so this cannot overflow.
#[inline]
pub fn round_up(n: u64, m: u64) -> u64 {
    debug_assert!(m.is_power_of_two() && n <= MAX_REQUEST);
    (n + m - 1) & !(m - 1)
}

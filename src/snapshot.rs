//! The records of the engine's memory tools, shared by the pools (which describe their
//! segments), the engine (which fills in what only it knows) and the C ABI (which copies
//! them out as they are): PyTorch's `torch.cuda.memory_snapshot()` segments and blocks,
//! the leak report of `check_memory_leaks`, and the result of `compact!`.

/// The state of a block in a snapshot (C: `cumem_block_t::state`), PyTorch's
/// `active_allocated` / `inactive` with its split distinction.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// A live allocation (counted in `allocated_bytes`).
    Active = 0,
    /// Free memory that can go back to the device (its segment holds no live block), or a
    /// block freed while a copy still uses it.
    Cached = 1,
    /// Free memory inside a segment (or, for the expandable pool, a granule) that also
    /// holds live memory: counted in `inactive_split_bytes`, not releasable.
    InactiveSplit = 2,
}

/// One segment of a snapshot (C: `cumem_segment_t`, 48 bytes): a device allocation of
/// the pool, or for the expandable pool a run of mapped granules.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentInfo {
    /// First address.
    pub addr: u64,
    /// Bytes (all reserved: the sum over segments is `reserved_bytes`).
    pub size: u64,
    /// Stream the segment serves (0: the default stream).
    pub stream: u64,
    /// Index of its first block in the snapshot's block array.
    pub first_block: u64,
    /// Number of its blocks (they tile the segment, in address order).
    pub num_blocks: u64,
    /// The ordinal of the engine's device.
    pub device: u32,
    /// The engine shard whose pool owns it.
    pub shard: u32,
}

/// One block of a snapshot (C: `cumem_block_t`, 40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockInfo {
    /// First address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Bytes asked for (active blocks; 0 otherwise).
    pub requested: u64,
    /// Origin id for `cumem_origin_text` (active blocks at `CUMEM_DEBUG=2`; else 0).
    pub origin: u64,
    /// `CUMEM_BLOCK_*` (`BlockState` as u32).
    pub state: u32,
    /// Index of its segment in the snapshot's segment array.
    pub segment: u32,
}

/// An outstanding allocation of a leak report (C: `cumem_leak_t`, 48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leak {
    /// Device address.
    pub addr: u64,
    /// Bytes asked for.
    pub requested_bytes: u64,
    /// Block size, bytes.
    pub size_bytes: u64,
    /// Allocation number within its shard (1, 2, …; grows with time per shard).
    pub seq: u64,
    /// Origin id for `cumem_origin_text` (at `CUMEM_DEBUG=2`; else 0).
    pub origin: u64,
    /// Allocating thread's index (`CUMEM_DEBUG` ≥ 1), else `UINT32_MAX`.
    pub thread: u32,
    /// The engine shard that holds it.
    pub shard: u32,
}

/// What `compact` did (C: `cumem_compact_t`, 24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Compaction {
    /// Bytes returned to the device.
    pub released_bytes: u64,
    /// `fragmentation_ratio` before.
    pub fragmentation_before: f64,
    /// `fragmentation_ratio` after.
    pub fragmentation_after: f64,
}

/// A segment as a pool describes it: the engine adds stream, device, shard and what the
/// live table knows of each used block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSegment {
    /// First address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// The blocks, tiling the segment in address order.
    pub blocks: Vec<PoolBlock>,
}

/// A block as a pool sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolBlock {
    /// First address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// [`BlockState::Active`] for a block the pool handed out (the engine turns one that
    /// is not live, freed while a copy used it, into [`BlockState::Cached`]).
    pub state: BlockState,
}

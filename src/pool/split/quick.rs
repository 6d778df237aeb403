//! The split pool's quick lists: freed blocks wait here, by size, until a request misses
//! them and they are merged (deferred frees), in a direct-mapped table keyed by size.
//! The expandable pool keeps its quick lists in the same table.

use super::SplitPool;

/// Slots of the direct-mapped quick-list table (a power of two).
pub const QUICK_SLOTS: usize = 512;

/// A quick list: the addresses of the blocks of one size freed since the last flush,
/// LIFO. Its slot is free for another size while it is empty.
#[derive(Default)]
pub(in crate::pool) struct QuickList {
    pub(in crate::pool) size: u64,
    pub(in crate::pool) ptrs: Vec<u64>,
    /// In the pool's list of touched slots (`SplitPool::touched`).
    pub(in crate::pool) touched: bool,
}

/// The slot of the quick list for blocks of `size` bytes.
#[inline]
pub(in crate::pool) fn quick_slot(size: u64) -> usize {
    ((size >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - QUICK_SLOTS.trailing_zeros())) as usize
}

/// Whether the quick list of `size`-byte blocks in `quick` holds one.
#[inline]
pub(in crate::pool) fn quick_holds(quick: &[QuickList], size: u64) -> bool {
    let q = &quick[quick_slot(size)];
    q.size == size && !q.ptrs.is_empty()
}

impl SplitPool {
    /// Merges every quick-listed block into the indexes.
    pub(super) fn flush(&mut self) {
        if self.quick_bytes == 0 {
            return;
        }
        let mut touched = std::mem::take(&mut self.touched);
        for &q in &touched {
            let mut ptrs = std::mem::take(&mut self.quick[q].ptrs);
            for &p in &ptrs {
                self.release(self.node_at[&p]);
            }
            ptrs.clear();
            self.quick[q] = QuickList { size: 0, ptrs, touched: false }; // keeps the capacity
        }
        touched.clear();
        self.touched = touched;
        self.quick_bytes = 0;
    }
}

//! The quick lists of the split and expandable pools: freed blocks wait here, by size,
//! until a request misses them and the pool merges them (deferred frees), in a
//! direct-mapped table keyed by size.

/// Slots of the direct-mapped quick-list table (a power of two).
pub const QUICK_SLOTS: usize = 512;

/// A quick list: the addresses of the blocks of one size freed since the last flush,
/// LIFO. Its slot is free for another size while it is empty.
#[derive(Default)]
struct QuickList {
    size: u64,
    ptrs: Vec<u64>,
    /// In [`QuickLists::touched`].
    touched: bool,
}

/// The table of quick lists, [`QUICK_SLOTS`] of them by [`quick_slot`] of their size, with
/// the slots filled since the last flush and the bytes they hold. `Default` is an empty
/// table without slots, only a placeholder while the pool flushes ([`QuickLists::take`]).
#[derive(Default)]
pub(in crate::pool) struct QuickLists {
    lists: Box<[QuickList]>,
    touched: Vec<usize>,
    bytes: u64,
}

/// The slot of the quick list for blocks of `size` bytes.
#[inline]
pub(in crate::pool) fn quick_slot(size: u64) -> usize {
    ((size >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - QUICK_SLOTS.trailing_zeros())) as usize
}

impl QuickLists {
    pub(in crate::pool) fn new() -> Self {
        QuickLists {
            lists: (0..QUICK_SLOTS).map(|_| QuickList::default()).collect(),
            touched: Vec::new(),
            bytes: 0,
        }
    }

    /// The block last freed of exactly `size` bytes, taken off its list (the hit path).
    #[inline]
    pub(in crate::pool) fn pop(&mut self, size: u64) -> Option<u64> {
        let q = &mut self.lists[quick_slot(size)];
        if q.size != size {
            return None;
        }
        let ptr = q.ptrs.pop()?;
        self.bytes -= size;
        Some(ptr)
    }

    /// Puts freed block `ptr` of `size` bytes on its list; false (and nothing changes)
    /// when the slot holds another size's list: the pool merges the block at once.
    #[inline]
    pub(in crate::pool) fn push(&mut self, ptr: u64, size: u64) -> bool {
        let slot = quick_slot(size);
        let q = &mut self.lists[slot];
        if q.ptrs.is_empty() {
            q.size = size;
            if !q.touched {
                q.touched = true;
                self.touched.push(slot);
            }
        } else if q.size != size {
            return false;
        }
        q.ptrs.push(ptr);
        self.bytes += size;
        true
    }

    /// Whether a block of `size` bytes waits on its list.
    #[inline]
    pub(in crate::pool) fn holds(&self, size: u64) -> bool {
        let q = &self.lists[quick_slot(size)];
        q.size == size && !q.ptrs.is_empty()
    }

    /// Bytes of the blocks on the lists.
    #[inline]
    pub(in crate::pool) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The blocks on the lists, as (address, size).
    pub(in crate::pool) fn blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.lists.iter().flat_map(|q| q.ptrs.iter().map(move |&p| (p, q.size)))
    }

    /// Empties every list, handing each block's address to `release` (the pool's merge),
    /// and keeps the lists' capacity. The pool takes the table out of itself first
    /// (`std::mem::take`) so that `release` may borrow the pool.
    pub(in crate::pool) fn flush(&mut self, mut release: impl FnMut(u64)) {
        if self.bytes == 0 {
            return;
        }
        for &slot in &self.touched {
            let q = &mut self.lists[slot];
            for &p in &q.ptrs {
                release(p);
            }
            q.ptrs.clear();
            q.size = 0;
            q.touched = false;
        }
        self.touched.clear();
        self.bytes = 0;
    }

    /// Checks that every block is on the list of its size's slot, every non-empty list
    /// is marked touched, and the byte count agrees; returns the blocks for the pool's
    /// own checks.
    #[cfg(test)]
    pub(in crate::pool) fn check(&self) -> Vec<(u64, u64)> {
        for (slot, q) in self.lists.iter().enumerate() {
            assert!(q.ptrs.is_empty() || (q.touched && self.touched.contains(&slot)));
            assert!(q.ptrs.is_empty() || quick_slot(q.size) == slot);
        }
        let blocks: Vec<(u64, u64)> = self.blocks().collect();
        assert_eq!(blocks.iter().map(|b| b.1).sum::<u64>(), self.bytes);
        blocks
    }
}

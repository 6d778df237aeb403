//! The physical allocations behind a device's mapped virtual memory, as CUDA has them:
//! each [`super::Device::vm_map`] creates one allocation for its whole range (one
//! `cuMemCreate` of several granules, one `cuMemMap`, one `cuMemSetAccess`), and
//! `cuMemUnmap` takes whole mappings only, so a range can be unmapped or moved only as
//! whole allocations (one or several neighbours), never a part of one. The CUDA device
//! keeps its handles here; the host device keeps the same table (with no handle) so that
//! a pool which would cut an allocation on a GPU fails the same way without one.

use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// Mapped allocations by first address: `(bytes, data)`, `data` the driver's handle on
/// CUDA, `()` on the host device.
pub(crate) struct ChunkTable<T> {
    map: BTreeMap<u64, (u64, T)>,
}

impl<T> Default for ChunkTable<T> {
    fn default() -> Self {
        ChunkTable { map: BTreeMap::new() }
    }
}

impl<T: Copy> ChunkTable<T> {
    /// Records an allocation mapped at `[addr, addr+bytes)`. Errors:
    /// [`Error::InvalidValue`] when the range overlaps one recorded (nothing changes).
    pub fn insert(&mut self, addr: u64, bytes: u64, data: T) -> Result<()> {
        let before = self.map.range(..addr + bytes).next_back();
        if before.is_some_and(|(&a, &(b, _))| a + b > addr) {
            return Err(Error::InvalidValue(format!("{addr:#x}+{bytes} is mapped already")));
        }
        self.map.insert(addr, (bytes, data));
        Ok(())
    }

    /// Whether `[addr, addr+bytes)` overlaps no recorded allocation.
    pub fn is_free(&self, addr: u64, bytes: u64) -> bool {
        self.map.range(..addr + bytes).next_back().is_none_or(|(&a, &(b, _))| a + b <= addr)
    }

    /// The allocations `(addr, bytes, data)` that exactly tile `[addr, addr+bytes)`, in
    /// address order, left recorded. Errors: [`Error::InvalidValue`] when the range starts
    /// or ends inside an allocation (a part of one cannot be unmapped) or has a hole.
    pub fn tiling(&self, addr: u64, bytes: u64) -> Result<Vec<(u64, u64, T)>> {
        let mut out = Vec::new();
        let mut at = addr;
        for (&a, &(b, d)) in self.map.range(addr..addr + bytes) {
            if a != at {
                break;
            }
            out.push((a, b, d));
            at = a + b;
        }
        if at != addr + bytes || bytes == 0 {
            return Err(Error::InvalidValue(format!(
                "{addr:#x}+{bytes} is not a run of whole mapped allocations (a part of one \
                 cannot be unmapped or moved; mapped from {addr:#x}: {} bytes in {} allocations)",
                at - addr,
                out.len()
            )));
        }
        Ok(out)
    }

    /// Forgets the allocation at `addr` (recorded). Returns its bytes and data.
    pub fn remove(&mut self, addr: u64) -> Option<(u64, T)> {
        self.map.remove(&addr)
    }

    /// The number of allocations recorded.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_allocations_tile_a_range() {
        let mut t = ChunkTable::default();
        t.insert(0, 4, 'a').unwrap();
        t.insert(4, 2, 'b').unwrap();
        t.insert(10, 2, 'c').unwrap();
        assert!(matches!(t.insert(5, 2, 'x'), Err(Error::InvalidValue(_))));
        assert!(matches!(t.insert(3, 1, 'x'), Err(Error::InvalidValue(_))));
        assert_eq!(t.tiling(0, 6).unwrap(), vec![(0, 4, 'a'), (4, 2, 'b')]);
        assert_eq!(t.tiling(4, 2).unwrap(), vec![(4, 2, 'b')]);
        // A part of an allocation, a hole, past the end: refused.
        for (a, b) in [(0, 2), (2, 2), (0, 5), (4, 8), (10, 4), (6, 2)] {
            assert!(t.tiling(a, b).is_err(), "{a}+{b}");
        }
        assert!(t.is_free(6, 4) && !t.is_free(6, 5) && !t.is_free(3, 1));
        assert_eq!(t.remove(4), Some((2, 'b')));
        assert_eq!(t.len(), 2);
    }
}

//! The split pool's index of free blocks by (size, address): exact best fit over size
//! classes of 1/8 octave, each a sorted vector, with a bitmap of the non-empty classes
//! (a bit scan and a binary search over a few entries, where a B-tree costs several cache
//! misses per operation).

/// Size classes of 1/8 octave from 512 B to 2^48 B.
pub(in crate::pool) const CLASSES: usize = 320;

/// The class of a block size (≥ 512): 8 classes per power of two.
#[inline]
pub(in crate::pool) fn class(size: u64) -> usize {
    let lg = 63 - size.leading_zeros() as usize;
    (lg - 9) * 8 + ((size >> (lg - 3)) & 7) as usize
}

/// Free blocks by (size, address): exact best fit over size classes, each a vector
/// sorted by (size, address), with a bitmap of the non-empty classes.
#[derive(Default)]
pub(in crate::pool) struct FitIndex {
    /// (size, address, node); empty until the first insert.
    pub(in crate::pool) classes: Vec<Vec<(u64, u64, u32)>>,
    pub(in crate::pool) bits: [u64; CLASSES / 64],
    pub(in crate::pool) bytes: u64,
}

impl FitIndex {
    pub(in crate::pool) fn insert(&mut self, size: u64, addr: u64, node: u32) {
        if self.classes.is_empty() {
            self.classes.resize_with(CLASSES, Vec::new);
        }
        let c = class(size);
        let v = &mut self.classes[c];
        let i = v.partition_point(|e| (e.0, e.1) < (size, addr));
        v.insert(i, (size, addr, node));
        self.bits[c / 64] |= 1 << (c % 64);
        self.bytes += size;
    }

    pub(in crate::pool) fn remove(&mut self, size: u64, addr: u64) {
        let c = class(size);
        let v = &mut self.classes[c];
        let i = v.partition_point(|e| (e.0, e.1) < (size, addr));
        debug_assert!(
            v.get(i).is_some_and(|e| (e.0, e.1) == (size, addr)),
            "{size} at {addr:#x} not indexed"
        );
        v.remove(i);
        if v.is_empty() {
            self.bits[c / 64] &= !(1 << (c % 64));
        }
        self.bytes -= size;
    }

    /// The smallest (size, address, node) with size ≥ `size`.
    #[inline]
    pub(in crate::pool) fn best_fit(&self, size: u64) -> Option<(u64, u64, u32)> {
        if self.bytes == 0 {
            return None;
        }
        let c = class(size);
        if self.bits[c / 64] & (1 << (c % 64)) != 0 {
            let v = &self.classes[c];
            let i = v.partition_point(|e| e.0 < size);
            if i < v.len() {
                return Some(v[i]);
            }
        }
        // Every block of a higher class is larger: the first one of the next class.
        let c = c + 1;
        let mut w = c / 64;
        let mut mask = !0u64 << (c % 64);
        while w < self.bits.len() {
            let b = self.bits[w] & mask;
            if b != 0 {
                return Some(self.classes[w * 64 + b.trailing_zeros() as usize][0]);
            }
            w += 1;
            mask = !0;
        }
        None
    }

    pub(in crate::pool) fn iter(&self) -> impl Iterator<Item = &(u64, u64, u32)> {
        self.classes.iter().flatten()
    }
}

/// The smaller of two candidates by (size, address).
pub(in crate::pool) fn smaller(
    a: Option<(u64, u64, u32)>,
    b: Option<(u64, u64, u32)>,
) -> Option<(u64, u64, u32)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if (y.0, y.1) < (x.0, x.1) { y } else { x }),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
impl FitIndex {
    pub(in crate::pool) fn contains(&self, size: u64, addr: u64, node: u32) -> bool {
        self.classes.get(class(size)).is_some_and(|v| {
            v.binary_search_by_key(&(size, addr), |e| (e.0, e.1)).is_ok_and(|i| v[i].2 == node)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const MIN_BLOCK: u64 = crate::pool::MIN_BLOCK;

    #[test]
    fn size_classes_are_monotone_and_fine() {
        let mut last = 0;
        for size in (MIN_BLOCK..64 * MIB).step_by(4096).chain([1 << 47, (1 << 48) - 512]) {
            let c = class(size);
            assert!(c >= last && c < CLASSES);
            last = c;
        }
        // Within a class, sizes differ by less than 1/8.
        assert_eq!(class(8 * MIB), class(9 * MIB - 512));
        assert_ne!(class(8 * MIB), class(9 * MIB));
    }
}

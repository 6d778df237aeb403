//! The expandable pool's index of free ranges: per size class (1/4 octave), a doubly
//! linked list threaded through the arena's nodes, with a bitmap of the non-empty classes
//! (the segregated lists of TLSF).
//!
//! Why lists and not split's sorted vectors ([`FitIndex`](super::super::split::fit_index::FitIndex)):
//! this pool merges every freed block at once, so an alloc+free pair inserts and removes
//! about three entries (the carve's remainder, the merge's neighbours). A sorted vector
//! pays a binary search and a memmove for each; a list pays a few stores. Best fit, which
//! runs once per allocation, pays instead: it scans the request's class and, if nothing
//! there fits, the next non-empty one, for the smallest (size, address). A class spans
//! 1/4 of an octave, so the lists are short (on the traces in `data/`, a few entries).
//! Why a quarter and not split's eighth: a carve or a merge that moves a range to another
//! class costs a removal and an insertion, and with classes twice as wide fewer do, for a
//! few more entries looked at by best fit: warm instructions per event 383.9 → 377.7 on
//! bertlike_infer_varlen_lognormal_seed102, 442.8 → 435.1 on encoder_infer_varlen (host
//! device, callgrind; bench/results/host-2026-11-28-exp13). Half an octave saved 2 more on
//! three traces and lost 2 on random_seed1. The placement is the same: best fit is exact
//! whatever the classes.
//!
//! The result is the same exact best fit by (size, address) as the sorted index gives.

use super::node::{NIL, Node, Nodes};
use std::hint::select_unpredictable;

/// log2 of the size classes per octave.
const SUB: usize = 2;
/// Size classes: 2^SUB per octave from 512 B (2^9) to 2^49 B, rounded up to a multiple
/// of 64 (the bitmap's words).
const CLASSES: usize = (40usize << SUB).next_multiple_of(64);

/// The class of a size (≥ 512 bytes): `2^SUB` classes per power of two.
#[inline(always)]
fn class(size: u64) -> usize {
    let lg = 63 - size.leading_zeros() as usize;
    ((lg - 9) << SUB) + ((size >> (lg - SUB)) as usize & ((1 << SUB) - 1))
}

/// Free ranges by size class: list heads (node indexes, [`NIL`] when empty) and a bit per
/// non-empty class. No count of entries or bytes is kept (only the tests' checks ask:
/// [`FreeLists::totals`]).
pub(super) struct FreeLists {
    heads: Box<[u32; CLASSES]>,
    bits: [u64; CLASSES / 64],
}

impl Default for FreeLists {
    fn default() -> Self {
        FreeLists { heads: Box::new([NIL; CLASSES]), bits: [0; CLASSES / 64] }
    }
}

impl FreeLists {
    /// Indexes free node `i` (its `size` set; its list links are overwritten).
    ///
    /// Here and in [`FreeLists::remove`] the links of a list's neighbours are written by
    /// selects, not branches: whether a list is empty, or a node its head or its tail,
    /// follows the workload, and those branches were mispredicted about 1.1 times per
    /// alloc+free pair on random_seed1 (callgrind's branch simulation,
    /// bench/results/host-2026-11-29-exp14b). Where there is no neighbour the link is
    /// written to node `i` itself, which is then overwritten or leaves the list.
    #[inline]
    pub fn insert(&mut self, nodes: &mut Nodes, i: u32) {
        let c = class(nodes[i as usize].size);
        let head = self.heads[c];
        nodes[select_unpredictable(head != NIL, head, i) as usize].fprev = i;
        let n = &mut nodes[i as usize];
        n.fprev = NIL;
        n.fnext = head;
        n.class = c as u16;
        self.heads[c] = i;
        self.bits[c / 64] |= 1 << (c % 64);
    }

    /// Unindexes free node `i` (its own list links are left stale).
    #[inline]
    pub fn remove(&mut self, nodes: &mut Nodes, i: u32) {
        let Node { fprev, fnext, class: c, .. } = nodes[i as usize];
        let c = c as usize;
        debug_assert!(fprev != NIL || self.heads[c] == i, "node {i} not indexed");
        nodes[select_unpredictable(fnext != NIL, fnext, i) as usize].fprev = fprev;
        nodes[select_unpredictable(fprev != NIL, fprev, i) as usize].fnext = fnext;
        // The head moves on if `i` was the head; the class empties if it was the only one.
        self.heads[c] = select_unpredictable(fprev == NIL, fnext, self.heads[c]);
        self.bits[c / 64] &= !(((fprev == NIL && fnext == NIL) as u64) << (c % 64));
    }

    /// Sets the size of indexed node `i` to `size`, moving it to the list of its new
    /// class only if the class changes (a carve or a merge mostly keeps it).
    #[inline(always)]
    pub fn resize(&mut self, nodes: &mut Nodes, i: u32, size: u64) {
        if nodes[i as usize].class as usize == class(size) {
            nodes[i as usize].size = size;
        } else {
            self.remove(nodes, i);
            nodes[i as usize].size = size;
            self.insert(nodes, i);
        }
    }

    /// The first non-empty class at or above `c`.
    #[inline]
    fn next_class(&self, c: usize) -> Option<usize> {
        let (mut w, mut mask) = (c / 64, if c < CLASSES { !0u64 << (c % 64) } else { 0 });
        while w < self.bits.len() {
            let b = self.bits[w] & mask;
            if b != 0 {
                return Some(w * 64 + b.trailing_zeros() as usize);
            }
            w += 1;
            mask = !0;
        }
        None
    }

    /// The smallest (size, address) of class `c`'s list among the entries of at least
    /// `size` bytes. The running minimum is kept by selects on one 128-bit key (size,
    /// address): which entry wins follows the workload, and the branches of a tuple
    /// comparison were mispredicted (random_seed1, bench/results/host-2026-11-29-exp14b).
    #[inline]
    fn min_in(&self, nodes: &Nodes, c: usize, size: u64) -> Option<u32> {
        let (mut i, mut best, mut key) = (self.heads[c], NIL, u128::MAX);
        while i != NIL {
            let n = &nodes[i as usize];
            let k = (n.size as u128) << 64 | n.addr as u128;
            let better = n.size >= size && k < key;
            best = select_unpredictable(better, i, best);
            key = select_unpredictable(better, k, key);
            i = n.fnext;
        }
        (best != NIL).then_some(best)
    }

    /// The free range that fits `size` best: the smallest by (size, address) of those
    /// at least `size` long.
    #[inline]
    pub fn best_fit(&self, nodes: &Nodes, size: u64) -> Option<u32> {
        let c = class(size);
        if self.bits[c / 64] >> (c % 64) & 1 != 0
            && let Some(i) = self.min_in(nodes, c, size)
        {
            return Some(i);
        }
        // Every entry of a higher class is larger than any of class c: the smallest of
        // the next non-empty class. Most requests come here (their own class is empty:
        // 79 % on bertlike_infer_varlen_lognormal_seed102), and most lists hold one
        // range (1.0 a list looked at here, 1.3 in the request's class), so a lone head
        // is taken without the walk.
        let c = self.next_class(c + 1)?;
        let head = self.heads[c];
        if nodes[head as usize].fnext == NIL {
            return Some(head);
        }
        self.min_in(nodes, c, 0)
    }

    /// The free range that follows indexed node `after` in best-fit order: the smallest
    /// by (size, address) above `after`'s among those at least `size` long (`after` at
    /// least `size` long itself). Walks `after`'s class list, else takes the first
    /// non-empty higher class's smallest, as [`FreeLists::best_fit`] does; so the ranges
    /// from `best_fit` on, each the `next_fit` of the one before, are the fits in order,
    /// with no list gathered or sorted.
    #[inline]
    pub fn next_fit(&self, nodes: &Nodes, size: u64, after: u32) -> Option<u32> {
        let Node { size: s0, addr: a0, class: c, .. } = nodes[after as usize];
        let c = c as usize;
        let (mut i, mut best, mut key) = (self.heads[c], NIL, (u64::MAX, u64::MAX));
        while i != NIL {
            let n = &nodes[i as usize];
            let k = (n.size, n.addr);
            if n.size >= size && k > (s0, a0) && k < key {
                (best, key) = (i, k);
            }
            i = n.fnext;
        }
        if best != NIL {
            return Some(best);
        }
        // Every entry of a higher class is larger than any of class c (which holds `size`
        // or larger).
        let c = self.next_class(c + 1)?;
        self.min_in(nodes, c, 0)
    }

    /// Calls `f(node)` for every free range of at least `size` bytes, in no set order.
    pub fn for_each_fit(&self, nodes: &Nodes, size: u64, mut f: impl FnMut(u32)) {
        let mut c = class(size);
        while let Some(cc) = self.next_class(c) {
            let mut i = self.heads[cc];
            while i != NIL {
                let n = &nodes[i as usize];
                if n.size >= size {
                    f(i);
                }
                i = n.fnext;
            }
            c = cc + 1;
        }
    }

    /// The number and the bytes of the free ranges indexed (for the structure checks of
    /// the tests).
    #[cfg(test)]
    pub fn totals(&self, nodes: &Nodes) -> (usize, u64) {
        let (mut len, mut bytes) = (0, 0);
        for &head in self.heads.iter() {
            let mut i = head;
            while i != NIL {
                len += 1;
                bytes += nodes[i as usize].size;
                i = nodes[i as usize].fnext;
            }
        }
        (len, bytes)
    }

    /// Whether node `i` is on its class's list (for the structure checks of the tests).
    #[cfg(test)]
    pub fn contains(&self, nodes: &Nodes, i: u32) -> bool {
        let mut j = self.heads[nodes[i as usize].class as usize];
        while j != NIL {
            if j == i {
                return true;
            }
            j = nodes[j as usize].fnext;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`class`] is the quarter octave of the size (`(log2 − 9) · 4 + the next two bits`),
    /// below [`CLASSES`], and never decreases with the size.
    #[test]
    fn class_is_the_quarter_octave() {
        let mut last = 0;
        for lg in 9..49u32 {
            let quarter = 1u64 << (lg - 2);
            for sub in 0..4u64 {
                for extra in [0, quarter / 2, quarter - 1] {
                    let size = (1u64 << lg) + sub * quarter + extra;
                    let c = class(size);
                    assert_eq!(c, ((lg as usize - 9) << SUB) + sub as usize, "size {size}");
                    assert!(c < CLASSES && c >= last, "size {size}");
                    last = c;
                }
            }
        }
    }
}

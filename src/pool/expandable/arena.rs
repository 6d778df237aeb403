//! An arena of the expandable pool: one reserved address range, the free ranges in it
//! (best fit by size and address, merged with their neighbours) and the state of each
//! granule (how many blocks touch it, whether physical memory is mapped there).

use std::collections::{BTreeMap, BTreeSet};

/// Free ranges [`Arena::place`] considers for a block, smallest first.
const CANDIDATES: usize = 16;

/// One reserved range of addresses, carved into blocks. Free ranges are address space;
/// whether memory lies behind them is the granules' business: a granule is mapped while
/// a block touches it and after, until the pool unmaps it (lazily).
pub(super) struct Arena {
    /// First address and length of the reserved range (whole granules).
    pub base: u64,
    pub size: u64,
    /// Serves requests above 1 MiB (else up to 1 MiB).
    pub large: bool,
    /// log2 of the granule.
    shift: u32,
    /// Free ranges: address → size, and (size, address) for best fit.
    free_by_addr: BTreeMap<u64, u64>,
    free_by_size: BTreeSet<(u64, u64)>,
    /// Per granule: blocks touching it (in use or on a quick list).
    pins: Vec<u32>,
    /// Per granule: physical memory mapped there.
    mapped: Vec<bool>,
    /// One past the highest mapped granule (0: none).
    top: usize,
    /// Bytes mapped, and of those the bytes of granules no block touches.
    pub mapped_bytes: u64,
    pub idle_bytes: u64,
}

impl Arena {
    /// An arena over the reserved range `[base, base+size)`, `size` a multiple of the
    /// granule `gran` (a power of two), all free and unmapped, for large requests or not.
    pub fn new(base: u64, size: u64, gran: u64, large: bool) -> Arena {
        let n = (size / gran) as usize;
        let mut a = Arena {
            base,
            size,
            large,
            shift: gran.trailing_zeros(),
            free_by_addr: BTreeMap::new(),
            free_by_size: BTreeSet::new(),
            pins: vec![0; n],
            mapped: vec![false; n],
            top: 0,
            mapped_bytes: 0,
            idle_bytes: 0,
        };
        a.insert_free(base, size);
        a
    }

    /// The granule in bytes.
    #[inline]
    pub fn granule(&self) -> u64 {
        1 << self.shift
    }

    /// True when no block lies in the arena (it is one free range).
    pub fn is_empty(&self) -> bool {
        self.free_by_addr.get(&self.base) == Some(&self.size)
    }

    /// The granules `[first, last]` that `[addr, addr+size)` touches.
    #[inline]
    fn granules(&self, addr: u64, size: u64) -> std::ops::RangeInclusive<usize> {
        let first = ((addr - self.base) >> self.shift) as usize;
        let last = ((addr + size - 1 - self.base) >> self.shift) as usize;
        first..=last
    }

    #[inline]
    fn granule_addr(&self, g: usize) -> u64 {
        self.base + ((g as u64) << self.shift)
    }

    fn insert_free(&mut self, addr: u64, size: u64) {
        self.free_by_addr.insert(addr, size);
        self.free_by_size.insert((size, addr));
    }

    fn remove_free(&mut self, addr: u64, size: u64) {
        self.free_by_addr.remove(&addr);
        let found = self.free_by_size.remove(&(size, addr));
        debug_assert!(found, "free range {addr:#x}+{size} not indexed");
    }

    /// Granules of `[addr, addr+size)` that are not mapped.
    fn unmapped_in(&self, addr: u64, size: u64) -> usize {
        let r = self.granules(addr, size);
        self.mapped[r].iter().filter(|&&m| !m).count()
    }

    /// Where a block of `size` bytes goes: the start or the end of a free range, among
    /// the [`CANDIDATES`] smallest that fit (best fit, lowest address among equals), the
    /// first place that needs the fewest granules mapped. Returns the address and that
    /// number of granules. So a warm pass whose blocks land elsewhere than in the last
    /// pass still finds mapped memory, and calls no device, where a fit exists.
    pub fn place(&self, size: u64) -> Option<(u64, usize)> {
        let mut best: Option<(u64, usize)> = None;
        for &(have, a) in self.free_by_size.range((size, 0)..).take(CANDIDATES) {
            for addr in [a, a + have - size] {
                let n = self.unmapped_in(addr, size);
                if best.is_none_or(|b| n < b.1) {
                    best = Some((addr, n));
                }
                if n == 0 {
                    return best;
                }
            }
        }
        best
    }

    /// Takes `[addr, addr+size)` from the free range that holds it.
    pub fn carve(&mut self, addr: u64, size: u64) {
        let (&start, &have) = self.free_by_addr.range(..=addr).next_back().expect("inside a free range");
        debug_assert!(start + have >= addr + size);
        self.remove_free(start, have);
        if addr > start {
            self.insert_free(start, addr - start);
        }
        if start + have > addr + size {
            self.insert_free(addr + size, start + have - (addr + size));
        }
    }

    /// Gives `[addr, addr+size)` back to the free ranges, merged with free neighbours.
    pub fn give_back(&mut self, mut addr: u64, mut size: u64) {
        if let Some(next) = self.free_by_addr.get(&(addr + size)).copied() {
            self.remove_free(addr + size, next);
            size += next;
        }
        if let Some((&p, &ps)) = self.free_by_addr.range(..addr).next_back()
            && p + ps == addr
        {
            self.remove_free(p, ps);
            addr = p;
            size += ps;
        }
        self.insert_free(addr, size);
    }

    /// Counts a block at `[addr, addr+size)` on the granules it touches. Returns the
    /// runs `(address, bytes)` of those that are not mapped, in address order.
    pub fn pin(&mut self, addr: u64, size: u64) -> Vec<(u64, u64)> {
        let gran = self.granule();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for g in self.granules(addr, size) {
            if self.pins[g] == 0 && self.mapped[g] {
                self.idle_bytes -= gran;
            }
            self.pins[g] += 1;
            if !self.mapped[g] {
                let a = self.granule_addr(g);
                match runs.last_mut() {
                    Some(r) if r.0 + r.1 == a => r.1 += gran,
                    _ => runs.push((a, gran)),
                }
            }
        }
        runs
    }

    /// Uncounts a block at `[addr, addr+size)` from the granules it touches.
    pub fn unpin(&mut self, addr: u64, size: u64) {
        let gran = self.granule();
        for g in self.granules(addr, size) {
            self.pins[g] -= 1;
            if self.pins[g] == 0 && self.mapped[g] {
                self.idle_bytes += gran;
            }
        }
    }

    /// Records `[addr, addr+bytes)` (whole granules) as mapped.
    pub fn set_mapped(&mut self, addr: u64, bytes: u64) {
        let gran = self.granule();
        for g in self.granules(addr, bytes) {
            debug_assert!(!self.mapped[g]);
            self.mapped[g] = true;
            if self.pins[g] == 0 {
                self.idle_bytes += gran;
            }
        }
        self.mapped_bytes += bytes;
        self.top = self.top.max(*self.granules(addr, bytes).end() + 1);
    }

    /// Records `[addr, addr+bytes)` (whole idle granules) as unmapped.
    fn set_unmapped(&mut self, addr: u64, bytes: u64) {
        for g in self.granules(addr, bytes) {
            debug_assert!(self.mapped[g] && self.pins[g] == 0);
            self.mapped[g] = false;
        }
        self.mapped_bytes -= bytes;
        self.idle_bytes -= bytes;
        while self.top > 0 && !self.mapped[self.top - 1] {
            self.top -= 1;
        }
    }

    /// Unmaps idle granules, highest address first, through `unmap(addr, bytes)` (one
    /// call per run of neighbours), until `target` bytes are unmapped or none is idle.
    /// Returns the bytes unmapped (whole granules, so possibly more than `target`).
    pub fn unmap_idle(&mut self, target: u64, mut unmap: impl FnMut(u64, u64)) -> u64 {
        let gran = self.granule();
        let mut done = 0;
        let mut g = self.top;
        while done < target && self.idle_bytes > 0 && g > 0 {
            // The next run of idle granules below `g`, cut to what is still wanted.
            while g > 0 && !(self.mapped[g - 1] && self.pins[g - 1] == 0) {
                g -= 1;
            }
            let end = g;
            while g > 0
                && self.mapped[g - 1]
                && self.pins[g - 1] == 0
                && done + ((end - g) as u64) * gran < target
            {
                g -= 1;
            }
            if g == end {
                break;
            }
            let (addr, bytes) = (self.granule_addr(g), ((end - g) as u64) * gran);
            unmap(addr, bytes);
            self.set_unmapped(addr, bytes);
            done += bytes;
        }
        done
    }

    /// True when `addr` lies in the arena's reserved range.
    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
}

#[cfg(test)]
impl Arena {
    /// Checks the free ranges (disjoint, merged, both indexes equal), the granule
    /// counts against `blocks` (the blocks in use or quick-listed, address → size) and
    /// the byte counters. Returns the free bytes.
    pub fn check(&self, blocks: &BTreeMap<u64, u64>) -> u64 {
        let mut free = 0;
        let mut last_end = None;
        for (&a, &s) in &self.free_by_addr {
            assert!(s > 0 && a >= self.base && a + s <= self.base + self.size);
            assert!(self.free_by_size.contains(&(s, a)));
            if let Some(e) = last_end {
                assert!(e < a, "free ranges at {a:#x} overlap or touch");
            }
            last_end = Some(a + s);
            free += s;
        }
        assert_eq!(self.free_by_addr.len(), self.free_by_size.len());
        let mut pins = vec![0u32; self.pins.len()];
        let mut used = 0;
        for (&a, &s) in blocks.range(self.base..self.base + self.size) {
            used += s;
            for g in self.granules(a, s) {
                pins[g] += 1;
                assert!(self.mapped[g], "block {a:#x} on an unmapped granule");
            }
            let before = self.free_by_addr.range(..=a).next_back();
            assert!(before.is_none_or(|(&f, &fs)| f + fs <= a), "block {a:#x} overlaps a free range");
        }
        assert_eq!(pins, self.pins);
        assert_eq!(used + free, self.size, "blocks and free ranges do not tile the arena");
        let gran = self.granule();
        let mapped = self.mapped.iter().filter(|&&m| m).count() as u64 * gran;
        let idle =
            (0..self.pins.len()).filter(|&g| self.mapped[g] && self.pins[g] == 0).count() as u64 * gran;
        assert_eq!((mapped, idle), (self.mapped_bytes, self.idle_bytes));
        assert!(self.mapped[self.top..].iter().all(|&m| !m));
        assert!(self.top == 0 || self.mapped[self.top - 1]);
        free
    }
}

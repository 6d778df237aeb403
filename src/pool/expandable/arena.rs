//! An arena of the expandable pool: one reserved address range, carved into blocks and
//! free ranges, and which granules have physical memory mapped.
//!
//! Blocks and free ranges are nodes in a slab, linked to their address neighbours, so
//! merging a freed block costs no search; free ranges are on lists by size class
//! ([`FreeLists`], threaded through the nodes), so indexing one costs a few stores and
//! best fit a bit scan and a look at a few entries. Which granules are mapped is a bitmap. A granule is *idle*
//! (mapped, no block touches it) exactly when it lies wholly inside one free range, since
//! blocks and free ranges tile the arena and free neighbours are merged; so there is no
//! count per granule, and placing or freeing a block costs a few bitmap words however many
//! granules it spans. Nor is there a running count of idle bytes: it would cost a bitmap
//! count on every index insert and removal (a fifth of a miss's instructions), while only
//! statistics and unmapping ask, and idle granules can lie only in the free ranges a
//! granule long or longer (`Arena::idle_bytes`; [`Arena::releasable_bytes`] counts the
//! allocations among them that reclaim can give back).

use super::free_lists::FreeLists;
use super::node::{NIL, Node, Nodes};
use crate::pool::MIN_BLOCK;
use crate::pool::split::SMALL_SIZE;
use crate::snapshot::{BlockState, PoolBlock, PoolSegment};
use std::hint::select_unpredictable;

/// Free ranges [`Arena::place`] considers for a block, smallest first.
const CANDIDATES: usize = 16;

/// A free range at most `TIGHT` × a block's size fits it tightly ([`Arena::place_further`]):
/// a mapped place there is taken at once, where a looser range's mapped run is kept whole
/// for a longer block unless it is the tightest mapped piece.
const TIGHT: u64 = 2;

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
    nodes: Nodes,
    /// The first dead node (reusable), the others linked through their `next` ([`NIL`]:
    /// none).
    dead: u32,
    /// The node that ends at the end of the range.
    tail: u32,
    /// Free ranges by size class.
    free: FreeLists,
    /// One bit per granule: physical memory mapped there.
    mapped: Vec<u64>,
    /// One bit per granule: the first granule of a physical allocation (one per
    /// [`Arena::set_mapped`], i.e. per device mapping). An allocation runs to the next
    /// such bit or the next unmapped granule, and is given up only whole (CUDA unmaps
    /// and releases whole allocations only).
    starts: Vec<u64>,
    /// One past the highest mapped granule (0: none).
    top: usize,
    /// Bytes mapped.
    pub mapped_bytes: u64,
    /// log2 of the unit of [`Arena::block_at`]: 512 B ([`MIN_BLOCK`]) in arenas for
    /// blocks up to 1 MiB, 1 MiB ([`SMALL_SIZE`]) in arenas for larger blocks (two of
    /// which start more than 1 MiB apart, so no two start in one MiB).
    unit: u32,
    /// The node of the block in use that starts in each unit of the range (entry
    /// `(addr − base) >> unit`; stale where none does), grown on demand up to the
    /// highest block start and cut back when the mapped extent shrinks
    /// ([`Arena::lower_top`]): the pool's only map from a block's address to its node
    /// (an index, no hash and no probe; the engine's live table is the address table).
    /// Host memory: 4 bytes per 512 B of the small blocks' arena up to its highest mapped
    /// granule (0.8 % of that extent), 4 bytes per MiB in the large blocks' arenas.
    block_at: Vec<u32>,
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
            nodes: Nodes::new(Node::new(base, size, true)),
            dead: NIL,
            tail: 0,
            free: FreeLists::default(),
            mapped: vec![0; n.div_ceil(64)],
            starts: vec![0; n.div_ceil(64)],
            top: 0,
            mapped_bytes: 0,
            unit: if large { SMALL_SIZE.trailing_zeros() } else { MIN_BLOCK.trailing_zeros() },
            block_at: Vec::new(),
        };
        a.free.insert(&mut a.nodes, 0);
        a
    }

    /// The granule in bytes.
    #[inline]
    pub fn granule(&self) -> u64 {
        1 << self.shift
    }

    /// True when no block lies in the arena (it is one free range).
    pub fn is_empty(&self) -> bool {
        let t = &self.nodes[self.tail as usize];
        t.free && t.addr == self.base
    }

    /// True when `addr` lies in the arena's reserved range.
    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }

    #[inline]
    fn granule_addr(&self, g: usize) -> u64 {
        self.base + ((g as u64) << self.shift)
    }

    #[inline]
    fn is_mapped(&self, g: usize) -> bool {
        self.mapped[g / 64] >> (g % 64) & 1 != 0
    }

    /// Mapped granules in `[g0, g1)`.
    #[inline]
    fn count_mapped(&self, g0: usize, g1: usize) -> usize {
        let g1 = g1.min(self.top);
        if g0 >= g1 {
            return 0;
        }
        if g1 - g0 == 1 {
            return self.is_mapped(g0) as usize;
        }
        let (w0, w1) = (g0 / 64, (g1 - 1) / 64);
        let lo = !0u64 << (g0 % 64);
        let hi = !0u64 >> (63 - (g1 - 1) % 64);
        if w0 == w1 {
            return (self.mapped[w0] & lo & hi).count_ones() as usize;
        }
        let mut n = (self.mapped[w0] & lo).count_ones() + (self.mapped[w1] & hi).count_ones();
        for w in &self.mapped[w0 + 1..w1] {
            n += w.count_ones();
        }
        n as usize
    }

    /// Whether every granule that `[addr, addr+size)` touches is mapped
    /// (`unmapped_in(addr, size) == 0`, without counting).
    #[inline(always)]
    fn all_mapped(&self, addr: u64, size: u64) -> bool {
        let g1 = ((addr + size - 1 - self.base) >> self.shift) as usize + 1;
        if g1 > self.top {
            return false;
        }
        // Every granule below the top mapped (no granule was unmapped or moved away, as
        // in training): nothing to look up.
        if self.mapped_bytes == (self.top as u64) << self.shift {
            return true;
        }
        let g0 = ((addr - self.base) >> self.shift) as usize;
        let (w0, w1) = (g0 / 64, (g1 - 1) / 64);
        let lo = !0u64 << (g0 % 64);
        let hi = !0u64 >> (63 - (g1 - 1) % 64);
        if w0 == w1 {
            let m = lo & hi;
            return self.mapped[w0] & m == m;
        }
        self.mapped[w0] & lo == lo
            && self.mapped[w1] & hi == hi
            && self.mapped[w0 + 1..w1].iter().all(|&w| w == !0)
    }

    /// The granules `[first, last+1)` that `[addr, addr+size)` touches.
    #[inline]
    fn touched(&self, addr: u64, size: u64) -> (usize, usize) {
        (
            ((addr - self.base) >> self.shift) as usize,
            ((addr + size - 1 - self.base) >> self.shift) as usize + 1,
        )
    }

    /// Idle bytes of a free range `[addr, addr+size)`: its mapped granules that lie
    /// wholly inside it.
    #[inline]
    fn idle_in(&self, addr: u64, size: u64) -> u64 {
        let g0 = (addr - self.base).div_ceil(self.granule()) as usize;
        let g1 = ((addr + size - self.base) >> self.shift) as usize;
        (self.count_mapped(g0, g1) as u64) << self.shift
    }

    /// Granules of `[addr, addr+size)` that are not mapped.
    #[inline]
    fn unmapped_in(&self, addr: u64, size: u64) -> usize {
        let (g0, g1) = self.touched(addr, size);
        (g1 - g0) - self.count_mapped(g0, g1)
    }

    /// A node for `n`: a dead one reused, else a new one.
    #[inline]
    fn new_node(&mut self, n: Node) -> u32 {
        let i = self.dead;
        if i == NIL {
            return self.nodes.push(n);
        }
        self.dead = self.nodes[i as usize].next;
        self.nodes[i as usize] = n;
        i
    }

    /// Marks node `i` (unlinked) dead, for reuse.
    #[inline]
    fn kill(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.dead = true;
        n.next = self.dead;
        self.dead = i;
    }

    // The address links below are written by selects, as the free lists' are
    // ([`FreeLists::insert`]): whether a node is the arena's last or first follows the
    // workload (`link_after`'s test was mispredicted 0.13 times per event on
    // encoder_infer_varlen, cachegrind's branch simulation,
    // bench/results/host-2026-11-29-exp15). Where there is no neighbour, the link goes
    // to node `i` itself, whose own links are written after or no longer read.

    /// Makes node `i` (not linked yet) the next neighbour of `after`.
    #[inline]
    fn link_after(&mut self, after: u32, i: u32) {
        let next = self.nodes[after as usize].next;
        self.nodes[select_unpredictable(next != NIL, next, i) as usize].prev = i;
        self.nodes[i as usize].prev = after;
        self.nodes[i as usize].next = next;
        self.nodes[after as usize].next = i;
        self.tail = select_unpredictable(next == NIL, i, self.tail);
    }

    /// Makes node `i` (not linked yet) the previous neighbour of `before`.
    #[inline]
    fn link_before(&mut self, before: u32, i: u32) {
        let prev = self.nodes[before as usize].prev;
        self.nodes[select_unpredictable(prev != NIL, prev, i) as usize].next = i;
        self.nodes[i as usize].prev = prev;
        self.nodes[i as usize].next = before;
        self.nodes[before as usize].prev = i;
    }

    /// Takes node `i` out of the address list (its own links are left stale).
    #[inline]
    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        self.nodes[select_unpredictable(prev != NIL, prev, i) as usize].next = next;
        self.nodes[select_unpredictable(next != NIL, next, i) as usize].prev = prev;
        self.tail = select_unpredictable(next == NIL, prev, self.tail);
    }

    /// Indexes free node `i`.
    #[inline]
    fn add_free(&mut self, i: u32) {
        self.free.insert(&mut self.nodes, i);
    }

    /// Sets the size of free node `i` (indexed), moving it to another list only if its
    /// size class changes.
    #[inline]
    fn resize_free(&mut self, i: u32, size: u64) {
        self.free.resize(&mut self.nodes, i, size);
    }

    /// Unindexes free node `i`.
    #[inline]
    fn remove_free(&mut self, i: u32) {
        self.free.remove(&mut self.nodes, i);
    }

    /// The free ranges that can hold a whole granule (at least a granule long), as
    /// (size, address), in no set order. Idle granules lie only in these.
    fn granule_ranges(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        self.free.for_each_fit(&self.nodes, self.granule(), |i| {
            let n = &self.nodes[i as usize];
            v.push((n.size, n.addr));
        });
        v
    }

    /// Bytes of idle granules (mapped, wholly inside a free range): counted on demand
    /// over the free ranges a granule long or longer (statistics and reclaim ask; the
    /// alloc and free paths keep no count).
    #[cfg(test)]
    pub fn idle_bytes(&self) -> u64 {
        if self.mapped_bytes == 0 {
            return 0;
        }
        self.granule_ranges().into_iter().map(|(size, addr)| self.idle_in(addr, size)).sum()
    }

    /// Bytes of the physical allocations that lie wholly inside free ranges: what
    /// [`Arena::unmap_idle`] can give back. An idle granule of an allocation that a block
    /// still touches elsewhere stays mapped (CUDA releases an allocation whole), so it
    /// counts as an inactive split, not as releasable.
    pub fn releasable_bytes(&self) -> u64 {
        if self.mapped_bytes == 0 {
            return 0;
        }
        let mut found = Vec::new();
        let mut total = 0;
        for (size, addr) in self.granule_ranges() {
            found.clear();
            self.chunks_inside(addr, size, &mut found);
            total += found.iter().map(|&(cs, ce)| (ce - cs) as u64).sum::<u64>() * self.granule();
        }
        total
    }

    /// The allocations (granules `[start, end)`) wholly inside the free range
    /// `[at, at + len)`, lowest first, appended to `found`.
    fn chunks_inside(&self, at: u64, len: u64, found: &mut Vec<(usize, usize)>) {
        let gran = self.granule();
        let lo = (at - self.base).div_ceil(gran) as usize;
        let hi = (((at + len - self.base) >> self.shift) as usize).min(self.top);
        let mut g = lo;
        while g < hi {
            let Some(m) = self.next_with(g, hi, true) else { break };
            let (cs, ce) = self.chunk_at(m);
            if cs >= lo && ce <= hi {
                found.push((cs, ce));
            }
            g = ce;
        }
    }

    /// Where a block of `size` bytes goes. The best fit (the smallest free range that
    /// holds it, lowest address among equals) if its start is mapped (the common case);
    /// else, among the best fits up to [`TIGHT`] × the size (at most [`CANDIDATES`]), the
    /// first with a mapped place (its start, its end, or a run of idle granules inside);
    /// else the smallest *mapped piece* that holds it ([`Arena::mapped_piece`]: a free
    /// range cut to one run of its mapped granules, best fit measured by what is mapped,
    /// not by address space); only if no piece anywhere holds it, among the
    /// [`CANDIDATES`] best fits the first place that needs the fewest granules mapped
    /// ([`Arena::place_in`]: a mapping follows). Returns the free range's node, the
    /// address and that number of granules. So a warm pass whose blocks land elsewhere
    /// than in the last pass finds mapped memory, and calls no device, wherever a mapped
    /// place exists; and a block that cannot have a tight fit takes the tightest mapped
    /// place, keeping long mapped runs whole for the long blocks that need them.
    #[inline]
    pub fn place(&mut self, size: u64) -> Option<(u32, u64, usize)> {
        let i = self.free.best_fit(&self.nodes, size)?;
        let a = self.nodes[i as usize].addr;
        if self.all_mapped(a, size) {
            return Some((i, a, 0));
        }
        self.place_further(i, size)
    }

    /// [`Arena::place`] when the start of the best fit `i` needs granules mapped (out of
    /// line): the best fits in (size, address) order, each found from the one before
    /// ([`FreeLists::next_fit`]: no list gathered or sorted); the tight ones for a mapped
    /// place, found without counting; then the mapped pieces; then, rarely (a mapping
    /// follows), the candidates looked at again for the fewest granules to map.
    ///
    /// Why the tightest mapped piece rather than the first mapped place among the 16
    /// best fits by address space (the rule until 2026-11-28): on encoder_infer_varlen a
    /// transformer layer's 43 MiB blocks took a fully mapped free range three times their
    /// size, left by the last layer's 172 MiB block (the best fit by address space),
    /// while a shorter mapped run lay at the top of the arena; the next 172 MiB block
    /// found no mapped run long enough and moved memory (about 19 device calls a warm
    /// pass, the block taking three places in turn). By mapped pieces the long run stays
    /// whole for it: 0.2 device calls a warm pass, 0 in the last, and 1.1157 × live warm
    /// instead of 1.1385 (host device, bench/results/host-2026-11-28-exp12). Why the
    /// tight fits first: the pieces' search looks at every free range that fits (about
    /// 13 on random_seed1, whose requests take this path a fifth of the time): 423 → 614
    /// warm instructions per event there when every request here searched them.
    #[inline(never)]
    fn place_further(&self, i: u32, size: u64) -> Option<(u32, u64, usize)> {
        let mut j = i;
        for k in 0..CANDIDATES {
            if k > 0 {
                let Some(next) = self.free.next_fit(&self.nodes, size, j) else { break };
                j = next;
            }
            let Node { addr: at, size: have, .. } = self.nodes[j as usize];
            if have > TIGHT * size {
                break;
            }
            if k > 0 && self.all_mapped(at, size) {
                return Some((j, at, 0));
            }
            if self.all_mapped(at + have - size, size) {
                return Some((j, at + have - size, 0));
            }
            if let Some(g) = self.mapped_run(at, have, size) {
                return Some((j, self.granule_addr(g), 0));
            }
        }
        if let Some(p) = self.mapped_piece(size) {
            return Some(p);
        }
        let (mut best, mut j) = (None, i);
        for k in 0..CANDIDATES {
            if k > 0 {
                let Some(next) = self.free.next_fit(&self.nodes, size, j) else { break };
                j = next;
            }
            self.place_in(j, size, &mut best);
        }
        best
    }

    /// The smallest mapped piece that holds `size` bytes, by (length, address), placed at
    /// its start: a piece is a free range cut to one run of mapped granules (the range's
    /// ends included where the granule there is mapped: a block touches it). Looks at
    /// every free range at least `size` long, a bitmap word at a time.
    fn mapped_piece(&self, size: u64) -> Option<(u32, u64, usize)> {
        // (piece length, piece address, node)
        let mut best: Option<(u64, u64, u32)> = None;
        if self.top == 0 {
            return None;
        }
        self.free.for_each_fit(&self.nodes, size, |i| {
            let Node { addr: a, size: have, .. } = self.nodes[i as usize];
            let b = a + have;
            let g0 = ((a - self.base) >> self.shift) as usize;
            let g1 = (((b - 1 - self.base) >> self.shift) as usize + 1).min(self.top);
            let mut g = g0;
            while g < g1 {
                let Some(s) = self.next_with(g, g1, true) else { break };
                let e = self.next_with(s, g1, false).unwrap_or(g1);
                let (pa, pb) = (self.granule_addr(s).max(a), self.granule_addr(e).min(b));
                if pb - pa >= size && best.is_none_or(|x| (pb - pa, pa) < (x.0, x.1)) {
                    best = Some((pb - pa, pa, i));
                }
                g = e;
            }
        });
        best.map(|(_, addr, i)| (i, addr, 0))
    }

    /// The first granule of the first run of mapped granules wholly inside the free range
    /// `[a, a+have)` that is long enough for a block of `size`: where
    /// [`Arena::mapped_window`] finds its place needing no mapping, if it does (its first
    /// window with every granule mapped starts such a run), found without counting.
    fn mapped_run(&self, a: u64, have: u64, size: u64) -> Option<usize> {
        let g_lo = (a - self.base).div_ceil(self.granule()) as usize;
        let g_end = ((a + have - self.base) >> self.shift) as usize;
        let m = size.div_ceil(self.granule()) as usize;
        if g_lo + m > g_end || g_lo >= self.top {
            return None;
        }
        let stop = g_end.min(self.top);
        let mut g = g_lo;
        while g < stop {
            let s = self.next_with(g, stop, true)?;
            let e = self.next_with(s, stop, false).unwrap_or(stop);
            if e - s >= m {
                return Some(s);
            }
            g = e;
        }
        None
    }

    /// Looks at free range `i` for a block of `size` (its start, its end, then idle
    /// granules inside it), keeping in `best` the first place that needs the fewest
    /// granules mapped.
    fn place_in(&self, i: u32, size: u64, best: &mut Option<(u32, u64, usize)>) {
        let Node { addr: a, size: have, .. } = self.nodes[i as usize];
        for addr in [a, a + have - size] {
            let n = self.unmapped_in(addr, size);
            if best.is_none_or(|b| n < b.2) {
                *best = Some((i, addr, n));
            }
        }
        if let Some((addr, n)) = self.mapped_window(a, have, size)
            && best.is_none_or(|b| n < b.2)
        {
            *best = Some((i, addr, n));
        }
    }

    /// Inside the free range `[a, a+have)`, the granule-aligned place for a block of
    /// `size` that needs the fewest granules mapped, and that number, if it needs fewer
    /// than the granules it touches (some idle granule lies in the way). Mapped granules
    /// in the middle of a long free range (left by large blocks freed and merged) are so
    /// reused, where the ends of the range alone would map new ones.
    fn mapped_window(&self, a: u64, have: u64, size: u64) -> Option<(u64, usize)> {
        let g_lo = (a - self.base).div_ceil(self.granule()) as usize;
        let g_end = ((a + have - self.base) >> self.shift) as usize;
        let m = size.div_ceil(self.granule()) as usize;
        if g_lo + m > g_end || g_lo >= self.top {
            return None;
        }
        let last = g_end - m;
        // Windows that start where a run of mapped granules starts, or end where one ends
        // (the best window has one of these forms); runs found a word at a time.
        let (mut best_g, mut best_n) = (0, 0);
        let mut g = g_lo;
        let stop = g_end.min(self.top);
        while g < stop {
            // The next mapped granule at or after g.
            let Some(s) = self.next_with(g, stop, true) else { break };
            let e = self.next_with(s, stop, false).unwrap_or(stop);
            for w in [s.min(last), e.saturating_sub(m).max(g_lo).min(last)] {
                let n = self.count_mapped(w, w + m);
                if n > best_n {
                    (best_g, best_n) = (w, n);
                    if n == m {
                        return Some((self.granule_addr(w), 0));
                    }
                }
            }
            g = e;
        }
        (best_n > 0).then(|| (self.granule_addr(best_g), m - best_n))
    }

    /// The first granule in `[g, stop)` that is mapped (`mapped` true) or not.
    #[inline]
    fn next_with(&self, g: usize, stop: usize, mapped: bool) -> Option<usize> {
        let mut w = g / 64;
        let flip = if mapped { 0 } else { !0u64 };
        let mut bits = (self.mapped[w] ^ flip) & (!0u64 << (g % 64));
        loop {
            if bits != 0 {
                let at = w * 64 + bits.trailing_zeros() as usize;
                return (at < stop).then_some(at);
            }
            w += 1;
            if w * 64 >= stop {
                return None;
            }
            bits = self.mapped[w] ^ flip;
        }
    }

    /// The first allocation start in `(g, stop)` (see [`Arena::starts`]).
    #[inline]
    fn next_start(&self, g: usize, stop: usize) -> Option<usize> {
        let g = g + 1;
        if g >= stop {
            return None;
        }
        let mut w = g / 64;
        let mut bits = self.starts[w] & (!0u64 << (g % 64));
        loop {
            if bits != 0 {
                let at = w * 64 + bits.trailing_zeros() as usize;
                return (at < stop).then_some(at);
            }
            w += 1;
            if w * 64 >= stop {
                return None;
            }
            bits = self.starts[w];
        }
    }

    /// The last allocation start at or before mapped granule `g`.
    #[inline]
    fn prev_start(&self, g: usize) -> usize {
        let mut w = g / 64;
        let mut bits = self.starts[w] & (!0u64 >> (63 - g % 64));
        loop {
            if bits != 0 {
                return w * 64 + 63 - bits.leading_zeros() as usize;
            }
            debug_assert!(w > 0, "mapped granule {g} in no allocation");
            w -= 1;
            bits = self.starts[w];
        }
    }

    /// The physical allocation that holds mapped granule `g`: its granules `[start, end)`.
    #[inline]
    fn chunk_at(&self, g: usize) -> (usize, usize) {
        let s = self.prev_start(g);
        let unmapped = self.next_with(s, self.top, false).unwrap_or(self.top);
        let e = self.next_start(s, unmapped).unwrap_or(unmapped);
        (s, e)
    }

    /// Takes `[addr, addr+size)` out of free node `i` (which holds it) as a block.
    /// Returns the block's node. The free rest keeps node `i` where it can, and with it
    /// its place on its size class's list while the class holds (no list update).
    #[inline]
    pub fn carve(&mut self, i: u32, addr: u64, size: u64) -> u32 {
        let b = self.carve_node(i, addr, size);
        let u = ((addr - self.base) >> self.unit) as usize;
        if u >= self.block_at.len() {
            self.grow_block_at(u);
        }
        // SAFETY: `u` is below the length, grown just above if it was not.
        *unsafe { self.block_at.get_unchecked_mut(u) } = b;
        b
    }

    /// Grows [`Arena::block_at`] to hold unit `u` (rare: amortised doubling).
    #[cold]
    #[inline(never)]
    fn grow_block_at(&mut self, u: usize) {
        self.block_at.resize((u + 1).next_power_of_two().max(64), NIL);
    }

    /// The node of the block in use that starts at `addr` (a block of this arena).
    #[inline]
    pub fn block_node(&self, addr: u64) -> u32 {
        let i = self.block_at[((addr - self.base) >> self.unit) as usize];
        debug_assert!({
            let n = &self.nodes[i as usize];
            n.addr == addr && !n.free && !n.dead
        });
        i
    }

    /// Whether a block in use starts at `addr` (which lies in the arena).
    pub fn is_block_start(&self, addr: u64) -> bool {
        let Some(&i) = self.block_at.get(((addr - self.base) >> self.unit) as usize) else { return false };
        self.nodes.get(i as usize).is_some_and(|n| n.addr == addr && !n.free && !n.dead)
    }

    /// [`Arena::carve`] but for the block map.
    #[inline(always)]
    fn carve_node(&mut self, i: u32, addr: u64, size: u64) -> u32 {
        let n = self.nodes[i as usize];
        debug_assert!(n.free && !n.dead && n.addr <= addr && addr + size <= n.addr + n.size);
        let end = n.addr + n.size;
        if addr == n.addr {
            if end == addr + size {
                // An exact fit: the range becomes the block.
                self.remove_free(i);
                self.nodes[i as usize].free = false;
                return i;
            }
            // The rest, after the block, stays free in `i`.
            let b = self.new_node(Node::new(addr, size, false));
            self.link_before(i, b);
            self.nodes[i as usize].addr = addr + size;
            self.resize_free(i, end - addr - size);
            return b;
        }
        // The part before the block stays free in `i`; the block and any rest after it get
        // new nodes.
        self.resize_free(i, addr - n.addr);
        let b = self.new_node(Node::new(addr, size, false));
        self.link_after(i, b);
        if end > addr + size {
            let r = self.new_node(Node::new(addr + size, end - addr - size, true));
            self.link_after(b, r);
            self.add_free(r);
        }
        b
    }

    /// Gives block `i` back to the free ranges, merged with free neighbours (the free
    /// neighbour absorbs the block, keeping its node and, while its class holds, its
    /// place on its list).
    #[inline(always)]
    pub fn give_back(&mut self, i: u32) {
        let Node { prev, next, size, addr, .. } = self.nodes[i as usize];
        debug_assert!(!self.nodes[i as usize].free && !self.nodes[i as usize].dead);
        let prev_free = prev != NIL && self.nodes[prev as usize].free;
        let next_free = next != NIL && self.nodes[next as usize].free;
        match (prev_free, next_free) {
            (false, false) => {
                self.nodes[i as usize].free = true;
                self.add_free(i);
                return;
            }
            (false, true) => {
                let merged = self.nodes[next as usize].size + size;
                self.nodes[next as usize].addr = addr;
                self.resize_free(next, merged);
            }
            (true, false) => {
                let merged = self.nodes[prev as usize].size + size;
                self.resize_free(prev, merged);
            }
            (true, true) => {
                let merged = self.nodes[prev as usize].size + size + self.nodes[next as usize].size;
                self.remove_free(next);
                self.unlink(next);
                self.kill(next);
                self.resize_free(prev, merged);
            }
        }
        self.unlink(i);
        self.kill(i);
    }

    /// The runs `(address, bytes)` of granules that `[addr, addr+size)` touches and that
    /// are not mapped, in address order.
    pub fn unmapped_runs(&self, addr: u64, size: u64) -> Vec<(u64, u64)> {
        let (g0, g1) = self.touched(addr, size);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        if self.count_mapped(g0, g1) == g1 - g0 {
            return runs;
        }
        let gran = self.granule();
        for g in g0..g1 {
            if !self.is_mapped(g) {
                let a = self.granule_addr(g);
                match runs.last_mut() {
                    Some(r) if r.0 + r.1 == a => r.1 += gran,
                    _ => runs.push((a, gran)),
                }
            }
        }
        runs
    }

    /// Records `[addr, addr+bytes)` (whole unmapped granules) as mapped by one physical
    /// allocation (one device mapping, given up only whole).
    pub fn set_mapped(&mut self, addr: u64, bytes: u64) {
        let (g0, g1) = self.touched(addr, bytes);
        for g in g0..g1 {
            debug_assert!(!self.is_mapped(g));
            self.mapped[g / 64] |= 1 << (g % 64);
        }
        self.starts[g0 / 64] |= 1 << (g0 % 64);
        self.mapped_bytes += bytes;
        self.top = self.top.max(g1);
    }

    /// Records the allocation `[addr, addr+bytes)` (one [`Arena::set_mapped`], no block
    /// on it) as unmapped again.
    pub fn set_unmapped(&mut self, addr: u64, bytes: u64) {
        let (g0, g1) = self.touched(addr, bytes);
        debug_assert!(self.starts[g0 / 64] >> (g0 % 64) & 1 != 0);
        for g in g0..g1 {
            self.mapped[g / 64] &= !(1 << (g % 64));
        }
        self.starts[g0 / 64] &= !(1 << (g0 % 64));
        self.mapped_bytes -= bytes;
        self.lower_top();
    }

    /// Lowers the top to one past the highest mapped granule, and gives back the block
    /// map's memory above it when that is most of the map (no block starts above the top:
    /// blocks lie on mapped granules), so that the map follows the arena's current extent
    /// rather than its high-water mark.
    fn lower_top(&mut self) {
        while self.top > 0 && !self.is_mapped(self.top - 1) {
            self.top -= 1;
        }
        let need = (((self.top as u64) << self.shift) >> self.unit) as usize;
        if self.block_at.len() > 2 * need.max(64) {
            self.block_at.truncate(need);
            self.block_at.shrink_to_fit();
        }
    }

    /// Takes idle physical allocations out of the arena (marks them unmapped) and hands
    /// each to `unmap(addr, bytes)`, which unmaps it or moves its memory elsewhere, until
    /// `target` bytes are taken or none is idle. An allocation is idle when all its
    /// granules are (lie wholly inside one free range): a part of one cannot be given
    /// back, as CUDA unmaps and releases whole allocations only. The free ranges lowest
    /// address first, in each the highest allocations first. Returns the bytes taken
    /// (whole allocations, so possibly more than `target`).
    ///
    /// Why lowest first: a request that fits no free range grows the arena at its top,
    /// next to the free ranges highest up, which the layouts of later requests tend to
    /// come back to; idle granules low down lie in holes between longer-lived blocks.
    /// Measured on the replay traces that remap in their warm passes (the host device,
    /// `cumem-bench replay`, one granule per allocation): encoder_infer_varlen 144 → 56
    /// mappings per warm pass, random_seed1 95 → 55, against highest first; the peaks are
    /// the same.
    pub fn unmap_idle(&mut self, target: u64, mut unmap: impl FnMut(u64, u64)) -> u64 {
        let gran = self.granule();
        let mut done = 0;
        if self.mapped_bytes == 0 {
            return 0;
        }
        // The free ranges that may hold idle granules, lowest address first.
        let mut ranges: Vec<(u64, u64)> = self
            .granule_ranges()
            .into_iter()
            .map(|(size, addr)| (addr, size))
            .filter(|&(addr, size)| self.idle_in(addr, size) > 0)
            .collect();
        ranges.sort_unstable_by_key(|r| r.0);
        let mut found: Vec<(usize, usize)> = Vec::new();
        for (at, len) in ranges {
            if done >= target {
                break;
            }
            // The allocations wholly inside this free range's whole granules.
            found.clear();
            self.chunks_inside(at, len, &mut found);
            for &(cs, ce) in found.iter().rev() {
                if done >= target {
                    break;
                }
                let bytes = ((ce - cs) as u64) * gran;
                unmap(self.granule_addr(cs), bytes);
                for k in cs..ce {
                    self.mapped[k / 64] &= !(1 << (k % 64));
                }
                self.starts[cs / 64] &= !(1 << (cs % 64));
                self.mapped_bytes -= bytes;
                done += bytes;
            }
        }
        self.lower_top();
        done
    }

    /// The address of the block in use that holds `addr`, if any (a walk of the list).
    pub fn block_around(&self, addr: u64) -> Option<u64> {
        let mut i = self.tail;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.addr <= addr {
                return (!n.free).then_some(n.addr);
            }
            i = n.prev;
        }
        None
    }

    /// Appends the arena's runs of mapped granules as segments to `out`, with the nodes
    /// that lie in them: blocks in use and free ranges, cut where a granule changes
    /// between releasable (its whole allocation inside the free range: cached) and not
    /// (touched by a block, or in an allocation a block touches: inactive split).
    pub fn snapshot(&self, out: &mut Vec<PoolSegment>) {
        let mut order = Vec::new();
        let mut i = self.tail;
        while i != NIL {
            order.push(i);
            i = self.nodes[i as usize].prev;
        }
        order.reverse();
        let gran = self.granule();
        let ng = (self.size >> self.shift) as usize;
        let mut k = 0;
        let mut g = 0;
        while g < ng {
            if !self.is_mapped(g) {
                g += 1;
                continue;
            }
            let g0 = g;
            while g < ng && self.is_mapped(g) {
                g += 1;
            }
            let (ra, rb) = (self.granule_addr(g0), self.granule_addr(g0) + (g - g0) as u64 * gran);
            let mut seg = PoolSegment { addr: ra, size: rb - ra, blocks: Vec::new() };
            while k < order.len() && {
                let n = &self.nodes[order[k] as usize];
                n.addr + n.size <= ra
            } {
                k += 1;
            }
            let mut j = k;
            let mut last_free = false;
            while j < order.len() && self.nodes[order[j] as usize].addr < rb {
                let n = &self.nodes[order[j] as usize];
                let (a, b) = (n.addr.max(ra), (n.addr + n.size).min(rb));
                if !n.free {
                    seg.blocks.push(PoolBlock { addr: a, size: b - a, state: BlockState::Active });
                    last_free = false;
                } else {
                    let mut at = a;
                    while at < b {
                        let gi = ((at - self.base) >> self.shift) as usize;
                        let (gs, ge) = (self.granule_addr(gi), self.granule_addr(gi) + gran);
                        // cached: the granule's whole allocation lies in the free range
                        // (releasable); otherwise an inactive split, as the statistics say
                        let idle = gs >= n.addr && ge <= n.addr + n.size && {
                            let (cs, ce) = self.chunk_at(gi);
                            self.granule_addr(cs) >= n.addr && self.granule_addr(ce) <= n.addr + n.size
                        };
                        let state = if idle { BlockState::Cached } else { BlockState::InactiveSplit };
                        let end = ge.min(b);
                        match seg.blocks.last_mut() {
                            Some(l) if last_free && l.state == state && l.addr + l.size == at => {
                                l.size += end - at
                            }
                            _ => seg.blocks.push(PoolBlock { addr: at, size: end - at, state }),
                        }
                        last_free = true;
                        at = end;
                    }
                }
                j += 1;
            }
            // The last node may reach into the next run.
            k = j.saturating_sub(1).max(k);
            out.push(seg);
        }
    }
}

#[cfg(test)]
impl Arena {
    /// Size of the block at node `i`.
    pub fn block_size(&self, i: u32) -> u64 {
        self.nodes[i as usize].size
    }

    /// The blocks in use, as (address, size), in address order (a walk of the list).
    pub fn blocks(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        let mut i = self.tail;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if !n.free {
                v.push((n.addr, n.size));
            }
            i = n.prev;
        }
        v.reverse();
        v
    }

    /// Checks the nodes (tiling the range, linked both ways, no two free neighbours), the
    /// index (exactly the free ranges), the blocks against `blocks` (the blocks in use,
    /// address → size), the bitmap (every block's granules mapped) and the
    /// byte counters. Returns the free bytes.
    pub fn check(&self, blocks: &std::collections::BTreeMap<u64, u64>) -> u64 {
        let mut head = self.tail;
        while self.nodes[head as usize].prev != NIL {
            head = self.nodes[head as usize].prev;
        }
        let (mut at, mut i, mut prev, mut prev_free) = (self.base, head, NIL, false);
        let (mut free, mut nfree, mut idle, mut live) = (0, 0, 0, 0);
        let mut seen = std::collections::BTreeMap::new();
        while i != NIL {
            let n = &self.nodes[i as usize];
            live += 1;
            assert!(!n.dead && n.size > 0);
            assert_eq!((n.addr, n.prev), (at, prev), "node {i}");
            if n.free {
                assert!(!prev_free, "two free neighbours at {at:#x}");
                assert!(self.free.contains(&self.nodes, i), "free range {at:#x} not indexed");
                free += n.size;
                nfree += 1;
                idle += self.idle_in(n.addr, n.size);
            } else {
                seen.insert(n.addr, n.size);
                assert_eq!(self.block_node(n.addr), i, "block {at:#x} not in the block map");
                let (g0, g1) = self.touched(n.addr, n.size);
                assert!((g0..g1).all(|g| self.is_mapped(g)), "block {at:#x} on an unmapped granule");
            }
            prev_free = n.free;
            at += n.size;
            prev = i;
            i = n.next;
        }
        assert_eq!(prev, self.tail);
        assert_eq!(at, self.base + self.size, "blocks and free ranges do not tile the arena");
        let mut dead = 0;
        let mut d = self.dead;
        while d != NIL {
            assert!(self.nodes[d as usize].dead);
            dead += 1;
            d = self.nodes[d as usize].next;
        }
        assert_eq!(live + dead, self.nodes.len());
        assert_eq!(self.free.totals(&self.nodes), (nfree, free));
        let mine: std::collections::BTreeMap<u64, u64> =
            blocks.range(self.base..self.base + self.size).map(|(&a, &s)| (a, s)).collect();
        assert_eq!(seen, mine, "the blocks in the arena are the pool's");
        let n = (self.size >> self.shift) as usize;
        let mapped = (0..n).filter(|&g| self.is_mapped(g)).count() as u64;
        assert_eq!((mapped << self.shift, idle), (self.mapped_bytes, self.idle_bytes()));
        assert!((self.top..n).all(|g| !self.is_mapped(g)));
        // Every run of mapped granules starts an allocation; starts lie on mapped granules.
        let start = |g: usize| self.starts[g / 64] >> (g % 64) & 1 != 0;
        for g in 0..n {
            assert!(!start(g) || self.is_mapped(g), "allocation start {g} not mapped");
            assert!(
                !self.is_mapped(g) || g > 0 && self.is_mapped(g - 1) || start(g),
                "granule {g} in no allocation"
            );
        }
        assert!(self.top == 0 || self.is_mapped(self.top - 1));
        free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const G: u64 = 2 * MIB;

    /// Places and carves a block of `size`, mapping what it touches; returns its node.
    fn alloc(a: &mut Arena, size: u64) -> (u32, u64) {
        let (i, addr, _) = a.place(size).unwrap();
        let b = a.carve(i, addr, size);
        for (at, bytes) in a.unmapped_runs(addr, size) {
            a.set_mapped(at, bytes);
        }
        (b, addr)
    }

    /// The placement written out plainly: every fit gathered and sorted by (size,
    /// address); the best fit's start if its granules are mapped; else among the first
    /// [`CANDIDATES`] fits, while they are at most [`TIGHT`] × the size, the first with
    /// a mapped place (start, end, inner idle granules); else the smallest mapped piece
    /// by (length, address), the pieces found a granule at a time; else among
    /// the first [`CANDIDATES`] fits (start, end, inner idle granules) the first place
    /// needing the fewest granules mapped.
    fn place_reference(a: &Arena, size: u64) -> Option<(u32, u64, usize)> {
        let mut fits = Vec::new();
        a.free.for_each_fit(&a.nodes, size, |i| fits.push(i));
        fits.sort_by_key(|&i| (a.nodes[i as usize].size, a.nodes[i as usize].addr));
        let &first = fits.first()?;
        let start = a.nodes[first as usize].addr;
        if a.unmapped_in(start, size) == 0 {
            return Some((first, start, 0));
        }
        for &i in fits.iter().take(CANDIDATES) {
            let Node { addr: at, size: have, .. } = a.nodes[i as usize];
            if have > TIGHT * size {
                break;
            }
            if a.unmapped_in(at, size) == 0 {
                return Some((i, at, 0));
            }
            if a.unmapped_in(at + have - size, size) == 0 {
                return Some((i, at + have - size, 0));
            }
            if let Some((addr, 0)) = a.mapped_window(at, have, size) {
                return Some((i, addr, 0));
            }
        }
        let mut piece: Option<(u64, u64, u32)> = None;
        for &i in &fits {
            let Node { addr: at, size: have, .. } = a.nodes[i as usize];
            let (g0, g1) = a.touched(at, have);
            let mut g = g0;
            while g < g1 {
                if !a.is_mapped(g) {
                    g += 1;
                    continue;
                }
                let s = g;
                while g < g1 && a.is_mapped(g) {
                    g += 1;
                }
                let (pa, pb) = (a.granule_addr(s).max(at), a.granule_addr(g).min(at + have));
                if pb - pa >= size && piece.is_none_or(|p| (pb - pa, pa) < (p.0, p.1)) {
                    piece = Some((pb - pa, pa, i));
                }
            }
        }
        if let Some((_, addr, i)) = piece {
            return Some((i, addr, 0));
        }
        let mut best: Option<(u32, u64, usize)> = None;
        for &i in fits.iter().take(CANDIDATES) {
            let Node { addr: at, size: have, .. } = a.nodes[i as usize];
            for addr in [at, at + have - size] {
                let n = a.unmapped_in(addr, size);
                if best.is_none_or(|b| n < b.2) {
                    best = Some((i, addr, n));
                }
            }
            if let Some((addr, n)) = a.mapped_window(at, have, size)
                && best.is_none_or(|b| n < b.2)
            {
                best = Some((i, addr, n));
            }
        }
        best
    }

    #[test]
    fn placement_matches_the_gathered_and_sorted_search() {
        let mut a = Arena::new(1 << 40, 1 << 32, G, false);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let (mut live, mut slow): (Vec<(u32, u64)>, usize) = (Vec::new(), 0);
        for step in 0..20_000 {
            let r = next();
            if live.len() < 40 && r % 3 != 0 || live.is_empty() {
                // Sizes from 512 B to 16 MiB, log-uniform, multiples of 512.
                let size =
                    ((1u64 << (9 + r % 16)) + (next() % (1 << 20))).next_multiple_of(512).min(16 * MIB);
                let got = a.place(size);
                assert_eq!(got, place_reference(&a, size), "step {step}, size {size}");
                let (i, addr, n) = got.unwrap();
                slow += (n > 0 || addr != a.nodes[i as usize].addr) as usize;
                let b = a.carve(i, addr, size);
                for (at, bytes) in a.unmapped_runs(addr, size) {
                    a.set_mapped(at, bytes);
                }
                live.push((b, size));
            } else {
                let (b, _) = live.swap_remove((r as usize / 3) % live.len());
                a.give_back(b);
            }
            // Now and then idle granules go (as when a mapping elsewhere takes them), so
            // free ranges with unmapped granules inside send requests down the slow path.
            if next() % 8 == 0 {
                a.unmap_idle(G * (1 + next() % 4), |_, _| {});
            }
        }
        a.check(&live.iter().map(|&(b, size)| (a.nodes[b as usize].addr, size)).collect());
        assert!(slow > 100, "the slow path ran {slow} times");
    }

    #[test]
    fn allocations_are_given_up_only_whole() {
        let mut a = Arena::new(1 << 40, 1 << 30, G, true);
        // One allocation of 8 granules, one of 1 (as two device mappings would make).
        let (b8, addr8) = {
            let (i, addr, _) = a.place(8 * G).unwrap();
            (a.carve(i, addr, 8 * G), addr)
        };
        a.set_mapped(addr8, 8 * G);
        let (b1, addr1) = {
            let (i, addr, _) = a.place(G).unwrap();
            (a.carve(i, addr, G), addr)
        };
        a.set_mapped(addr1, G);
        assert_eq!(addr1, addr8 + 8 * G);
        let (mut taken, no_blocks) = (Vec::new(), std::collections::BTreeMap::new());
        // The first 8 granules freed, a block of 2 granules at their start: 6 granules
        // are idle, but their allocation is in use, so nothing can be given up.
        a.give_back(b8);
        let (i, addr, n) = a.place(2 * G).unwrap();
        assert_eq!((addr, n), (addr8, 0));
        let b2 = a.carve(i, addr, 2 * G);
        assert_eq!(a.idle_bytes(), 6 * G);
        assert_eq!(a.unmap_idle(u64::MAX, |at, bytes| taken.push((at, bytes))), 0);
        assert!(taken.is_empty());
        // The 1-granule allocation goes alone once its block is freed (its neighbour
        // range merges with the 6 idle granules; the 8-granule allocation stays).
        a.give_back(b1);
        assert_eq!(a.unmap_idle(u64::MAX, |at, bytes| taken.push((at, bytes))), G);
        assert_eq!(taken, vec![(addr1, G)]);
        // With no block left, the 8 granules go in one piece.
        a.give_back(b2);
        taken.clear();
        assert_eq!(a.unmap_idle(u64::MAX, |at, bytes| taken.push((at, bytes))), 8 * G);
        assert_eq!(taken, vec![(addr8, 8 * G)]);
        assert_eq!((a.mapped_bytes, a.top), (0, 0));
        a.check(&no_blocks);
    }

    #[test]
    fn the_block_map_follows_the_mapped_extent() {
        // Small blocks up to 64 MiB high, then all freed and unmapped: the map, 4 bytes
        // per 512 B up to the highest block, goes back to nothing.
        let mut a = Arena::new(1 << 40, 1 << 30, G, false);
        let blocks: Vec<u32> = (0..64).map(|_| alloc(&mut a, MIB).0).collect();
        assert!(a.block_at.len() >= (63 * MIB / 512) as usize);
        for b in blocks {
            a.give_back(b);
        }
        assert_eq!(a.unmap_idle(u64::MAX, |_, _| {}), 32 * G);
        assert_eq!(a.top, 0);
        assert!(a.block_at.capacity() <= 64, "block map of {} entries left", a.block_at.capacity());
        // And it grows again with the next block.
        let (b, addr) = alloc(&mut a, MIB);
        assert_eq!(a.block_node(addr), b);
        a.check(&[(addr, MIB)].into_iter().collect());
    }

    #[test]
    fn idle_granules_inside_a_free_range_are_reused_where_its_ends_are_unmapped() {
        let mut a = Arena::new(1 << 40, 1 << 30, G, true);
        let (p, _) = alloc(&mut a, G); // granule 0
        let (q1, _) = alloc(&mut a, G); // 1
        let (q2, q2_addr) = alloc(&mut a, 8 * G); // 2..=9
        let (r, _) = alloc(&mut a, G); // 10
        let (_s, _) = alloc(&mut a, G); // 11
        assert_eq!(a.mapped_bytes, 12 * G);
        // Granules 1 and 10 go idle and are unmapped (the only idle ones each time).
        a.give_back(q1);
        assert_eq!(a.unmap_idle(G, |_, _| {}), G);
        a.give_back(r);
        assert_eq!(a.unmap_idle(G, |_, _| {}), G);
        // Now [2G, 11G) is one free range: granules 2..=9 mapped, 1's half and 10 not.
        a.give_back(q2);
        assert_eq!((a.mapped_bytes, a.idle_bytes()), (10 * G, 8 * G));
        // Its start (granule 1) and its end (granule 10) would each map one granule; the
        // middle needs none.
        let (_, addr, n) = a.place(8 * G).unwrap();
        assert_eq!((addr, n), (q2_addr, 0));
        let (_, addr, n) = a.place(7 * G).unwrap();
        assert_eq!(n, 0);
        assert!(addr >= q2_addr && addr + 7 * G <= q2_addr + 8 * G);
        let _ = p;
    }

    #[test]
    fn a_block_with_no_tight_fit_takes_the_shortest_mapped_piece() {
        // Granules: p0 | x (5) | p1 | y (6) | p2 | z (4) | unmapped tail.
        let mut a = Arena::new(1 << 40, 1 << 30, G, true);
        let (_p0, _) = alloc(&mut a, G);
        let (x, x_addr) = alloc(&mut a, 5 * G);
        let (_p1, _) = alloc(&mut a, G);
        let (y, y_addr) = alloc(&mut a, 6 * G);
        let (_p2, _) = alloc(&mut a, G);
        let (z, z_addr) = alloc(&mut a, 4 * G);
        assert_eq!((a.mapped_bytes, z_addr + 4 * G - a.base), (18 * G, 18 * G));
        // x's granules go (moved elsewhere, say); y's stay mapped and idle; z's range
        // merges with the tail, whose start keeps 4 mapped granules.
        a.give_back(x);
        assert_eq!(a.unmap_idle(5 * G, |_, _| {}), 5 * G);
        a.give_back(y);
        a.give_back(z);
        // 5 MiB: the best fit is x's range (unmapped), the next fit y's range (mapped, more
        // than twice the block): the block takes the tail's 8 MiB mapped piece, not y's
        // 12 MiB, and needs no mapping.
        let (i, addr, n) = a.place(5 * MIB).unwrap();
        assert_eq!((addr, n), (z_addr, 0));
        assert_eq!(a.nodes[i as usize].addr, z_addr);
        // A block as long as y's range still takes it whole (its best fit, mapped).
        let (_, addr, n) = a.place(6 * G).unwrap();
        assert_eq!((addr, n), (y_addr, 0));
        // With x's last three granules mapped again, x's range is a tight fit (10 MiB,
        // at most twice 5 MiB) with a mapped place at its end: taken before any piece.
        a.set_mapped(x_addr + 2 * G, 3 * G);
        let (_, addr, n) = a.place(5 * MIB).unwrap();
        assert_eq!((addr, n), (x_addr + 5 * G - 5 * MIB, 0));
    }
}

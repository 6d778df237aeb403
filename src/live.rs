//! The table of live allocations of one shard: device address → (requested bytes, block
//! size, origin).
//!
//! Why not `HashMap`: a profile of the cache-hit alloc+free pair showed `HashMap::insert`
//! and `remove` at 144 of its ~420 instructions (a lookup before each insert, control
//! bytes, dropping the `Option` that `insert` returns). Keys here are non-zero,
//! 512-byte-aligned addresses, and the pool never hands out a live address twice, so an
//! open-addressing table with linear probing and backward-shift deletion (no tombstones)
//! does the same job in a fraction of the instructions. Key 0 marks an empty slot (0 is
//! never allocated: a request of 0 bytes gives the null address without touching the
//! table).

use crate::tracking::Origin;

/// What the engine keeps of a live allocation.
#[derive(Debug)]
pub struct LiveBlock {
    /// Bytes the caller asked for.
    pub requested: u64,
    /// Size of the block handed out (bytes).
    pub size: u64,
    /// Allocation number within the shard (1, 2, …): leak checks list the live blocks
    /// numbered after a mark.
    pub seq: u64,
    /// Where it was made (with `CUMEM_DEBUG` ≥ 1).
    pub origin: Option<Box<Origin>>,
}

struct Slot {
    key: u64,
    live: LiveBlock,
}

const EMPTY: Slot = Slot { key: 0, live: LiveBlock { requested: 0, size: 0, seq: 0, origin: None } };

/// The home slot of address `key` in a table of `2^(64 − shift)` slots. Addresses are
/// 512-aligned: drop the low bits, spread the rest (Fibonacci hashing).
#[inline(always)]
fn home_slot(key: u64, shift: u32) -> usize {
    ((key >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// Backward-shift deletion (both tables): after slot `hole` was emptied, moves later
/// entries of its probe run into the hole when their home slot allows it, so no
/// tombstones are needed. `key` reads a slot's key (0: empty).
#[inline(always)]
fn shift_back<S>(slots: &mut [S], mut hole: usize, shift: u32, key: impl Fn(&S) -> u64) {
    let mask = slots.len() - 1;
    let mut j = hole;
    loop {
        j = (j + 1) & mask;
        let k = key(&slots[j]);
        if k == 0 {
            break;
        }
        let home = home_slot(k, shift);
        // Entry j may move to `hole` if its home is not within (hole, j] cyclically.
        let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
        if !stays {
            slots.swap(hole, j);
            hole = j;
        }
    }
}

/// An address-keyed table of [`LiveBlock`] entries.
pub struct LiveTable {
    slots: Box<[Slot]>,
    len: usize,
    /// `64 − log2(slots.len())`: the hash is the top bits of a Fibonacci product.
    shift: u32,
}

impl Default for LiveTable {
    fn default() -> Self {
        LiveTable::with_capacity_log2(6)
    }
}

impl LiveTable {
    fn with_capacity_log2(bits: u32) -> LiveTable {
        LiveTable { slots: (0..1usize << bits).map(|_| EMPTY).collect(), len: 0, shift: 64 - bits }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        home_slot(key, self.shift)
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `key` (non-zero, not present: the pool never hands out a live block twice).
    #[inline]
    pub fn insert(&mut self, key: u64, live: LiveBlock) {
        debug_assert!(key != 0 && self.get(key).is_none(), "address {key:#x} inserted twice");
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow(); // load factor at most 1/2: probes stay short
        }
        let mask = self.mask();
        let mut i = self.home(key);
        while self.slots[i].key != 0 {
            i = (i + 1) & mask;
        }
        // The slot is empty (`EMPTY`, which owns nothing): forgetting it skips a call
        // to drop glue that profiling showed on every insert.
        std::mem::forget(std::mem::replace(&mut self.slots[i], Slot { key, live }));
        self.len += 1;
    }

    /// The entry for `key`, if live.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&LiveBlock> {
        self.find(key).map(|i| &self.slots[i].live)
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if key == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            match self.slots[i].key {
                k if k == key => return Some(i),
                0 => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Removes and returns the entry for `key`, if live.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<LiveBlock> {
        let hole = self.find(key)?;
        let out = std::mem::replace(&mut self.slots[hole], EMPTY).live;
        self.len -= 1;
        shift_back(&mut self.slots, hole, self.shift, |s| s.key);
        Some(out)
    }

    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, LiveTable::with_capacity_log2(bits));
        for s in old.slots.into_vec() {
            if s.key != 0 {
                self.insert(s.key, s.live);
            }
        }
    }

    /// Removes every entry, yielding `(address, entry)`.
    pub fn drain(&mut self) -> impl Iterator<Item = (u64, LiveBlock)> + '_ {
        self.len = 0;
        self.slots.iter_mut().filter(|s| s.key != 0).map(|s| {
            let s = std::mem::replace(s, EMPTY);
            (s.key, s.live)
        })
    }

    /// Every live entry as `(address, entry)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &LiveBlock)> {
        self.slots.iter().filter(|s| s.key != 0).map(|s| (s.key, &s.live))
    }
}

/// The live table of a thread cache: address → (requested bytes, block size) only, for
/// blocks below 4 GiB (a thread cache holds blocks of at most 1 MiB; it records no origin,
/// since thread caches are off while tracking is on, and no number: a block gets its
/// number when it moves into a shard's table). An [`AddrIndex`] whose two values are the
/// requested bytes and the block size.
#[derive(Default)]
pub struct LiveSizes(AddrIndex);

impl LiveSizes {
    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `key` (non-zero, not present) for a block of `size` bytes handed out for
    /// `requested` bytes (both below 4 GiB).
    #[inline(always)]
    pub fn insert(&mut self, key: u64, requested: u64, size: u64) {
        debug_assert!(requested <= size && size <= u32::MAX as u64);
        self.0.insert(key, requested as u32, size as u32);
    }

    /// `(requested, size)` of `key`, if live.
    pub fn get(&self, key: u64) -> Option<(u64, u64)> {
        self.0.get(key).map(|(r, s)| (r as u64, s as u64))
    }

    /// Removes `key` and returns its `(requested, size)`, if live (None for 0 and for
    /// absent keys, changing nothing).
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<(u64, u64)> {
        self.0.remove(key).map(|(r, s)| (r as u64, s as u64))
    }

    /// Removes every entry, yielding `(address, requested, size)`.
    pub fn drain(&mut self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.0.drain().map(|(k, r, s)| (k, r as u64, s as u64))
    }
}

#[derive(Clone, Copy, Default)]
#[repr(align(16))]
struct PairSlot {
    key: u64,
    a: u32,
    b: u32,
}

/// Address → a pair of 32-bit values: the thread caches' live blocks ([`LiveSizes`]:
/// requested bytes and size) and the expandable pool's blocks (arena and node). The open
/// addressing of [`LiveTable`] (linear probing, backward-shift deletion, key 0 empty,
/// load factor at most 1/2) with sixteen-byte slots, so that an insert or a remove
/// without collision touches one slot of one cache line, and the common remove (the next
/// slot empty) ends without entering the backward-shift loop; a fraction of a
/// `HashMap`'s instructions per insert and remove (see the module's notes).
pub struct AddrIndex {
    slots: Box<[PairSlot]>,
    len: usize,
    /// Grow when `len` reaches this (half the slots).
    grow_at: usize,
    /// `64 − log2(slots.len())`: the hash is the top bits of a Fibonacci product.
    shift: u32,
}

impl Default for AddrIndex {
    fn default() -> Self {
        AddrIndex::with_capacity_log2(6)
    }
}

impl AddrIndex {
    fn with_capacity_log2(bits: u32) -> AddrIndex {
        AddrIndex {
            slots: vec![PairSlot::default(); 1 << bits].into_boxed_slice(),
            len: 0,
            grow_at: 1 << (bits - 1),
            shift: 64 - bits,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `key` (non-zero, not present) with the values `(a, b)`.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, a: u32, b: u32) {
        debug_assert!(key != 0 && self.get(key).is_none(), "address {key:#x} inserted twice");
        if self.len >= self.grow_at {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = home_slot(key, self.shift);
        // SAFETY: `i` is masked to the table's size (a power of two), here and below.
        while unsafe { self.slots.get_unchecked(i) }.key != 0 {
            i = (i + 1) & mask;
        }
        *unsafe { self.slots.get_unchecked_mut(i) } = PairSlot { key, a, b };
        self.len += 1;
    }

    /// The slot of `key` (non-zero), if present.
    #[inline(always)]
    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = home_slot(key, self.shift);
        loop {
            // SAFETY: masked, as in `insert`.
            match unsafe { self.slots.get_unchecked(i) }.key {
                k if k == key => return Some(i),
                0 => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The values of `key`, if present (None for 0).
    #[inline]
    pub fn get(&self, key: u64) -> Option<(u32, u32)> {
        // Key 0 would match an empty slot.
        if key == 0 {
            return None;
        }
        let s = &self.slots[self.find(key)?];
        Some((s.a, s.b))
    }

    /// Removes `key` and returns its values, if present (None for 0 and absent keys,
    /// changing nothing).
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<(u32, u32)> {
        // Key 0 would match an empty slot: refused here (the engine never passes it).
        if key == 0 {
            return None;
        }
        let hole = self.find(key)?;
        let mask = self.slots.len() - 1;
        // SAFETY: masked, as in `insert`.
        let s = unsafe { self.slots.get_unchecked_mut(hole) };
        let out = (s.a, s.b);
        s.key = 0;
        self.len -= 1;
        if unsafe { self.slots.get_unchecked((hole + 1) & mask) }.key != 0 {
            self.shift_back(hole);
        }
        Some(out)
    }

    /// Backward-shift deletion after emptying `hole`, out of line: the common remove
    /// finds the next slot empty and needs none.
    #[cold]
    #[inline(never)]
    fn shift_back(&mut self, hole: usize) {
        shift_back(&mut self.slots, hole, self.shift, |s| s.key);
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, AddrIndex::with_capacity_log2(bits));
        for s in old.slots.iter().filter(|s| s.key != 0) {
            self.insert(s.key, s.a, s.b);
        }
    }

    /// The entries as `(key, a, b)`, in no set order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32, u32)> + '_ {
        self.slots.iter().filter(|s| s.key != 0).map(|s| (s.key, s.a, s.b))
    }

    /// Removes every entry, yielding `(key, a, b)`.
    pub fn drain(&mut self) -> impl Iterator<Item = (u64, u32, u32)> + '_ {
        self.len = 0;
        self.slots.iter_mut().filter(|s| s.key != 0).map(|s| {
            let s = std::mem::take(s);
            (s.key, s.a, s.b)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn live(n: u64) -> LiveBlock {
        LiveBlock { requested: n, size: n + 1, seq: n, origin: None }
    }

    proptest! {
        /// The table behaves as a HashMap under random inserts and removes, including
        /// removes of absent keys and keys that collide in their home slot.
        #[test]
        fn matches_hashmap(ops in proptest::collection::vec((any::<bool>(), 1u64..300), 1..2000)) {
            let mut t = LiveTable::default();
            let mut m: HashMap<u64, u64> = HashMap::new();
            for (ins, k) in ops {
                let key = k << 9; // aligned, like device addresses
                if ins && !m.contains_key(&key) {
                    t.insert(key, live(k));
                    m.insert(key, k);
                } else {
                    prop_assert_eq!(t.remove(key).map(|l| l.requested), m.remove(&key));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&key, &v) in &m {
                prop_assert_eq!(t.get(key).map(|l| l.size), Some(v + 1));
            }
            let mut drained: Vec<u64> = t.drain().map(|(k, _)| k).collect();
            drained.sort();
            let mut keys: Vec<u64> = m.keys().copied().collect();
            keys.sort();
            prop_assert_eq!(drained, keys);
        }
    }

    proptest! {
        /// [`LiveSizes`] behaves as a HashMap too, with clustered keys (homes collide).
        #[test]
        fn sizes_match_hashmap(ops in proptest::collection::vec((any::<bool>(), 1u64..300), 1..2000)) {
            let mut t = LiveSizes::default();
            let mut m: HashMap<u64, u64> = HashMap::new();
            for (ins, k) in ops {
                let key = k << 9;
                if ins && !m.contains_key(&key) {
                    t.insert(key, k, k + 1);
                    m.insert(key, k);
                } else {
                    prop_assert_eq!(t.remove(key), m.remove(&key).map(|v| (v, v + 1)));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&key, &v) in &m {
                prop_assert_eq!(t.get(key), Some((v, v + 1)));
            }
            let mut drained: Vec<(u64, u64)> = t.drain().map(|(k, r, _)| (k, r)).collect();
            drained.sort();
            let mut all: Vec<(u64, u64)> = m.into_iter().collect();
            all.sort();
            prop_assert_eq!(drained, all);
            prop_assert!(t.is_empty() && t.get(512).is_none());
        }
    }

    proptest! {
        /// [`AddrIndex`] behaves as a HashMap of pairs, with clustered keys.
        #[test]
        fn addr_index_matches_hashmap(ops in proptest::collection::vec((any::<bool>(), 1u64..300), 1..2000)) {
            let mut t = AddrIndex::default();
            let mut m: HashMap<u64, (u32, u32)> = HashMap::new();
            for (ins, k) in ops {
                let key = k << 9;
                let v = (k as u32 * 7, k as u32 % 3);
                if ins && !m.contains_key(&key) {
                    t.insert(key, v.0, v.1);
                    m.insert(key, v);
                } else {
                    prop_assert_eq!(t.remove(key), m.remove(&key));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&key, &v) in &m {
                prop_assert_eq!(t.get(key), Some(v));
            }
            prop_assert_eq!(t.iter().count(), m.len());
            prop_assert!(t.get(0).is_none() && t.remove(0).is_none());
        }
    }

    #[test]
    fn sizes_absent_and_zero() {
        let mut t = LiveSizes::default();
        assert!(t.remove(0).is_none() && t.get(0).is_none() && t.remove(512).is_none());
        t.insert(512, 1, 512);
        assert!(t.remove(0).is_none() && t.remove(1024).is_none());
        assert_eq!(t.remove(512), Some((1, 512)));
        assert!(t.is_empty());
    }

    #[test]
    fn absent_and_zero() {
        let mut t = LiveTable::default();
        assert!(t.remove(0).is_none() && t.get(0).is_none() && t.remove(512).is_none());
        t.insert(512, live(1));
        assert!(t.remove(1024).is_none());
        assert_eq!(t.remove(512).unwrap().requested, 1);
        assert!(t.is_empty());
    }
}

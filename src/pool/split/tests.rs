//! Unit tests of the split pool: random operations against its structure check, and
//! the placement rules one by one.

use super::*;
use crate::device::HostDevice;
use crate::upstream::Upstream;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;

/// An upstream on an 8 GiB host device, with an optional limit (the expandable pool's
/// tests use it too).
pub(in crate::pool) fn upstream(limit: Option<u64>) -> Upstream {
    Upstream::new(Box::new(HostDevice::new(Some(8 << 30))), limit)
}

/// The upstream as shard 0 sees it.
fn view(up: &Upstream) -> ShardUpstream<'_> {
    up.shard(0)
}

/// xorshift64*: a small deterministic generator, so failures reproduce.
pub(in crate::pool) struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes a tag at both ends of a block, so that overlapping blocks are caught.
fn tag(ptr: u64, bytes: u64, v: u8) {
    // SAFETY: the block is live host memory of at least `bytes` bytes.
    unsafe {
        *(ptr as *mut u8) = v;
        *((ptr + bytes - 1) as *mut u8) = v;
    }
}

fn tagged(ptr: u64, bytes: u64) -> (u8, u8) {
    // SAFETY: as in `tag`.
    unsafe { (*(ptr as *const u8), *((ptr + bytes - 1) as *const u8)) }
}

#[test]
fn random_operations_keep_the_structure() {
    for seed in 1..=4u64 {
        let up = upstream(None);
        let mut pool = SplitPool::default();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Live blocks: address → (requested, block size, tag).
        let mut live: BTreeMap<u64, (u64, u64, u8)> = BTreeMap::new();
        // A few sizes that recur, as in a training loop; the rest log-uniform.
        let recurring = [3000, 4096, 700 * 1024, 3 * MIB + 5, 12 * MIB, 40 * MIB];
        for step in 0..6000u64 {
            match rng.below(100) {
                0..=52 if live.len() < 150 => {
                    let bytes = if rng.below(2) == 0 {
                        recurring[rng.below(recurring.len() as u64) as usize]
                    } else {
                        1 + (1u64 << rng.below(27)) + rng.below(1 << 16)
                    };
                    let Ok(b) = pool.alloc(bytes, view(&up)) else {
                        pool.check();
                        continue;
                    };
                    assert!(b.ptr.is_multiple_of(MIN_BLOCK));
                    assert!(b.size >= round_up(bytes, MIN_BLOCK) && b.size.is_multiple_of(MIN_BLOCK));
                    // At most 1 MiB is kept in a block rather than split off.
                    assert!(b.size <= round_up(bytes, MIN_BLOCK) + MIB, "{bytes} bytes got {}", b.size);
                    if let Some((&p, &(_, s, _))) = live.range(..=b.ptr).next_back() {
                        assert!(p + s <= b.ptr, "step {step}: {:#x} overlaps {p:#x}+{s}", b.ptr);
                    }
                    if let Some((&p, _)) = live.range(b.ptr..).next() {
                        assert!(b.ptr + b.size <= p, "step {step}: {:#x}+{} overlaps {p:#x}", b.ptr, b.size);
                    }
                    let t = step as u8;
                    tag(b.ptr, bytes, t);
                    live.insert(b.ptr, (bytes, b.size, t));
                }
                0..=94 if !live.is_empty() => {
                    let k = rng.below(live.len() as u64) as usize;
                    let (&p, &(bytes, size, t)) = live.iter().nth(k).unwrap();
                    assert_eq!(tagged(p, bytes), (t, t), "step {step}: block {p:#x} was overwritten");
                    // An address inside the block belongs to it.
                    let inner = p + rng.below(size);
                    let seg = up.segment_containing(inner).expect("inside a segment").0;
                    assert_eq!(pool.block_base(inner, seg), Some(p));
                    live.remove(&p);
                    pool.free(p, size, view(&up));
                }
                _ => {
                    let target = if rng.below(4) == 0 { u64::MAX } else { rng.below(64 * MIB) };
                    let before = up.reserved();
                    let released = pool.reclaim(target, view(&up));
                    assert_eq!(up.reserved(), before - released);
                }
            }
            pool.check();
            let used: u64 = live.values().map(|v| v.1).sum();
            assert_eq!(up.reserved(), used + pool.cached_bytes(), "step {step}");
            assert!(pool.inactive_split_bytes() <= pool.cached_bytes());
        }
        for (p, (bytes, size, t)) in std::mem::take(&mut live) {
            assert_eq!(tagged(p, bytes), (t, t));
            pool.free(p, size, view(&up));
        }
        pool.reclaim(u64::MAX, view(&up));
        pool.check();
        assert_eq!(up.reserved(), 0, "seed {seed}: whole free segments were not all released");
    }
}

#[test]
fn neighbours_merge_and_only_whole_segments_go_back() {
    let up = upstream(None);
    let mut pool = SplitPool::default();
    let k = 256 * 1024;
    let [a, b, c] = [0; 3].map(|_| pool.alloc(k, view(&up)).unwrap().ptr);
    assert_eq!((b, c), (a + k, a + 2 * k), "carved in order from one 2 MiB segment");
    assert_eq!(up.reserved(), SMALL_SEGMENT);
    pool.free(a, k, view(&up));
    pool.free(c, k, view(&up));
    pool.check();
    // b keeps the segment: nothing goes back, and its free parts are inactive split.
    assert_eq!(pool.reclaim(u64::MAX, view(&up)), 0);
    pool.check();
    assert_eq!(pool.inactive_split_bytes(), SMALL_SEGMENT - k);
    assert_eq!(pool.indexes[SMALL].iter().count(), 2, "a alone, c merged with the tail");
    // Freeing b merges all three with the tail: one free block, the whole segment,
    // which counts as cached but not as split, merged or not.
    pool.free(b, k, view(&up));
    assert_eq!(pool.inactive_split_bytes(), 0);
    pool.check();
    let m = pool.alloc(SMALL_SIZE, view(&up)).unwrap();
    assert_eq!((m.ptr, m.hit), (a, true), "served from the merged block");
    pool.free(a, SMALL_SIZE, view(&up));
    assert_eq!(pool.reclaim(1, view(&up)), SMALL_SEGMENT);
    pool.check();
    assert_eq!((up.reserved(), pool.cached_bytes()), (0, 0));
}

#[test]
fn quick_hits_return_the_freed_block_and_misses_merge_first() {
    let up = upstream(None);
    let mut pool = SplitPool::default();
    let a = pool.alloc(5000, view(&up)).unwrap();
    assert_eq!((a.size, a.hit), (5120, false));
    pool.free(a.ptr, a.size, view(&up));
    let b = pool.alloc(5100, view(&up)).unwrap();
    assert_eq!((b.ptr, b.size, b.hit), (a.ptr, 5120, true));
    // A miss merges the quick-listed blocks before it searches: the freed 5 KiB
    // and the rest of the segment form one block again.
    pool.free(b.ptr, b.size, view(&up));
    let c = pool.alloc(6000, view(&up)).unwrap();
    assert_eq!((c.ptr, c.hit), (a.ptr, true));
    pool.check();
    assert_eq!(pool.indexes[SMALL].iter().count(), 1);
    // Give the segment back: neither the pool nor the upstream frees on drop, and a
    // leak here is what AddressSanitizer reports.
    pool.free(c.ptr, c.size, view(&up));
    pool.reclaim(u64::MAX, view(&up));
    assert_eq!(up.reserved(), 0);
}

#[test]
fn block_base_finds_the_block_around_an_address() {
    let up = upstream(None);
    let mut pool = SplitPool::default();
    let a = pool.alloc(3 * MIB, view(&up)).unwrap();
    let b = pool.alloc(4 * MIB, view(&up)).unwrap();
    assert_eq!(b.ptr, a.ptr + 3 * MIB);
    let seg = up.segment_containing(a.ptr).unwrap().0;
    assert_eq!(seg, a.ptr);
    for (addr, base) in
        [(a.ptr, a.ptr), (a.ptr + 3 * MIB - 1, a.ptr), (b.ptr + 1, b.ptr), (b.ptr + 4 * MIB, b.ptr + 4 * MIB)]
    {
        assert_eq!(pool.block_base(addr, seg), Some(base), "{:#x}", addr - seg);
    }
    assert_eq!(pool.block_base(a.ptr, seg + 64 * MIB), None, "a segment of another pool");
    for blk in [a, b] {
        pool.free(blk.ptr, blk.size, view(&up));
    }
    pool.reclaim(u64::MAX, view(&up));
    assert_eq!(up.reserved(), 0, "the segment leaked");
}

#[test]
fn a_new_big_size_does_not_pin_a_much_larger_free_segment() {
    let up = upstream(None);
    let mut pool = SplitPool::default();
    let a = pool.alloc(100 * MIB, view(&up)).unwrap();
    pool.free(a.ptr, a.size, view(&up));
    // 12 MiB would fit in the free 100 MiB segment, but a new size does not split
    // it: growing by 12 MiB would lift the peak, so the free segment goes back.
    let b = pool.alloc(12 * MIB, view(&up)).unwrap();
    assert!(!b.hit);
    assert_eq!(up.reserved(), 12 * MIB);
    assert_eq!(up.peak_reserved(), 100 * MIB);
    pool.free(b.ptr, b.size, view(&up));
    pool.reclaim(u64::MAX, view(&up));
    pool.check();
}

#[test]
fn a_recurring_size_splits_a_segment_once_the_peak_holds() {
    let up = upstream(None);
    let mut pool = SplitPool::default();
    let b = pool.alloc(12 * MIB, view(&up)).unwrap(); // 12 MiB is now recurring
    let a = pool.alloc(100 * MIB, view(&up)).unwrap();
    pool.free(a.ptr, a.size, view(&up));
    // Serve more than the high-water mark from the cache: a steady state.
    for _ in 0..2 {
        let x = pool.alloc(100 * MIB, view(&up)).unwrap();
        assert_eq!((x.ptr, x.hit), (a.ptr, true));
        pool.free(x.ptr, x.size, view(&up));
    }
    pool.reclaim(0, view(&up)); // merges the quick lists, releases nothing
    let c = pool.alloc(12 * MIB, view(&up)).unwrap();
    assert_eq!((c.ptr, c.size, c.hit), (a.ptr, 12 * MIB, true), "split off the free segment");
    assert_eq!(up.reserved(), 112 * MIB);
    pool.check();
    for blk in [b, c] {
        pool.free(blk.ptr, blk.size, view(&up));
    }
    assert_eq!(pool.reclaim(u64::MAX, view(&up)), 112 * MIB);
}

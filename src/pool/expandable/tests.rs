//! Unit tests of the expandable pool: granule accounting, lazy unmapping, reclaim, the
//! limit, and a random workload checked against the structure after every step.

use super::*;
use crate::pool::split::tests::{Rng, upstream};
use crate::upstream::Upstream;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;
/// The host device's granule.
const G: u64 = crate::device::HOST_VM_GRANULE;

impl ExpandablePool {
    /// The size of the block at `addr` (in use).
    fn size_of(&self, addr: u64) -> u64 {
        let a = &self.arenas[self.arena_of(addr)];
        assert!(a.is_block_start(addr), "a block in use at {addr:#x}");
        a.block_size(a.block_node(addr))
    }

    /// The number of blocks in use.
    fn block_count(&self) -> usize {
        self.arenas.iter().map(|a| a.blocks().len()).sum()
    }

    /// Checks every arena against the blocks in use, and the counters.
    fn check(&self) {
        let blocks: BTreeMap<u64, u64> = self.arenas.iter().flat_map(|a| a.blocks()).collect();
        for (&addr, &size) in &blocks {
            assert_eq!(self.size_of(addr), size);
        }
        for a in &self.arenas {
            a.check(&blocks);
        }
        let in_arenas: usize =
            self.arenas.iter().map(|a| blocks.range(a.base..a.base + a.size).count()).sum();
        assert_eq!(in_arenas, blocks.len(), "a block outside the arenas");
        assert_eq!(blocks.values().sum::<u64>(), self.used_bytes);
    }
}

/// A hole and growth past it: a block `a` of `hole` bytes, `keep` (2 MiB) after it, `a`
/// freed, then a block `b` of `grow` bytes (more than `hole`: it goes above `keep`, and
/// the pool may move a's idle granules under it). Returns `(a, keep, b)`; `a` is freed.
fn hole_then_growth(pool: &mut ExpandablePool, up: &Upstream, hole: u64, grow: u64) -> (Block, Block, Block) {
    let a = pool.alloc(hole, up.shard(0)).unwrap();
    let keep = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    pool.free(a.ptr, a.size, up.shard(0));
    let b = pool.alloc(grow, up.shard(0)).unwrap();
    (a, keep, b)
}

/// Frees `blocks`, then gives every idle byte back: the reclaim returns all that was
/// reserved, and nothing is left.
fn free_and_reclaim_all(pool: &mut ExpandablePool, up: &Upstream, blocks: &[Block]) {
    for blk in blocks {
        pool.free(blk.ptr, blk.size, up.shard(0));
    }
    let r = up.reserved();
    assert_eq!(pool.reclaim(u64::MAX, up.shard(0)), r);
    assert_eq!(up.reserved(), 0);
}

#[test]
fn blocks_map_the_granules_they_touch_and_no_more() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let a = pool.alloc(5 * MIB / 2, up.shard(0)).unwrap();
    assert!(!a.hit);
    assert_eq!(a.size, 5 * MIB / 2);
    assert_eq!(up.reserved(), 2 * G, "2.5 MiB touches two 2 MiB granules");
    // The next block starts where `a` ends, in the granule `a` already maps.
    let b = pool.alloc(MIB / 2 + 1, up.shard(0)).unwrap(); // small: the other arena
    let c = pool.alloc(MIB + 512, up.shard(0)).unwrap();
    assert_eq!(c.ptr, a.ptr + 5 * MIB / 2);
    assert!(c.hit, "fits in the mapped rest of the second granule");
    assert_eq!(up.reserved(), 3 * G, "one granule for the small arena");
    pool.check();
    assert_eq!(up.reserved(), pool.used_bytes + pool.cached_bytes());
    for blk in [a, b, c] {
        pool.free(blk.ptr, blk.size, up.shard(0));
    }
    pool.check();
    assert_eq!(pool.cached_bytes(), 3 * G);
}

/// Freed blocks merge at once and every request takes the best fit: a freed block is not
/// handed out again where best fit would not put the request (the quick lists of this pool
/// until 2026-11-27 did: the 2 MiB request below took `b` back, `a` then could not merge
/// with it, and the 8 MiB request mapped new granules after unmapping idle ones).
#[test]
fn a_request_takes_the_best_fit_not_the_block_freed_last() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let h = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    let _k = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    let a = pool.alloc(6 * MIB, up.shard(0)).unwrap();
    let b = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    let _keep = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    assert_eq!((b.ptr - h.ptr, up.reserved()), (10 * MIB, 14 * MIB), "laid out in order");
    pool.free(h.ptr, h.size, up.shard(0));
    pool.free(b.ptr, b.size, up.shard(0));
    // Two exact fits: the lower one is taken, not the one freed last.
    let again = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    assert_eq!(again.ptr, h.ptr);
    // So `a` merges with `b`'s place, and 8 MiB fit there: no device call, no growth.
    pool.free(a.ptr, a.size, up.shard(0));
    let big = pool.alloc(8 * MIB, up.shard(0)).unwrap();
    assert_eq!(big.ptr, a.ptr);
    assert!(big.hit);
    assert_eq!((up.reserved(), up.peak_reserved()), (14 * MIB, 14 * MIB));
    pool.check();
}

#[test]
fn mapped_memory_grows_to_an_eighth_above_the_peak_in_use_then_moves() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let a: Vec<Block> = (0..8).map(|_| pool.alloc(16 * MIB, up.shard(0)).unwrap()).collect();
    assert_eq!((pool.peak_used, up.reserved()), (128 * MIB, 128 * MIB));
    // Holes of 16 MiB; the last one merges with the unmapped rest of the arena.
    for b in a.iter().skip(1).step_by(2) {
        pool.free(b.ptr, b.size, up.shard(0));
    }
    // 24 MiB fits no hole: at the end, mapping 8 MiB more is within 128 + 128/8 MiB.
    let x = pool.alloc(24 * MIB, up.shard(0)).unwrap();
    assert_eq!(x.ptr, a[7].ptr);
    assert_eq!((up.reserved(), up.peak_reserved()), (136 * MIB, 136 * MIB));
    // The next one needs 24 MiB where 8 are left: the highest idle hole (16 MiB) goes.
    let y = pool.alloc(24 * MIB, up.shard(0)).unwrap();
    assert_eq!((up.reserved(), up.peak_reserved()), (144 * MIB, 144 * MIB));
    assert_eq!(pool.cached_bytes(), 2 * 16 * MIB);
    // And from now on mapping moves idle memory: the peak stays at 144 MiB.
    let z = pool.alloc(24 * MIB, up.shard(0)).unwrap();
    assert_eq!((up.reserved(), up.peak_reserved()), (144 * MIB, 144 * MIB));
    assert_eq!(pool.cached_bytes(), 8 * MIB, "24 MiB of the holes unmapped, highest first");
    pool.check();
    for b in a.iter().step_by(2).chain([&x, &y, &z]) {
        pool.free(b.ptr, b.size, up.shard(0));
    }
    pool.reclaim(u64::MAX, up.shard(0));
    assert_eq!(up.reserved(), 0);
}

#[test]
fn freeing_unmaps_nothing_until_memory_is_needed() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let blocks: Vec<Block> = (0..8).map(|_| pool.alloc(4 * MIB, up.shard(0)).unwrap()).collect();
    assert_eq!(up.reserved(), 32 * MIB);
    for b in &blocks {
        pool.free(b.ptr, b.size, up.shard(0));
    }
    // A warm pass over the same sizes: every block from the cache (a hit is a request
    // that called no device: mapping is the only way the pool calls one on a request).
    for _ in 0..3 {
        let again: Vec<Block> = (0..8).map(|_| pool.alloc(4 * MIB, up.shard(0)).unwrap()).collect();
        assert!(again.iter().all(|b| b.hit));
        for b in &again {
            pool.free(b.ptr, b.size, up.shard(0));
        }
    }
    // A different layout of the same bytes also fits in the mapped granules.
    let big = pool.alloc(32 * MIB, up.shard(0)).unwrap();
    assert!(big.hit);
    pool.free(big.ptr, big.size, up.shard(0));
    assert_eq!(up.reserved(), 32 * MIB);
    pool.check();
}

#[test]
fn growth_above_the_peak_moves_idle_granules_first() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let a = pool.alloc(64 * MIB, up.shard(0)).unwrap();
    let keep = pool.alloc(2 * MIB, up.shard(0)).unwrap();
    // Each granule of `a` marked with its number (the host device's memory is the
    // process's; the marks show where the pages go).
    for i in 0..32 {
        // SAFETY: `a` is a block of 64 MiB in use.
        unsafe { *((a.ptr + i * G) as *mut u64) = i + 1 };
    }
    pool.free(a.ptr, a.size, up.shard(0));
    assert_eq!(up.reserved(), 66 * MIB);
    let before = up.stats().counts();
    // 100 MiB does not fit in the free 64 MiB hole: it goes above `keep`, and would
    // lift the peak to 166 MiB; the idle 64 MiB go first, moved (not released and
    // created again) under the first 64 MiB of the new block.
    let b = pool.alloc(100 * MIB, up.shard(0)).unwrap();
    assert!(b.ptr > keep.ptr);
    assert_eq!(up.reserved(), 102 * MIB);
    assert_eq!(up.peak_reserved(), 102 * MIB);
    for i in 0..32 {
        // SAFETY: `b` is a block of 100 MiB in use.
        assert_eq!(unsafe { *((b.ptr + i * G) as *const u64) }, i + 1, "granule {i} moved");
    }
    // SAFETY: as above; the rest of `b` was mapped fresh.
    assert_eq!(unsafe { *((b.ptr + 32 * G) as *const u64) }, 0);
    let after = up.stats().counts();
    // A granule moved counts as unmapped and mapped; 18 mapped fresh.
    assert_eq!((after.0 - before.0, after.1 - before.1), (50, 32));
    pool.check();
    // A block goes where granules are mapped rather than into the unmapped hole that
    // fits best: 64 MiB in b's granules is a hit.
    pool.free(b.ptr, b.size, up.shard(0));
    let c = pool.alloc(64 * MIB, up.shard(0)).unwrap();
    assert_eq!((c.ptr, c.hit), (b.ptr, true));
    assert_eq!(up.reserved(), 102 * MIB);
    pool.check();
    free_and_reclaim_all(&mut pool, &up, &[c, keep]);
}

/// A reclaim that leaves nothing releasable forgets the moves (the layout that thrashed is
/// gone), so the pool moves idle memory again; one that leaves idle memory keeps them.
#[test]
fn a_reclaim_of_every_idle_byte_lets_the_pool_move_again() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    // The thrash of `memory_wanted_back_where_it_was_moved_from_stops_the_moves`.
    let (a, keep, b) = hole_then_growth(&mut pool, &up, 64 * MIB, 100 * MIB);
    pool.free(b.ptr, b.size, up.shard(0));
    let d = pool.alloc(100 * MIB, up.shard(0)).unwrap();
    let c = pool.alloc(64 * MIB, up.shard(0)).unwrap();
    assert!(pool.moves_off);
    // A partial reclaim (a's 64 MiB freed and 2 MiB of it given back) leaves idle memory:
    // the moves stay off.
    pool.free(c.ptr, c.size, up.shard(0));
    assert!(pool.reclaim(2 * MIB, up.shard(0)) >= 2 * MIB);
    assert!(pool.cached_bytes() > 0);
    assert!(pool.moves_off, "idle memory left: the layout is still there");
    // Everything idle given back: forgotten.
    let r = pool.reclaim(u64::MAX, up.shard(0));
    assert!(r > 0);
    assert_eq!(up.reserved(), d.size + keep.size);
    assert!(!pool.moves_off && pool.moved_away.is_empty());
    pool.check();
    // And the pool moves again: 64 MiB mapped fresh below `keep` (back to the peak of
    // 166 MiB) and freed, then 200 MiB above d would lift mapped memory far past the
    // peak and the headroom: the idle 64 MiB move under it (with the moves still off,
    // 200 MiB would be mapped fresh, to 366 MiB).
    let p = pool.alloc(64 * MIB, up.shard(0)).unwrap();
    assert_eq!((p.ptr, up.reserved()), (a.ptr, 166 * MIB));
    pool.free(p.ptr, p.size, up.shard(0));
    let q = pool.alloc(200 * MIB, up.shard(0)).unwrap();
    assert!(q.ptr > d.ptr);
    assert_eq!(up.reserved(), 302 * MIB, "the idle 64 MiB moved");
    pool.check();
    free_and_reclaim_all(&mut pool, &up, &[d, q, keep]);
}

#[test]
fn reclaim_unmaps_idle_granules_and_returns_empty_arenas() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let a = pool.alloc(10 * MIB, up.shard(0)).unwrap();
    let b = pool.alloc(MIB + 512, up.shard(0)).unwrap(); // pins the granule after a's five
    assert_eq!(b.ptr, a.ptr + 10 * MIB);
    assert_eq!(up.reserved(), 12 * MIB);
    pool.free(a.ptr, a.size, up.shard(0));
    // Whole granules, highest first: the idle granule just below b.
    assert_eq!(pool.reclaim(1, up.shard(0)), G);
    assert_eq!(up.reserved(), 12 * MIB - G);
    pool.check();
    assert_eq!(pool.reclaim(u64::MAX, up.shard(0)), 8 * MIB);
    assert_eq!(up.reserved(), 2 * MIB);
    assert!(pool.arenas.iter().any(|a| a.large), "b keeps its arena");
    pool.check();
    // The unmapped granules are mapped again when a block needs them.
    let c = pool.alloc(10 * MIB, up.shard(0)).unwrap();
    assert_eq!((c.ptr, c.hit), (a.ptr, false));
    assert_eq!(up.reserved(), 12 * MIB);
    pool.check();
    for blk in [b, c] {
        pool.free(blk.ptr, blk.size, up.shard(0));
    }
    assert_eq!(pool.reclaim(u64::MAX, up.shard(0)), 12 * MIB);
    assert!(pool.arenas.is_empty(), "an empty arena returns its addresses");
    assert!(up.segment_containing(b.ptr).is_none());
    assert_eq!(up.reserved(), 0);
}

#[test]
fn the_limit_is_respected() {
    let up = upstream(Some(40 * MIB));
    let mut pool = ExpandablePool::default();
    // 36 MiB does not fit in a's 30 MiB: it goes above `keep` and needs 36 MiB more
    // mapped, over the limit unless a's idle granules go first.
    let (_, keep, b) = hole_then_growth(&mut pool, &up, 30 * MIB, 36 * MIB);
    assert_eq!(b.ptr, keep.ptr + 2 * MIB);
    assert_eq!(up.reserved(), 38 * MIB);
    pool.check();
    // Beyond the limit with nothing idle: out of memory, and nothing changed.
    let before = (up.reserved(), pool.cached_bytes(), pool.block_count());
    assert!(matches!(pool.alloc(4 * MIB, up.shard(0)), Err(Error::OutOfMemory(_))));
    assert_eq!((up.reserved(), pool.cached_bytes(), pool.block_count()), before);
    pool.check();
    free_and_reclaim_all(&mut pool, &up, &[keep, b]);
}

#[test]
fn block_base_finds_the_block_around_an_address() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let a = pool.alloc(3 * MIB, up.shard(0)).unwrap();
    let b = pool.alloc(5 * MIB, up.shard(0)).unwrap();
    let (seg, s) = up.segment_containing(b.ptr + 1).unwrap();
    assert_eq!(s.shard, 0);
    assert_eq!(pool.block_base(b.ptr + 1, seg), Some(b.ptr));
    assert_eq!(pool.block_base(a.ptr + 3 * MIB - 1, seg), Some(a.ptr));
    assert_eq!(pool.block_base(b.ptr + 5 * MIB, seg), Some(seg), "past every block");
    let other = ExpandablePool::default();
    assert_eq!(other.block_base(b.ptr + 1, seg), None, "an arena of another pool");
}

#[test]
fn random_operations_keep_the_structure() {
    for seed in 1..=4u64 {
        let up = upstream(if seed == 4 { Some(256 * MIB) } else { None });
        let mut pool = ExpandablePool::default();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut live: BTreeMap<u64, (u64, u8)> = BTreeMap::new();
        let recurring = [3000, 4096, 700 * 1024, 3 * MIB + 5, 12 * MIB, 40 * MIB];
        for step in 0..4000u64 {
            match rng.below(100) {
                0..=52 if live.len() < 120 => {
                    let bytes = if rng.below(2) == 0 {
                        recurring[rng.below(recurring.len() as u64) as usize]
                    } else {
                        1 + (1u64 << rng.below(27)) + rng.below(1 << 16)
                    };
                    let Ok(b) = pool.alloc(bytes, up.shard(0)) else {
                        assert_eq!(seed, 4, "only the limited run runs out of memory");
                        pool.check();
                        continue;
                    };
                    assert_eq!(b.size, round_up(bytes, MIN_BLOCK));
                    if let Some((&p, &(s, _))) = live.range(..=b.ptr).next_back() {
                        assert!(p + s <= b.ptr, "step {step}: overlap");
                    }
                    if let Some((&p, _)) = live.range(b.ptr..).next() {
                        assert!(b.ptr + b.size <= p, "step {step}: overlap");
                    }
                    // The whole block is writable (mapped) memory.
                    let t = step as u8;
                    // SAFETY: the block is live host memory of `b.size` bytes.
                    unsafe {
                        *(b.ptr as *mut u8) = t;
                        *((b.ptr + b.size - 1) as *mut u8) = t;
                    }
                    live.insert(b.ptr, (b.size, t));
                }
                0..=94 if !live.is_empty() => {
                    let k = rng.below(live.len() as u64) as usize;
                    let (&p, &(size, t)) = live.iter().nth(k).unwrap();
                    // SAFETY: as above.
                    unsafe {
                        assert_eq!(
                            (*(p as *const u8), *((p + size - 1) as *const u8)),
                            (t, t),
                            "step {step}"
                        );
                    }
                    live.remove(&p);
                    pool.free(p, size, up.shard(0));
                }
                _ => {
                    let target = if rng.below(4) == 0 { u64::MAX } else { rng.below(64 * MIB) };
                    let before = up.reserved();
                    let released = pool.reclaim(target, up.shard(0));
                    assert_eq!(up.reserved(), before - released);
                    assert!(released >= target.min(released), "whole granules");
                }
            }
            pool.check();
            let used: u64 = live.values().map(|v| v.0).sum();
            assert_eq!(up.reserved(), used + pool.cached_bytes(), "step {step}");
            assert!(up.reserved() <= up.limit().unwrap_or(u64::MAX));
            assert!(pool.inactive_split_bytes() <= pool.cached_bytes());
        }
        for (p, (size, _)) in std::mem::take(&mut live) {
            pool.free(p, size, up.shard(0));
        }
        pool.reclaim(u64::MAX, up.shard(0));
        pool.check();
        assert_eq!(up.reserved(), 0, "seed {seed}");
        assert!(pool.arenas.is_empty());
    }
}

#[test]
fn a_layout_that_varies_from_pass_to_pass_settles_into_mapped_memory() {
    // The same random workload (sizes of 2-32 MiB, up to 48 live blocks) pass after pass,
    // as a benchmark replays a trace: each warm pass starts with every block free but
    // other granules mapped, so its blocks land elsewhere than in the last one; within the
    // headroom (1/8 above the peak in use) the granules it comes back to stay mapped.
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    let mut rng = Rng(0x5EED);
    let sizes: Vec<u64> = (0..64).map(|_| 2 * MIB + rng.below(30 * MIB)).collect();
    let seed = rng.next();
    let mut calls = Vec::new();
    let mut peak_live = 0;
    for _pass in 0..24 {
        let mut rng = Rng(seed);
        // Requests that mapped memory (a hit is a request that called no device).
        let mut mapped = 0u64;
        let mut live: Vec<Block> = Vec::new();
        for _ in 0..600 {
            if live.len() < 48 && (live.is_empty() || rng.below(2) == 0) {
                let b = pool.alloc(sizes[rng.below(64) as usize], up.shard(0)).unwrap();
                mapped += !b.hit as u64;
                live.push(b);
                peak_live = peak_live.max(live.iter().map(|b| b.size).sum::<u64>());
            } else {
                let b = live.swap_remove(rng.below(live.len() as u64) as usize);
                pool.free(b.ptr, b.size, up.shard(0));
            }
        }
        for b in live {
            pool.free(b.ptr, b.size, up.shard(0));
        }
        calls.push(mapped);
        pool.check();
    }
    // Warm passes do map at first (else this tests nothing), and stop within 20 passes.
    assert!(calls[1] > 0, "{calls:?}");
    assert_eq!(calls[20..], [0, 0, 0, 0], "requests that mapped memory, per pass: {calls:?}");
    // The memory kept for that stays within the headroom above the live peak (and the
    // granules that blocks only partly fill).
    let ratio = up.peak_reserved() as f64 / peak_live as f64;
    assert!(ratio < 1.2, "peak reserved / peak live = {ratio:.3}, calls per pass {calls:?}");
}

/// A move that fails (here: every unmapping the device is asked for) returns the idle
/// granule's memory, as an unmapping would, and the pool maps fresh memory instead: the
/// counts of reserved bytes and the structure stay right.
#[test]
fn a_failed_move_falls_back_to_a_fresh_mapping() {
    use crate::device::{FaultSpec, FaultyDevice, HostDevice};
    let spec = FaultSpec { alloc: 0.0, free: 1.0, copy: 0.0, stream: 0.0, seed: 1 };
    let dev = FaultyDevice::new(Box::new(HostDevice::new(Some(1 << 30))), spec);
    let up = Upstream::new(Box::new(dev), None);
    let mut pool = ExpandablePool::default();
    let (_, keep, b) = hole_then_growth(&mut pool, &up, 64 * MIB, 100 * MIB);
    // The idle 64 MiB were given up (their moves failed: the memory went back to the
    // device) and b's 100 MiB mapped fresh.
    assert_eq!((up.reserved(), up.peak_reserved()), (102 * MIB, 102 * MIB));
    assert_eq!(pool.cached_bytes(), 0);
    assert!(up.stats().counts().1 >= 32, "the granules given up are counted as freed");
    // SAFETY: `b` is a block of 100 MiB in use; its memory is mapped.
    unsafe { std::ptr::write_bytes(b.ptr as *mut u8, 7, b.size as usize) };
    pool.check();
    for blk in [b, keep] {
        pool.free(blk.ptr, blk.size, up.shard(0));
    }
    pool.check();
    assert_eq!(up.reserved(), pool.cached_bytes());
}

/// Memory moved away and then wanted back where it was (the layout cycles through more
/// places than the headroom holds) stops the moves: from then on the pool grows, as
/// PyTorch's expandable segments do, rather than moving memory at every pass
/// (random_seed1's warm device calls).
#[test]
fn memory_wanted_back_where_it_was_moved_from_stops_the_moves() {
    let up = upstream(None);
    let mut pool = ExpandablePool::default();
    // As in `growth_above_the_peak_moves_idle_granules_first`: a's idle 64 MiB move
    // under b.
    let (a, keep, b) = hole_then_growth(&mut pool, &up, 64 * MIB, 100 * MIB);
    assert_eq!((up.reserved(), up.peak_reserved()), (102 * MIB, 102 * MIB));
    assert!(!pool.moves_off, "a move alone does not stop the moves");
    // b's place taken again (mapped: a hit), then a block that fits a's old place best
    // and finds no mapped place: mapped again where memory was moved from.
    pool.free(b.ptr, b.size, up.shard(0));
    let d = pool.alloc(100 * MIB, up.shard(0)).unwrap();
    assert_eq!((d.ptr, d.hit), (b.ptr, true));
    let c = pool.alloc(64 * MIB, up.shard(0)).unwrap();
    assert_eq!((c.ptr, c.hit), (a.ptr, false));
    assert!(pool.moves_off, "the layout came back where memory was moved from");
    pool.check();
    // Growth above the headroom with idle memory at hand now maps fresh memory and gives
    // nothing up (before, the idle 64 MiB would have moved).
    pool.free(c.ptr, c.size, up.shard(0));
    let freed = up.stats().counts().1;
    let e = pool.alloc(130 * MIB, up.shard(0)).unwrap();
    assert!(!e.hit);
    assert_eq!(up.stats().counts().1, freed, "no memory given up or moved");
    assert_eq!(up.reserved(), 166 * MIB + 130 * MIB, "grown by the whole block");
    pool.check();
    free_and_reclaim_all(&mut pool, &up, &[d, e, keep]);
}

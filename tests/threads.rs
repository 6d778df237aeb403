//! Threads: 8 threads × 100 000 mixed operations on each pool over a sharded engine.
//! Each thread keeps its own live set of up to 32 blocks (mostly small); some blocks are
//! handed to other threads through a shared queue and freed there, so frees cross
//! shards. Every block carries a tag (thread, operation) in its first bytes, checked
//! before it is freed. Halfway, all threads stop at a barrier and the statistics are
//! checked against what the threads hold; at the end everything is freed, the cache
//! released, and nothing may stay reserved.

mod common;

use common::*;
use cumem::{Engine, PoolKind};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

const THREADS: u64 = 8;
const OPS: u64 = 100_000;
const MAX_LIVE: usize = 32;
const SHARDS: usize = 4;

#[derive(Clone, Copy)]
struct Block {
    ptr: u64,
    bytes: u64,
    tag: u64,
}

/// A barrier that does not hang when a participant panics: waiting fails instead once
/// any thread has panicked (each thread holds a [`PanicFlag`]).
struct Gate {
    arrived: AtomicU64,
    failed: AtomicBool,
}

impl Gate {
    fn new() -> Gate {
        Gate { arrived: AtomicU64::new(0), failed: AtomicBool::new(false) }
    }

    /// Arrives and waits until `n` arrivals in total (counting earlier rounds).
    fn wait_for(&self, n: u64) {
        self.arrived.fetch_add(1, SeqCst);
        while self.arrived.load(SeqCst) < n {
            assert!(!self.failed.load(SeqCst), "another thread panicked");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Sets the gate's failure flag when the thread holding it unwinds.
struct PanicFlag<'a>(&'a Gate);

impl Drop for PanicFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, SeqCst);
        }
    }
}

/// Mostly small sizes: 90% up to 4 KiB, 9% up to 256 KiB, 1% up to 4 MiB.
fn size(r: &mut Rng) -> u64 {
    let x = r.next();
    match x % 1000 {
        0..=899 => 1 + (x >> 10) % 4096,
        900..=989 => 1 + (x >> 10) % (256 * KIB),
        _ => 1 + (x >> 10) % (4 * MIB),
    }
}

fn write_tag(e: &Engine, b: &Block) {
    let n = b.bytes.min(8) as usize;
    e.copy_htod(b.ptr, &b.tag.to_le_bytes()[..n]).unwrap();
}

fn check_tag(e: &Engine, b: &Block) {
    let n = b.bytes.min(8) as usize;
    let mut got = [0u8; 8];
    e.copy_dtoh(&mut got[..n], b.ptr).unwrap();
    assert_eq!(got[..n], b.tag.to_le_bytes()[..n], "block {:#x} ({} bytes) was overwritten", b.ptr, b.bytes);
}

fn stress(pool: PoolKind) {
    let e = engine(pool, SHARDS);
    let queue: Mutex<Vec<Block>> = Mutex::new(Vec::new());
    let gate = Gate::new();
    let everyone = THREADS + 1;
    let held_requested = AtomicU64::new(0);
    let held_blocks = AtomicU64::new(0);
    let ops_done = AtomicU64::new(0);

    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let (e, queue, gate) = (&e, &queue, &gate);
            let (held_requested, held_blocks, ops_done) = (&held_requested, &held_blocks, &ops_done);
            sc.spawn(move || {
                let _flag = PanicFlag(gate);
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1).wrapping_mul(0x1234_5678_9abc_def1));
                let mut live: Vec<Block> = Vec::with_capacity(MAX_LIVE);
                let mut ops = 0;
                for i in 0..OPS {
                    if i == OPS / 2 {
                        // Publish what this thread holds, then let the main thread check.
                        held_requested.fetch_add(live.iter().map(|b| b.bytes).sum(), SeqCst);
                        held_blocks.fetch_add(live.len() as u64, SeqCst);
                        gate.wait_for(everyone);
                        gate.wait_for(2 * everyone);
                    }
                    let r = rng.next() % 100;
                    if live.is_empty() || (live.len() < MAX_LIVE && r < 50) {
                        let bytes = size(&mut rng);
                        let ptr = e.alloc(bytes).unwrap();
                        assert_eq!(ptr % 256, 0);
                        let b = Block { ptr, bytes, tag: (t << 56) | i };
                        write_tag(e, &b);
                        live.push(b);
                    } else if r < 88 {
                        let b = live.swap_remove((rng.next() % live.len() as u64) as usize);
                        check_tag(e, &b);
                        e.free(b.ptr).unwrap();
                    } else if r < 94 {
                        // Hand a block to whichever thread takes it next.
                        let b = live.swap_remove((rng.next() % live.len() as u64) as usize);
                        queue.lock().unwrap().push(b);
                    } else if r < 99 {
                        // Free a block another thread allocated (another home shard).
                        let b = queue.lock().unwrap().pop();
                        if let Some(b) = b {
                            check_tag(e, &b);
                            e.free(b.ptr).unwrap();
                            // (No double-free check here: another thread may already
                            // have been handed the same address again.)
                        }
                    } else if rng.next().is_multiple_of(64) {
                        // Now and then: release some cache while other threads allocate
                        // (whole segments only: live blocks must survive it).
                        e.reclaim(rng.next() % (8 * MIB));
                    } else {
                        let s = e.stats();
                        assert!(s.num_frees <= s.num_allocations);
                    }
                    ops += 1;
                }
                for b in live.drain(..) {
                    check_tag(e, &b);
                    e.free(b.ptr).unwrap();
                }
                ops_done.fetch_add(ops, SeqCst);
            });
        }

        // Halfway: every thread waits at the gate; nothing moves.
        let _flag = PanicFlag(&gate);
        gate.wait_for(everyone);
        let s = invariants(&e);
        let queued: Vec<Block> = queue.lock().unwrap().clone();
        let requested = held_requested.load(SeqCst) + queued.iter().map(|b| b.bytes).sum::<u64>();
        let blocks = held_blocks.load(SeqCst) + queued.len() as u64;
        assert_eq!(s.requested_bytes, requested, "{s:#?}");
        assert_eq!(s.num_allocations - s.num_frees, blocks, "{s:#?}");
        assert_eq!(e.outstanding().len() as u64, blocks);
        for b in &queued {
            check_tag(&e, b);
        }
        gate.wait_for(2 * everyone);
    });
    assert_eq!(ops_done.load(SeqCst), THREADS * OPS);

    // Free what is still queued, from this thread.
    for b in queue.into_inner().unwrap() {
        check_tag(&e, &b);
        e.free(b.ptr).unwrap();
    }
    let s = invariants(&e);
    assert_eq!(s.requested_bytes, 0, "{s:#?}");
    assert_eq!(s.allocated_bytes, 0, "{s:#?}");
    assert_eq!(s.num_allocations, s.num_frees, "{s:#?}");
    assert!(s.num_allocations >= THREADS * OPS / 3, "{s:#?}");
    assert_eq!(s.num_cache_hits + s.num_cache_misses, s.num_allocations, "{s:#?}");
    assert_eq!(s.num_ooms, 0);
    if pool == PoolKind::None {
        assert_eq!(s.reserved_bytes, 0);
    } else {
        assert!(s.num_cache_hits > 0, "{s:#?}");
    }
    reclaim_all_and_check_empty(&e);
    let s = e.stats();
    assert_eq!(s.num_device_allocations, s.num_device_frees, "{s:#?}");
}

#[test]
fn binned() {
    stress(PoolKind::Binned);
}

#[test]
fn split() {
    stress(PoolKind::Split);
}

#[test]
fn simple() {
    stress(PoolKind::Simple);
}

#[test]
fn none() {
    stress(PoolKind::None);
}

#[test]
fn expandable() {
    stress(PoolKind::Expandable);
}

/// Allocation under a tight limit from many threads at once: the limit is never
/// crossed, out-of-memory errors are clean, and the engine recovers.
#[test]
fn limit_under_contention() {
    for pool in PoolKind::ALL {
        let limit = 64 * MIB;
        let e = engine_with(
            cumem::Config {
                pool,
                limit: Some(cumem::config::Amount::Bytes(limit)),
                ..cumem::Config::default()
            },
            SHARDS,
        );
        let ooms = AtomicU64::new(0);
        std::thread::scope(|sc| {
            for t in 0..THREADS {
                let (e, ooms) = (&e, &ooms);
                sc.spawn(move || {
                    let mut rng = Rng(t * 7919 + 17);
                    let mut live = Vec::new();
                    for _ in 0..2_000 {
                        if live.len() < 8 && rng.next().is_multiple_of(2) {
                            let bytes = 1 + rng.next() % (4 * MIB);
                            match e.alloc(bytes) {
                                Ok(p) => live.push(p),
                                Err(err) => {
                                    assert!(err.is_oom(), "{err}");
                                    ooms.fetch_add(1, SeqCst);
                                }
                            }
                        } else if let Some(p) = live.pop() {
                            e.free(p).unwrap();
                        }
                        assert!(e.stats().reserved_bytes <= limit);
                    }
                    for p in live {
                        e.free(p).unwrap();
                    }
                });
            }
        });
        let s = invariants(&e);
        assert!(s.peak_reserved_bytes <= limit, "{pool:?}: {s:#?}");
        assert_eq!(s.num_ooms, ooms.load(SeqCst), "{pool:?}");
        assert_eq!(s.allocated_bytes, 0);
        // It works afterwards.
        let p = e.alloc(32 * MIB).unwrap();
        e.free(p).unwrap();
        reclaim_all_and_check_empty(&e);
    }
}

/// Failed reservations against the limit must not show, even for an instant: reserved
/// bytes never read above the limit, and a request that fits is not refused because a
/// concurrent one that does not fit was being turned down at the same moment.
#[test]
fn limit_is_never_exceeded_even_transiently() {
    let limit = 10 * MIB;
    let e = engine_with(
        cumem::Config {
            pool: PoolKind::None,
            limit: Some(cumem::config::Amount::Bytes(limit)),
            ..cumem::Config::default()
        },
        SHARDS,
    );
    let stop = AtomicBool::new(false);
    let over = AtomicU64::new(0);
    let small_failures = AtomicU64::new(0);
    std::thread::scope(|sc| {
        // Requests that can never fit (11 MiB > 10 MiB): always refused.
        for _ in 0..2 {
            sc.spawn(|| {
                while !stop.load(SeqCst) {
                    assert!(e.alloc(11 * MIB).unwrap_err().is_oom());
                }
            });
        }
        // A request that always fits (nothing else is live): must never be refused.
        sc.spawn(|| {
            for _ in 0..20_000 {
                match e.alloc(4 * MIB) {
                    Ok(p) => e.free(p).unwrap(),
                    Err(_) => {
                        small_failures.fetch_add(1, SeqCst);
                    }
                }
            }
            stop.store(true, SeqCst);
        });
        sc.spawn(|| {
            while !stop.load(SeqCst) {
                if e.stats().reserved_bytes > limit {
                    over.fetch_add(1, SeqCst);
                }
            }
        });
    });
    assert_eq!(over.load(SeqCst), 0, "reserved bytes read above the limit");
    assert_eq!(small_failures.load(SeqCst), 0, "a fitting request was refused");
    let s = invariants(&e);
    assert!(s.peak_reserved_bytes <= limit);
}

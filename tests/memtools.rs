//! The memory tools of issue 8 on every pool: the allocation history, the snapshot
//! (checked against the statistics after random operations, as PyTorch's tests check
//! `memory_stats` against `memory_snapshot`), leak marks and checkpoints, run-time memory
//! and cache limits, compaction and the ladder's retry counts.

mod common;

use common::*;
use cumem::engine::tools::Retry;
use cumem::history::{Event, EventKind};
use cumem::snapshot::BlockState;
use cumem::{Config, Engine, Error, PoolKind};

macro_rules! for_each_pool {
    ($($test:ident),* $(,)?) => {
        mod binned { $( #[test] fn $test() { super::$test(cumem::PoolKind::Binned) } )* }
        mod split { $( #[test] fn $test() { super::$test(cumem::PoolKind::Split) } )* }
        mod simple { $( #[test] fn $test() { super::$test(cumem::PoolKind::Simple) } )* }
        mod none { $( #[test] fn $test() { super::$test(cumem::PoolKind::None) } )* }
        mod expandable { $( #[test] fn $test() { super::$test(cumem::PoolKind::Expandable) } )* }
    };
}

for_each_pool!(
    snapshot_sums_equal_stats_after_random_operations,
    snapshot_sums_equal_stats_with_several_shards,
    history_records_allocs_frees_and_device_calls,
    history_keeps_the_latest_events_and_costs_nothing_off,
    history_records_out_of_memory,
    history_origins_at_debug_2,
    leaks_since_a_mark_and_checkpoints,
    memory_limit_at_run_time,
    cache_limit_returns_frees_beyond_the_cap,
    compact_releases_whole_free_segments,
    ladder_retries_are_counted,
    records_name_their_device,
);

fn caches(pool: PoolKind) -> bool {
    pool != PoolKind::None
}

/// A request size spread over the pools' regimes: small, medium, big (up to 40 MiB).
fn size(r: &mut Rng) -> u64 {
    match r.below(10) {
        0..=5 => 1 + r.below(64 * KIB),
        6..=7 => 1 + r.below(2 * MIB),
        8 => MIB + r.below(9 * MIB),
        _ => 10 * MIB + r.below(30 * MIB),
    }
}

/// Checks the snapshot against the statistics (exactly) and its own structure: segments
/// by address, disjoint, tiled by their blocks; live blocks exactly the active ones.
fn check_snapshot(e: &Engine, live: &[(u64, u64)]) {
    let snap = e.snapshot();
    let s = e.stats();
    let mut sums = [0u64; 3];
    let (mut reserved, mut requested) = (0, 0);
    let mut active = Vec::new();
    let mut last_end = 0;
    for (k, seg) in snap.segments.iter().enumerate() {
        assert!(seg.addr >= last_end, "segments overlap or are unsorted at {:#x}", seg.addr);
        last_end = seg.addr + seg.size;
        reserved += seg.size;
        assert_eq!((seg.stream, seg.device), (0, 0));
        let blocks = &snap.blocks[seg.first_block as usize..(seg.first_block + seg.num_blocks) as usize];
        assert!(!blocks.is_empty());
        let mut at = seg.addr;
        for b in blocks {
            assert_eq!(b.addr, at, "blocks do not tile segment {:#x}", seg.addr);
            assert_eq!(b.segment as usize, k);
            assert!(b.size > 0);
            at += b.size;
            sums[b.state as usize] += b.size;
            if b.state == BlockState::Active as u32 {
                requested += b.requested;
                active.push((b.addr, b.requested));
            } else {
                assert_eq!(b.requested, 0);
            }
        }
        assert_eq!(at, seg.addr + seg.size, "blocks do not fill segment {:#x}", seg.addr);
    }
    assert_eq!(snap.blocks.len() as u64, snap.segments.iter().map(|s| s.num_blocks).sum::<u64>());
    assert_eq!(reserved, s.reserved_bytes, "segments vs reserved_bytes");
    assert_eq!(sums[BlockState::Active as usize], s.allocated_bytes, "active vs allocated_bytes");
    assert_eq!(requested, s.requested_bytes, "requested");
    assert_eq!(sums[BlockState::InactiveSplit as usize], s.inactive_split_bytes, "inactive splits");
    assert_eq!(sums[1] + sums[2], s.cached_bytes, "cached + inactive splits vs cached_bytes");
    active.sort();
    let mut want = live.to_vec();
    want.sort();
    assert_eq!(active, want, "active blocks are not the live allocations");
}

fn snapshot_sums_equal_stats_after_random_operations(pool: PoolKind) {
    for seed in [1u64, 7, 42] {
        let e = engine(pool, 1);
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1));
        let mut live: Vec<(u64, u64)> = Vec::new();
        check_snapshot(&e, &live);
        for step in 0..400 {
            match r.below(20) {
                0..=10 => {
                    let n = size(&mut r);
                    live.push((e.alloc(n).unwrap(), n));
                }
                11..=17 if !live.is_empty() => {
                    let (p, _) = live.swap_remove(r.below(live.len() as u64) as usize);
                    e.free(p).unwrap();
                }
                18 => {
                    e.reclaim(r.below(64 * MIB));
                }
                _ => {
                    e.compact();
                }
            }
            if step % 10 == 0 {
                check_snapshot(&e, &live);
            }
        }
        check_snapshot(&e, &live);
        for (p, _) in live.drain(..) {
            e.free(p).unwrap();
        }
        check_snapshot(&e, &live);
        reclaim_all_and_check_empty(&e);
        assert!(e.snapshot().segments.is_empty());
    }
}

fn snapshot_sums_equal_stats_with_several_shards(pool: PoolKind) {
    let e = engine(pool, 4);
    let live: Vec<Vec<(u64, u64)>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let e = &e;
                sc.spawn(move || {
                    let mut r = Rng(t + 11);
                    let mut live = Vec::new();
                    for _ in 0..150 {
                        if r.below(3) < 2 || live.is_empty() {
                            let n = size(&mut r) / 4 + 1;
                            live.push((e.alloc(n).unwrap(), n));
                        } else {
                            let (p, _) = live.swap_remove(r.below(live.len() as u64) as usize);
                            e.free(p).unwrap();
                        }
                    }
                    live
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let live: Vec<(u64, u64)> = live.concat();
    check_snapshot(&e, &live);
    assert!(e.snapshot().segments.iter().any(|s| s.shard != 0) || live.is_empty());
    for &(p, _) in &live {
        e.free(p).unwrap();
    }
    check_snapshot(&e, &[]);
}

/// The history's events and the snapshot's segments carry the engine's device ordinal
/// (here a host stand-in for device 1), not 0.
fn records_name_their_device(pool: PoolKind) {
    let dev = cumem::device::HostDevice::with_ordinal(Some(HOST_CAPACITY), 1);
    let e = Engine::with_device(Config { pool, ..Config::default() }, Box::new(dev), 1).expect("engine");
    assert_eq!(e.ordinal(), 1);
    e.record_memory_history(true, 1000).unwrap();
    let a = e.alloc(3 * MIB).unwrap();
    let snap = e.snapshot();
    assert!(!snap.segments.is_empty());
    assert!(snap.segments.iter().all(|s| s.device == 1), "{:#?}", snap.segments);
    e.free(a).unwrap();
    let ev = e.memory_events();
    assert!(ev.iter().any(|x| x.kind == EventKind::Alloc as u32));
    assert!(ev.iter().all(|x| x.device == 1), "{ev:#?}");
}

fn kinds(ev: &[Event]) -> Vec<EventKind> {
    ev.iter().map(|e| EventKind::from_u32(e.kind).unwrap()).collect()
}

fn history_records_allocs_frees_and_device_calls(pool: PoolKind) {
    let e = engine(pool, 1);
    let before = e.alloc(1000).unwrap(); // allocated before recording: no lifetime
    e.record_memory_history(true, 1000).unwrap();
    assert!(e.recording_memory_history());
    // 50 MiB: beyond every pool's cache so far (a miss), then reused (a hit).
    let a = e.alloc(50 * MIB).unwrap();
    e.free(a).unwrap();
    let b = e.alloc(50 * MIB).unwrap();
    e.free(before).unwrap();
    e.free(b).unwrap();
    e.reclaim(u64::MAX);
    e.record_memory_history(false, 0).unwrap();
    let _ = e.alloc(100).map(|p| e.free(p));
    let ev = e.memory_events();
    assert!(ev.windows(2).all(|w| w[0].time_ns <= w[1].time_ns), "not in time order");
    let k = kinds(&ev);
    let engine_side: Vec<EventKind> =
        k.iter().copied().filter(|k| matches!(k, EventKind::Alloc | EventKind::Free)).collect();
    use EventKind::*;
    assert_eq!(engine_side, vec![Alloc, Free, Alloc, Free, Free], "{ev:#?}");
    let allocs: Vec<&Event> = ev.iter().filter(|e| e.kind == Alloc as u32).collect();
    let frees: Vec<&Event> = ev.iter().filter(|e| e.kind == Free as u32).collect();
    assert_eq!((allocs[0].addr, allocs[0].requested_bytes), (a, 50 * MIB));
    assert!(allocs[0].size_bytes >= 50 * MIB);
    assert_eq!(allocs[0].hit, 0, "the first allocation of a fresh engine is a miss");
    assert_eq!(allocs[1].hit, caches(pool) as u32, "the second reuses the cache: {ev:#?}");
    assert_eq!(
        (frees[0].addr, frees[0].requested_bytes, frees[0].size_bytes),
        (a, 50 * MIB, allocs[0].size_bytes)
    );
    assert!(frees[0].lifetime_ns > 0 && frees[0].lifetime_ns <= frees[0].time_ns - allocs[0].time_ns + 1);
    assert_eq!((frees[1].addr, frees[1].lifetime_ns), (before, 0), "allocated before recording");
    assert!(ev.iter().all(|e| e.stream == 0 && e.device == 0 && e.origin == 0));
    let s = e.stats();
    let dev_allocs = k.iter().filter(|&&k| k == DeviceAlloc).count() as u64;
    let dev_frees = k.iter().filter(|&&k| k == DeviceFree).count();
    assert!(dev_allocs >= 1, "the first miss called the device: {ev:#?}");
    // Device events: the segments' addresses and sizes; every segment obtained while
    // recording was released by the reclaim.
    let got: u64 = ev.iter().filter(|e| e.kind == DeviceAlloc as u32).map(|e| e.size_bytes).sum();
    let put: u64 = ev.iter().filter(|e| e.kind == DeviceFree as u32).map(|e| e.size_bytes).sum();
    assert!(put >= got, "{ev:#?}");
    assert!(dev_frees >= 1);
    assert!(
        ev.iter()
            .filter(|e| e.kind == DeviceAlloc as u32)
            .all(|e| e.requested_bytes == 0 && e.size_bytes > 0)
    );
    // A device allocation happens inside its allocation's call.
    let d = ev.iter().find(|e| e.kind == DeviceAlloc as u32).unwrap();
    assert!(allocs[0].time_ns <= d.time_ns && d.time_ns <= allocs[0].time_ns + allocs[0].duration_ns);
    assert_eq!(s.num_allocations, 4, "recording does not change the counts");
    // Bad input changes nothing.
    assert!(matches!(e.record_memory_history(true, 0), Err(Error::InvalidValue(_))));
    assert!(matches!(e.record_memory_history(true, (1 << 24) + 1), Err(Error::InvalidValue(_))));
    let same = |v: &[Event]| v.iter().map(|e| (e.kind, e.addr, e.size_bytes)).collect::<Vec<_>>();
    assert_eq!(same(&e.memory_events()), same(&ev), "stopped: nothing more recorded");
    assert!(!e.recording_memory_history());
}

fn history_keeps_the_latest_events_and_costs_nothing_off(pool: PoolKind) {
    let e = engine(pool, 1);
    let p = e.alloc(512).unwrap();
    e.free(p).unwrap();
    assert!(e.memory_events().is_empty(), "recording is off at start");
    e.record_memory_history(true, 10).unwrap();
    let mut last = 0;
    for _ in 0..50 {
        let p = e.alloc(512).unwrap();
        e.free(p).unwrap();
        last = p;
    }
    let ev = e.memory_events();
    assert_eq!(ev.len(), 10);
    let frees: Vec<&Event> = ev.iter().filter(|e| e.kind == EventKind::Free as u32).collect();
    assert_eq!(frees.last().unwrap().addr, last, "the latest events are kept: {ev:#?}");
    // Starting again drops the old events.
    e.record_memory_history(true, 10).unwrap();
    assert!(e.memory_events().is_empty());
}

fn history_records_out_of_memory(pool: PoolKind) {
    let e = small_memory(pool, 8 * MIB, 1);
    e.record_memory_history(true, 100).unwrap();
    assert!(e.alloc(64 * MIB).is_err());
    assert!(e.try_alloc(64 * MIB).is_err(), "not counted in num_ooms: no event");
    let ev = e.memory_events();
    let ooms: Vec<&Event> = ev.iter().filter(|e| e.kind == EventKind::Oom as u32).collect();
    assert_eq!(ooms.len(), 1, "{ev:#?}");
    assert_eq!((ooms[0].addr, ooms[0].requested_bytes, ooms[0].size_bytes), (0, 64 * MIB, 0));
    assert_eq!(e.stats().num_ooms, 1);
    // A caller's origin survives a failed attempt, for its retry.
    cumem::history::set_next_origin(9);
    assert!(e.try_alloc(64 * MIB).is_err());
    let p = e.alloc(1000).unwrap();
    let ev = e.memory_events();
    let a = ev.iter().rev().find(|x| x.kind == EventKind::Alloc as u32).unwrap();
    assert_eq!((a.addr, a.origin), (p, 9 | cumem::history::CALLER_ORIGIN));
    e.free(p).unwrap();
}

#[inline(never)]
fn recorded_allocation_site(e: &Engine) -> u64 {
    e.alloc(777).unwrap()
}

fn history_origins_at_debug_2(pool: PoolKind) {
    let e = engine_with(Config { pool, debug: 2, ..Config::default() }, 1);
    e.record_memory_history(true, 100).unwrap();
    let a = recorded_allocation_site(&e);
    let b = recorded_allocation_site(&e);
    e.free(a).unwrap();
    let ev = e.memory_events();
    let alloc = ev.iter().find(|x| x.kind == EventKind::Alloc as u32 && x.addr == a).unwrap();
    let free = ev.iter().find(|x| x.kind == EventKind::Free as u32).unwrap();
    assert_ne!(alloc.origin, 0);
    assert_eq!(free.origin, alloc.origin, "a free carries its allocation's origin");
    let text = e.origin_text(alloc.origin).unwrap();
    assert!(text.contains("recorded_allocation_site"), "{text}");
    assert!(!text.lines().next().unwrap().starts_with("cumem::"), "{text}");
    // Snapshot and leak report name the same site.
    let snap = e.snapshot();
    let blk = snap.blocks.iter().find(|x| x.addr == b).unwrap();
    assert!(e.origin_text(blk.origin).unwrap().contains("recorded_allocation_site"));
    let leaks = e.check_memory_leaks();
    assert_eq!(leaks.len(), 1);
    assert!(e.origin_text(leaks[0].origin).unwrap().contains("recorded_allocation_site"));
    assert_ne!(leaks[0].thread, u32::MAX);
    assert_eq!(e.origin_text(0), None);
    e.free(b).unwrap();
}

fn leaks_since_a_mark_and_checkpoints(pool: PoolKind) {
    let e = engine(pool, 2);
    let old = e.alloc(5000).unwrap();
    assert_eq!(e.check_memory_leaks().iter().map(|l| l.addr).collect::<Vec<_>>(), vec![old], "since start");
    let d = e.checkpoint();
    assert_eq!(d.allocated, e.stats().allocated_bytes as i64);
    let mark = e.leak_mark();
    let kept = e.alloc(100).unwrap();
    let freed = e.alloc(200).unwrap();
    e.free(freed).unwrap();
    // An address reused after the mark is new: a freed old block's address handed out
    // again counts.
    e.free(old).unwrap();
    let again = e.alloc(5000).unwrap();
    let other = std::thread::scope(|s| s.spawn(|| e.alloc(300).unwrap()).join().unwrap());
    let mut want = vec![(kept, 100), (again, 5000), (other, 300)];
    want.sort();
    let got: Vec<(u64, u64)> =
        e.leaks_since(mark).unwrap().iter().map(|l| (l.addr, l.requested_bytes)).collect();
    assert_eq!(got, want);
    assert_eq!(e.check_memory_leaks().len(), 3, "the checkpoint's mark is as old");
    assert!(e.leaks_since(mark).unwrap().iter().all(|l| l.size_bytes >= l.requested_bytes && l.seq > 0));
    assert!(matches!(e.leaks_since(u64::MAX), Err(Error::InvalidValue(_))));
    let s0 = e.stats();
    let d = e.checkpoint();
    assert!(e.check_memory_leaks().is_empty());
    for p in [kept, again, other] {
        e.free(p).unwrap();
    }
    let s1 = e.stats();
    let d2 = e.checkpoint();
    assert_eq!(d2.allocated, s1.allocated_bytes as i64 - s0.allocated_bytes as i64);
    assert_eq!(d2.reserved, s1.reserved_bytes as i64 - s0.reserved_bytes as i64);
    assert!(d2.allocated < 0);
    let _ = d;
}

fn memory_limit_at_run_time(pool: PoolKind) {
    let e = engine(pool, 1);
    let live = e.alloc(3 * MIB).unwrap();
    let cached: Vec<u64> = (0..4).map(|_| e.alloc(3 * MIB).unwrap()).collect();
    for p in cached {
        e.free(p).unwrap();
    }
    let s = e.stats();
    // Below what is live: refused, nothing changes.
    let err = e.set_memory_limit(Some(MIB)).unwrap_err();
    assert!(matches!(err, Error::InvalidValue(_)) && err.to_string().contains("live"), "{err}");
    assert_eq!(e.stats().reserved_bytes, s.reserved_bytes);
    assert_eq!(e.stats().limit_bytes, 0);
    assert!(matches!(e.set_memory_limit(Some(0)), Err(Error::InvalidValue(_))));
    // Above live, below reserved: the cache goes first.
    let cap = s.allocated_bytes + 2 * MIB;
    e.set_memory_limit(Some(cap)).unwrap();
    let s2 = e.stats();
    assert_eq!(s2.limit_bytes, cap);
    assert!(s2.reserved_bytes <= cap.max(s2.allocated_bytes + s2.inactive_split_bytes), "{s2:#?}");
    assert!((e.memory_pressure() - s2.reserved_bytes as f64 / cap as f64).abs() < 1e-12);
    // The new cap holds for growth.
    assert!(e.alloc(100 * MIB).unwrap_err().is_oom());
    // Raised and removed.
    e.set_memory_limit(Some(64 * MIB)).unwrap();
    let p = e.alloc(8 * MIB).unwrap();
    e.set_memory_limit(None).unwrap();
    assert_eq!(e.stats().limit_bytes, 0);
    let (_, total) = e.device_memory().unwrap();
    assert!((e.memory_pressure() - e.stats().reserved_bytes as f64 / total as f64).abs() < 1e-12);
    e.set_memory_fraction(0.5).unwrap();
    assert_eq!(e.stats().limit_bytes, total / 2);
    for f in [0.0, -1.0, 1.5, f64::NAN] {
        assert!(matches!(e.set_memory_fraction(f), Err(Error::InvalidValue(_))), "{f}");
    }
    assert_eq!(e.stats().limit_bytes, total / 2);
    e.set_memory_limit_amount(cumem::config::parse_amount("x", "100MiB").unwrap()).unwrap();
    assert_eq!(e.stats().limit_bytes, 100 * MIB);
    e.free(p).unwrap();
    e.free(live).unwrap();
    reclaim_all_and_check_empty(&e);
}

fn cache_limit_returns_frees_beyond_the_cap(pool: PoolKind) {
    let e = engine(pool, 1);
    let blocks: Vec<u64> = (0..8).map(|_| e.alloc(4 * MIB).unwrap()).collect();
    assert_eq!(e.cache_limit(), None);
    e.set_cache_limit(Some(9 * MIB));
    assert_eq!(e.cache_limit(), Some(9 * MIB));
    for p in blocks {
        e.free(p).unwrap();
        let s = invariants(&e);
        // What the pool cannot release (partly used segments) may stay; whole free
        // segments may not exceed the cap.
        assert!(s.cached_bytes - s.inactive_split_bytes <= 9 * MIB + 20 * MIB, "{s:#?}");
    }
    let s = e.stats();
    assert!(s.cached_bytes <= 9 * MIB + 20 * MIB, "{s:#?}");
    if caches(pool) && pool != PoolKind::Expandable {
        assert!(s.num_device_frees > 0, "frees beyond the cap went back to the device");
    }
    // A cap of 0 keeps nothing once everything is free; lifting it caches again.
    e.set_cache_limit(Some(0));
    assert_eq!(e.stats().reserved_bytes, 0);
    e.set_cache_limit(None);
    let p = e.alloc(MIB).unwrap();
    e.free(p).unwrap();
    assert_eq!(e.stats().cached_bytes > 0, caches(pool));
}

fn compact_releases_whole_free_segments(pool: PoolKind) {
    let e = engine(pool, 1);
    let keep = e.alloc(1000).unwrap();
    let ps: Vec<u64> = (0..6).map(|i| e.alloc((i + 1) * MIB).unwrap()).collect();
    for p in ps {
        e.free(p).unwrap();
    }
    let s = e.stats();
    let c = e.compact();
    let t = e.stats();
    assert_eq!(c.released_bytes, s.reserved_bytes - t.reserved_bytes);
    assert_eq!(
        (c.fragmentation_before, c.fragmentation_after),
        (s.fragmentation_ratio, t.fragmentation_ratio)
    );
    assert!(c.fragmentation_after <= c.fragmentation_before);
    assert_eq!(t.cached_bytes, t.inactive_split_bytes, "only partly used segments stay cached: {t:#?}");
    assert_eq!(e.compact().released_bytes, 0);
    e.free(keep).unwrap();
    let c = e.compact();
    assert_eq!((e.stats().reserved_bytes, c.fragmentation_after), (0, 0.0));
}

fn ladder_retries_are_counted(pool: PoolKind) {
    let e = engine(pool, 2);
    e.note_retry(Retry::Gc);
    e.note_retry(Retry::Gc);
    std::thread::scope(|s| s.spawn(|| e.note_retry(Retry::Reclaim)).join().unwrap());
    let s = e.stats();
    assert_eq!((s.num_gc_retries, s.num_reclaim_retries), (2, 1));
    e.reset_stats();
    let s = e.stats();
    assert_eq!((s.num_gc_retries, s.num_reclaim_retries), (0, 0));
}

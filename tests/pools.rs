//! Exact behaviour of each pool through the engine: reuse, rounding, splitting and
//! merging, reclaim, out of memory with retry, bad frees, statistics, tracking and the
//! `memory_status` text. Runs on the host device, or on CUDA with `CUMEM_TEST_CUDA=1`.

mod common;

use common::*;
use cumem::config::Amount;
use cumem::format::format_bytes;
use cumem::report::{Allocations, memory_status as status};
use cumem::{Config, Engine, Error, PoolKind, Stats};

/// Every generic test below, instantiated once per pool as `<pool>::<test>`.
macro_rules! per_pool {
    ($($test:ident),* $(,)?) => {
        mod binned { $( #[test] fn $test() { super::$test(cumem::PoolKind::Binned) } )* }
        mod split { $( #[test] fn $test() { super::$test(cumem::PoolKind::Split) } )* }
        mod simple { $( #[test] fn $test() { super::$test(cumem::PoolKind::Simple) } )* }
        mod none { $( #[test] fn $test() { super::$test(cumem::PoolKind::None) } )* }
        mod expandable { $( #[test] fn $test() { super::$test(cumem::PoolKind::Expandable) } )* }
    };
}

per_pool!(
    zero_bytes_and_null_free,
    alignment_and_sizes,
    freed_block_is_reused,
    contents_survive_neighbours,
    bad_frees_change_nothing,
    oversized_requests,
    oom_retry_after_releasing_cache,
    oom_when_impossible,
    oom_under_limit,
    peaks_and_reset,
    hit_rate_and_fragmentation,
    reclaim_everything,
    tracking_with_backtraces,
    tracking_levels_0_and_1,
    memory_status_lines,
    checked_copies,
    many_live_allocations,
);

fn caches(pool: PoolKind) -> bool {
    pool != PoolKind::None
}

/// Statistics without the device timings, which change with every device call.
fn untimed(mut s: Stats) -> Stats {
    s.device_alloc_ns = 0;
    s.device_free_ns = 0;
    s
}

fn zero_bytes_and_null_free(pool: PoolKind) {
    let e = engine(pool, 1);
    assert_eq!(e.alloc(0).unwrap(), 0);
    e.free(0).unwrap();
    e.free(0).unwrap();
    let s = invariants(&e);
    assert_eq!(untimed(s), untimed(Stats::default()));
}

fn alignment_and_sizes(pool: PoolKind) {
    let e = engine(pool, 1);
    let sizes = [
        1,
        7,
        255,
        256,
        257,
        511,
        512,
        513,
        1000,
        4095,
        4096,
        65537,
        MIB - 1,
        MIB,
        MIB + 1,
        3 * MIB + 7,
        11 * MIB + 3,
        129 * MIB + 1,
    ];
    let mut live = Vec::new();
    for &n in &sizes {
        let before = e.stats();
        let p = e.alloc(n).unwrap();
        assert_ne!(p, 0);
        assert_eq!(p % 256, 0, "{n} bytes at {p:#x} is not 256-byte aligned");
        let s = invariants(&e);
        let size = s.allocated_bytes - before.allocated_bytes;
        let min = block_size(pool, n);
        if pool == PoolKind::Split {
            assert!((min..=min + MIB).contains(&size), "{n} bytes got a block of {size}");
        } else {
            assert_eq!(size, min, "{n} bytes got a block of {size}");
        }
        assert_eq!(s.requested_bytes - before.requested_bytes, n);
        live.push((p, n, size));
    }
    // No two live blocks overlap.
    live.sort();
    for w in live.windows(2) {
        assert!(w[0].0 + w[0].2 <= w[1].0, "blocks overlap: {w:x?}");
    }
    let out = e.outstanding();
    assert_eq!(out.len(), live.len());
    for (o, &(p, n, size)) in out.iter().zip(&live) {
        assert_eq!((o.ptr, o.requested, o.size), (p, n, size));
    }
    for (p, _, _) in live {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

fn freed_block_is_reused(pool: PoolKind) {
    let e = engine(pool, 1);
    for n in [1, 1000, 4096, 100 * KIB, 3 * MIB, 12 * MIB, 129 * MIB] {
        e.reset_stats();
        let p = e.alloc(n).unwrap();
        e.free(p).unwrap();
        let s = invariants(&e);
        if caches(pool) {
            assert!(s.cached_bytes >= block_size(pool, n), "{n}: {s:#?}");
        } else {
            assert_eq!(s.reserved_bytes, 0, "none caches nothing: {s:#?}");
        }
        let q = e.alloc(n).unwrap();
        let s = invariants(&e);
        assert_eq!(s.num_allocations, 2);
        assert_eq!(s.num_frees, 1);
        if caches(pool) {
            assert_eq!(q, p, "{pool:?} did not reuse the freed block of {n} bytes");
            assert_eq!(s.num_cache_hits, 1, "{n}: {s:#?}");
            assert_eq!(s.num_cache_misses, 1, "{n}: {s:#?}");
            // Expandable maps each granule as a physical allocation of its own.
            let calls = if pool == PoolKind::Expandable { block_size(pool, n).div_ceil(2 * MIB) } else { 1 };
            assert_eq!(s.num_device_allocations, calls, "{n}: {s:#?}");
        } else {
            assert_eq!(s.num_cache_hits, 0);
            assert_eq!(s.num_cache_misses, 2);
            assert_eq!(s.num_device_allocations, 2);
            assert_eq!(s.num_device_frees, 1);
        }
        e.free(q).unwrap();
        e.reclaim(u64::MAX);
    }
    reclaim_all_and_check_empty(&e);
}

fn contents_survive_neighbours(pool: PoolKind) {
    let e = engine(pool, 1);
    let sizes = [100, 512, 700, 4096, 5000, 64 * KIB, MIB, 300 * KIB, 2 * MIB, 11 * MIB];
    let mut live: Vec<(u64, u64, u8)> = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let p = e.alloc(n).unwrap();
        let b = i as u8 + 1;
        fill(&e, p, n, b);
        live.push((p, n, b));
    }
    // Free every other block, allocate again (reusing and splitting), refill.
    for i in (0..live.len()).step_by(2) {
        let (p, n, b) = live[i];
        check(&e, p, n, b);
        e.free(p).unwrap();
        let q = e.alloc(n / 2 + 1).unwrap();
        let b = b + 100;
        fill(&e, q, n / 2 + 1, b);
        live[i] = (q, n / 2 + 1, b);
    }
    for &(p, n, b) in &live {
        check(&e, p, n, b);
    }
    for (p, _, _) in live {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

fn bad_frees_change_nothing(pool: PoolKind) {
    let e = engine(pool, 2);
    let p = e.alloc(1000).unwrap();
    let q = e.alloc(3 * MIB).unwrap();
    let r = e.alloc(5000).unwrap();
    e.free(r).unwrap();
    let before = untimed(invariants(&e));
    let unknown = [0x1000, 0xdead_beef_0000, u64::MAX, u64::MAX - 255, p + 256, p + 512, q + 1, q + MIB, r];
    for bad in unknown {
        match e.free(bad) {
            Err(Error::InvalidValue(m)) => assert!(m.contains(&format!("{bad:#x}")), "{m}"),
            other => panic!("free({bad:#x}) gave {other:?}, expected InvalidValue"),
        }
        assert_eq!(untimed(invariants(&e)), before, "free({bad:#x}) changed the statistics");
    }
    e.free(p).unwrap();
    let after = untimed(invariants(&e));
    assert_eq!(e.free(p).unwrap_err().code(), cumem::ffi::CUMEM_ERROR_INVALID_VALUE, "double free");
    assert_eq!(untimed(invariants(&e)), after, "double free changed the statistics");
    e.free(q).unwrap();
    assert!(matches!(e.free(q), Err(Error::InvalidValue(_))));
    reclaim_all_and_check_empty(&e);
}

fn oversized_requests(pool: PoolKind) {
    let e = small_memory(pool, 64 * MIB, 1);
    // Sizes no signed 64-bit count can express are invalid values ...
    for n in [u64::MAX, u64::MAX - 511, (1 << 63) + 1, 1 << 63] {
        match e.alloc(n) {
            Err(Error::InvalidValue(m)) => assert!(m.contains(&n.to_string()), "{m}"),
            other => panic!("alloc({n}) gave {other:?}, expected InvalidValue"),
        }
        assert!(matches!(e.try_alloc(n), Err(Error::InvalidValue(_))));
    }
    // ... any smaller size that no device holds is out of memory, as in CUDA.jl and PyTorch.
    let oversized =
        [i64::MAX as u64, 1 << 62, 1 << 60, (1 << 48) + 1, 1 << 48, (1 << 48) - 1, (1 << 48) - 511, 1 << 40];
    for n in oversized {
        match e.alloc(n) {
            Err(Error::OutOfMemory(m)) => assert!(m.contains(&format!("({n} bytes)")), "{m}"),
            other => panic!("alloc({n}) gave {other:?}, expected OutOfMemory"),
        }
        assert!(matches!(e.try_alloc(n), Err(Error::OutOfMemory(_))));
    }
    let s = invariants(&e);
    assert_eq!(s.num_ooms, oversized.len() as u64, "alloc counts each, try_alloc none");
    assert_eq!(s.num_allocations, 0);
    assert_eq!(s.reserved_bytes, 0);
    // The engine works afterwards.
    let p = e.alloc(MIB).unwrap();
    fill(&e, p, MIB, 9);
    check(&e, p, MIB, 9);
    e.free(p).unwrap();
    reclaim_all_and_check_empty(&e);
}

fn oom_retry_after_releasing_cache(pool: PoolKind) {
    if !caches(pool) {
        return; // nothing is ever cached, so there is nothing to retry with
    }
    let e = small_memory(pool, 64 * MIB, 1);
    let a = e.alloc(24 * MIB).unwrap();
    let b = e.alloc(24 * MIB).unwrap();
    e.free(a).unwrap();
    e.free(b).unwrap();
    let s = invariants(&e);
    assert!(s.cached_bytes >= 48 * MIB, "{s:#?}");
    // 40 MiB fits in no cached block and not next to the cache: the cache must be
    // released first. Binned and simple find out from the device (or limit) and the
    // engine releases the cache and retries; split releases cached segments itself
    // before growing above its high-water mark, so it needs no retry (the engine's retry
    // for split: `split_engine_retries_when_its_own_release_is_not_enough`).
    let c = e.alloc(40 * MIB).unwrap();
    fill(&e, c, 40 * MIB, 3);
    let s = invariants(&e);
    // Expandable needs no release at all: the freed blocks merge, and the 40 MiB block
    // lies in their mapped granules.
    let retries = if matches!(pool, PoolKind::Split | PoolKind::Expandable) { 0 } else { 1 };
    assert_eq!(s.num_alloc_retries, retries, "{s:#?}");
    assert_eq!(s.num_ooms, 0, "{s:#?}");
    assert_eq!(s.allocated_bytes, block_size(pool, 40 * MIB), "{s:#?}");
    if pool == PoolKind::Expandable {
        assert_eq!((s.reserved_bytes, s.num_device_allocations), (48 * MIB, 24), "{s:#?}");
    } else {
        assert_eq!(s.reserved_bytes, s.allocated_bytes, "{s:#?}");
    }
    assert!(s.peak_reserved_bytes <= 64 * MIB, "{s:#?}");
    check(&e, c, 40 * MIB, 3);
    e.free(c).unwrap();
    reclaim_all_and_check_empty(&e);
}

fn oom_when_impossible(pool: PoolKind) {
    let e = small_memory(pool, 64 * MIB, 1);
    let a = e.alloc(24 * MIB).unwrap();
    let b = e.alloc(24 * MIB).unwrap();
    let n = 24 * MIB + 5;
    let err = e.alloc(n).unwrap_err();
    assert_eq!(err.code(), cumem::ffi::CUMEM_ERROR_OUT_OF_MEMORY);
    let Error::OutOfMemory(msg) = &err else { unreachable!() };
    let s = invariants(&e);
    let (free, total) = e.device_memory().unwrap();
    for part in [
        format!("({n} bytes)"),
        format_bytes(n),
        format!("reserved {}", format_bytes(s.reserved_bytes)),
        format!("cached {}", format_bytes(s.cached_bytes)),
        "limit ".into(),
        "device free".into(),
        format!(" of {}", format_bytes(total)),
    ] {
        assert!(msg.contains(&part), "OOM message lacks {part:?}: {msg}");
    }
    if !cuda() {
        assert!(msg.contains("limit none"), "{msg}");
        assert!(msg.contains(&format!("device free {}", format_bytes(free))), "{msg}");
    }
    assert_eq!(s.num_ooms, 1);
    assert_eq!(s.num_alloc_retries, 0, "nothing was cached: {s:#?}");
    assert_eq!(s.num_allocations, 2);
    assert_eq!(s.requested_bytes, 48 * MIB);
    // The engine works afterwards; freed memory makes room.
    e.free(a).unwrap();
    let c = e.alloc(n).unwrap();
    fill(&e, c, n, 1);
    check(&e, c, n, 1);
    e.free(b).unwrap();
    e.free(c).unwrap();
    let s = invariants(&e);
    assert_eq!(s.num_ooms, 1);
    reclaim_all_and_check_empty(&e);
}

fn oom_under_limit(pool: PoolKind) {
    let limit = 24 * MIB;
    let e = engine_with(Config { pool, limit: Some(Amount::Bytes(limit)), ..Config::default() }, 1);
    assert_eq!(e.stats().limit_bytes, limit);
    // Per pool: a live block `a`, a freed (cached) block `b`, then a request `c` that
    // the cached block cannot serve and that fits under the limit only once the cache
    // is released.
    let (a, b, c) = match pool {
        // classes 16 + 8 MiB reserved; 4 MiB more needs the cached 8 MiB released
        PoolKind::Binned => (12 * MIB, 5 * MIB, 3 * MIB),
        // 12 + 5 reserved; the 5 MiB block is too small for 8 MiB; 12 + 5 + 8 > 24
        PoolKind::Simple => (12 * MIB, 5 * MIB, 8 * MIB),
        // segments of their own: 12 + 10; 11 MiB needs a 12 MiB segment
        PoolKind::Split => (12 * MIB, 10 * MIB, 11 * MIB),
        // nothing cached: 12 + 8 fits at once
        PoolKind::None => (12 * MIB, 5 * MIB, 8 * MIB),
        // b's granules are reused by c, which maps 4 MiB more: 22 MiB
        PoolKind::Expandable => (12 * MIB, 6 * MIB, 10 * MIB),
    };
    let a = e.alloc(a).unwrap();
    let b = e.alloc(b).unwrap();
    e.free(b).unwrap();
    let c = e.alloc(c).unwrap();
    fill(&e, c, 3 * MIB, 0xc);
    let s = invariants(&e);
    assert!(s.reserved_bytes <= limit, "{s:#?}");
    // Split releases its cache itself before growing above its high-water mark.
    let retries = if matches!(pool, PoolKind::Binned | PoolKind::Simple) { 1 } else { 0 };
    assert_eq!(s.num_alloc_retries, retries, "{s:#?}");
    assert_eq!(s.num_ooms, 0, "{s:#?}");
    // 10 MiB more cannot fit beside the live 20+ MiB in any pool.
    let err = e.alloc(10 * MIB).unwrap_err();
    let msg = err.to_string();
    assert!(err.is_oom(), "{msg}");
    assert!(msg.contains(&format!("limit {}", format_bytes(limit))), "{msg}");
    assert!(msg.contains("JULIA_CUDA_MEMORY_LIMIT"), "{msg}");
    assert!(msg.contains(&format!("({} bytes)", 10 * MIB)), "{msg}");
    let s = invariants(&e);
    assert_eq!(s.num_ooms, 1);
    assert_eq!(s.num_alloc_retries, retries, "nothing was cached to release");
    assert!(s.peak_reserved_bytes <= limit);
    check(&e, c, 3 * MIB, 0xc);
    e.free(a).unwrap();
    // Now it fits (after releasing the freed block where needed).
    let d = e.alloc(10 * MIB).unwrap();
    e.free(c).unwrap();
    e.free(d).unwrap();
    assert!(invariants(&e).peak_reserved_bytes <= limit);
    reclaim_all_and_check_empty(&e);
}

fn peaks_and_reset(pool: PoolKind) {
    let e = engine(pool, 1);
    let a = e.alloc(MIB).unwrap();
    let b = e.alloc(3 * MIB + 100).unwrap();
    let s1 = invariants(&e);
    e.free(b).unwrap();
    let s2 = invariants(&e);
    assert_eq!(s2.peak_requested_bytes, 4 * MIB + 100);
    assert_eq!(s2.peak_allocated_bytes, s1.allocated_bytes);
    assert_eq!(s2.peak_reserved_bytes, s1.reserved_bytes);
    assert_eq!(s2.requested_bytes, MIB);
    assert!(s2.peak_cached_bytes >= s2.cached_bytes);
    assert_eq!(s2.num_allocations, 2);
    assert_eq!(s2.num_frees, 1);
    assert!(s2.num_device_allocations >= 1);

    e.reset_stats();
    let s = invariants(&e);
    for (name, v) in [
        ("num_allocations", s.num_allocations),
        ("num_frees", s.num_frees),
        ("num_cache_hits", s.num_cache_hits),
        ("num_cache_misses", s.num_cache_misses),
        ("num_device_allocations", s.num_device_allocations),
        ("num_device_frees", s.num_device_frees),
        ("device_alloc_ns", s.device_alloc_ns),
        ("device_free_ns", s.device_free_ns),
        ("num_alloc_retries", s.num_alloc_retries),
        ("num_ooms", s.num_ooms),
    ] {
        assert_eq!(v, 0, "{name} after reset_stats: {s:#?}");
    }
    assert_eq!(s.peak_requested_bytes, s.requested_bytes);
    assert_eq!(s.peak_allocated_bytes, s.allocated_bytes);
    assert_eq!(s.peak_cached_bytes, s.cached_bytes);
    assert_eq!(s.peak_reserved_bytes, s.reserved_bytes);
    assert_eq!(s.cache_hit_rate, 0.0);
    // The current values are untouched.
    assert_eq!(
        (s.requested_bytes, s.allocated_bytes, s.reserved_bytes),
        (s2.requested_bytes, s2.allocated_bytes, s2.reserved_bytes)
    );
    // Peaks grow again from there.
    let c = e.alloc(2 * MIB).unwrap();
    let s3 = invariants(&e);
    assert_eq!(s3.peak_requested_bytes, 3 * MIB);
    assert_eq!(s3.peak_allocated_bytes, s3.allocated_bytes);
    e.free(c).unwrap();
    e.free(a).unwrap();
    let s4 = invariants(&e);
    assert_eq!(s4.peak_requested_bytes, 3 * MIB);
    assert_eq!(s4.num_frees, 2);
    reclaim_all_and_check_empty(&e);
}

fn hit_rate_and_fragmentation(pool: PoolKind) {
    let e = engine(pool, 1);
    let s = e.stats();
    assert_eq!((s.cache_hit_rate, s.fragmentation_ratio), (0.0, 0.0));
    let a = e.alloc(4096).unwrap();
    let b = e.alloc(4096).unwrap();
    e.free(a).unwrap();
    let c = e.alloc(4096).unwrap();
    let s = invariants(&e);
    assert_eq!(s.num_cache_hits + s.num_cache_misses, 3);
    match pool {
        // The second 4 KiB block is carved from the first segment.
        PoolKind::Split | PoolKind::Expandable => {
            assert_eq!((s.num_cache_hits, s.num_cache_misses), (2, 1))
        }
        PoolKind::Binned | PoolKind::Simple => {
            assert_eq!((s.num_cache_hits, s.num_cache_misses), (1, 2))
        }
        PoolKind::None => assert_eq!((s.num_cache_hits, s.num_cache_misses), (0, 3)),
    }
    assert_eq!(s.cache_hit_rate, s.num_cache_hits as f64 / 3.0, "{s:#?}");
    let frag = s.cached_bytes as f64 / s.reserved_bytes as f64;
    assert_eq!(s.fragmentation_ratio, frag);
    if matches!(pool, PoolKind::Split | PoolKind::Expandable) {
        // 8 KiB of a 2 MiB segment (granule) in use.
        assert_eq!(s.reserved_bytes, 2 * MIB);
        assert_eq!(s.fragmentation_ratio, (2 * MIB - 8 * KIB) as f64 / (2 * MIB) as f64);
    } else {
        assert_eq!(s.fragmentation_ratio, 0.0);
    }
    e.free(b).unwrap();
    e.free(c).unwrap();
    let s = invariants(&e);
    if caches(pool) {
        assert_eq!(s.fragmentation_ratio, 1.0, "all reserved memory is cached");
    }
    reclaim_all_and_check_empty(&e);
    assert_eq!(e.stats().fragmentation_ratio, 0.0);
}

fn reclaim_everything(pool: PoolKind) {
    let e = engine(pool, 1);
    let mut ptrs = Vec::new();
    for n in [1, 600, 4096, 70 * KIB, 900 * KIB, 3 * MIB, 15 * MIB, 130 * MIB] {
        ptrs.push(e.alloc(n).unwrap());
    }
    for p in ptrs {
        e.free(p).unwrap();
    }
    let s = invariants(&e);
    assert_eq!(s.allocated_bytes, 0);
    // A partial reclaim releases at least what was asked for (whole blocks or
    // segments), unless less is cached.
    let first = e.reclaim(1);
    let s1 = invariants(&e);
    assert_eq!(s.reserved_bytes - s1.reserved_bytes, first);
    if caches(pool) {
        assert!(first >= 1);
    } else {
        assert_eq!(first, 0);
    }
    let rest = e.reclaim(u64::MAX);
    assert_eq!(first + rest, s.reserved_bytes);
    assert_eq!(e.reclaim(u64::MAX), 0);
    let s2 = invariants(&e);
    assert_eq!(s2.num_device_frees, s2.num_device_allocations);
    reclaim_all_and_check_empty(&e);
}

#[inline(never)]
fn tracked_allocation_site(e: &Engine, n: u64) -> u64 {
    e.alloc(n).unwrap()
}

fn tracking_with_backtraces(pool: PoolKind) {
    let e = engine_with(Config { pool, debug: 2, ..Config::default() }, 1);
    let a = tracked_allocation_site(&e, 100);
    let b = tracked_allocation_site(&e, 5000);
    let c = e.alloc(3 * MIB).unwrap();
    let out = e.outstanding();
    assert_eq!(out.len(), 3);
    let mut sorted = [(a, 100), (b, 5000), (c, 3 * MIB)];
    sorted.sort();
    for (o, &(p, n)) in out.iter().zip(&sorted) {
        assert_eq!((o.ptr, o.requested), (p, n));
        assert!(o.size >= n);
        assert!(o.at_ns.is_some());
        assert!(o.thread.is_some());
        assert!(!o.frames.is_empty(), "no frames for {p:#x}");
        assert!(
            !o.frames[0].starts_with("cumem::") && !o.frames[0].starts_with("backtrace::"),
            "the allocator's own frames were not removed: {:#?}",
            o.frames
        );
        assert!(
            o.frames.iter().any(|f| f.contains("tracking_with_backtraces")),
            "the test function is not among the frames: {:#?}",
            o.frames
        );
        if n != 3 * MIB {
            assert!(
                o.frames[0].contains("tracked_allocation_site"),
                "the innermost frame is not the caller of alloc: {:#?}",
                o.frames
            );
        }
    }
    let text = status(&e, Allocations::Listed);
    for (p, n) in sorted {
        let line = format!("Outstanding memory allocation of {n} bytes at {p:#x}");
        assert!(text.contains(&line), "memory_status lacks {line:?}:\n{text}");
    }
    assert!(text.contains("tracking_with_backtraces"), "{text}");
    e.free(b).unwrap();
    let out = e.outstanding();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|o| o.ptr != b));
    let text = status(&e, Allocations::Listed);
    assert!(!text.contains("of 5000 bytes"), "{text}");
    e.free(a).unwrap();
    e.free(c).unwrap();
    assert!(!status(&e, Allocations::Listed).contains("Outstanding"));
    reclaim_all_and_check_empty(&e);
}

fn tracking_levels_0_and_1(pool: PoolKind) {
    for debug in [0u8, 1] {
        let e = engine_with(Config { pool, debug, ..Config::default() }, 1);
        let a = e.alloc(100).unwrap();
        let out = e.outstanding();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].ptr, out[0].requested), (a, 100));
        assert!(out[0].frames.is_empty(), "frames at debug {debug}");
        assert_eq!(out[0].at_ns.is_some(), debug == 1);
        assert_eq!(out[0].thread.is_some(), debug == 1);
        let text = status(&e, Allocations::Listed);
        let line = format!("Outstanding memory allocation of 100 bytes at {a:#x}");
        assert_eq!(text.contains(&line), debug == 1, "debug {debug}:\n{text}");
        // Omitted, the list goes and the summary stays as it was.
        let summary = status(&e, Allocations::Omitted);
        assert!(!summary.contains("Outstanding"), "{summary}");
        assert!(text.starts_with(&summary), "{summary}\n---\n{text}");
        e.free(a).unwrap();
        assert!(e.outstanding().is_empty());
    }
}

fn memory_status_lines(pool: PoolKind) {
    let e = engine(pool, 1);
    let p = e.alloc(8).unwrap();
    let q = e.alloc(8000).unwrap();
    e.free(q).unwrap();
    let s = invariants(&e);
    let text = status(&e, Allocations::Listed);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(text.ends_with('\n'));
    assert!(lines[0].starts_with("Effective GPU memory usage: ") && lines[0].ends_with(')'), "{text}");
    let (free, total) = e.device_memory().unwrap();
    if !cuda() {
        let used = total - free;
        assert_eq!(
            lines[0],
            format!(
                "Effective GPU memory usage: {:.2}% ({}/{})",
                100.0 * used as f64 / total as f64,
                format_bytes(used),
                format_bytes(total)
            )
        );
        assert_eq!(lines[1], format!("Host memory (no GPU) usage: {}", format_bytes(s.reserved_bytes)));
    } else {
        assert!(lines[0].contains(&format!("/{})", format_bytes(total))), "{text}");
        assert_eq!(lines[1], format!("CUDA GPU memory usage: {}", format_bytes(s.reserved_bytes)));
    }
    assert_eq!(
        lines[2],
        format!(
            "{} usage: {} ({} allocated, {} cached)",
            pool.type_name(),
            format_bytes(s.reserved_bytes),
            format_bytes(s.allocated_bytes),
            format_bytes(s.cached_bytes)
        )
    );
    let expected_type = match pool {
        PoolKind::Binned => "BinnedPool",
        PoolKind::Split => "SplitPool",
        PoolKind::Simple => "SimplePool",
        PoolKind::None => "NoPool",
        PoolKind::Expandable => "ExpandablePool",
    };
    assert!(lines[2].starts_with(&format!("{expected_type} usage: ")));
    if pool == PoolKind::Binned {
        assert_eq!(lines[2], "BinnedPool usage: 8.500 KiB (512 bytes allocated, 8.000 KiB cached)");
    }
    e.free(p).unwrap();

    // With a limit, a fourth line names it.
    let e = engine_with(Config { pool, limit: Some(Amount::Bytes(512 * MIB)), ..Config::default() }, 1);
    let text = status(&e, Allocations::Listed);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[3], "Memory limit: 512.000 MiB");
    assert_eq!(lines[2], format!("{} usage: 0 bytes (0 bytes allocated, 0 bytes cached)", pool.type_name()));
}

fn checked_copies(pool: PoolKind) {
    let e = engine(pool, 1);
    let n = 1000;
    let p = e.alloc(n).unwrap();
    let q = e.alloc(n).unwrap();
    fill(&e, p, n, 0x11);
    fill(&e, q, n, 0x22);
    // Inside: fine. Partial ranges at an offset too.
    e.copy_htod(p + 10, &[7; 20]).unwrap();
    let got = read(&e, p, 40);
    assert_eq!(&got[..10], &[0x11; 10]);
    assert_eq!(&got[10..30], &[7; 20]);
    assert_eq!(&got[30..], &[0x11; 10]);
    fill(&e, p, n, 0x11);
    // Crossing the end of the requested bytes, even inside the rounded block: refused,
    // nothing written.
    for (off, len) in [(0, n + 1), (n - 1, 2), (n, 1), (500, 600)] {
        let err = e.copy_htod(p + off, &vec![0xee; len as usize]).unwrap_err();
        assert!(matches!(err, Error::InvalidValue(_)), "{err}");
        let err = e.memset(p + off, 0xee, len).unwrap_err();
        assert!(matches!(err, Error::InvalidValue(_)), "{err}");
        let mut buf = vec![0u8; len as usize];
        assert!(matches!(e.copy_dtoh(&mut buf, p + off), Err(Error::InvalidValue(_))));
        assert!(matches!(e.copy_dtod(q, p + off, len), Err(Error::InvalidValue(_))));
        assert!(matches!(e.copy_dtod(p + off, q, len), Err(Error::InvalidValue(_))));
    }
    check(&e, p, n, 0x11);
    check(&e, q, n, 0x22);
    // Overflowing ranges and unknown addresses.
    assert!(e.memset(p, 1, u64::MAX).is_err());
    assert!(e.memset(u64::MAX - 4, 1, 10).is_err());
    assert!(e.memset(0x1000, 1, 10).is_err());
    assert!(e.memset(0, 1, 10).is_err());
    // Copies between blocks, memset of a middle range.
    e.copy_dtod(q + 100, p + 200, 300).unwrap();
    e.memset(p + 1, 0x33, 998).unwrap();
    let got = read(&e, p, n);
    assert_eq!((got[0], got[1], got[998], got[999]), (0x11, 0x33, 0x33, 0x11));
    let got = read(&e, q, n);
    assert_eq!(&got[..100], &[0x22; 100]);
    assert_eq!(&got[100..400], &[0x11; 300]);
    assert_eq!(&got[400..], &[0x22; 600]);
    // Overlapping copy within one block.
    e.copy_dtod(q + 1, q, 999).unwrap();
    assert_eq!(read(&e, q, 3), vec![0x22, 0x22, 0x22]);
    // Zero-byte operations are no-ops even on bad addresses.
    e.copy_htod(0x1000, &[]).unwrap();
    e.memset(0x1000, 0, 0).unwrap();
    e.copy_dtod(0x1000, 0x2000, 0).unwrap();
    // Freed memory: refused (it may be cached, split or returned).
    e.free(q).unwrap();
    assert!(matches!(e.copy_htod(q, &[1; 10]), Err(Error::InvalidValue(_))));
    assert!(matches!(e.memset(q, 1, 1), Err(Error::InvalidValue(_))));
    assert!(matches!(e.copy_dtod(p, q, 1), Err(Error::InvalidValue(_))));
    let mut buf = [0u8; 4];
    assert!(matches!(e.copy_dtoh(&mut buf, q + 8), Err(Error::InvalidValue(_))));
    check(&e, p + 999, 1, 0x11);
    e.free(p).unwrap();
    reclaim_all_and_check_empty(&e);
}

// ---- binned ----------------------------------------------------------------------

#[test]
fn binned_rounds_to_power_of_two_classes() {
    let e = engine(PoolKind::Binned, 1);
    for (n, class) in [
        (1, 512),
        (512, 512),
        (513, 1024),
        (1000, 1024),
        (1025, 2048),
        (3 * MIB, 4 * MIB),
        (65 * MIB, 128 * MIB),
        (128 * MIB, 128 * MIB),
    ] {
        let p = e.alloc(n).unwrap();
        let s = invariants(&e);
        assert_eq!(s.allocated_bytes, class, "{n} bytes");
        assert_eq!(s.requested_bytes, n);
        e.free(p).unwrap();
        // A request of another size in the same class reuses the block.
        let q = e.alloc(class).unwrap();
        assert_eq!(q, p, "class {class}");
        e.free(q).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn binned_caches_blocks_above_128_mib_rounded_to_2_mib() {
    let e = engine(PoolKind::Binned, 1);
    let n = 129 * MIB + 1;
    let p = e.alloc(n).unwrap();
    let s = invariants(&e);
    assert_eq!(s.allocated_bytes, 130 * MIB);
    assert_eq!(s.reserved_bytes, 130 * MIB);
    e.free(p).unwrap();
    let s = invariants(&e);
    assert_eq!(s.cached_bytes, 130 * MIB, "large blocks are cached, not freed");
    assert_eq!(s.num_device_frees, 0);
    // Reused by a request of the same rounded size and by a slightly smaller one.
    let q = e.alloc(130 * MIB).unwrap();
    assert_eq!(q, p);
    e.free(q).unwrap();
    let q = e.alloc(129 * MIB).unwrap();
    assert_eq!(q, p, "a 130 MiB block serves 129 MiB (within 1/8)");
    assert_eq!(e.stats().allocated_bytes, 130 * MIB);
    e.free(q).unwrap();
    // Not used for a much smaller large request, nor a larger one.
    let big = e.alloc(300 * MIB).unwrap();
    e.free(big).unwrap();
    let s0 = e.stats();
    let r = e.alloc(200 * MIB).unwrap();
    assert!(r != big && r != p);
    let s = invariants(&e);
    assert_eq!(s.num_device_allocations, s0.num_device_allocations + 1);
    assert_eq!(s.allocated_bytes, 200 * MIB);
    e.free(r).unwrap();
    let r = e.alloc(140 * MIB).unwrap();
    assert!(r != big && r != p, "140 MiB must not take the 130 or 300 MiB block");
    e.free(r).unwrap();
    // Requests up to 128 MiB never take a large block.
    let r = e.alloc(100 * MIB).unwrap();
    assert!(r != big && r != p);
    assert_eq!(e.stats().allocated_bytes, 128 * MIB);
    e.free(r).unwrap();
    reclaim_all_and_check_empty(&e);
}

#[test]
fn binned_classes_do_not_mix() {
    let e = engine(PoolKind::Binned, 1);
    let p = e.alloc(8 * KIB).unwrap();
    e.free(p).unwrap();
    // A smaller class does not take the cached 8 KiB block; a larger one neither.
    let a = e.alloc(4 * KIB).unwrap();
    let b = e.alloc(16 * KIB).unwrap();
    assert!(a != p && b != p);
    let s = invariants(&e);
    assert_eq!(s.num_cache_hits, 0);
    assert_eq!(s.cached_bytes, 8 * KIB);
    // LIFO within a class.
    let c = e.alloc(4 * KIB).unwrap();
    e.free(a).unwrap();
    e.free(c).unwrap();
    assert_eq!(e.alloc(4 * KIB).unwrap(), c);
    assert_eq!(e.alloc(4 * KIB).unwrap(), a);
    for x in [a, b, c] {
        e.free(x).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

// ---- split -----------------------------------------------------------------------

#[test]
fn split_carves_small_requests_from_2_mib_segments() {
    let e = engine(PoolKind::Split, 1);
    let a = e.alloc(1000).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 2 * MIB);
    assert_eq!(s.allocated_bytes, 1024);
    assert_eq!(s.num_device_allocations, 1);
    assert_eq!(s.inactive_split_bytes, 2 * MIB - 1024);
    let b = e.alloc(1000).unwrap();
    assert_eq!(b, a + 1024, "carved right after the first block");
    let c = e.alloc(MIB).unwrap();
    assert_eq!(c, b + 1024);
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 2 * MIB);
    assert_eq!(s.num_device_allocations, 1);
    assert_eq!(s.num_cache_hits, 2);
    assert_eq!(s.num_cache_misses, 1);
    assert_eq!(s.allocated_bytes, 2048 + MIB);
    // The rest of the segment (1 MiB − 2 KiB) cannot hold another 1 MiB: new segment.
    let d = e.alloc(MIB).unwrap();
    let s = invariants(&e);
    assert!(d < a || d >= a + 2 * MIB);
    assert_eq!(s.reserved_bytes, 4 * MIB);
    assert_eq!(s.num_device_allocations, 2);
    for p in [a, b, c, d] {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_segment_sizes() {
    let e = engine(PoolKind::Split, 1);
    for (n, segment, block) in [
        (1, 2 * MIB, 512),
        (MIB, 2 * MIB, MIB),
        (MIB + 1, 20 * MIB, MIB + 512),
        (9 * MIB, 20 * MIB, 9 * MIB),
        // The remainder of a large segment is kept only above 1 MiB.
        (19 * MIB + 512, 20 * MIB, 20 * MIB),
        (10 * MIB, 10 * MIB, 10 * MIB),
        (11 * MIB + 1, 12 * MIB, 12 * MIB),
        (200 * MIB - 3, 200 * MIB, 200 * MIB),
    ] {
        let _ = block;
        let p = e.alloc(n).unwrap();
        let s = invariants(&e);
        assert_eq!(s.reserved_bytes, segment, "{n} bytes");
        assert_eq!(s.allocated_bytes, block, "{n} bytes");
        e.free(p).unwrap();
        assert_eq!(e.reclaim(u64::MAX), segment);
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_merges_free_neighbours() {
    let e = engine(PoolKind::Split, 1);
    let k = 256 * KIB;
    let a = e.alloc(k).unwrap();
    let b = e.alloc(k).unwrap();
    let c = e.alloc(k).unwrap();
    assert_eq!((b, c), (a + k, a + 2 * k));
    fill(&e, c, k, 0xcc);
    e.free(a).unwrap();
    e.free(b).unwrap();
    let s0 = invariants(&e);
    // Their combined size is served at the same address, without a device call.
    let m = e.alloc(2 * k).unwrap();
    assert_eq!(m, a, "the two freed neighbours were not merged");
    let s = invariants(&e);
    assert_eq!(s.num_device_allocations, s0.num_device_allocations);
    assert_eq!(s.reserved_bytes, 2 * MIB);
    assert_eq!(s.num_cache_hits, s0.num_cache_hits + 1);
    fill(&e, m, 2 * k, 0xaa);
    check(&e, c, k, 0xcc);
    // Free in the other order too: c then the merged block; then three-way merge with
    // the tail of the segment gives the whole segment back for one 2 MiB-ish request.
    e.free(c).unwrap();
    e.free(m).unwrap();
    let s = invariants(&e);
    assert_eq!(s.inactive_split_bytes, 0, "a wholly free segment is not split: {s:#?}");
    let w = e.alloc(MIB).unwrap();
    assert_eq!(w, a);
    let s = invariants(&e);
    assert_eq!(s.num_device_allocations, 1);
    e.free(w).unwrap();
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_best_fit_by_size_then_address() {
    let e = engine(PoolKind::Split, 1);
    // Holes of 64, 32 and 32 KiB separated by live blocks.
    let k = 32 * KIB;
    let h1 = e.alloc(2 * k).unwrap();
    let l1 = e.alloc(k).unwrap();
    let h2 = e.alloc(k).unwrap();
    let l2 = e.alloc(k).unwrap();
    let h3 = e.alloc(k).unwrap();
    let l3 = e.alloc(k).unwrap();
    for p in [h3, h1, h2] {
        e.free(p).unwrap();
    }
    // A 16 KiB request that misses the quick lists takes the smallest hole at the lowest
    // address, and splits it.
    let x = e.alloc(16 * KIB).unwrap();
    assert_eq!(x, h2);
    let y = e.alloc(16 * KIB).unwrap();
    assert_eq!(y, h2 + 16 * KIB);
    let z = e.alloc(2 * k).unwrap();
    assert_eq!(z, h1);
    for p in [l1, l2, l3, x, y, z] {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_releases_only_whole_free_segments() {
    let e = engine(PoolKind::Split, 1);
    let a = e.alloc(1000).unwrap();
    let b = e.alloc(1000).unwrap();
    let big = e.alloc(12 * MIB).unwrap();
    let mid = e.alloc(3 * MIB).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 2 * MIB + 12 * MIB + 20 * MIB);
    e.free(a).unwrap();
    e.free(big).unwrap();
    let s = invariants(&e);
    // Free parts of partly used segments: the small one (all but b's 1 KiB) and the
    // 20 MiB one (all but mid's 3 MiB). The free 12 MiB segment is not "split".
    assert_eq!(s.inactive_split_bytes, (2 * MIB - 1024) + (20 * MIB - 3 * MIB), "{s:#?}");
    let released = e.reclaim(u64::MAX);
    assert_eq!(released, 12 * MIB, "only the whole free segment goes back");
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 22 * MIB);
    assert_eq!(s.num_device_frees, 1);
    fill(&e, b, 1000, 0xbb);
    fill(&e, mid, 3 * MIB, 0x33);
    // The remaining blocks keep working and their segments are released once free.
    e.free(mid).unwrap();
    assert_eq!(e.reclaim(u64::MAX), 20 * MIB);
    check(&e, b, 1000, 0xbb);
    e.free(b).unwrap();
    let s = invariants(&e);
    assert_eq!(s.inactive_split_bytes, 0, "{s:#?}");
    assert_eq!(s.cached_bytes, 2 * MIB);
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_small_and_large_segments_are_separate() {
    let e = engine(PoolKind::Split, 1);
    // Raise the high-water mark first, so growth below it keeps the cache.
    let p = e.alloc(40 * MIB).unwrap();
    e.free(p).unwrap();
    e.reclaim(u64::MAX);
    let big = e.alloc(4 * MIB).unwrap();
    e.free(big).unwrap();
    // A small request does not carve a block out of the cached 20 MiB segment.
    let s0 = e.stats();
    let small = e.alloc(1000).unwrap();
    let s = invariants(&e);
    assert_eq!(s.num_device_allocations, s0.num_device_allocations + 1);
    assert_eq!(s.reserved_bytes, 22 * MIB);
    assert!(small < big || small >= big + 20 * MIB);
    // A large request does, splitting it.
    let m = e.alloc(5 * MIB).unwrap();
    assert_eq!(m, big);
    let m2 = e.alloc(5 * MIB).unwrap();
    assert_eq!(m2, big + 5 * MIB);
    assert_eq!(e.stats().num_device_allocations, s0.num_device_allocations + 1);
    for p in [small, m, m2] {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_releases_cache_before_raising_the_peak() {
    let e = engine(PoolKind::Split, 1);
    let big = e.alloc(4 * MIB).unwrap();
    e.free(big).unwrap();
    // Growing by a 2 MiB segment would lift reserved above its high-water mark (20 MiB):
    // the wholly free 20 MiB segment goes back first.
    let small = e.alloc(1000).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 2 * MIB, "{s:#?}");
    assert_eq!(s.peak_reserved_bytes, 20 * MIB, "{s:#?}");
    assert_eq!(s.num_device_frees, 1);
    assert_eq!(s.num_alloc_retries, 0);
    // Growth below the high-water mark keeps the cache.
    let a = e.alloc(3 * MIB).unwrap();
    e.free(a).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 22 * MIB, "{s:#?}");
    assert_eq!(s.peak_reserved_bytes, 22 * MIB, "{s:#?}");
    // A partly used segment is never released for growth.
    let b = e.alloc(MIB).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 22 * MIB, "carved from the small segment: {s:#?}");
    let c = e.alloc(30 * MIB).unwrap();
    let s = invariants(&e);
    assert_eq!(s.reserved_bytes, 2 * MIB + 30 * MIB, "the free 20 MiB segment went back: {s:#?}");
    for p in [small, b, c] {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

#[test]
fn split_engine_retries_when_its_own_release_is_not_enough() {
    if cuda() {
        return; // needs a device of a chosen capacity shared with another consumer
    }
    let dev: std::sync::Arc<dyn cumem::device::Device> =
        std::sync::Arc::new(cumem::device::HostDevice::new(Some(64 * MIB)));
    let other =
        Engine::with_device(Config { pool: PoolKind::None, ..Config::default() }, counted(dev.clone()).0, 1)
            .unwrap();
    let e =
        Engine::with_device(Config { pool: PoolKind::Split, ..Config::default() }, counted(dev.clone()).0, 1)
            .unwrap();
    // High-water mark 60 MiB, then 48 MiB cached in two 24 MiB segments.
    let p = e.alloc(60 * MIB).unwrap();
    e.free(p).unwrap();
    e.reclaim(u64::MAX);
    let a = e.alloc(24 * MIB).unwrap();
    let b = e.alloc(24 * MIB).unwrap();
    e.free(a).unwrap();
    e.free(b).unwrap();
    // Another consumer takes the remaining 16 MiB of the device.
    let x = other.alloc(16 * MIB).unwrap();
    // 30 MiB would lift reserved 12 MiB above the mark: the pool releases one 24 MiB
    // segment, but the device is still full (16 + 24 + 30 > 64); the engine releases
    // the rest of the cache and retries.
    let c = e.alloc(30 * MIB).unwrap();
    let s = invariants(&e);
    assert_eq!(s.num_alloc_retries, 1, "{s:#?}");
    assert_eq!(s.num_ooms, 0, "{s:#?}");
    assert_eq!(s.reserved_bytes, 30 * MIB, "{s:#?}");
    fill(&e, c, 30 * MIB, 1);
    check(&e, c, 30 * MIB, 1);
    // Now nothing is cached and the device is full: out of memory.
    let err = e.alloc(20 * MIB).unwrap_err();
    assert!(err.is_oom(), "{err}");
    assert_eq!(e.stats().num_alloc_retries, 1);
    e.free(c).unwrap();
    other.free(x).unwrap();
    reclaim_all_and_check_empty(&e);
    assert_eq!(dev.mem_info().unwrap().0, 64 * MIB);
}

// ---- simple ----------------------------------------------------------------------

#[test]
fn simple_does_not_hand_out_wastefully_large_blocks() {
    let e = engine(PoolKind::Simple, 1);
    let ten = e.alloc(10 * MIB).unwrap();
    e.free(ten).unwrap();
    let small = e.alloc(MIB).unwrap();
    assert_ne!(small, ten, "a cached 10 MiB block served a 1 MiB request");
    let s = invariants(&e);
    assert_eq!(s.num_device_allocations, 2);
    assert_eq!(s.allocated_bytes, MIB);
    assert_eq!(s.cached_bytes, 10 * MIB);
    // A request within a factor of two takes it whole.
    let six = e.alloc(6 * MIB).unwrap();
    assert_eq!(six, ten);
    let s = invariants(&e);
    assert_eq!(s.allocated_bytes, MIB + 10 * MIB);
    assert_eq!(s.requested_bytes, 7 * MIB);
    e.free(six).unwrap();
    e.free(small).unwrap();
    reclaim_all_and_check_empty(&e);
}

#[test]
fn simple_takes_the_smallest_fitting_block() {
    let e = engine(PoolKind::Simple, 1);
    let a = e.alloc(6 * MIB).unwrap();
    let b = e.alloc(4 * MIB).unwrap();
    let c = e.alloc(5 * MIB).unwrap();
    for p in [a, b, c] {
        e.free(p).unwrap();
    }
    assert_eq!(e.alloc(3 * MIB).unwrap(), b);
    assert_eq!(e.alloc(4 * MIB + 1).unwrap(), c);
    assert_eq!(e.alloc(MIB * 4).unwrap(), a);
    let s = invariants(&e);
    assert_eq!(s.num_cache_hits, 3);
    assert_eq!(s.cached_bytes, 0);
    for p in [a, b, c] {
        e.free(p).unwrap();
    }
    reclaim_all_and_check_empty(&e);
}

// ---- none ------------------------------------------------------------------------

#[test]
fn none_caches_nothing() {
    let e = engine(PoolKind::None, 1);
    for n in [1, 4096, 3 * MIB, 130 * MIB] {
        let p = e.alloc(n).unwrap();
        let s = invariants(&e);
        assert_eq!(s.reserved_bytes, round_up(n, 512));
        assert_eq!(s.allocated_bytes, round_up(n, 512));
        e.free(p).unwrap();
        let s = invariants(&e);
        assert_eq!(s.reserved_bytes, 0, "right after free");
        assert_eq!(s.cached_bytes, 0);
    }
    let s = e.stats();
    assert_eq!(s.num_device_allocations, 4);
    assert_eq!(s.num_device_frees, 4);
    assert_eq!(s.num_cache_hits, 0);
    assert_eq!(s.num_cache_misses, 4);
    assert_eq!(e.reclaim(u64::MAX), 0);
}

// ---- engine-wide -----------------------------------------------------------------

#[test]
fn device_name_and_memory() {
    let e = engine(PoolKind::Binned, 1);
    let (free, total) = e.device_memory().unwrap();
    assert!(free <= total && total > 0);
    if !cuda() {
        assert!(e.device().is_host());
        assert_eq!(e.device().name(), "host memory (no GPU)");
        assert_eq!((free, total), (HOST_CAPACITY, HOST_CAPACITY));
        let p = e.alloc(3 * MIB).unwrap();
        assert_eq!(e.device_memory().unwrap().0, HOST_CAPACITY - 4 * MIB);
        e.free(p).unwrap();
    } else {
        assert!(!e.device().is_host());
        assert!(!e.device().name().is_empty());
    }
}

#[test]
fn percentage_limit_resolves_against_device_memory() {
    let e = Engine::with_device(
        Config { limit: Some(Amount::Fraction(0.25)), ..Config::default() },
        device_with_capacity(GIB),
        1,
    )
    .unwrap();
    let total = e.device_memory().unwrap().1;
    assert_eq!(e.stats().limit_bytes, (total as f64 * 0.25) as u64);
    assert!(status(&e, Allocations::Listed).contains("Memory limit: "));
}

#[test]
fn reset_with_live_blocks_on_several_shards() {
    // PyTorch's semantics: counts restart, peaks drop to the current values, current
    // values stay exact, also while blocks allocated before the reset are freed after it
    // on other threads' shards.
    for pool in PoolKind::ALL {
        let e = engine(pool, 4);
        let before: Vec<u64> = (0..40).map(|i| e.alloc(1000 + i * 4096).unwrap()).collect();
        let s0 = invariants(&e);
        e.reset_stats();
        let after: Vec<u64> = std::thread::scope(|sc| {
            let hs: Vec<_> = before
                .chunks(10)
                .map(|chunk| {
                    let e = &e;
                    sc.spawn(move || {
                        let mine: Vec<u64> = (0..5).map(|_| e.alloc(3000).unwrap()).collect();
                        for &p in chunk {
                            e.free(p).unwrap();
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let s = invariants(&e);
        assert_eq!((s.num_allocations, s.num_frees), (20, 40), "{pool:?}: counts since the reset");
        assert_eq!(s.requested_bytes, 20 * 3000, "{pool:?}");
        assert!(s.peak_requested_bytes <= s0.requested_bytes + 20 * 3000, "{pool:?}: {s:#?}");
        assert!(s.peak_requested_bytes >= s0.requested_bytes, "{pool:?}: the reset peak is the live bytes");
        for p in after {
            e.free(p).unwrap();
        }
        let s = invariants(&e);
        assert_eq!((s.num_frees, s.requested_bytes, s.allocated_bytes), (60, 0, 0), "{pool:?}");
        reclaim_all_and_check_empty(&e);
    }
}

/// A host device whose allocations and mappings of `gate` bytes or more announce
/// themselves on `entered`, wait for `go`, then fail with out of memory having done
/// nothing: a request in flight.
struct GatedDevice {
    inner: cumem::device::HostDevice,
    gate: u64,
    entered: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl GatedDevice {
    /// An upstream under a 12 MiB limit on a 1 GiB host device gated at 8 MiB, the
    /// receiver of the announcements and the sender that lets a gated request go on.
    fn upstream() -> (cumem::upstream::Upstream, std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>) {
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel();
        let dev = GatedDevice {
            inner: cumem::device::HostDevice::new(Some(GIB)),
            gate: 8 * MIB,
            entered: std::sync::Mutex::new(entered_tx),
            go: std::sync::Mutex::new(go_rx),
        };
        (cumem::upstream::Upstream::new(Box::new(dev), Some(12 * MIB)), entered, go)
    }

    /// Waits at the gate if `bytes` reach it: Err (out of memory) once let go.
    fn wait_at_gate(&self, bytes: u64) -> cumem::Result<()> {
        if bytes >= self.gate {
            self.entered.lock().unwrap().send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
            return Err(Error::OutOfMemory("gated".into()));
        }
        Ok(())
    }
}

impl cumem::device::Device for GatedDevice {
    forward_device!();
    fn alloc(&self, bytes: u64) -> cumem::Result<u64> {
        self.wait_at_gate(bytes)?;
        self.inner.alloc(bytes)
    }
    unsafe fn free(&self, ptr: u64, bytes: u64) -> cumem::Result<()> {
        unsafe { self.inner.free(ptr, bytes) }
    }
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        self.wait_at_gate(bytes)?;
        unsafe { self.inner.vm_map(addr, bytes) }
    }
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        unsafe { self.inner.vm_unmap(addr, bytes) }
    }
}

/// Growth past the reserved peak moves idle granules' memory to the new block (CUDA: the
/// same physical allocation mapped at the new place; host: `mremap`) instead of
/// releasing it and creating more: the contents written before the free are there.
#[test]
fn expandable_moves_idle_memory_instead_of_raising_the_peak() {
    let e = engine(PoolKind::Expandable, 1);
    let a = e.alloc(64 * MIB).unwrap();
    let keep = e.alloc(2 * MIB).unwrap();
    fill(&e, a, 64 * MIB, 0x5a);
    e.free(a).unwrap();
    let before = e.stats();
    assert_eq!(before.reserved_bytes, 66 * MIB);
    // 100 MiB fit no free range: mapped above `keep`, they would lift the peak to
    // 166 MiB; the idle 64 MiB move under the block's first 64 MiB, 36 MiB are new.
    let b = e.alloc(100 * MIB).unwrap();
    let after = e.stats();
    assert_eq!((after.reserved_bytes, after.peak_reserved_bytes), (102 * MIB, 102 * MIB));
    assert_eq!(after.num_device_frees - before.num_device_frees, 32, "32 granules moved out");
    assert_eq!(after.num_device_allocations - before.num_device_allocations, 50, "and 50 mapped");
    assert!(read(&e, b, 64 * MIB).iter().all(|&x| x == 0x5a), "the moved memory kept its contents");
    fill(&e, b, 100 * MIB, 1);
    e.free(b).unwrap();
    e.free(keep).unwrap();
    e.reclaim(u64::MAX);
    assert_eq!(e.stats().reserved_bytes, 0);
}

/// Growth in bulk: the granules a block needs are mapped as one physical allocation of
/// several granules in one device call (CUDA: one `cuMemCreate` of them all, one
/// `cuMemMap`, one `cuMemSetAccess`), and an allocation is given back only whole, as
/// CUDA can unmap and release no part of one: while a block touches it, reclaim keeps
/// all of it (and its memory stays usable); once none does, one call returns it.
#[test]
fn expandable_maps_a_block_in_one_call_and_gives_back_only_whole_allocations() {
    let e = engine(PoolKind::Expandable, 1);
    let calls = e.device_calls();
    let a = e.alloc(8 * MIB).unwrap();
    assert_eq!(e.device_calls() - calls, 2, "one address reservation, one mapping of 4 granules");
    assert_eq!(e.stats().reserved_bytes, 8 * MIB);
    fill(&e, a, 8 * MIB, 0x33);
    assert!(read(&e, a + 7 * MIB, MIB).iter().all(|&x| x == 0x33), "the whole range is mapped");
    e.free(a).unwrap();
    // A smaller block goes to the start of the free range, in the mapped allocation.
    let calls = e.device_calls();
    let b = e.alloc(2 * MIB).unwrap();
    assert_eq!((b, e.device_calls()), (a, calls), "no device call");
    // 6 MiB are idle, but their allocation is in use: reclaim can give back nothing.
    e.reclaim(u64::MAX);
    assert_eq!((e.stats().reserved_bytes, e.device_calls()), (8 * MIB, calls));
    fill(&e, b, 2 * MIB, 7);
    assert!(read(&e, b + MIB, MIB).iter().all(|&x| x == 7));
    e.free(b).unwrap();
    e.reclaim(u64::MAX);
    assert_eq!(e.stats().reserved_bytes, 0);
    assert_eq!(e.device_calls() - calls, 2, "one unmapping of the whole allocation, one address release");
}

#[test]
fn peak_reserved_counts_only_mapped_memory() {
    // As below, for the expandable pool's path: a mapping in flight that later fails
    // claims against the limit but never shows in reserved bytes or their peak.
    let (up, entered, go) = GatedDevice::upstream();
    let base = up.shard(0).vm_reserve(32 * MIB).unwrap();
    std::thread::scope(|sc| {
        let go = go;
        let failing = sc.spawn(|| up.shard(0).vm_map(base, 8 * MIB));
        entered.recv().unwrap();
        up.shard(0).vm_map(base + 8 * MIB, 2 * MIB).unwrap();
        assert_eq!((up.reserved(), up.peak_reserved()), (2 * MIB, 2 * MIB), "a mapping in flight counted");
        // 2 MiB mapped + 8 MiB in flight: 4 MiB more would cross the 12 MiB limit.
        let over = up.shard(0).vm_map(base + 16 * MIB, 4 * MIB);
        assert!(matches!(over, Err(Error::OutOfMemory(m)) if m.contains("LIMIT")));
        go.send(()).unwrap();
        assert!(failing.join().unwrap().is_err());
        assert_eq!((up.reserved(), up.peak_reserved()), (2 * MIB, 2 * MIB));
        // The failed mapping's claim is gone: 6 MiB more fit now.
        up.shard(0).vm_map(base + 16 * MIB, 6 * MIB).unwrap();
        assert_eq!(up.peak_reserved(), 8 * MIB);
        up.shard(0).vm_unmap(base + 16 * MIB, 6 * MIB);
        up.shard(0).vm_unmap(base + 8 * MIB, 2 * MIB);
        assert_eq!(up.reserved(), 0);
    });
    // Unmapping unclaimed too: the whole limit can be mapped again (in pieces below the
    // gate).
    up.shard(0).vm_map(base + 16 * MIB, 6 * MIB).expect("the claims of unmapped memory were not given back");
    up.shard(0).vm_map(base + 22 * MIB, 6 * MIB).expect("the claims of unmapped memory were not given back");
    assert_eq!(up.reserved(), 12 * MIB);
    up.shard(0).vm_unmap(base + 16 * MIB, 12 * MIB);
    up.shard(0).vm_release(base, 32 * MIB);
    assert_eq!(up.reserved(), 0);
}

#[test]
fn peak_reserved_counts_only_obtained_memory() {
    // A device request in flight that later fails must never show in reserved bytes or
    // their peak, even when another request succeeds meanwhile; and it still counts
    // against the limit while in flight, so the limit is never overshot.
    let (up, entered, go) = GatedDevice::upstream();
    std::thread::scope(|sc| {
        // Owned here, so a failing assertion drops it and the gated thread ends too.
        let go = go;
        let failing = sc.spawn(|| up.shard(0).alloc(8 * MIB));
        entered.recv().unwrap();
        let p = up.shard(1).alloc(2 * MIB).unwrap();
        assert_eq!(up.reserved(), 2 * MIB);
        assert_eq!(up.peak_reserved(), 2 * MIB, "a request in flight raised the peak");
        // 2 MiB obtained + 8 MiB in flight: 4 MiB more would cross the 12 MiB limit.
        assert!(matches!(up.shard(1).alloc(4 * MIB), Err(Error::OutOfMemory(m)) if m.contains("LIMIT")));
        go.send(()).unwrap();
        assert!(failing.join().unwrap().is_err());
        assert_eq!((up.reserved(), up.peak_reserved()), (2 * MIB, 2 * MIB));
        // The failed request's claim is gone: 6 MiB more fit now (8 + 2 + 6 would not).
        let q = up.shard(1).alloc(6 * MIB).unwrap();
        assert_eq!(up.peak_reserved(), 8 * MIB);
        up.shard(1).free(q, 6 * MIB);
        up.shard(1).free(p, 2 * MIB);
    });
    assert_eq!(up.reserved(), 0);
}

#[test]
fn largest_byte_limit_is_a_limit() {
    // 2^64 − 1 bytes is a limit like any other, not "no limit".
    let cfg = Config { limit: Some(Amount::Bytes(u64::MAX)), ..Config::default() };
    let e = Engine::with_device(cfg, device(), 1).unwrap();
    assert_eq!(e.stats().limit_bytes, u64::MAX);
    let text = status(&e, Allocations::Listed);
    assert!(text.contains("Memory limit: "), "{text}");
}

#[test]
fn frees_from_another_shard() {
    // Blocks allocated on one thread and freed on others (another home shard).
    for pool in PoolKind::ALL {
        let e = engine(pool, 4);
        let ptrs: Vec<u64> = (0..64).map(|i| e.alloc(1000 + i * 100).unwrap()).collect();
        std::thread::scope(|sc| {
            for chunk in ptrs.chunks(16) {
                let e = &e;
                sc.spawn(move || {
                    for &p in chunk {
                        e.free(p).unwrap();
                        assert!(e.free(p).is_err());
                    }
                });
            }
        });
        let s = invariants(&e);
        assert_eq!(s.num_frees, 64);
        assert_eq!(s.allocated_bytes, 0);
        reclaim_all_and_check_empty(&e);
    }
}

#[test]
fn drop_returns_everything() {
    // Dropping an engine with live and cached blocks returns all device memory.
    for pool in PoolKind::ALL {
        let (dev, held) = counted_device();
        let e = Engine::with_device(Config { pool, ..Config::default() }, dev, 2).unwrap();
        let a = e.alloc(1000).unwrap();
        let _b = e.alloc(3 * MIB).unwrap();
        let _c = e.alloc(200 * MIB).unwrap();
        e.free(a).unwrap();
        let s = invariants(&e);
        assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), s.reserved_bytes);
        drop(e);
        assert_eq!(held.load(std::sync::atomic::Ordering::SeqCst), 0, "{pool:?}");
    }
}

/// Tens of thousands of live allocations, freed in a scrambled order: the engine's table
/// of live allocations grows and shrinks through many collisions, and every block stays
/// findable (by free and by the checked copies) until it is freed, and only until then.
fn many_live_allocations(pool: PoolKind) {
    let e = engine(pool, 1);
    let n = 20_000u64;
    let mut live: Vec<(u64, u8)> = (0..n)
        .map(|i| {
            let p = e.alloc(1 + (i * 7919) % 2048).unwrap();
            let tag = (i % 251) as u8;
            fill(&e, p, 1, tag);
            (p, tag)
        })
        .collect();
    let s = invariants(&e);
    assert_eq!(s.num_allocations, n);
    assert_eq!(e.outstanding().len() as u64, n);
    // A scrambled order: i ↦ (7777·i + 13) mod n, a bijection since gcd(7777, n) = 1.
    let perm: Vec<usize> = (0..n as usize).map(|i| (i * 7_777 + 13) % n as usize).collect();
    let mut seen = perm.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len() as u64, n);
    let mut freed = vec![false; n as usize];
    for (k, &i) in perm.iter().enumerate() {
        let (p, tag) = live[i];
        check(&e, p, 1, tag);
        e.free(p).unwrap();
        freed[i] = true;
        assert!(matches!(e.free(p), Err(Error::InvalidValue(_))));
        // Now and then, every block still live must still be found.
        if k % 5_000 == 4_999 {
            for (j, &(q, t)) in live.iter().enumerate() {
                if !freed[j] {
                    check(&e, q, 1, t);
                }
            }
            assert_eq!(e.outstanding().len(), n as usize - k - 1);
        }
    }
    live.clear();
    let s = invariants(&e);
    assert_eq!((s.num_frees, s.allocated_bytes, s.requested_bytes), (n, 0, 0));
    reclaim_all_and_check_empty(&e);
}

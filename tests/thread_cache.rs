//! Thread caches (`src/thread_cache.rs`): a thread's freed small blocks wait in its own
//! cache; frees from other threads, thread exit, reclaim and the out-of-memory retry must
//! reach them, double frees through them must be refused, and the statistics must stay
//! exact. Each test runs on the pools with thread caches (`POOLS`), with one shard so that
//! every thread shares one pool unless said; the expandable pool's caches hold blocks up
//! to 64 KiB and bypass themselves while they miss (the two `expandables_` tests).

mod common;

use common::*;
use cumem::config::Amount;
use cumem::{Config, Engine, PoolKind, Stats, thread_cache};
use std::sync::Barrier;
use std::sync::mpsc::{Receiver, channel};

/// Blocks until the test's sender sends or is dropped (also when the test panics, so a
/// failed assertion never leaves a helper thread waiting).
fn hold(rx: Receiver<()>) {
    let _ = rx.recv();
}

/// The pools that get thread caches (`expandable` for blocks up to 64 KiB only: see
/// `expandables_thread_caches_hold_small_blocks_and_merge_them_before_a_search`).
const POOLS: [PoolKind; 4] = [PoolKind::Binned, PoolKind::Split, PoolKind::Simple, PoolKind::Expandable];

/// The expandable pool's thread caches hold blocks up to
/// [`PoolKind::thread_cache_max_size`] (64 KiB) only. A larger block freed on a thread
/// that is still alive is back in the pool at once, so another thread's request of its
/// size gets it; a small one waits in the thread's cache (another thread's request does
/// not get it), until the thread's next request that reaches the pool, which first takes
/// the cached blocks back: two cached neighbours serve one request of both their sizes at
/// the first one's address, merged.
#[test]
fn expandables_thread_caches_hold_small_blocks_and_merge_them_before_a_search() {
    let max = PoolKind::Expandable.thread_cache_max_size();
    assert!(max >= 4096 && max < PoolKind::Binned.thread_cache_max_size(), "{max}");
    for tc in [true, false] {
        for (size, cached) in [(4096, tc), (max, tc), (2 * max, false)] {
            let e = engine_with(cfg(PoolKind::Expandable, tc), 1);
            let (ptx, prx) = channel();
            let (done, rx) = channel();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let p = e.alloc(size).unwrap();
                    e.free(p).unwrap();
                    ptx.send(p).unwrap();
                    hold(rx); // alive, so its cache is not handed back at exit yet
                });
                let p = prx.recv().unwrap();
                let q = e.alloc(size).unwrap();
                assert_eq!(q == p, !cached, "{size} B, thread cache {tc}: {p:#x} {q:#x}");
                e.free(q).unwrap();
                drop(done);
            });
            invariants(&e.stats());
        }
        let e = engine_with(cfg(PoolKind::Expandable, tc), 1);
        let a = e.alloc(8192).unwrap();
        let b = e.alloc(8192).unwrap();
        assert_eq!(b, a + 8192, "thread cache {tc}");
        e.free(a).unwrap();
        e.free(b).unwrap();
        let c = e.alloc(16384).unwrap();
        assert_eq!(c, a, "thread cache {tc}: the two freed blocks were not merged");
        e.free(c).unwrap();
        invariants(&e.stats());
    }
}

/// The expandable pool's thread cache bypasses itself while it does not pay
/// (`ThreadCache::bypassed`): after a run of requests that all miss it (each for another
/// size than the blocks just freed), a freed block goes to the pool at once (another
/// thread's request of its size gets it, as without thread caches); after a run of
/// pairs (each request for the size just freed) the cache holds freed blocks again.
#[test]
fn expandables_thread_cache_is_bypassed_while_it_misses() {
    let e = engine_tc(PoolKind::Expandable);
    let (ptx, prx) = channel();
    let (gtx, grx) = channel::<()>();
    // Main's request of 4 KiB after the thread freed one: whether it got the thread's.
    // Main keeps its blocks (freed, they would wait in its own cache for its next
    // request), so that each of its requests reaches the pool.
    let kept = std::cell::RefCell::new(Vec::new());
    let got_it = |p: u64| {
        let q = e.alloc(4096).unwrap();
        kept.borrow_mut().push(q);
        q == p
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            // A fresh cache holds the freed block.
            let p = e.alloc(4096).unwrap();
            e.free(p).unwrap();
            ptx.send(p).unwrap();
            grx.recv().unwrap();
            // Requests that miss: sizes 512 B to 2.5 KiB in turn, each freed after the
            // next request (so never a size the cache holds).
            let mut prev = 0;
            for i in 0..2 * thread_cache::BYPASS_START {
                let p = e.alloc(512 * (1 + u64::from(i) % 5)).unwrap();
                if prev != 0 {
                    e.free(prev).unwrap();
                }
                prev = p;
            }
            e.free(prev).unwrap();
            let p = e.alloc(4096).unwrap();
            e.free(p).unwrap();
            ptx.send(p).unwrap();
            grx.recv().unwrap();
            // Pairs: the cache comes back.
            for _ in 0..4 * thread_cache::BYPASS_LEAVE {
                let p = e.alloc(4096).unwrap();
                e.free(p).unwrap();
            }
            let p = e.alloc(4096).unwrap();
            e.free(p).unwrap();
            ptx.send(p).unwrap();
            hold(grx); // alive, so its cache is not handed back at exit yet
        });
        assert!(!got_it(prx.recv().unwrap()), "a fresh cache holds the freed block");
        gtx.send(()).unwrap();
        assert!(got_it(prx.recv().unwrap()), "after misses only, the cache is bypassed");
        gtx.send(()).unwrap();
        assert!(!got_it(prx.recv().unwrap()), "after pairs, the cache holds freed blocks again");
        drop(gtx);
    });
    kept.into_inner().into_iter().for_each(|q| e.free(q).unwrap());
    invariants(&e.stats());
}

fn cfg(pool: PoolKind, thread_cache: bool) -> Config {
    Config { pool, thread_cache, ..Config::default() }
}

fn engine_tc(pool: PoolKind) -> Engine {
    engine_with(cfg(pool, true), 1)
}

/// `cached = reserved − allocated`, `requested ≤ allocated ≤ reserved`.
fn invariants(s: &Stats) {
    assert!(s.requested_bytes <= s.allocated_bytes && s.allocated_bytes <= s.reserved_bytes, "{s:?}");
    assert_eq!(s.cached_bytes, s.reserved_bytes - s.allocated_bytes, "{s:?}");
}

/// A block freed on one thread waits in that thread's cache: another thread's request
/// of the same size does not get it (it would from a pool without thread caches), and
/// reclaim gives it back to the device.
#[test]
fn freed_blocks_stay_with_their_thread() {
    for pool in POOLS {
        for tc in [true, false] {
            let e = engine_with(cfg(pool, tc), 1);
            let (ptx, prx) = channel();
            let (done, rx) = channel();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let p = e.alloc(4096).unwrap();
                    e.free(p).unwrap();
                    ptx.send(p).unwrap();
                    hold(rx); // alive, so its cache is not handed back at exit yet
                });
                let p = prx.recv().unwrap();
                let q = e.alloc(4096).unwrap();
                assert_eq!(q == p, !tc, "{pool:?}, thread cache {tc}: {p:#x} {q:#x}");
                e.free(q).unwrap();
                drop(done);
            });
            let st = e.stats();
            invariants(&st);
            assert_eq!((st.allocated_bytes, st.requested_bytes), (0, 0), "{pool:?}");
            e.reclaim(u64::MAX);
            assert_eq!(e.stats().reserved_bytes, 0, "{pool:?}, thread cache {tc}");
        }
    }
}

/// A block handed out by one thread's cache is freed by another thread; a second free of
/// it, on either thread, is refused and changes nothing.
#[test]
fn free_from_another_thread_and_double_frees() {
    for pool in POOLS {
        let e = engine_tc(pool);
        // Warm this thread's cache, so the next request is a cache hit.
        let w = e.alloc(3000).unwrap();
        e.free(w).unwrap();
        let p = e.alloc(3000).unwrap();
        assert_eq!(p, w, "{pool:?}: served from the thread cache");
        std::thread::scope(|s| {
            s.spawn(|| {
                e.free(p).unwrap();
                let before = e.stats();
                let err = e.free(p).unwrap_err();
                assert_eq!(err.code(), cumem::error::CUMEM_ERROR_INVALID_VALUE, "{pool:?}");
                assert_eq!(e.stats().num_frees, before.num_frees);
            });
        });
        let before = e.stats();
        assert!(e.free(p).is_err(), "{pool:?}: double free on the allocating thread");
        assert!(e.free(p + 512).is_err(), "{pool:?}: free inside a block");
        assert!(e.free(0xdead_0000).is_err(), "{pool:?}: unknown pointer");
        let after = e.stats();
        assert_eq!(before, after, "{pool:?}: refused frees change nothing");
        assert_eq!((after.allocated_bytes, after.num_allocations, after.num_frees), (0, 2, 2), "{pool:?}");
        invariants(&after);
    }
}

/// A double free on the allocating thread, through its own cache.
#[test]
fn double_free_through_the_cache() {
    for pool in POOLS {
        let e = engine_tc(pool);
        for _ in 0..3 {
            let p = e.alloc(512).unwrap();
            e.free(p).unwrap();
            let before = e.stats();
            assert!(e.free(p).is_err(), "{pool:?}");
            assert_eq!(e.stats(), before, "{pool:?}");
        }
        assert_eq!(e.stats().num_cache_hits, 2, "{pool:?}");
    }
}

/// When a thread exits, what its cache holds goes to its shard: its cached blocks serve
/// the next request of another thread, and a block it left live can still be freed
/// (once).
#[test]
fn thread_exit_returns_blocks() {
    for pool in POOLS {
        let e = engine_tc(pool);
        let (cached, live) = std::thread::scope(|s| {
            s.spawn(|| {
                let a = e.alloc(8192).unwrap();
                e.free(a).unwrap();
                let live = e.alloc(8192).unwrap(); // a cache hit: live in the thread's cache
                assert_eq!(live, a);
                let b = e.alloc(8192).unwrap();
                e.free(b).unwrap(); // cached at exit
                (b, live)
            })
            .join()
            .unwrap()
        });
        let device_allocs = e.stats().num_device_allocations;
        let q = e.alloc(8192).unwrap();
        assert_eq!(q, cached, "{pool:?}: the exited thread's cached block is reused");
        assert_eq!(e.stats().num_device_allocations, device_allocs, "{pool:?}");
        e.free(live).unwrap();
        assert!(e.free(live).is_err(), "{pool:?}");
        e.free(q).unwrap();
        let st = e.stats();
        invariants(&st);
        assert_eq!((st.allocated_bytes, st.num_allocations, st.num_frees), (0, 4, 4), "{pool:?}");
        e.reclaim(u64::MAX);
        assert_eq!(e.stats().reserved_bytes, 0, "{pool:?}");
    }
}

/// `reclaim` on one thread empties the caches of threads that are still running (and
/// idle), and those threads go on working afterwards.
#[test]
fn reclaim_drains_other_threads_caches() {
    for pool in POOLS {
        let e = engine_with(cfg(pool, true), 4);
        let threads = 3;
        let filled = Barrier::new(threads + 1);
        let mut go = Vec::new();
        std::thread::scope(|s| {
            for t in 0..threads as u64 {
                let (e, filled) = (&e, &filled);
                let (tx, rx) = channel();
                go.push(tx);
                s.spawn(move || {
                    let ps: Vec<u64> = (0..4).map(|i| e.alloc(4096 << (i + t)).unwrap()).collect();
                    ps.iter().for_each(|&p| e.free(p).unwrap());
                    filled.wait();
                    hold(rx);
                    for _ in 0..100 {
                        let p = e.alloc(4096 << t).unwrap();
                        e.free(p).unwrap();
                    }
                });
            }
            filled.wait();
            let before = e.stats();
            assert!(before.reserved_bytes > 0 && before.allocated_bytes == 0, "{pool:?}");
            e.reclaim(u64::MAX);
            let after = e.stats();
            assert_eq!(after.reserved_bytes, 0, "{pool:?}: every cached block was released");
            go.clear();
        });
        let st = e.stats();
        invariants(&st);
        assert_eq!((st.allocated_bytes, st.num_allocations, st.num_frees), (0, 312, 312), "{pool:?}");
    }
}

/// Under a memory limit, blocks idle in another thread's cache are released by the
/// engine's out-of-memory retry, so the request succeeds; `try_alloc` (no retry) fails.
#[test]
fn out_of_memory_retry_drains_caches() {
    // Not expandable, whose thread caches hold no 1 MiB block (the retry is the engine's,
    // the same for every pool).
    for pool in POOLS.into_iter().filter(|p| p.thread_cache_max_size() >= MIB) {
        let limit = 4 * MIB;
        let e = engine_with(Config { limit: Some(Amount::Bytes(limit)), ..cfg(pool, true) }, 1);
        let filled = Barrier::new(2);
        let (done, rx) = channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let ps: Vec<u64> = (0..4).map(|_| e.alloc(MIB).unwrap()).collect();
                ps.iter().for_each(|&p| e.free(p).unwrap());
                filled.wait();
                hold(rx);
            });
            filled.wait();
            // (No statistics read here: with split and expandable that returns cached
            // blocks to the pools.)
            let err = e.try_alloc(MIB).unwrap_err();
            assert!(err.is_oom(), "{pool:?}: the other thread's cache holds the memory: {err}");
            let p = e.alloc(MIB).unwrap();
            let st = e.stats();
            assert_eq!(st.num_alloc_retries, 1, "{pool:?}");
            assert!(st.reserved_bytes <= limit, "{pool:?}");
            invariants(&st);
            e.free(p).unwrap();
            drop(done);
        });
    }
}

/// The same single-threaded sequence gives the same statistics with and without thread
/// caches: current bytes, peaks and counts (hits included) are exact.
#[test]
fn statistics_match_without_thread_caches() {
    for pool in POOLS {
        let run = |tc: bool| {
            let e = engine_with(cfg(pool, tc), 1);
            let mut snaps = Vec::new();
            let w = e.alloc(8000).unwrap();
            e.free(w).unwrap();
            let a = e.alloc(4000).unwrap(); // miss
            let b = e.alloc(8000).unwrap(); // hit (thread cache or pool)
            snaps.push(e.stats());
            e.free(b).unwrap();
            let c = e.alloc(3 * MIB).unwrap(); // beyond the thread caches' sizes
            e.free(a).unwrap();
            snaps.push(e.stats());
            e.reset_stats();
            snaps.push(e.stats());
            let d = e.alloc(8000).unwrap();
            e.free(c).unwrap();
            e.free(d).unwrap();
            snaps.push(e.stats());
            snaps
        };
        let (with, without) = (run(true), run(false));
        for (i, (x, y)) in with.iter().zip(&without).enumerate() {
            invariants(x);
            let key = |s: &Stats| {
                (
                    s.requested_bytes,
                    s.allocated_bytes,
                    s.peak_requested_bytes,
                    s.peak_allocated_bytes,
                    s.num_allocations,
                    s.num_frees,
                    s.num_cache_hits,
                    s.num_cache_misses,
                )
            };
            assert_eq!(key(x), key(y), "{pool:?}, snapshot {i}");
        }
        assert_eq!(with[0].peak_requested_bytes, 12000, "{pool:?}");
    }
}

/// Copies into and out of blocks served by a thread cache, on the allocating thread and
/// on another one, inside a block too; then the blocks free normally.
#[test]
fn copies_reach_cache_blocks() {
    for pool in POOLS {
        let e = engine_tc(pool);
        let w = e.alloc(4096).unwrap();
        e.free(w).unwrap();
        let p = e.alloc(4096).unwrap();
        assert_eq!(p, w);
        fill(&e, p, 4096, 7);
        let q = e.alloc(4096).unwrap();
        e.free(q).unwrap();
        let r = e.alloc(4096).unwrap(); // from the cache again
        std::thread::scope(|s| {
            s.spawn(|| {
                e.copy_htod(r + 1024, &[9u8; 100]).unwrap();
                assert_eq!(read(&e, p, 4096), vec![7u8; 4096]);
                assert!(e.copy_htod(r + 4000, &[0u8; 200]).is_err(), "{pool:?}: crosses the end");
            });
        });
        assert_eq!(read(&e, r + 1024, 100), vec![9u8; 100]);
        let live: Vec<u64> = e.outstanding().iter().map(|o| o.ptr).collect();
        assert_eq!(
            live,
            {
                let mut v = vec![p, r];
                v.sort();
                v
            },
            "{pool:?}"
        );
        e.free(p).unwrap();
        e.free(r).unwrap();
        assert!(e.free(r).is_err());
        assert_eq!(e.stats().allocated_bytes, 0, "{pool:?}");
    }
}

/// Many threads allocating, handing blocks to each other and freeing them, with the
/// statistics read and the caches reclaimed while they run: at the end the counts add
/// up and everything can be released.
#[test]
fn threads_exchange_blocks_while_reclaimed() {
    for pool in POOLS {
        let e = engine_with(cfg(pool, true), 2);
        let threads = 4u64;
        let ops = 3_000u64;
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let rx = std::sync::Mutex::new(rx);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (e, tx, rx) = (&e, tx.clone(), &rx);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..ops {
                        let p = e.alloc(512 + ((i * 7 + t) % 16) * 512).unwrap();
                        if i % 5 == 0 {
                            tx.send(p).unwrap();
                        } else {
                            mine.push(p);
                        }
                        if mine.len() > 8 {
                            e.free(mine.swap_remove(0)).unwrap();
                        }
                        if let Ok(q) = rx.lock().unwrap().try_recv() {
                            e.free(q).unwrap();
                        }
                        if t == 0 && i % 500 == 0 {
                            invariants(&e.stats());
                            e.reclaim(u64::MAX);
                        }
                    }
                    mine.into_iter().for_each(|p| e.free(p).unwrap());
                });
            }
        });
        drop(tx);
        while let Ok(q) = rx.lock().unwrap().try_recv() {
            e.free(q).unwrap();
        }
        let st = e.stats();
        invariants(&st);
        assert_eq!((st.allocated_bytes, st.num_allocations, st.num_frees), (0, threads * ops, threads * ops));
        e.reclaim(u64::MAX);
        assert_eq!(e.stats().reserved_bytes, 0, "{pool:?}");
    }
}

/// `CUMEM_THREAD_CACHE` is read as a switch.
#[test]
fn environment_switch() {
    let c = |v: &str| Config::from_lookup(|k| (k == "CUMEM_THREAD_CACHE").then(|| v.to_string()));
    assert!(c("1").unwrap().thread_cache);
    assert!(!c("0").unwrap().thread_cache);
    assert!(Config::default().thread_cache);
    let m = c("yes").unwrap_err().to_string();
    assert!(m.contains("CUMEM_THREAD_CACHE") && m.contains("accepted"), "{m}");
}

/// Threads exit while another thread keeps claiming the caches (statistics): no exited
/// thread's cache is lost between a claim and the next (its counts, its cached blocks
/// and the block it left live all reach the shards).
#[test]
fn threads_exit_during_claims() {
    for pool in POOLS {
        let e = engine_with(cfg(pool, true), 2);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let left = std::sync::Mutex::new(Vec::new());
        let rounds = 40u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    invariants(&e.stats());
                }
            });
            for _ in 0..rounds {
                std::thread::scope(|s2| {
                    for _ in 0..3 {
                        s2.spawn(|| {
                            for _ in 0..20 {
                                let p = e.alloc(4096).unwrap();
                                e.free(p).unwrap();
                            }
                            left.lock().unwrap().push(e.alloc(4096).unwrap());
                        });
                    }
                });
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let left = left.into_inner().unwrap();
        assert_eq!(left.len() as u64, rounds * 3);
        let st = e.stats();
        assert_eq!(st.num_allocations, rounds * 3 * 21, "{pool:?}: {st:?}");
        assert_eq!(st.num_frees, rounds * 3 * 20, "{pool:?}");
        assert_eq!(st.allocated_bytes, 4096 * left.len() as u64, "{pool:?}");
        for p in left {
            e.free(p).unwrap();
        }
        e.reclaim(u64::MAX);
        let st = e.stats();
        assert_eq!((st.allocated_bytes, st.reserved_bytes), (0, 0), "{pool:?}");
    }
}

/// Random single-threaded sequences (hits and misses of the thread caches, requests above
/// their largest size, resets): the peaks stay exact. The peak of requested bytes is the
/// test's own maximum of live requested bytes since the last reset; with binned (whose
/// blocks are the same with and without thread caches) every peak equals that of the
/// same sequence without thread caches.
#[test]
fn peaks_stay_exact_through_cache_hits() {
    const SIZES: [u64; 7] = [100, 512, 4096, 8000, 70_000, MIB, 3 * MIB];
    for seed in 0..24u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let ops: Vec<(u64, u64)> = (0..400).map(|_| (rnd(100), rnd(1 << 20))).collect();
        for pool in POOLS {
            let run = |tc: bool| {
                let e = engine_with(cfg(pool, tc), 1);
                let (mut live, mut req, mut peak) = (Vec::new(), 0u64, 0u64);
                for &(op, arg) in &ops {
                    match op {
                        0..=49 => {
                            let n = SIZES[(arg % SIZES.len() as u64) as usize] - arg % 50;
                            live.push((e.alloc(n).unwrap(), n));
                            req += n;
                            peak = peak.max(req);
                        }
                        50..=97 if !live.is_empty() => {
                            let (p, n) = live.swap_remove((arg % live.len() as u64) as usize);
                            e.free(p).unwrap();
                            req -= n;
                        }
                        98 => {
                            e.reset_stats();
                            peak = req;
                        }
                        _ => {}
                    }
                }
                let s = e.stats();
                invariants(&s);
                assert_eq!(s.peak_requested_bytes, peak, "{pool:?}, seed {seed}, thread caches {tc}");
                for (p, _) in live {
                    e.free(p).unwrap();
                }
                s
            };
            let (with, without) = (run(true), run(false));
            if pool == PoolKind::Binned {
                let key = |s: &Stats| {
                    (
                        s.peak_requested_bytes,
                        s.peak_allocated_bytes,
                        s.peak_cached_bytes,
                        s.peak_reserved_bytes,
                    )
                };
                assert_eq!(key(&with), key(&without), "seed {seed}");
            }
        }
    }
}

/// Peaks reached by cache hits and frees alone, after a reset (which closes the caches'
/// peak windows): requested and allocated bytes rise above the reset level through hits
/// only, cached bytes through the cache's frees only.
#[test]
fn peaks_reached_by_hits_alone() {
    for pool in POOLS {
        let e = engine_tc(pool);
        let p: Vec<u64> = (0..16).map(|_| e.alloc(4096).unwrap()).collect();
        p.iter().for_each(|&x| e.free(x).unwrap()); // 8 into the thread cache
        let q: Vec<u64> = (0..6).map(|_| e.alloc(4096).unwrap()).collect();
        e.reset_stats();
        let reserved = e.stats().reserved_bytes;
        q[..4].iter().for_each(|&x| e.free(x).unwrap()); // down to 2 blocks: cached peak
        let r: Vec<u64> = (0..6).map(|_| e.alloc(4096).unwrap()).collect(); // up to 8
        e.free(r[0]).unwrap();
        e.free(r[1]).unwrap();
        let s = e.stats();
        assert_eq!(s.num_cache_hits, 6, "{pool:?}: every allocation after the reset was a hit");
        assert_eq!(
            (s.peak_requested_bytes, s.peak_allocated_bytes),
            (8 * 4096, 8 * 4096),
            "{pool:?}: {s:#?}"
        );
        assert_eq!(s.peak_cached_bytes, reserved - 2 * 4096, "{pool:?}: {s:#?}");
        assert_eq!(s.requested_bytes, 6 * 4096);
        q[4..].iter().for_each(|&x| e.free(x).unwrap());
        r[2..].iter().for_each(|&x| e.free(x).unwrap());
    }
}

//! `threads`: aggregate alloc+free pair throughput with N threads at once, as
//! anchor_bench.py's `threads_torch`: all threads start together (they spin on an atomic
//! flag once all are ready), and the result is wall time ÷ total pairs. The engine has
//! `cumem::engine::default_shards()` shards, as in production; one engine per (pool,
//! thread count), reused across repetitions; median of the repetitions.

use crate::pair::time_pairs;
use crate::report::{self, Table};
use crate::{Common, median, parse_counts, parse_sizes};
use clap::Args;
use cumem::{Engine, PoolKind};
use serde::Serialize;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const REPS: usize = 5;
pub const QUICK_REPS: usize = 2;
pub const QUICK_ITERS: u64 = 2_000;
/// Default pairs per thread (anchor_bench.py's count), fewer when a pair is so slow
/// (the `none` pool on CUDA) that one thread would need more than [`MAX_THREAD_TIME`].
pub const ITERS: u64 = 100_000;
pub const MAX_THREAD_TIME: Duration = Duration::from_millis(200);

#[derive(Args, Debug)]
pub struct ThreadsArgs {
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,4,16")]
    pub threads: String,
    /// Allocation size in bytes.
    #[arg(long, default_value = "4096")]
    pub size: String,
    /// Pairs per thread and repetition (default 100 000, fewer for very slow pools;
    /// 2000 with --quick).
    #[arg(long)]
    pub iters: Option<u64>,
    /// `--quick`: 2 repetitions of 2000 pairs per thread.
    #[command(flatten)]
    pub common: Common,
}

#[derive(Serialize, Debug, Clone)]
pub struct ThreadsRow {
    pub bench: &'static str,
    pub pool: &'static str,
    pub device: &'static str,
    pub threads: usize,
    pub size: u64,
    /// Wall time ÷ (threads × iters), median over repetitions.
    pub ns_per_pair: f64,
    pub ns_per_pair_min: f64,
    /// Pairs per thread and repetition.
    pub iters: u64,
    pub reps: usize,
    pub shards: usize,
}

/// One timed run: `threads` threads doing `iters` pairs each; wall ns per pair.
fn run_once(e: &Engine, threads: usize, size: u64, iters: u64) -> Result<f64, String> {
    let ready = AtomicUsize::new(0);
    let go = AtomicBool::new(false);
    let failed = AtomicBool::new(false);
    let wall = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // Warm-up pair: binds the thread to its shard and caches a block there.
                    if time_pairs(e, size, 1).is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    ready.fetch_add(1, Ordering::AcqRel);
                    let mut spins = 0u32;
                    while !go.load(Ordering::Acquire) {
                        spins += 1;
                        if spins < 1000 {
                            std::hint::spin_loop();
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    for _ in 0..iters {
                        match e.alloc(black_box(size)) {
                            Ok(p) => {
                                if e.free(black_box(p)).is_err() {
                                    failed.store(true, Ordering::Relaxed);
                                }
                            }
                            Err(_) => failed.store(true, Ordering::Relaxed),
                        }
                    }
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < threads {
            std::thread::yield_now();
        }
        let t0 = Instant::now();
        go.store(true, Ordering::Release);
        for h in handles {
            if h.join().is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        }
        t0.elapsed()
    });
    if failed.load(Ordering::Relaxed) {
        return Err(format!("threads: an allocation or free of {size} bytes failed with {threads} threads"));
    }
    Ok(wall.as_nanos() as f64 / (threads as u64 * iters).max(1) as f64)
}

pub fn threads_one(
    common: &Common,
    pool: PoolKind,
    threads: usize,
    size: u64,
    iters: Option<u64>,
) -> Result<ThreadsRow, String> {
    let shards = cumem::engine::default_shards();
    let e = common.engine(pool)?;
    let (iters, reps) = if common.quick {
        (iters.unwrap_or(QUICK_ITERS), QUICK_REPS)
    } else {
        let n = match iters {
            Some(n) => n,
            None => {
                time_pairs(&e, size, 1)?;
                let per = time_pairs(&e, size, 100)?.max(1.0);
                ITERS.min((MAX_THREAD_TIME.as_nanos() as f64 / per) as u64).max(100)
            }
        };
        (n, REPS)
    };
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(run_once(&e, threads, size, iters)?);
    }
    Ok(ThreadsRow {
        bench: "threads",
        pool: pool.name(),
        device: common.device.name(),
        threads,
        size,
        ns_per_pair: median(&v),
        ns_per_pair_min: v.iter().copied().fold(f64::INFINITY, f64::min),
        iters,
        reps,
        shards,
    })
}

pub fn run(a: &ThreadsArgs) -> Result<(), String> {
    let pools = a.common.pools()?;
    let counts = parse_counts("--threads", &a.threads)?;
    let size = match parse_sizes(&a.size)?.as_slice() {
        [s] if *s > 0 => *s,
        _ => return Err("--size: give one size of at least 1 byte".into()),
    };
    if counts.is_empty() {
        return Err("--threads: give at least one thread count".into());
    }
    if a.iters == Some(0) {
        return Err("--iters must be at least 1".into());
    }
    let mut bar = a.common.progress((pools.len() * counts.len()) as u64);
    let mut rows = Vec::new();
    for &pool in &pools {
        for &n in &counts {
            bar.set_message(format!("{} / {n} threads", pool.name()));
            let row = threads_one(&a.common, pool, n, size, a.iters)?;
            bar.inc();
            if a.common.json {
                report::json_line(&row);
            }
            rows.push(row);
        }
    }
    bar.finish();
    if !a.common.json {
        println!(
            "{} threads allocating and freeing {} concurrently on {} ({} shards): aggregate ns per pair (wall time / pairs, median of {} repetitions)",
            a.threads,
            report::size_label(size),
            a.common.device.name(),
            cumem::engine::default_shards(),
            rows.first().map_or(0, |r| r.reps)
        );
        let mut headers = vec!["pool".to_string()];
        headers.extend(counts.iter().map(|n| format!("{n} threads")));
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&headers, 1);
        for &pool in &pools {
            let mut cells = vec![pool.name().to_string()];
            for &n in &counts {
                let r = rows.iter().find(|r| r.pool == pool.name() && r.threads == n);
                cells.push(r.map_or("-".into(), |r| report::ns(r.ns_per_pair)));
            }
            t.row(cells);
        }
        t.print();
    }
    Ok(())
}

//! `pair`: the latency of an alloc+free pair that hits the cache, per size. One fresh
//! engine per (pool, size); one pair warms the cache, then repetitions of many pairs in
//! a tight loop are timed as a whole; the result is the median over repetitions.

use crate::report::{self, Table};
use crate::{Common, median, parse_sizes};
use clap::Args;
use cumem::{Engine, PoolKind};
use serde::Serialize;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Repetitions (and with `--quick`).
pub const REPS: usize = 7;
pub const QUICK_REPS: usize = 3;
/// Pairs per repetition with `--quick`.
pub const QUICK_ITERS: u64 = 1_000;
/// Without `--iters`, pairs per repetition are chosen so one repetition takes about this
/// long (at least 1 pair, at most 1 000 000).
pub const TARGET: Duration = Duration::from_millis(25);

#[derive(Args, Debug)]
pub struct PairArgs {
    /// Sizes in bytes, comma-separated (units allowed: 4KiB, 16MiB).
    #[arg(long, default_value = "512,4096,65536,1048576,16777216")]
    pub sizes: String,
    /// Pairs per repetition (default: calibrated to ~25 ms a repetition; 1000 with --quick).
    #[arg(long)]
    pub iters: Option<u64>,
    /// Also time the C library's `malloc`+`free` of each size in the same process, as
    /// the row `malloc` (the reference for the host-side cost of a pair).
    #[arg(long)]
    pub malloc: bool,
    /// `--quick`: 3 repetitions of 1000 pairs.
    #[command(flatten)]
    pub common: Common,
}

#[derive(Serialize, Debug, Clone)]
pub struct PairRow {
    pub bench: &'static str,
    pub pool: &'static str,
    pub device: &'static str,
    pub size: u64,
    /// Median over repetitions.
    pub ns_per_pair: f64,
    pub ns_per_pair_min: f64,
    pub iters: u64,
    pub reps: usize,
    /// Cache hit rate over the timed pairs (0 for the `none` pool).
    pub hit_rate: f64,
}

/// Times `n` pairs of the C library's `malloc`+`free` of `size`, in ns per pair.
pub fn time_malloc_pairs(size: u64, n: u64) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        // SAFETY: malloc's result (possibly null) goes straight to free.
        unsafe { libc::free(black_box(libc::malloc(black_box(size as usize)))) };
    }
    t0.elapsed().as_nanos() as f64 / n.max(1) as f64
}

/// The `malloc` row: as [`pair_one`], for the C library's allocator.
pub fn malloc_one(common: &Common, size: u64, iters: Option<u64>) -> PairRow {
    time_malloc_pairs(size, 1);
    let (n, reps) = if common.quick {
        (iters.unwrap_or(QUICK_ITERS), QUICK_REPS)
    } else {
        let per = time_malloc_pairs(size, 10_000).max(1.0);
        (iters.unwrap_or(((TARGET.as_nanos() as f64 / per) as u64).clamp(1, 1_000_000)), REPS)
    };
    let v: Vec<f64> = (0..reps).map(|_| time_malloc_pairs(size, n)).collect();
    PairRow {
        bench: "pair",
        pool: "malloc",
        device: "host",
        size,
        ns_per_pair: median(&v),
        ns_per_pair_min: v.iter().copied().fold(f64::INFINITY, f64::min),
        iters: n,
        reps,
        hit_rate: 0.0,
    }
}

/// Times `n` pairs of `size`, in ns per pair.
pub fn time_pairs(e: &Engine, size: u64, n: u64) -> Result<f64, String> {
    let t0 = Instant::now();
    for _ in 0..n {
        let p = e.alloc(black_box(size)).map_err(|e| e.to_string())?;
        e.free(black_box(p)).map_err(|e| e.to_string())?;
    }
    Ok(t0.elapsed().as_nanos() as f64 / n.max(1) as f64)
}

/// Pairs per repetition so that one takes about `target`: doubles a count until a run
/// of it takes a tenth of the target, then scales.
pub fn calibrate(e: &Engine, size: u64, target: Duration, max: u64) -> Result<u64, String> {
    let mut n = 1u64;
    loop {
        let ns = time_pairs(e, size, n)? * n as f64;
        if ns >= target.as_nanos() as f64 / 10.0 || n >= max {
            let per = ns / n as f64;
            return Ok(((target.as_nanos() as f64 / per.max(1.0)) as u64).clamp(1, max));
        }
        n *= 2;
    }
}

pub fn pair_one(common: &Common, pool: PoolKind, size: u64, iters: Option<u64>) -> Result<PairRow, String> {
    let e = common.engine(pool)?;
    time_pairs(&e, size, 1)?; // warm-up: the block is now cached
    let (n, reps) = if common.quick {
        (iters.unwrap_or(QUICK_ITERS), QUICK_REPS)
    } else {
        let n = match iters {
            Some(n) => n,
            None => calibrate(&e, size, TARGET, 1_000_000)?,
        };
        (n, REPS)
    };
    e.reset_stats();
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(time_pairs(&e, size, n)?);
    }
    let st = e.stats();
    Ok(PairRow {
        bench: "pair",
        pool: pool.name(),
        device: common.device.name(),
        size,
        ns_per_pair: median(&v),
        ns_per_pair_min: v.iter().copied().fold(f64::INFINITY, f64::min),
        iters: n,
        reps,
        hit_rate: st.cache_hit_rate,
    })
}

pub fn run(a: &PairArgs) -> Result<(), String> {
    let pools = a.common.pools()?;
    let sizes = parse_sizes(&a.sizes)?;
    if sizes.is_empty() || sizes.contains(&0) {
        return Err("--sizes: give sizes of at least 1 byte".into());
    }
    if a.iters == Some(0) {
        return Err("--iters must be at least 1".into());
    }
    let mut bar = a.common.progress((pools.len() * sizes.len()) as u64);
    let mut rows = Vec::new();
    for &pool in &pools {
        for &size in &sizes {
            bar.set_message(format!("{} / {}", pool.name(), report::size_label(size)));
            let row = pair_one(&a.common, pool, size, a.iters)?;
            bar.inc();
            if a.common.json {
                report::json_line(&row);
            }
            rows.push(row);
        }
    }
    if a.malloc {
        for &size in &sizes {
            let row = malloc_one(&a.common, size, a.iters);
            if a.common.json {
                report::json_line(&row);
            }
            rows.push(row);
        }
    }
    bar.finish();
    let mut pools: Vec<&str> = pools.iter().map(|p| p.name()).collect();
    if a.malloc {
        pools.push("malloc");
    }
    if !a.common.json {
        println!(
            "alloc+free pair of a cache hit on {}: ns per pair (median of {} repetitions)",
            a.common.device.name(),
            rows.first().map_or(0, |r| r.reps)
        );
        let mut headers = vec!["pool".to_string()];
        headers.extend(sizes.iter().map(|&s| report::size_label(s)));
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&headers, 1);
        for &pool in &pools {
            let mut cells = vec![pool.to_string()];
            for &size in &sizes {
                let r = rows.iter().find(|r| r.pool == pool && r.size == size);
                cells.push(r.map_or("-".into(), |r| report::ns(r.ns_per_pair)));
            }
            t.row(cells);
        }
        t.print();
    }
    Ok(())
}

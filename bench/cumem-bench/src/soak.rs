//! `soak`: a long run of random allocations, frees and checked copies from several
//! threads under a tight memory limit, to find what short tests miss (leaks, slow
//! growth of reserved memory or RSS, corruption, lost throughput). Each thread keeps up
//! to [`MAX_LIVE`] blocks of random sizes (log-uniform, 1 B to `--max-size`), writes a
//! pattern into each (the thread, a sequence number) and checks its first and last bytes
//! before freeing it; when the limit refuses an allocation, the thread frees half its
//! blocks. Every `--interval` seconds one line reports ops/s, the process RSS and the
//! engine's reserved and allocated bytes; at the end everything is freed and reclaimed,
//! and the run fails if a pattern was overwritten or memory stays reserved.

use crate::report::{self, Table};
use crate::{Common, parse_sizes};
use clap::Args;
use cumem::format::format_bytes;
use cumem::{Config, Engine, Error, PoolKind};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Most blocks one thread holds at once.
pub const MAX_LIVE: usize = 256;
/// Bytes checked at each end of a block.
const CHECK: u64 = 64;

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Length of the run per pool, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// Threads allocating at once.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// `JULIA_CUDA_MEMORY_LIMIT` of the engine (bytes or with a unit).
    #[arg(long, default_value = "128MiB")]
    pub limit: String,
    /// Largest request, bytes or with a unit.
    #[arg(long, default_value = "8MiB")]
    pub max_size: String,
    /// Seconds between report lines (default: a tenth of the run, at least 1).
    #[arg(long)]
    pub interval: Option<f64>,
    /// `--quick`: 2 seconds, 2 threads.
    #[command(flatten)]
    pub common: Common,
}

/// One report line: the state at `t_s` and the rates since the previous line.
#[derive(Serialize, Debug, Clone)]
pub struct SoakRow {
    pub bench: &'static str,
    pub pool: &'static str,
    pub device: &'static str,
    pub threads: usize,
    pub t_s: f64,
    /// Allocations + frees per second since the previous line, all threads.
    pub ops_per_s: f64,
    pub rss_bytes: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub limit_bytes: u64,
    /// Allocations refused by the limit so far (each followed by freeing half the
    /// thread's blocks).
    pub ooms: u64,
    /// Blocks whose pattern was checked so far, and those found overwritten.
    pub checked: u64,
    pub corrupted: u64,
    /// In the last line only: whether nothing stayed reserved after freeing everything
    /// and a full reclaim.
    pub clean: Option<bool>,
}

/// The resident set size of this process (`VmRSS` of /proc/self/status), 0 if unknown.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            l.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    ooms: AtomicU64,
    checked: AtomicU64,
    corrupted: AtomicU64,
}

/// The pattern byte of block number `seq` of thread `t`.
fn tag(t: usize, seq: u64) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(t as u8 * 7 + 1)
}

fn check_and_free(e: &Engine, p: u64, bytes: u64, tag: u8, c: &Counts) -> Result<(), String> {
    let mut ok = true;
    let mut buf = vec![0u8; CHECK.min(bytes) as usize];
    for at in [p, p + bytes - buf.len() as u64] {
        e.copy_dtoh(&mut buf, at).map_err(|err| format!("reading block {p:#x}: {err}"))?;
        ok &= buf.iter().all(|&b| b == tag);
    }
    c.checked.fetch_add(1, Relaxed);
    if !ok {
        c.corrupted.fetch_add(1, Relaxed);
    }
    e.free(p).map_err(|err| format!("freeing block {p:#x}: {err}"))?;
    c.ops.fetch_add(1, Relaxed);
    Ok(())
}

fn worker(e: &Engine, t: usize, max_size: u64, stop: &AtomicBool, c: &Counts) -> Result<(), String> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let bits = 64 - max_size.leading_zeros() as u64;
    let mut live: Vec<(u64, u64, u8)> = Vec::with_capacity(MAX_LIVE);
    let mut seq = 0u64;
    while !stop.load(Relaxed) {
        if live.len() >= MAX_LIVE || (!live.is_empty() && next() % 2 == 0) {
            let (p, n, g) = live.swap_remove((next() % live.len() as u64) as usize);
            check_and_free(e, p, n, g, c)?;
            continue;
        }
        let bytes = (1 + next() % (1u64 << (next() % bits))).min(max_size);
        match e.alloc(bytes) {
            Ok(p) => {
                seq += 1;
                let g = tag(t, seq);
                e.memset(p, g, bytes).map_err(|err| format!("writing block {p:#x}: {err}"))?;
                live.push((p, bytes, g));
                c.ops.fetch_add(1, Relaxed);
            }
            Err(Error::OutOfMemory(_)) => {
                c.ooms.fetch_add(1, Relaxed);
                for _ in 0..live.len().div_ceil(2) {
                    let (p, n, g) = live.swap_remove((next() % live.len() as u64) as usize);
                    check_and_free(e, p, n, g, c)?;
                }
            }
            Err(err) => return Err(format!("alloc({bytes}): {err}")),
        }
    }
    for (p, n, g) in live {
        check_and_free(e, p, n, g, c)?;
    }
    Ok(())
}

fn soak_pool(a: &SoakArgs, pool: PoolKind, limit: u64, max_size: u64) -> Result<Vec<SoakRow>, String> {
    let quick = a.common.quick;
    let seconds = if quick { 2.0 } else { a.seconds };
    let threads = if quick { 2 } else { a.threads.max(1) };
    let interval = a.interval.unwrap_or((seconds / 10.0).max(1.0)).max(0.1);
    let cfg = Config { pool, limit: Some(cumem::config::Amount::Bytes(limit)), ..Config::default() };
    let e = Engine::with_device(
        cfg,
        a.common.device.open(a.common.host_capacity)?,
        cumem::engine::default_shards(),
    )
    .map_err(|err| format!("cannot create the engine: {err}"))?;
    let stop = AtomicBool::new(false);
    let counts = Counts::default();
    let start = Instant::now();
    let mut rows = Vec::new();
    let row = |t_s: f64, ops_per_s: f64, clean: Option<bool>| {
        let s = e.stats();
        SoakRow {
            bench: "soak",
            pool: pool.name(),
            device: a.common.device.name(),
            threads,
            t_s,
            ops_per_s,
            rss_bytes: rss_bytes(),
            reserved_bytes: s.reserved_bytes,
            allocated_bytes: s.allocated_bytes,
            limit_bytes: limit,
            ooms: counts.ooms.load(Relaxed),
            checked: counts.checked.load(Relaxed),
            corrupted: counts.corrupted.load(Relaxed),
            clean,
        }
    };
    let result: Result<(), String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (e, stop, counts) = (&e, &stop, &counts);
                sc.spawn(move || {
                    let r = worker(e, t, max_size, stop, counts);
                    if r.is_err() {
                        stop.store(true, Relaxed);
                    }
                    r
                })
            })
            .collect();
        let (mut last_t, mut last_ops) = (0.0, 0);
        while !stop.load(Relaxed) {
            let next = last_t + interval;
            let wait = next.min(seconds) - start.elapsed().as_secs_f64();
            if wait > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(wait.min(0.25)));
                continue;
            }
            let t = start.elapsed().as_secs_f64();
            let ops = counts.ops.load(Relaxed);
            let r = row(t, (ops - last_ops) as f64 / (t - last_t), None);
            if a.common.json {
                report::json_line(&r);
            }
            rows.push(r);
            (last_t, last_ops) = (t, ops);
            if t >= seconds {
                stop.store(true, Relaxed);
            }
        }
        hs.into_iter().try_for_each(|h| h.join().map_err(|_| "a soak thread panicked".to_string())?)
    });
    result?;
    e.reclaim(u64::MAX);
    let s = e.stats();
    let clean = s.reserved_bytes == 0 && s.allocated_bytes == 0;
    let t = start.elapsed().as_secs_f64();
    let last = row(t, 0.0, Some(clean));
    if a.common.json {
        report::json_line(&last);
    }
    rows.push(last);
    Ok(rows)
}

pub fn run(a: &SoakArgs) -> Result<(), String> {
    let one = |what: &str, v: &str| -> Result<u64, String> {
        match parse_sizes(v)?.as_slice() {
            [b] => Ok(*b),
            _ => Err(format!("{what}: one size, e.g. 256MiB")),
        }
    };
    let limit = one("--limit", &a.limit)?;
    let max_size = one("--max-size", &a.max_size)?.min(limit);
    if !(a.seconds > 0.0) {
        return Err("--seconds: a positive number".into());
    }
    let mut failed = Vec::new();
    for pool in a.common.pools()? {
        let rows = soak_pool(a, pool, limit, max_size)?;
        let end = rows.last().expect("a final line");
        if !a.common.json {
            let mut tab = Table::new(
                &["pool", "t (s)", "ops/s", "RSS", "reserved", "allocated", "OOMs", "checked", "corrupted"],
                1,
            );
            for r in &rows[..rows.len() - 1] {
                tab.row(vec![
                    r.pool.into(),
                    format!("{:.0}", r.t_s),
                    format!("{:.0}", r.ops_per_s),
                    format_bytes(r.rss_bytes),
                    format_bytes(r.reserved_bytes),
                    format_bytes(r.allocated_bytes),
                    r.ooms.to_string(),
                    r.checked.to_string(),
                    r.corrupted.to_string(),
                ]);
            }
            println!(
                "soak: {} pool, {} threads, limit {}, sizes 1 B to {}, {} device",
                pool.name(),
                end.threads,
                format_bytes(limit),
                format_bytes(max_size),
                end.device
            );
            print!("{}", tab.render());
            println!(
                "end: {} blocks checked, {} corrupted; after freeing all and reclaim: reserved {}, RSS {} ({})\n",
                end.checked,
                end.corrupted,
                format_bytes(end.reserved_bytes),
                format_bytes(end.rss_bytes),
                if end.clean == Some(true) { "clean" } else { "NOT CLEAN" }
            );
        }
        if end.corrupted > 0 || end.clean != Some(true) {
            failed.push(pool.name());
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("soak failed (corruption or a leak) on: {}", failed.join(", ")))
    }
}

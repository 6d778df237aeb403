//! `cumem-bench`: CuMem's benchmark tool (a crate of its own, so that the engine
//! library does not depend on what only the benchmarks use). The binary is `src/main.rs`;
//! this library also serves `examples/fragcheck.rs`.
//!
//! - `replay`: replays allocation traces (`data/*.trace` by default) through each pool;
//!   `--timeline FILE` also draws the memory timeline of a cold pass ([`timeline`]);
//! - `pair`: alloc+free pair latency of a cache hit, per size;
//! - `threads`: aggregate pair throughput with several threads;
//! - `soak`: a long random run from several threads under a tight limit, patterns
//!   checked, with ops/s, RSS and reserved bytes over time;
//! - `chart`: an SVG of replay (and pair) results beside the anchors of
//!   `bench/anchors/anchor_bench.py`.
//!
//! Tables on stdout by default; `--json` prints one JSON object per line instead.
//! `--quick` is a mode small enough for CI: see each subcommand's help.

pub mod chart;
pub mod pair;
pub mod replay;
pub mod report;
pub mod soak;
pub mod threads;
pub mod timeline;
pub mod trace;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cumem::device::{CudaDevice, Device, HostDevice};
use cumem::{Config, Engine, PoolKind};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Default capacity of the host device (`--host-capacity`): large enough for every trace;
/// the bench never touches the pages, so host memory is only committed lazily.
pub const HOST_CAPACITY: u64 = 64 << 30;

#[derive(Parser)]
#[command(name = "cumem-bench", version, about = "CuMem's benchmark tool")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay allocation traces through the pools: ns per event (cold and warm passes),
    /// peak reserved ÷ peak live, cache hit rate, device allocations.
    Replay(replay::ReplayArgs),
    /// Alloc+free pair latency of a cache hit, per size (median of repetitions).
    Pair(pair::PairArgs),
    /// Aggregate ns per alloc+free pair with several threads at once.
    Threads(threads::ThreadsArgs),
    /// Random allocations, frees and checked copies from several threads under a tight
    /// limit for a while: ops/s, RSS and reserved bytes over time; fails on corruption
    /// or a leak.
    Soak(soak::SoakArgs),
    /// SVG chart of replay and pair results beside the anchor figures.
    Chart(chart::ChartArgs),
}

/// Options shared by the measuring subcommands.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Pools: `all` or a comma-separated list of binned, split, expandable, simple, none.
    #[arg(long, default_value = "all")]
    pub pool: String,
    /// Device under the pools: host memory standing in for a GPU, or CUDA device 0.
    #[arg(long, value_enum, default_value_t = DeviceArg::Host)]
    pub device: DeviceArg,
    /// One JSON object per line on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A small, fast run (for CI).
    #[arg(long)]
    pub quick: bool,
    /// Capacity of the host device (`--device host`; ignored for CUDA): bytes or an
    /// amount with a unit (`16GiB`), what the pools see as the device's memory. The
    /// expandable pool reserves address space of 1⅛ × this per arena; valgrind's tools
    /// (callgrind) cannot reserve the default's (two arenas of 72 GiB exceed the address
    /// space valgrind manages), so run them with `--host-capacity 16GiB`, enough for every
    /// trace in `data/`. A trace whose peak exceeds it fails its allocations (the `failed`
    /// column).
    #[arg(long, value_name = "BYTES", default_value_t = HOST_CAPACITY, value_parser = parse_capacity)]
    pub host_capacity: u64,
}

/// Parses `--host-capacity`: a positive byte count (`17179869184`, `16GiB`).
fn parse_capacity(s: &str) -> Result<u64, String> {
    match cumem::config::parse_amount("--host-capacity", s) {
        Ok(cumem::config::Amount::Bytes(b)) if b > 0 => Ok(b),
        _ => Err(format!("{s:?} is not a positive size in bytes (16GiB, 17179869184)")),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    Host,
    Cuda,
}

impl DeviceArg {
    pub fn name(self) -> &'static str {
        match self {
            DeviceArg::Host => "host",
            DeviceArg::Cuda => "cuda",
        }
    }

    /// Opens the device: for `Host`, a host device of `host_capacity` bytes.
    pub fn open(self, host_capacity: u64) -> Result<Box<dyn Device>, String> {
        Ok(match self {
            DeviceArg::Host => Box::new(HostDevice::new(Some(host_capacity))),
            DeviceArg::Cuda => Box::new(CudaDevice::new(0).map_err(|e| format!("--device cuda: {e}"))?),
        })
    }
}

impl Common {
    pub fn pools(&self) -> Result<Vec<PoolKind>, String> {
        parse_pools(&self.pool)
    }

    /// A fresh engine with `pool` over a fresh device, with the default number of shards
    /// (what `Engine::new`, and so the C ABI and Julia, use); thread caches as
    /// `CUMEM_THREAD_CACHE` says (on unless `0`), the only engine variable read here.
    pub fn engine(&self, pool: PoolKind) -> Result<Engine, String> {
        let thread_cache =
            Config::from_lookup(|k| if k == "CUMEM_THREAD_CACHE" { std::env::var(k).ok() } else { None })
                .map_err(|e| e.to_string())?
                .thread_cache;
        let cfg = Config { pool, thread_cache, ..Config::default() };
        Engine::with_device(cfg, self.device.open(self.host_capacity)?, cumem::engine::default_shards())
            .map_err(|e| format!("cannot create the engine: {e}"))
    }

    pub fn progress(&self, len: u64) -> Progress {
        Progress::new(len, !self.json)
    }
}

/// Parses `all` or a comma-separated list of pool names (duplicates dropped).
pub fn parse_pools(s: &str) -> Result<Vec<PoolKind>, String> {
    let mut v = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kinds = if name.eq_ignore_ascii_case("all") {
            PoolKind::ALL.to_vec()
        } else {
            vec![PoolKind::parse(name).map_err(|_| {
                format!("--pool: {name:?} is not a pool; accepted: all, binned, split, expandable, simple, none (comma-separated)")
            })?]
        };
        for k in kinds {
            if !v.contains(&k) {
                v.push(k);
            }
        }
    }
    if v.is_empty() {
        return Err("--pool: no pool given".into());
    }
    Ok(v)
}

/// Parses a comma-separated list of byte sizes (`4096`, `4KiB`, `16MiB`).
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match cumem::config::parse_amount("--sizes", x) {
            Ok(cumem::config::Amount::Bytes(b)) => Ok(b),
            _ => Err(format!("--sizes: {x:?} is not a size in bytes (4096, 64KiB, 16MiB)")),
        })
        .collect()
}

/// Parses a comma-separated list of positive integers.
pub fn parse_counts(what: &str, s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{what}: {x:?} is not a positive integer"))
        })
        .collect()
}

/// Median of a non-empty slice (mean of the middle two for an even length).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// A progress bar on stderr that only appears once a run has taken more than a second,
/// and never with `--json` or when stderr is not a terminal.
pub struct Progress {
    bar: ProgressBar,
    allowed: bool,
    shown: bool,
    start: Instant,
}

impl Progress {
    fn new(len: u64, allowed: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress {
            bar,
            allowed: allowed && std::io::stderr().is_terminal(),
            shown: false,
            start: Instant::now(),
        }
    }

    pub fn set_message(&mut self, msg: String) {
        self.bar.set_message(msg);
        self.maybe_show();
    }

    pub fn inc(&mut self) {
        self.bar.inc(1);
        self.maybe_show();
    }

    fn maybe_show(&mut self) {
        if self.allowed && !self.shown && self.start.elapsed() > Duration::from_secs(1) {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// Runs the command line `std::env::args()` asks for; exits with status 1 and a
/// message on stderr when it fails.
pub fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Replay(a) => replay::run(&a),
        Cmd::Pair(a) => pair::run(&a),
        Cmd::Threads(a) => threads::run(&a),
        Cmd::Soak(a) => soak::run(&a),
        Cmd::Chart(a) => chart::run(&a),
    };
    if let Err(e) = r {
        eprintln!("cumem-bench: {e}");
        std::process::exit(1);
    }
}

//! Replays allocation traces (format in data/README.md) through the pools
//! on the host device and prints, per trace and pool, peak reserved ÷ peak live bytes of
//! the cold pass, cold and warm ns/event, and device allocations of each warm pass
//! (mean over runs; max).
//!
//! ```text
//! cargo run --release -p cumem-bench --example fragcheck -- [--pools split,binned] [--passes 5] [--runs 3] [--device host|fake|cuda] [--seed 0] TRACE...
//! ```
//!
//! As the bench tool (`cumem-bench replay`): one engine per (trace, pool, run); pass 1
//! starts empty (cold), passes 2.. find the cache it left (warm); blocks still alive at
//! the end of a pass are freed after its timing. `--runs` repeats that with fresh
//! engines and reports the min–max of reserved/live (device addresses, and so best-fit
//! tie-breaks, differ between runs); `--device fake` gives each run its own random
//! address order (and no memory: timings are then not the host device's). `DETAIL=1` prints the state at the cold pass's
//! peak reserved. `CAPACITY_GIB=16` sizes the host device (default 1024 GiB; valgrind needs
//! a smaller one, since the expandable pool reserves 1⅛ × the capacity of addresses).
use cumem::device::{CudaDevice, Device, HostDevice};
use cumem::{Config, Engine, PoolKind};
use cumem_bench::median;
use cumem_bench::replay;
use cumem_bench::trace::Trace;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A device that hands out random, non-overlapping, 2 MiB-aligned addresses and no
/// memory (fragcheck never touches it): each run sees a different address order, as
/// real devices do between processes, so best-fit tie-breaks differ.
struct FakeDevice {
    /// base → size, and the xorshift state.
    state: Mutex<(BTreeMap<u64, u64>, u64)>,
}

impl Device for FakeDevice {
    fn name(&self) -> &str {
        "fake"
    }
    fn is_host(&self) -> bool {
        false
    }
    fn alloc(&self, bytes: u64) -> cumem::Result<u64> {
        let mut st = self.state.lock().unwrap();
        loop {
            st.1 ^= st.1 << 13;
            st.1 ^= st.1 >> 7;
            st.1 ^= st.1 << 17;
            let base = (st.1 % (1 << 26)) << 21; // 2 MiB granules below 128 TiB
            let clear_below = st.0.range(..base).next_back().is_none_or(|(&b, &s)| b + s <= base);
            let clear_above = st.0.range(base..).next().is_none_or(|(&b, _)| base + bytes <= b);
            if clear_below && clear_above {
                st.0.insert(base, bytes);
                return Ok(base);
            }
        }
    }
    unsafe fn free(&self, ptr: u64, _bytes: u64) -> cumem::Result<()> {
        self.state.lock().unwrap().0.remove(&ptr);
        Ok(())
    }
    fn mem_info(&self) -> cumem::Result<(u64, u64)> {
        Ok((1 << 46, 1 << 46))
    }
    unsafe fn copy_htod(&self, _: u64, _: *const u8, _: u64) -> cumem::Result<()> {
        unimplemented!()
    }
    unsafe fn copy_dtoh(&self, _: *mut u8, _: u64, _: u64) -> cumem::Result<()> {
        unimplemented!()
    }
    unsafe fn copy_dtod(&self, _: u64, _: u64, _: u64) -> cumem::Result<()> {
        unimplemented!()
    }
    unsafe fn memset(&self, _: u64, _: u8, _: u64) -> cumem::Result<()> {
        unimplemented!()
    }
}

/// One pass, as `cumem-bench replay` times it; returns ns/event. With `detail`, also
/// records the state at each new peak of reserved bytes (inside the timed loop).
fn pass(e: &Engine, t: &Trace, ptrs: &mut [u64], detail: &mut Option<String>) -> f64 {
    let out = match detail.as_mut() {
        None => replay::pass(e, &t.ops, ptrs),
        Some(snap) => {
            let (mut live, mut last_peak) = (0u64, 0u64);
            let mut sizes = vec![0u64; t.slots];
            replay::pass_observed(e, &t.ops, ptrs, |e, op| {
                let slot = op.slot as usize;
                if op.is_free() {
                    live -= sizes[slot];
                    return;
                }
                sizes[slot] = op.bytes;
                live += op.bytes;
                let s = e.stats();
                if s.peak_reserved_bytes > last_peak {
                    last_peak = s.peak_reserved_bytes;
                    *snap = format!(
                        "at peak reserved {} MiB: live {} alloc {} inactive_split {} cached {} (req {})",
                        s.reserved_bytes >> 20,
                        live >> 20,
                        s.allocated_bytes >> 20,
                        s.inactive_split_bytes >> 20,
                        s.cached_bytes >> 20,
                        op.bytes >> 20
                    );
                }
            })
        }
    };
    assert_eq!((out.failed, out.free_errors), (0, 0), "{}: failed allocations or frees", t.name);
    out.ns / t.ops.len() as f64
}

fn main() {
    let mut pools: Vec<PoolKind> = PoolKind::ALL.to_vec();
    let (mut passes, mut runs, mut seed, mut each) = (5usize, 1usize, 0u64, false);
    let mut device = String::from("host");
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().expect("option without a value");
        match a.as_str() {
            "--pools" => pools = value().split(',').map(|p| PoolKind::parse(p).unwrap()).collect(),
            "--passes" => passes = value().parse().unwrap(),
            "--runs" => runs = value().parse().unwrap(),
            "--device" => device = value(),
            "--seed" => seed = value().parse().unwrap(),
            "--each" => each = true,
            _ => paths.push(a),
        }
    }
    let detail = std::env::var("DETAIL").is_ok();
    // The host device's capacity: `CAPACITY_GIB` (default 1024; under valgrind, whose
    // address space is smaller, 16 lets the expandable pool reserve its range).
    let capacity =
        std::env::var("CAPACITY_GIB").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(1024) << 30;
    println!(
        "{:16} {:7} {:>13} {:>8} {:>8} {:>9}  warm devA per pass (mean over runs; max)",
        "trace", "pool", "reserved/live", "cold ns", "warm ns", "cold devA"
    );
    for path in &paths {
        let t = Trace::load(std::path::Path::new(path)).unwrap_or_else(|e| panic!("{e}"));
        for &pool in &pools {
            let (mut lo, mut hi) = (f64::MAX, 0f64);
            let (mut cold, mut warm) = (Vec::new(), Vec::new());
            let (mut cold_dev, mut per_pass) = (0, vec![(0u64, 0u64); passes.saturating_sub(1)]);
            let mut snap = None;
            for run in 0..runs {
                let dev: Box<dyn Device> = match device.as_str() {
                    "host" => Box::new(HostDevice::new(Some(capacity))),
                    "cuda" => Box::new(CudaDevice::new(0).unwrap()),
                    "fake" => Box::new(FakeDevice {
                        state: Mutex::new((
                            BTreeMap::new(),
                            0x9E37_79B9_7F4A_7C15
                                ^ (seed + run as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
                        )),
                    }),
                    d => panic!("--device {d}: host, fake or cuda"),
                };
                let e = Engine::with_device(Config { pool, ..Config::default() }, dev, 1).unwrap();
                let mut ptrs = vec![0u64; t.slots];
                snap = detail.then(String::new);
                cold.push(pass(&e, &t, &mut ptrs, &mut snap));
                let s = e.stats();
                cold_dev = s.num_device_allocations;
                let r = s.peak_reserved_bytes as f64 / t.peak_live as f64;
                if each {
                    println!("run {run} {} {} {r:.4}", t.name, pool.name());
                }
                (lo, hi) = (lo.min(r), hi.max(r));
                for (sum, max) in per_pass.iter_mut() {
                    let d0 = e.stats().num_device_allocations;
                    warm.push(pass(&e, &t, &mut ptrs, &mut None));
                    let d = e.stats().num_device_allocations - d0;
                    (*sum, *max) = (*sum + d, (*max).max(d));
                }
            }
            let range = if runs > 1 { format!("{lo:.3}–{hi:.3}") } else { format!("{lo:.3}") };
            println!(
                "{:16} {:7} {:>13} {:>8.0} {:>8.0} {:>9}  {}",
                t.name,
                pool.name(),
                range,
                median(&cold),
                median(&warm),
                cold_dev,
                per_pass
                    .iter()
                    .map(|&(sum, max)| format!("{:.1};{max}", sum as f64 / runs as f64))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            if let Some(s) = snap.filter(|s| !s.is_empty()) {
                println!("    {s}");
            }
        }
    }
}

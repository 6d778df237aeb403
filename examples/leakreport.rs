//! Cost of the leak report at `CUMEM_DEBUG=2`: ms per live allocation of the first
//! `memory_status()` (which resolves the native backtraces) and µs per allocation of the
//! second (frames already resolved once), with N live allocations made from a few call
//! sites, as a program's arrays are.
//!
//! ```text
//! cargo run --release --example leakreport [N]      # default: 3000
//! ```

use cumem::{Config, Engine, PoolKind};
use std::time::Instant;

#[inline(never)]
fn site_a(e: &Engine, n: u64) -> u64 {
    e.alloc(n).unwrap()
}

#[inline(never)]
fn site_b(e: &Engine, n: u64) -> u64 {
    e.alloc(n * 2).unwrap()
}

fn main() {
    let n: usize = std::env::args().nth(1).map_or(3000, |s| s.parse().expect("N: a number"));
    let cfg = Config { pool: PoolKind::Binned, debug: 2, ..Config::default() };
    let dev = Box::new(cumem::device::HostDevice::new(Some(1 << 32)));
    let e = Engine::with_device(cfg, dev, 1).unwrap();
    let ptrs: Vec<u64> = (0..n).map(|i| if i % 2 == 0 { site_a(&e, 64) } else { site_b(&e, 64) }).collect();
    let t = Instant::now();
    let first = cumem::report::memory_status(&e, cumem::report::Allocations::Listed);
    let t1 = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let second = cumem::report::memory_status(&e, cumem::report::Allocations::Listed);
    let t2 = t.elapsed().as_secs_f64();
    assert_eq!(first.lines().count(), second.lines().count());
    println!(
        "{n} live allocations, {} report lines: first report {:.3} ms per allocation ({:.2} s), \
         second {:.1} µs per allocation",
        first.lines().count(),
        t1 * 1e3 / n as f64,
        t1,
        t2 * 1e6 / n as f64
    );
    for p in ptrs {
        e.free(p).unwrap();
    }
}

//! Best-of-5 ns per 4 KiB cache-hit alloc+free pair for every pool on the host device,
//! one shard, and glibc's `malloc`+`free` of the same size in the same process.
//! `CUMEM_THREAD_CACHE=0` turns the thread caches off (as any engine variable).
use cumem::{Config, Engine, PoolKind, device::HostDevice};
use std::time::Instant;

fn best(mut pair: impl FnMut()) -> f64 {
    let n = 5_000_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            pair();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn main() {
    let base = Config::from_env().unwrap();
    for pool in PoolKind::ALL {
        let e =
            Engine::with_device(Config { pool, ..base.clone() }, Box::new(HostDevice::new(None)), 1).unwrap();
        let ns = best(|| {
            let p = e.alloc(std::hint::black_box(4096)).unwrap();
            e.free(p).unwrap();
        });
        println!("{:10} {:.1} ns/pair", pool.name(), ns);
    }
    let ns = best(|| unsafe {
        let p = libc::malloc(std::hint::black_box(4096));
        libc::free(std::hint::black_box(p));
    });
    println!("{:10} {:.1} ns/pair", "glibc", ns);
}

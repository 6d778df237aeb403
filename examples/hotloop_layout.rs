//! Whether the cache-hit pair's time depends on where the engine's heap objects land:
//! for each padding P (bytes of a heap allocation made before the engine, which shifts
//! the addresses of the shard array, the live table and the pool's lists), the best of
//! 5 runs of 1 000 000 4 KiB pairs, one shard, host device. The instructions per pair
//! are the same for every P (callgrind), so differences are the CPU's (store-to-load
//! aliasing at equal address bits 0-11, cache-set conflicts), not the code's.
//! `cargo run --release --example hotloop_layout -- split` (`CUMEM_THREAD_CACHE=0` for
//! the shard path alone).
use cumem::{Config, Engine, PoolKind, device::HostDevice};
use std::time::Instant;

fn main() {
    let pool = PoolKind::parse(&std::env::args().nth(1).unwrap_or("split".into())).unwrap();
    let base = Config::from_env().unwrap();
    for pad in (0..4096).step_by(256) {
        let padding = vec![1u8; pad + 16];
        let e =
            Engine::with_device(Config { pool, ..base.clone() }, Box::new(HostDevice::new(None)), 1).unwrap();
        let n = 1_000_000;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                let p = e.alloc(std::hint::black_box(4096)).unwrap();
                e.free(p).unwrap();
            }
            best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        println!("{} pad {pad:5}: {best:.1} ns/pair", pool.name());
        drop(e);
        drop(padding);
    }
}

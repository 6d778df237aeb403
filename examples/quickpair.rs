use cumem::{Config, Engine, PoolKind, device::HostDevice};
use std::time::Instant;
fn main() {
    for pool in PoolKind::ALL {
        let e = Engine::with_device(Config { pool, ..Config::default() }, Box::new(HostDevice::new(None)), 1)
            .unwrap();
        let n = 5_000_000;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                let p = e.alloc(std::hint::black_box(4096)).unwrap();
                e.free(p).unwrap();
            }
            best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        println!("{:7} {:.1} ns/pair", pool.name(), best);
    }
}

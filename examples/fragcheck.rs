use cumem::{Config, Engine, PoolKind, device::HostDevice};
fn main() {
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).unwrap();
        let ops: Vec<(bool, usize, u64)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let mut it = l.split_whitespace();
                let k = it.next().unwrap() == "a";
                let id: usize = it.next().unwrap().parse().unwrap();
                let sz = if k { it.next().unwrap().parse().unwrap() } else { 0 };
                (k, id, sz)
            })
            .collect();
        for pool in PoolKind::ALL {
            let e = Engine::with_device(
                Config { pool, ..Config::default() },
                Box::new(HostDevice::new(Some(1 << 40))),
                1,
            )
            .unwrap();
            let mut ptrs = vec![0u64; ops.len()];
            let mut sizes = vec![0u64; ops.len()];
            let (mut live, mut peak) = (0u64, 0u64);
            let t = std::time::Instant::now();
            let (mut last_miss, mut snap) = (0u64, String::new());
            for &(a, id, sz) in &ops {
                if a {
                    ptrs[id] = e.alloc(sz).unwrap();
                    sizes[id] = sz;
                    live += sz;
                    peak = peak.max(live);
                    if std::env::var("DETAIL").is_ok() {
                        let s = e.stats();
                        if s.peak_reserved_bytes > last_miss {
                            last_miss = s.peak_reserved_bytes;
                            snap = format!(
                                "at peak reserved {}: live {} alloc {} inactive_split {} cached {} (req {})",
                                s.reserved_bytes >> 20,
                                live >> 20,
                                s.allocated_bytes >> 20,
                                s.inactive_split_bytes >> 20,
                                s.cached_bytes >> 20,
                                sz >> 20
                            );
                        }
                    }
                } else {
                    e.free(ptrs[id]).unwrap();
                    live -= sizes[id];
                }
            }
            let ns = t.elapsed().as_nanos() as f64 / ops.len() as f64;
            let s = e.stats();
            println!(
                "{:40} {:7} reserved/live {:.3}  cold {:.0} ns/event  hit {:.3}",
                path.rsplit('/').next().unwrap(),
                pool.name(),
                s.peak_reserved_bytes as f64 / peak as f64,
                ns,
                s.cache_hit_rate
            );
            if !snap.is_empty() {
                println!("    {snap}");
            }
        }
    }
}

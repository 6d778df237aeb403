use cumem::{Config, Engine, PoolKind, device::HostDevice};
/// The cache-hit alloc+free pair in a loop (`N` pairs, default 20M), for callgrind and
/// wall-clock figures. `HISTORY=1` records the allocation history meanwhile (100,000
/// events per shard): the difference is the cost of two events per pair. `CACHED=K`
/// first allocates and frees K blocks of 4 KiB, so that the pair runs with K blocks
/// cached (Julia's loop of GC-freed arrays caches 16 384).
fn main() {
    let pool = PoolKind::parse(&std::env::args().nth(1).unwrap_or("binned".into())).unwrap();
    let e = Engine::with_device(
        Config { pool, ..Config::from_env().unwrap() },
        Box::new(HostDevice::new(None)),
        1,
    )
    .unwrap();
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000);
    if std::env::var("HISTORY").is_ok_and(|v| v == "1") {
        e.record_memory_history(true, 100_000).unwrap();
    }
    let cached: usize = std::env::var("CACHED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let blocks: Vec<u64> = (0..cached).map(|_| e.alloc(4096).unwrap()).collect();
    blocks.into_iter().for_each(|p| e.free(p).unwrap());
    let t = std::time::Instant::now();
    for _ in 0..n {
        let p = e.alloc(std::hint::black_box(4096)).unwrap();
        e.free(p).unwrap();
    }
    if std::env::var("REPORT").is_ok() {
        eprintln!("{:.1} ns per pair", t.elapsed().as_nanos() as f64 / n as f64);
    }
}

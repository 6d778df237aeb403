use cumem::{Config, Engine, PoolKind, device::HostDevice};
fn main() {
    let pool = PoolKind::parse(&std::env::args().nth(1).unwrap_or("binned".into())).unwrap();
    let e = Engine::with_device(
        Config { pool, ..Config::from_env().unwrap() },
        Box::new(HostDevice::new(None)),
        1,
    )
    .unwrap();
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000);
    for _ in 0..n {
        let p = e.alloc(std::hint::black_box(4096)).unwrap();
        e.free(p).unwrap();
    }
}

use cumem::{Config, Engine, PoolKind, device::HostDevice};
fn main() {
    let pool = PoolKind::parse(&std::env::args().nth(1).unwrap_or("binned".into())).unwrap();
    let e = Engine::with_device(Config { pool, ..Config::default() }, Box::new(HostDevice::new(None)), 1)
        .unwrap();
    for _ in 0..20_000_000 {
        let p = e.alloc(std::hint::black_box(4096)).unwrap();
        e.free(p).unwrap();
    }
}

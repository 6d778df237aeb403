//! The cache-hit pair through the C ABI (`cumem_alloc_ex` with `CUMEM_ALLOC_NO_RECLAIM`,
//! as the Julia package calls it, then `cumem_free`), `N` pairs (default 20M), for
//! callgrind and wall-clock figures beside `examples/hotloop.rs` (the same loop on
//! `Engine` directly): the difference is what the C wrappers cost. The pool and device
//! come from the environment (`JULIA_CUDA_MEMORY_POOL`, `CUMEM_DEVICE`), as for the
//! Julia package.
use cumem::ffi::{CUMEM_ALLOC_NO_RECLAIM, CUMEM_SUCCESS, cumem_alloc_ex, cumem_free};

fn main() {
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000);
    let mut p = 0u64;
    let t = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: `p` is writable.
        let c = unsafe { cumem_alloc_ex(std::hint::black_box(4096), &mut p, CUMEM_ALLOC_NO_RECLAIM) };
        assert_eq!(c, CUMEM_SUCCESS);
        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    }
    if std::env::var("REPORT").is_ok() {
        eprintln!("{:.1} ns per pair", t.elapsed().as_nanos() as f64 / n as f64);
    }
}

//! Cost of a checked copy through the C ABI on the host device: ns per
//! `cumem_copy_htod` / `cumem_copy_dtoh` / `cumem_memset` / `cumem_copy_dtod` of
//! 8 B, 4 KiB and 1 MiB into one live block (median of 7 repetitions). Small copies show
//! the cost of the range check (and of whatever keeps the block from being freed while
//! the copy runs); large ones the copy itself.
//!
//! ```text
//! cargo run --release --example copybench [pool [sizes]]   # default: binned 8,4096,1048576
//! ```

use cumem::ffi::{cumem_alloc, cumem_copy_dtod, cumem_copy_dtoh, cumem_copy_htod, cumem_free, cumem_memset};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let pool = std::env::args().nth(1).unwrap_or_else(|| "binned".into());
    let sizes: Vec<u64> = std::env::args().nth(2).map_or(vec![8, 4096, 1 << 20], |s| {
        s.split(',').map(|x| x.parse().expect("a size in bytes")).collect()
    });
    // SAFETY: set before any other thread exists and before the engine reads them.
    unsafe {
        std::env::set_var("CUMEM_DEVICE", "host");
        std::env::set_var("JULIA_CUDA_MEMORY_POOL", &pool);
    }
    println!(
        "{:8} {:>9} {:>9} {:>9} {:>9}   (ns per call, {pool} pool, host device)",
        "bytes", "htod", "dtoh", "memset", "dtod"
    );
    for bytes in sizes {
        let (mut a, mut b) = (0u64, 0u64);
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(cumem_alloc(bytes, &mut a), 0);
            assert_eq!(cumem_alloc(bytes, &mut b), 0);
        }
        let mut host = vec![1u8; bytes as usize];
        let n = (20_000_000 / (bytes + 200)).max(200);
        let time = |f: &mut dyn FnMut()| {
            median(
                (0..7)
                    .map(|_| {
                        let t = Instant::now();
                        for _ in 0..n {
                            f();
                        }
                        t.elapsed().as_nanos() as f64 / n as f64
                    })
                    .collect(),
            )
        };
        // SAFETY: `host` is readable and writable for `bytes`.
        let htod = time(&mut || {
            assert_eq!(unsafe { cumem_copy_htod(black_box(a), host.as_ptr().cast(), bytes) }, 0)
        });
        let dtoh = time(&mut || {
            assert_eq!(unsafe { cumem_copy_dtoh(host.as_mut_ptr().cast(), black_box(a), bytes) }, 0)
        });
        let memset = time(&mut || assert_eq!(cumem_memset(black_box(a), 7, bytes), 0));
        let dtod = time(&mut || assert_eq!(cumem_copy_dtod(black_box(b), a, bytes), 0));
        println!("{bytes:8} {htod:9.1} {dtoh:9.1} {memset:9.1} {dtod:9.1}");
        assert_eq!(cumem_free(a), 0);
        assert_eq!(cumem_free(b), 0);
    }
}

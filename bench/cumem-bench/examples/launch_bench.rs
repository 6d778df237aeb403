//! The launch limit on a GPU, measured below Julia: each small operation issued `N` times
//! in a row (one synchronisation at the end) through the CUDA driver directly and through
//! CuMem's C ABI, so the engine's own cost per call is the difference. Prints one JSON
//! line per row (µs per call, median of `REPS` repetitions).
//!
//! ```text
//! cargo build --release -p cumem-bench --example launch_bench
//! CUMEM_DEVICE=cuda target/release/examples/launch_bench [N=20000] [REPS=5]
//! ```
//!
//! Rows: an empty kernel (`cuLaunchKernel` / `cumem_kernel_launch_async`), a kernel with
//! two pointer and one integer parameter (a 1-element `y[i] = a[i] + b[i]`), a 4-byte
//! memset (`cuMemsetD32Async` / `cumem_memset_async`, and the synchronous `cumem_memset`
//! of before), a 4-byte device-to-device copy (`cuMemcpyDtoDAsync` /
//! `cumem_copy_dtod_async`, and `cumem_copy_dtod`), and a 4-byte read-back per call
//! (`cuMemcpyDtoHAsync` into pinned memory + `cuStreamSynchronize` /
//! `cumem_copy_dtoh_async` + `cumem_stream_synchronize`, and `cumem_copy_dtoh` into
//! pageable memory), each including its wait.
use cudarc::driver::{result, sys};
use cumem::compute::nvrtc;
use cumem::ffi::*;
use cumem::ffi::{cumem_device_info, cumem_kernel_launch_async, cumem_kernel_load, cumem_synchronize};
use std::ffi::{CString, c_void};
use std::time::Instant;

const SRC: &str = r#"
extern "C" __global__ void empty() {}
extern "C" __global__ void add1(const float* a, const float* b, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}
"#;

fn ok(code: i32, what: &str) {
    if code != CUMEM_SUCCESS {
        // SAFETY: the engine's message for this thread.
        let msg = unsafe { std::ffi::CStr::from_ptr(cumem_last_error()) }.to_string_lossy().into_owned();
        panic!("{what} failed ({code}): {msg}");
    }
}

fn drv(r: sys::CUresult, what: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
}

/// Median over `reps` of the µs per call of `n` calls of `f` followed by `sync`.
fn time(n: usize, reps: usize, mut f: impl FnMut(), sync: impl Fn()) -> f64 {
    for _ in 0..n.min(1000) {
        f();
    }
    sync();
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            sync();
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(20000);
    let reps = args.get(1).copied().unwrap_or(5);
    // SAFETY: plain engine calls with valid out-pointers; raw driver calls on the engine's
    // current context with live buffers.
    unsafe {
        ok(cumem_init(), "cumem_init");
        let src = CString::new(SRC).unwrap();
        let (mut hk_empty, mut hk_add) = (0u64, 0u64);
        ok(cumem_kernel_load(src.as_ptr(), c"empty".as_ptr(), &mut hk_empty), "load empty");
        ok(cumem_kernel_load(src.as_ptr(), c"add1".as_ptr(), &mut hk_add), "load add1");
        // The same kernels loaded straight through the driver, for the raw rows.
        let (mut maj, mut min, mut sms, mut thr) = (0, 0, 0, 0); // sms, thr: unused
        ok(cumem_device_info(&mut maj, &mut min, &mut sms, &mut thr), "device info");
        let nv = nvrtc::nvrtc().expect("libnvrtc");
        let target = nv.target_for(10 * maj + min).unwrap();
        let out = nv.compile(SRC, &target.arch()).unwrap();
        let image = match out.cubin {
            Some(c) => c,
            None => {
                let mut p = out.ptx.into_bytes();
                p.push(0);
                p
            }
        };
        let module = result::module::load_data(image.as_ptr() as *const c_void).unwrap();
        let f_empty = result::module::get_function(module, CString::new("empty").unwrap()).unwrap();
        let f_add = result::module::get_function(module, CString::new("add1").unwrap()).unwrap();

        let (mut a, mut b, mut y) = (0u64, 0u64, 0u64);
        ok(cumem_alloc(4, &mut a), "alloc");
        ok(cumem_alloc(4, &mut b), "alloc");
        ok(cumem_alloc(4, &mut y), "alloc");
        let mut pinned: *mut c_void = std::ptr::null_mut();
        ok(cumem_host_alloc(64, &mut pinned), "host alloc");
        let mut pageable = [0u8; 4];

        let sync = || ok(cumem_synchronize(), "synchronize");
        let null: sys::CUstream = std::ptr::null_mut();
        let mut rows: Vec<(&str, f64)> = Vec::new();

        rows.push((
            "empty kernel, cuLaunchKernel",
            time(
                n,
                reps,
                || {
                    drv(
                        sys::cuLaunchKernel(
                            f_empty,
                            1,
                            1,
                            1,
                            1,
                            1,
                            1,
                            0,
                            null,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        ),
                        "launch",
                    )
                },
                sync,
            ),
        ));
        rows.push((
            "empty kernel, cumem_kernel_launch_async",
            time(
                n,
                reps,
                || {
                    ok(
                        cumem_kernel_launch_async(0, hk_empty, 1, 1, 1, 1, 1, 1, 0, std::ptr::null_mut()),
                        "launch",
                    )
                },
                sync,
            ),
        ));
        let (mut pa, mut pb, mut py, mut pn) = (a, b, y, 1u32);
        let mut params = [
            &mut pa as *mut u64 as *mut c_void,
            &mut pb as *mut u64 as *mut c_void,
            &mut py as *mut u64 as *mut c_void,
            &mut pn as *mut u32 as *mut c_void,
        ];
        let pp = params.as_mut_ptr();
        rows.push((
            "1-element add kernel, cuLaunchKernel",
            time(
                n,
                reps,
                || {
                    drv(
                        sys::cuLaunchKernel(f_add, 1, 1, 1, 32, 1, 1, 0, null, pp, std::ptr::null_mut()),
                        "launch",
                    )
                },
                sync,
            ),
        ));
        rows.push((
            "1-element add kernel, cumem_kernel_launch_async",
            time(
                n,
                reps,
                || ok(cumem_kernel_launch_async(0, hk_add, 1, 1, 1, 32, 1, 1, 0, pp), "launch"),
                sync,
            ),
        ));
        rows.push((
            "4-byte memset, cuMemsetD32Async",
            time(n, reps, || drv(sys::cuMemsetD32Async(y, 7, 1, null), "memset"), sync),
        ));
        rows.push((
            "4-byte memset, cumem_memset_async",
            time(n, reps, || ok(cumem_memset_async(y, 7, 4, 1, 0), "memset"), sync),
        ));
        rows.push((
            "4-byte memset, cumem_memset (synchronous)",
            time(n, reps, || ok(cumem_memset(y, 7, 4), "memset"), sync),
        ));
        rows.push((
            "4-byte copy, cuMemcpyDtoDAsync",
            time(n, reps, || drv(sys::cuMemcpyDtoDAsync_v2(y, a, 4, null), "copy"), sync),
        ));
        rows.push((
            "4-byte copy, cumem_copy_dtod_async",
            time(n, reps, || ok(cumem_copy_dtod_async(y, a, 4, 0), "copy"), sync),
        ));
        rows.push((
            "4-byte copy, cumem_copy_dtod (synchronous)",
            time(n, reps, || ok(cumem_copy_dtod(y, a, 4), "copy"), sync),
        ));
        rows.push((
            "4-byte read-back, cuMemcpyDtoHAsync pinned + cuStreamSynchronize",
            time(
                n,
                reps,
                || {
                    drv(sys::cuMemcpyDtoHAsync_v2(pinned, y, 4, null), "dtoh");
                    drv(sys::cuStreamSynchronize(null), "sync");
                },
                sync,
            ),
        ));
        rows.push((
            "4-byte read-back, cumem_copy_dtoh_async pinned + cumem_stream_synchronize",
            time(
                n,
                reps,
                || {
                    ok(cumem_copy_dtoh_async(pinned, y, 4, 0), "dtoh");
                    ok(cumem_stream_synchronize(0), "sync");
                },
                sync,
            ),
        ));
        rows.push((
            "4-byte read-back, cumem_copy_dtoh pageable",
            time(n, reps, || ok(cumem_copy_dtoh(pageable.as_mut_ptr() as *mut c_void, y, 4), "dtoh"), sync),
        ));
        for (row, us) in rows {
            println!(
                "{{\"bench\":\"launch\",\"row\":\"{row}\",\"us_per_call\":{us:.3},\"n\":{n},\"reps\":{reps}}}"
            );
        }
    }
}

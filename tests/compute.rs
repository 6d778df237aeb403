//! The compute C ABI (`cumem_compile_ptx`, `cumem_kernel_*`, `cumem_gemm`, ...) through
//! the process-wide engine.
//!
//! On the host device (the default) it checks NVRTC's compile path when libnvrtc is found
//! (`make test` installs one from PyPI and names it in `CUMEM_NVRTC_LIBRARY`; without it
//! the tests say that the PTX checks were skipped), the `CUMEM_ERROR_NOT_SUPPORTED`
//! answers, and bad input. With `CUMEM_TEST_CUDA=1` the engine runs on CUDA device 0 and
//! kernels and GEMM are run and checked against host computations.

mod common;

use common::cuda;
use cumem::ffi::*;
use std::ffi::{CStr, CString, c_char, c_void};
use std::process::Command;
use std::sync::Once;

/// Points the engine at the device under test before anything initialises it.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: runs before any test reads the environment through the engine; the
        // other test threads wait on this Once before touching the engine.
        unsafe { std::env::set_var("CUMEM_DEVICE", if cuda() { "cuda" } else { "host" }) };
        assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    });
}

fn last_error() -> String {
    // SAFETY: cumem_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(cumem_last_error()) }.to_string_lossy().into_owned()
}

/// Prints `msg` past libtest's output capture (which takes only the print macros), so
/// that `cargo test` shows what was skipped even when the test passes.
fn note(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// NVRTC's version, or None (after printing that the PTX checks are skipped) when
/// libnvrtc is missing, in which case the answer must be NOT_SUPPORTED naming it.
fn nvrtc(test: &str) -> Option<(i32, i32)> {
    setup();
    let (mut a, mut b) = (-1, -1);
    // SAFETY: valid out-pointers.
    let rc = unsafe { cumem_nvrtc_version(&mut a, &mut b) };
    if rc == CUMEM_SUCCESS {
        assert!(a >= 11 && b >= 0, "NVRTC version {a}.{b}");
        return Some((a, b));
    }
    assert_eq!(rc, CUMEM_ERROR_NOT_SUPPORTED, "{}", last_error());
    let msg = last_error();
    assert!(msg.contains("libnvrtc") && msg.contains("CUMEM_NVRTC_LIBRARY"), "{msg}");
    note(&format!("{test}: libnvrtc not found, PTX check SKIPPED ({msg})"));
    None
}

/// `cumem_compile_ptx` the way a C caller uses it: size first, then the text.
fn compile(source: &str, arch: Option<&str>) -> Result<String, (i32, String)> {
    let src = CString::new(source).unwrap();
    let arch = arch.map(|a| CString::new(a).unwrap());
    let ap = arch.as_ref().map_or(std::ptr::null(), |a| a.as_ptr());
    let mut len = 0u64;
    // SAFETY: valid strings; NULL buffer with cap 0.
    let rc = unsafe { cumem_compile_ptx(src.as_ptr(), ap, std::ptr::null_mut(), 0, &mut len) };
    if rc != CUMEM_SUCCESS {
        return Err((rc, last_error()));
    }
    let mut buf = vec![0x55u8; len as usize + 8];
    let mut len2 = 0u64;
    // SAFETY: `buf` is writable for `len` bytes.
    let rc = unsafe { cumem_compile_ptx(src.as_ptr(), ap, buf.as_mut_ptr() as *mut c_char, len, &mut len2) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(len2, len);
    assert_eq!(buf[len as usize - 1], 0, "NUL-terminated");
    assert_eq!(buf[len as usize], 0x55, "nothing written past cap");
    Ok(String::from_utf8(buf[..len as usize - 1].to_vec()).unwrap())
}

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void scale(double *x, double s, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
"#;

/// Float16 without NVRTC's headers (`cuda_fp16.h` is not found without an include
/// path): storage as `unsigned short`, arithmetic in float through PTX conversions.
const HALF: &str = r#"
typedef unsigned short half_t;
__device__ __forceinline__ float h2f(half_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ half_t f2h(float f) { half_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
extern "C" __global__ void half_inc(half_t *x, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = f2h(h2f(x[i]) + 1.0f);
}
"#;

#[test]
fn compile_ptx_of_a_good_kernel() {
    let Some((major, _)) = nvrtc("compile_ptx_of_a_good_kernel") else { return };
    let ptx = compile(SAXPY, Some("compute_80")).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(ptx.contains(".target sm_80"), "{ptx}");
    assert!(ptx.contains(".visible .entry saxpy(") && ptx.contains(".visible .entry scale("), "{ptx}");
    // No fast math, and `a * x + y` is a rounded multiply then a rounded add, as Julia
    // computes it (--fmad=false), not one fused multiply-add.
    assert!(!ptx.contains(".approx") && !ptx.contains(".ftz"), "{ptx}");
    assert!(ptx.contains("mul.rn.f32") && ptx.contains("add.rn.f32") && !ptx.contains("fma.rn.f32"), "{ptx}");
    // NULL arch: compute_75 on the host device, the GPU's own on CUDA.
    let ptx = compile(SAXPY, None).unwrap();
    if cuda() {
        let (mut ma, mut mi, mut sm, mut mt) = (0, 0, 0, 0);
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { cumem_device_info(&mut ma, &mut mi, &mut sm, &mut mt) }, CUMEM_SUCCESS);
        // The GPU's own architecture, or the newest older one NVRTC knows.
        let after = ptx.split(".target sm_").nth(1).unwrap();
        let target: i32 = after.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap();
        assert!(target <= 10 * ma + mi && target >= 75, "{target} for {ma}.{mi}");
    } else {
        assert!(ptx.contains(".target sm_75"), "{ptx}");
    }
    // Truncation: cap smaller than the text writes exactly cap bytes, no NUL.
    let src = CString::new(SAXPY).unwrap();
    let mut buf = [0xffu8; 17];
    let mut len = 0u64;
    // SAFETY: `buf` is writable for 16 bytes (cap), one spare.
    let rc = unsafe {
        cumem_compile_ptx(src.as_ptr(), c"compute_80".as_ptr(), buf.as_mut_ptr() as *mut c_char, 16, &mut len)
    };
    assert_eq!(rc, CUMEM_SUCCESS);
    assert_eq!(len as usize, compile(SAXPY, Some("compute_80")).unwrap().len() + 1);
    assert_eq!(buf[16], 0xff, "nothing past cap");
    assert!(buf[..16].iter().all(|&b| b != 0));
    // Float16 through PTX conversions compiles without any include path.
    let ptx = compile(HALF, Some("compute_75")).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(ptx.contains("cvt.f32.f16") && ptx.contains("cvt.rn.f16.f32"), "{ptx}");
    note(&format!("compile_ptx_of_a_good_kernel: NVRTC {major} compiled the kernels to PTX"));
}

#[test]
fn compile_errors_carry_the_log_and_the_numbered_source() {
    if nvrtc("compile_errors_carry_the_log_and_the_numbered_source").is_none() {
        return;
    }
    let bad = "extern \"C\" __global__ void k(float *x) {\n    x[0] = undefined_thing + 1;\n}\n";
    let (rc, msg) = compile(bad, Some("compute_75")).unwrap_err();
    assert_eq!(rc, CUMEM_ERROR_COMPILE, "{msg}");
    assert!(msg.contains("undefined_thing") && msg.contains("error"), "NVRTC's log: {msg}");
    assert!(msg.contains("  2 |     x[0] = undefined_thing + 1;"), "numbered source: {msg}");
    assert!(msg.contains("  1 | extern \"C\" __global__ void k(float *x) {"), "{msg}");
    // An architecture NVRTC does not know is NVRTC's answer too, with its log.
    let (rc, msg) = compile(SAXPY, Some("compute_10")).unwrap_err();
    assert_eq!(rc, CUMEM_ERROR_COMPILE, "{msg}");
    assert!(msg.contains("compute_10"), "{msg}");
    // `#include <cuda_fp16.h>` needs an include path that NVRTC alone lacks.
    let fp16 =
        "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half *x) { x[0] = __float2half(1.0f); }\n";
    match compile(fp16, Some("compute_75")) {
        Ok(_) => note("this NVRTC finds cuda_fp16.h without an include path"),
        Err((rc, msg)) => {
            assert_eq!(rc, CUMEM_ERROR_COMPILE);
            assert!(msg.contains("cuda_fp16.h"), "{msg}");
        }
    }
}

#[test]
fn compile_ptx_bad_input() {
    setup();
    let mut len = 7u64;
    // SAFETY: null source is checked before use.
    let rc =
        unsafe { cumem_compile_ptx(std::ptr::null(), std::ptr::null(), std::ptr::null_mut(), 0, &mut len) };
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("source is a null pointer"));
    let src = CString::new(SAXPY).unwrap();
    // SAFETY: null len is checked.
    let rc = unsafe {
        cumem_compile_ptx(src.as_ptr(), std::ptr::null(), std::ptr::null_mut(), 0, std::ptr::null_mut())
    };
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    // SAFETY: null buf with cap > 0 is checked.
    let rc = unsafe { cumem_compile_ptx(src.as_ptr(), std::ptr::null(), std::ptr::null_mut(), 10, &mut len) };
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(len, 7, "nothing written on error");
    if nvrtc("compile_ptx_bad_input").is_some() {
        // SAFETY: valid strings.
        let rc = unsafe {
            cumem_compile_ptx(src.as_ptr(), c"sm 90; rm".as_ptr(), std::ptr::null_mut(), 0, &mut len)
        };
        assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
        assert!(last_error().contains("compute_XY or sm_XY"), "{}", last_error());
    }
    // SAFETY: null pointers are checked.
    assert_eq!(unsafe { cumem_nvrtc_version(std::ptr::null_mut(), &mut 0) }, CUMEM_ERROR_INVALID_VALUE);
}

#[test]
fn kernel_handles_and_null_pointers() {
    setup();
    let mut h = 0u64;
    // SAFETY: null pointers are checked before use.
    unsafe {
        assert_eq!(cumem_kernel_load(std::ptr::null(), c"k".as_ptr(), &mut h), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_kernel_load(c"x".as_ptr(), std::ptr::null(), &mut h), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(
            cumem_kernel_load(c"x".as_ptr(), c"k".as_ptr(), std::ptr::null_mut()),
            CUMEM_ERROR_INVALID_VALUE
        );
    }
    for bogus in [0u64, 12345, u64::MAX] {
        // SAFETY: the handle is checked before anything is launched.
        let rc = unsafe { cumem_kernel_launch(bogus, 1, 1, 1, 1, 1, 1, 0, std::ptr::null_mut()) };
        assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
        assert!(last_error().contains("is not a kernel handle"), "{}", last_error());
        let mut t = 0;
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { cumem_kernel_block_size(bogus, &mut t) }, CUMEM_ERROR_INVALID_VALUE);
    }
    // SAFETY: null is checked.
    assert_eq!(unsafe { cumem_kernel_block_size(1, std::ptr::null_mut()) }, CUMEM_ERROR_INVALID_VALUE);
    let (mut count, mut sizes) = (7, [0u64; 4]);
    // SAFETY: valid pointers; nulls are checked.
    unsafe {
        assert_eq!(cumem_kernel_params(12345, &mut count, sizes.as_mut_ptr(), 4), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(
            cumem_kernel_params(1, std::ptr::null_mut(), sizes.as_mut_ptr(), 4),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert_eq!(cumem_kernel_params(1, &mut count, std::ptr::null_mut(), 4), CUMEM_ERROR_INVALID_VALUE);
    }
    assert_eq!(count, 7, "nothing written on error");
    let mut x = 0;
    // SAFETY: null pointers are checked.
    unsafe {
        assert_eq!(
            cumem_device_info(&mut x, &mut x, std::ptr::null_mut(), &mut x),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert!(last_error().contains("sm_count"));
    }
}

#[test]
fn host_device_answers() {
    setup();
    if cuda() {
        return;
    }
    let (mut ma, mut mi, mut sm, mut mt) = (-1, -1, -1, -1);
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { cumem_device_info(&mut ma, &mut mi, &mut sm, &mut mt) }, CUMEM_SUCCESS);
    let cpus = std::thread::available_parallelism().unwrap().get() as i32;
    assert_eq!((ma, mi, sm, mt), (0, 0, cpus, 1024));
    assert_eq!(cumem_synchronize(), CUMEM_SUCCESS);
    let src = CString::new(SAXPY).unwrap();
    let mut h = 99u64;
    // SAFETY: valid strings and out-pointer.
    let rc = unsafe { cumem_kernel_load(src.as_ptr(), c"saxpy".as_ptr(), &mut h) };
    assert_eq!(rc, CUMEM_ERROR_NOT_SUPPORTED);
    assert!(
        last_error().contains("needs a CUDA GPU") && last_error().contains("host memory"),
        "{}",
        last_error()
    );
    assert_eq!(h, 99, "nothing written");
    // GEMM: valid operands, but no GPU.
    let (a, b, c) = (alloc(16 * 4), alloc(16 * 4), alloc(16 * 4));
    let (one, zero) = (1.0f32, 0.0f32);
    let rc = gemm(0, 0, 0, (4, 4, 4), &one, (a, 4), (b, 4), &zero, (c, 4));
    assert_eq!(rc, CUMEM_ERROR_NOT_SUPPORTED);
    assert!(last_error().contains("gemm (cuBLAS) needs a CUDA GPU"), "{}", last_error());
    for p in [a, b, c] {
        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    }
}

fn alloc(bytes: u64) -> u64 {
    let mut p = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cumem_alloc(bytes, &mut p) }, CUMEM_SUCCESS, "{}", last_error());
    p
}

#[allow(clippy::too_many_arguments)]
fn gemm<T>(
    dtype: i32,
    ta: i32,
    tb: i32,
    (m, n, k): (i64, i64, i64),
    alpha: &T,
    a: (u64, i64),
    b: (u64, i64),
    beta: &T,
    c: (u64, i64),
) -> i32 {
    // SAFETY: alpha and beta point to values of the dtype's size (callers match them).
    unsafe {
        cumem_gemm(
            dtype,
            ta,
            tb,
            m,
            n,
            k,
            alpha as *const T as *const c_void,
            a.0,
            a.1,
            b.0,
            b.1,
            beta as *const T as *const c_void,
            c.0,
            c.1,
        )
    }
}

#[test]
fn gemm_bad_input_is_refused_on_every_device() {
    setup();
    let (a, b, c) = (alloc(6 * 8), alloc(6 * 8), alloc(4 * 8));
    let (one, zero) = (1.0f64, 0.0f64);
    // (A 2×3, B 3×2, C 2×2 in Float64)
    // (dtype, transa, transb, (m, n, k), A, B, C, expected message or "" for valid)
    type Case = (i32, i32, i32, (i64, i64, i64), (u64, i64), (u64, i64), (u64, i64), &'static str);
    let cases: Vec<Case> = vec![
        (5, 0, 0, (2, 2, 3), (a, 2), (b, 3), (c, 2), "dtype 5"), // 4 is Float16 (GemmEx)
        (1, 3, 0, (2, 2, 3), (a, 2), (b, 3), (c, 2), "transa is 3"),
        (1, 0, -1, (2, 2, 3), (a, 2), (b, 3), (c, 2), "transb is -1"),
        (1, 0, 0, (-2, 2, 3), (a, 2), (b, 3), (c, 2), "m = -2"),
        (1, 0, 0, (2, 2, 1 << 31), (a, 2), (b, 3), (c, 2), "k = 2147483648"),
        (1, 0, 0, (2, 2, 3), (a, 1), (b, 3), (c, 2), "leading dimension of A is 1"),
        (1, 0, 0, (2, 2, 3), (a, 2), (b, 3), (c, 1), "leading dimension of C is 1"),
        (1, 0, 0, (2, 2, 4), (a, 2), (b, 4), (c, 2), "A (2×4, ld 2)"),
        (1, 1, 0, (2, 2, 3), (a, 3), (b, 3), (c, 2), "" /* T: A stored 3×2, fits */),
        (1, 0, 0, (2, 2, 3), (a + 8, 2), (b, 3), (c, 2), "crosses the end"),
        (1, 0, 0, (2, 2, 3), (a, 2), (b, 3), (0x10, 2), "C (2×2, ld 2)"),
    ];
    for (dt, ta, tb, mnk, ao, bo, co, want) in cases {
        let rc = gemm(dt, ta, tb, mnk, &one, ao, bo, &zero, co);
        if want.is_empty() {
            let expect = if cuda() { CUMEM_SUCCESS } else { CUMEM_ERROR_NOT_SUPPORTED };
            assert_eq!(rc, expect, "{}", last_error());
        } else {
            assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE, "{want}: {}", last_error());
            assert!(last_error().contains(want), "wanted {want:?} in {}", last_error());
        }
    }
    // SAFETY: null scalars are checked.
    let rc = unsafe {
        cumem_gemm(1, 0, 0, 2, 2, 3, std::ptr::null(), a, 2, b, 3, &zero as *const f64 as *const c_void, c, 2)
    };
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("alpha is a null pointer"));
    assert_eq!(cumem_synchronize(), CUMEM_SUCCESS);
    for p in [a, b, c] {
        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    }
}

/// A missing libnvrtc is NOT_SUPPORTED naming what was tried, in a process of its own
/// (the engine opens libnvrtc once per process).
#[test]
fn missing_nvrtc_is_not_supported() {
    if std::env::var("CUMEM_COMPUTE_CHILD").is_ok_and(|v| v == "missing_nvrtc") {
        setup();
        let (mut a, mut b) = (0, 0);
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { cumem_nvrtc_version(&mut a, &mut b) }, CUMEM_ERROR_NOT_SUPPORTED);
        let msg = last_error();
        assert!(msg.contains("CUMEM_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.12"), "{msg}");
        let src = CString::new(SAXPY).unwrap();
        let mut len = 0;
        // SAFETY: valid strings and out-pointer.
        let rc = unsafe {
            cumem_compile_ptx(src.as_ptr(), c"compute_75".as_ptr(), std::ptr::null_mut(), 0, &mut len)
        };
        assert_eq!(rc, CUMEM_ERROR_NOT_SUPPORTED);
        assert!(last_error().contains("libnvrtc"), "{}", last_error());
        println!("child missing_nvrtc done");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "missing_nvrtc_is_not_supported", "--nocapture", "--test-threads=1"])
        .env("CUMEM_COMPUTE_CHILD", "missing_nvrtc")
        .env("CUMEM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.12")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child missing_nvrtc done"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- on a GPU (CUMEM_TEST_CUDA=1) ----

fn upload<T: Copy>(v: &[T]) -> u64 {
    let bytes = std::mem::size_of_val(v) as u64;
    let p = alloc(bytes);
    // SAFETY: `v` is readable for `bytes`.
    assert_eq!(unsafe { cumem_copy_htod(p, v.as_ptr() as *const c_void, bytes) }, CUMEM_SUCCESS);
    p
}

fn download<T: Copy + Default>(p: u64, n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    // SAFETY: `v` is writable for its size.
    let rc =
        unsafe { cumem_copy_dtoh(v.as_mut_ptr() as *mut c_void, p, std::mem::size_of_val(&v[..]) as u64) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    v
}

fn load(src: &str, name: &str) -> Result<u64, (i32, String)> {
    let (s, n) = (CString::new(src).unwrap(), CString::new(name).unwrap());
    let mut h = 0;
    // SAFETY: valid strings and out-pointer.
    match unsafe { cumem_kernel_load(s.as_ptr(), n.as_ptr(), &mut h) } {
        CUMEM_SUCCESS => Ok(h),
        rc => Err((rc, last_error())),
    }
}

#[test]
fn cuda_kernels_load_launch_and_cache() {
    setup();
    if !cuda() {
        note("cuda_kernels_load_launch_and_cache: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        return;
    }
    let n: i64 = 1_000_003;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..n).map(|i| 1.0 + (i % 7) as f32).collect();
    let (dx, dy) = (upload(&x), upload(&y0));
    let h = load(SAXPY, "saxpy").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(load(SAXPY, "saxpy").unwrap(), h, "a cache hit returns the same handle");
    let h2 = load(SAXPY, "scale").unwrap();
    assert_ne!(h2, h);
    // Parameter sizes (drivers of CUDA 12.4 and later report them; the H100 machine's does).
    let params = |k: u64, cap: i32| {
        let (mut count, mut sizes) = (0, vec![0xeeu64; 8]);
        // SAFETY: `sizes` is writable for `cap` ≤ 8 entries.
        assert_eq!(unsafe { cumem_kernel_params(k, &mut count, sizes.as_mut_ptr(), cap) }, CUMEM_SUCCESS);
        (count, sizes)
    };
    let (count, sizes) = params(h, 8);
    if count >= 0 {
        assert_eq!((count, &sizes[..4]), (4, &[4u64, 8, 8, 8][..]));
        assert_eq!(params(h2, 8).1[..3], [8, 8, 8]);
        assert_eq!(params(h, 2), (4, vec![4, 8, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee]), "only cap written");
    } else {
        note("this driver does not report kernel parameters (cuFuncGetParamInfo, CUDA 12.4+)");
    }
    let mut threads = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cumem_kernel_block_size(h, &mut threads) }, CUMEM_SUCCESS);
    assert!((32..=1024).contains(&threads) && threads % 32 == 0, "{threads}");
    let (mut a, mut px, mut py, mut nn) = (2.5f32, dx, dy, n);
    let mut args = [
        &mut a as *mut f32 as *mut c_void,
        &mut px as *mut u64 as *mut c_void,
        &mut py as *mut u64 as *mut c_void,
        &mut nn as *mut i64 as *mut c_void,
    ];
    let blocks = ((n + threads as i64 - 1) / threads as i64) as u32;
    // SAFETY: four arguments of the kernel's types; the buffers hold n floats.
    let rc = unsafe { cumem_kernel_launch(h, blocks, 1, 1, threads as u32, 1, 1, 0, args.as_mut_ptr()) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_synchronize(), CUMEM_SUCCESS);
    let y: Vec<f32> = download(dy, n as usize);
    for i in 0..n as usize {
        // Bit for bit what the CPU computes without fusing (--fmad=false).
        assert_eq!(y[i], 2.5f32 * x[i] + y0[i], "y[{i}]");
    }
    // Bad geometry: refused, nothing launched.
    // SAFETY: refused before the arguments are read.
    unsafe {
        assert_eq!(
            cumem_kernel_launch(h, 0, 1, 1, 32, 1, 1, 0, args.as_mut_ptr()),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cumem_kernel_launch(h, 1, 1, 1, 2048, 1, 1, 0, args.as_mut_ptr()),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert!(last_error().contains("saxpy"), "{}", last_error());
    }
    assert_eq!(download::<f32>(dy, n as usize), y, "the refused launches changed nothing");
    // The PTX path (used when NVRTC does not know the GPU): compute_XY PTX for this GPU,
    // JIT-compiled by the driver, computes the same.
    let ptx = compile(SAXPY, None).unwrap();
    assert_eq!(cumem_synchronize(), CUMEM_SUCCESS); // binds the context on this thread
    let ptx_c = CString::new(ptx).unwrap();
    // SAFETY: NUL-terminated PTX; the context is current.
    let module = unsafe { cudarc::driver::result::module::load_data(ptx_c.as_ptr() as *const c_void) }
        .expect("cuModuleLoadData of NVRTC's PTX");
    // SAFETY: a loaded module.
    let f = unsafe { cudarc::driver::result::module::get_function(module, CString::new("saxpy").unwrap()) }
        .unwrap();
    let y1: Vec<f32> = download(dy, n as usize);
    // SAFETY: four arguments of the kernel's types; legacy stream.
    unsafe {
        cudarc::driver::sys::cuLaunchKernel(
            f,
            blocks,
            1,
            1,
            threads as u32,
            1,
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .unwrap();
    let y2: Vec<f32> = download(dy, n as usize);
    for i in 0..n as usize {
        assert_eq!(y2[i], 2.5f32 * x[i] + y1[i], "PTX path y[{i}]");
    }
    // Float16 by PTX conversions.
    let hx: Vec<u16> = vec![0x3c00; 100]; // 1.0
    let dh = upload(&hx);
    let hk = load(HALF, "half_inc").unwrap_or_else(|e| panic!("{e:?}"));
    let (mut p, mut m) = (dh, 100i64);
    let mut hargs = [&mut p as *mut u64 as *mut c_void, &mut m as *mut i64 as *mut c_void];
    // SAFETY: two arguments of the kernel's types.
    assert_eq!(unsafe { cumem_kernel_launch(hk, 1, 1, 1, 128, 1, 1, 0, hargs.as_mut_ptr()) }, CUMEM_SUCCESS);
    assert_eq!(download::<u16>(dh, 100), vec![0x4000; 100], "1.0 + 1 = 2.0 in Float16");
    // Errors of loading.
    let (rc, msg) = load(SAXPY, "nope").unwrap_err();
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    assert!(msg.contains("`nope`"), "{msg}");
    let (rc, msg) = load("extern \"C\" __global__ void k() { oops; }", "k").unwrap_err();
    assert_eq!(rc, CUMEM_ERROR_COMPILE);
    assert!(msg.contains("oops") && msg.contains("  1 | extern"), "{msg}");
    let (mut ma, mut mi, mut sm, mut mt) = (0, 0, 0, 0);
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { cumem_device_info(&mut ma, &mut mi, &mut sm, &mut mt) }, CUMEM_SUCCESS);
    assert!(ma >= 5 && sm > 0 && mt >= 512, "{ma}.{mi} {sm} {mt}");
    eprintln!(
        "device: compute capability {ma}.{mi}, {sm} SMs, {mt} threads per block; saxpy block size {threads}"
    );
    for q in [dx, dy, dh] {
        assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    }
}

/// Column-major reference: C = alpha op(A) op(B) + beta C in f64 (complex as pairs).
#[allow(clippy::too_many_arguments)]
fn reference(
    ta: i32,
    tb: i32,
    m: usize,
    n: usize,
    k: usize,
    alpha: (f64, f64),
    a: &[(f64, f64)],
    lda: usize,
    b: &[(f64, f64)],
    ldb: usize,
    beta: (f64, f64),
    c: &mut [(f64, f64)],
    ldc: usize,
) {
    let get = |x: &[(f64, f64)], t: i32, ld: usize, i: usize, j: usize| {
        let v = if t == 0 { x[i + j * ld] } else { x[j + i * ld] };
        if t == 2 { (v.0, -v.1) } else { v }
    };
    let mul = |p: (f64, f64), q: (f64, f64)| (p.0 * q.0 - p.1 * q.1, p.0 * q.1 + p.1 * q.0);
    for j in 0..n {
        for i in 0..m {
            let mut s = (0.0, 0.0);
            for l in 0..k {
                let t = mul(get(a, ta, lda, i, l), get(b, tb, ldb, l, j));
                s = (s.0 + t.0, s.1 + t.1);
            }
            let (p, q) = (mul(alpha, s), mul(beta, c[i + j * ldc]));
            c[i + j * ldc] = (p.0 + q.0, p.1 + q.1);
        }
    }
}

#[test]
fn cuda_gemm_matches_a_host_computation() {
    setup();
    if !cuda() {
        note("cuda_gemm_matches_a_host_computation: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        return;
    }
    let (m, n, k) = (37usize, 23usize, 41usize);
    let val = |s: usize, i: usize| (((i * 7 + s * 13) % 17) as f64 - 8.0) / 4.0;
    for dtype in 0..4 {
        for (ta, tb) in [(0, 0), (1, 0), (0, 1), (2, 2), (1, 2)] {
            if dtype < 2 && (ta == 2 || tb == 2) {
                continue;
            }
            let (ar, br) = (if ta == 0 { m } else { k }, if tb == 0 { k } else { n });
            let (ac, bc) = (if ta == 0 { k } else { m }, if tb == 0 { n } else { k });
            let (lda, ldb, ldc) = (ar + 3, br, m + 1); // padded leading dimensions too
            let a: Vec<(f64, f64)> =
                (0..lda * ac).map(|i| (val(1, i), if dtype >= 2 { val(2, i) } else { 0.0 })).collect();
            let b: Vec<(f64, f64)> =
                (0..ldb * bc).map(|i| (val(3, i), if dtype >= 2 { val(4, i) } else { 0.0 })).collect();
            let c0: Vec<(f64, f64)> =
                (0..ldc * n).map(|i| (val(5, i), if dtype >= 2 { val(6, i) } else { 0.0 })).collect();
            let (alpha, beta) =
                if dtype >= 2 { ((1.5, -0.5), (0.25, 0.75)) } else { ((1.5, 0.0), (-0.5, 0.0)) };
            let mut want = c0.clone();
            reference(ta, tb, m, n, k, alpha, &a, lda, &b, ldb, beta, &mut want, ldc);
            let got: Vec<(f64, f64)> = match dtype {
                0 => run_gemm(
                    0,
                    ta,
                    tb,
                    (m, n, k),
                    alpha.0 as f32,
                    beta.0 as f32,
                    &a,
                    lda,
                    &b,
                    ldb,
                    &c0,
                    ldc,
                    |v| v.0 as f32,
                    |v| (v as f64, 0.0),
                ),
                1 => run_gemm(
                    1,
                    ta,
                    tb,
                    (m, n, k),
                    alpha.0,
                    beta.0,
                    &a,
                    lda,
                    &b,
                    ldb,
                    &c0,
                    ldc,
                    |v| v.0,
                    |v| (v, 0.0),
                ),
                2 => run_gemm(
                    2,
                    ta,
                    tb,
                    (m, n, k),
                    [alpha.0 as f32, alpha.1 as f32],
                    [beta.0 as f32, beta.1 as f32],
                    &a,
                    lda,
                    &b,
                    ldb,
                    &c0,
                    ldc,
                    |v| [v.0 as f32, v.1 as f32],
                    |v| (v[0] as f64, v[1] as f64),
                ),
                _ => run_gemm(
                    3,
                    ta,
                    tb,
                    (m, n, k),
                    [alpha.0, alpha.1],
                    [beta.0, beta.1],
                    &a,
                    lda,
                    &b,
                    ldb,
                    &c0,
                    ldc,
                    |v| [v.0, v.1],
                    |v| (v[0], v[1]),
                ),
            };
            // Inputs are multiples of 1/4 below 2.5: every product and sum is exact in
            // f32 too (|sum| < 2^9 with 8 fractional bits), so the results must match exactly.
            for j in 0..n {
                for i in 0..m {
                    let (g, w) = (got[i + j * ldc], want[i + j * ldc]);
                    assert!(g == w, "dtype {dtype} op ({ta},{tb}) C[{i},{j}] = {g:?}, expected {w:?}");
                }
                for i in m..ldc {
                    assert_eq!(got[i + j * ldc], c0[i + j * ldc], "padding row {i} changed");
                }
            }
        }
    }
    eprintln!(
        "cuda_gemm_matches_a_host_computation: Float32, Float64, ComplexF32, ComplexF64 with N/T/C ops agree exactly"
    );
}

#[allow(clippy::too_many_arguments)]
fn run_gemm<T: Copy + Default>(
    dtype: i32,
    ta: i32,
    tb: i32,
    (m, n, k): (usize, usize, usize),
    alpha: T,
    beta: T,
    a: &[(f64, f64)],
    lda: usize,
    b: &[(f64, f64)],
    ldb: usize,
    c: &[(f64, f64)],
    ldc: usize,
    to: impl Fn((f64, f64)) -> T,
    from: impl Fn(T) -> (f64, f64),
) -> Vec<(f64, f64)> {
    let conv = |v: &[(f64, f64)]| v.iter().map(|&x| to(x)).collect::<Vec<T>>();
    let (da, db, dc) = (upload(&conv(a)), upload(&conv(b)), upload(&conv(c)));
    let rc = gemm(
        dtype,
        ta,
        tb,
        (m as i64, n as i64, k as i64),
        &alpha,
        (da, lda as i64),
        (db, ldb as i64),
        &beta,
        (dc, ldc as i64),
    );
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    let out: Vec<T> = download(dc, c.len());
    for p in [da, db, dc] {
        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    }
    out.into_iter().map(from).collect()
}

/// Two kernels that begin as CuMem's do (`CUMEM_PDL_ENTRY()`, julia/cuda/common.cuh) and
/// one that does not: a slow producer (one thread per block spins `ns` on the global timer
/// before the block writes) and its consumer.
const PDL_SOURCE: &str = r#"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ENTRY() asm volatile("griddepcontrol.wait;" ::: "memory"); asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define ENTRY()
#endif
extern "C" __global__ void pdl_fill(float* x, long long n, float v, unsigned long long ns) {
  ENTRY();
  if (threadIdx.x == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  }
  __syncthreads();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) x[i] = v;
}
extern "C" __global__ void pdl_add(const float* x, float* y, long long n) {
  ENTRY();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) y[i] = x[i] + 1.0f;
}
extern "C" __global__ void plain_add(const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) y[i] = x[i] + 1.0f;
}
"#;

fn uses_pdl(k: u64) -> bool {
    let mut on = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_kernel_uses_pdl(k, &mut on) }, CUMEM_SUCCESS, "{}", last_error());
    on == 1
}

/// Queues producer (value `v`) then consumer of `n` floats on `stream`.
fn pdl_pair(stream: u64, fill: u64, add: u64, (x, y, n): (u64, u64, i64), v: f32, ns: u64) {
    let (mut px, mut py, mut nn, mut vv, mut t) = (x, y, n, v, ns);
    let mut a1 = [
        &mut px as *mut u64 as *mut c_void,
        &mut nn as *mut i64 as *mut c_void,
        &mut vv as *mut f32 as *mut c_void,
        &mut t as *mut u64 as *mut c_void,
    ];
    // SAFETY: the kernels' parameters; x and y hold n floats.
    unsafe {
        let rc = cumem_kernel_launch_async(stream, fill, 264, 1, 1, 256, 1, 1, 0, a1.as_mut_ptr());
        assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
        let mut a2 = [
            &mut px as *mut u64 as *mut c_void,
            &mut py as *mut u64 as *mut c_void,
            &mut nn as *mut i64 as *mut c_void,
        ];
        let rc = cumem_kernel_launch_async(stream, add, 264, 1, 1, 256, 1, 1, 0, a2.as_mut_ptr());
        assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    }
}

/// Programmatic dependent launch (src/compute/module.rs, `launch`): a kernel that waits
/// (`griddepcontrol.wait`) launches with it on sm_90+ and one that does not launches without;
/// a consumer launched while its slow producer still runs reads the producer's values,
/// eagerly on a stream and replayed from a captured graph whose edge is programmatic;
/// `cumem_graph_exec_update` takes a graph captured the same way; `cumem_set_pdl(0)` turns it
/// off. The proof the GPU suite shows: "pdl: uses 1, programmatic edges 1" on an H100/H200.
#[test]
fn cuda_programmatic_dependent_launch() {
    setup();
    let mut was = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_set_pdl(1, &mut was) }, CUMEM_SUCCESS);
    assert!(was == 0 || was == 1);
    if !cuda() {
        note("cuda_programmatic_dependent_launch: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        // SAFETY: a valid out-pointer; the handle is refused.
        assert_eq!(unsafe { cumem_kernel_uses_pdl(12345, &mut was) }, CUMEM_ERROR_INVALID_VALUE);
        return;
    }
    let env_off = std::env::var("CUMEM_PDL").is_ok_and(|v| v.trim() == "0");
    let (mut ma, mut mi, mut sm, mut mt) = (0, 0, 0, 0);
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { cumem_device_info(&mut ma, &mut mi, &mut sm, &mut mt) }, CUMEM_SUCCESS);
    let fill = load(PDL_SOURCE, "pdl_fill").unwrap_or_else(|e| panic!("{e:?}"));
    let add = load(PDL_SOURCE, "pdl_add").unwrap();
    let plain = load(PDL_SOURCE, "plain_add").unwrap();
    let expect = ma >= 9 && !env_off;
    assert_eq!((uses_pdl(fill), uses_pdl(add)), (expect, expect), "sm {ma}.{mi}");
    assert!(!uses_pdl(plain), "a kernel without griddepcontrol.wait never launches with PDL");
    let n: i64 = 1 << 20;
    let (x, y) = (upload(&vec![0f32; n as usize]), upload(&vec![0f32; n as usize]));
    let mut s = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_stream_create(0, &mut s) }, CUMEM_SUCCESS);
    let check = |v: f32, what: &str| {
        assert_eq!(cumem_stream_synchronize(s), CUMEM_SUCCESS, "{}", last_error());
        let got: Vec<f32> = download(y, n as usize);
        let bad = got.iter().filter(|&&g| g != v + 1.0).count();
        assert_eq!(bad, 0, "{what}: {bad} of {n} elements are not {}", v + 1.0);
    };
    // eager: 20 rounds, each producer slow (20 µs per block) so the consumer, launched early, waits
    for k in 1..=20 {
        pdl_pair(s, fill, add, (x, y, n), k as f32, 20_000);
        check(k as f32, &format!("eager round {k}"));
    }
    // captured: one programmatic edge (sm_90+), replayed; then updated to another value
    // (`share`: the pool to capture in, 0 a new one; an executable is updated only from a
    // graph of its own pool)
    let capture = |v: f32, share: u64| {
        let (mut pool, mut g) = (0, 0);
        // SAFETY: valid out-pointers.
        assert_eq!(
            unsafe { cumem_stream_begin_capture(s, share, &mut pool) },
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        pdl_pair(s, fill, add, (x, y, n), v, 20_000);
        let mut count = 0;
        // SAFETY: a count query (null nodes, capacity 0).
        let rc = unsafe { cumem_stream_capture_dependencies(s, std::ptr::null_mut(), 0, &mut count) };
        assert_eq!((rc, count), (CUMEM_SUCCESS, 1), "{}", last_error());
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cumem_stream_end_capture(s, &mut g) }, CUMEM_SUCCESS, "{}", last_error());
        (pool, g)
    };
    let (pool, g) = capture(100.0, 0);
    let mut info = cumem::engine::GraphInfo::default();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_graph_info(g, &mut info) }, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!((info.nodes, info.kernels, info.edges, info.depth), (2, 2, 1, 2), "{info:?}");
    assert_eq!(info.programmatic, expect as u64, "{info:?}");
    eprintln!("pdl: uses {}, programmatic edges {} (sm {ma}.{mi})", uses_pdl(add) as i32, info.programmatic);
    let mut exec = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_graph_instantiate(g, &mut exec) }, CUMEM_SUCCESS, "{}", last_error());
    for _ in 0..3 {
        assert_eq!(cumem_graph_launch_async(exec, s), CUMEM_SUCCESS, "{}", last_error());
    }
    check(100.0, "replay");
    let (pool2, g2) = capture(200.0, pool);
    assert_eq!(pool2, pool);
    assert_eq!(cumem_graph_exec_update(exec, g2), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_graph_launch_async(exec, s), CUMEM_SUCCESS, "{}", last_error());
    check(200.0, "replay after update");
    // off: launched without PDL, results the same
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_set_pdl(0, &mut was) }, CUMEM_SUCCESS);
    assert_eq!(was, !env_off as i32, "on unless CUMEM_PDL=0, whatever the GPU");
    assert!(!uses_pdl(add));
    pdl_pair(s, fill, add, (x, y, n), 300.0, 20_000);
    check(300.0, "PDL off");
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_set_pdl(1, &mut was) }, CUMEM_SUCCESS);
    assert_eq!(was, 0);
    assert_eq!(uses_pdl(add), expect);
    let _ = (sm, mt);
    assert_eq!(cumem_graph_exec_destroy(exec), CUMEM_SUCCESS);
    for h in [g, g2] {
        assert_eq!(cumem_graph_destroy(h), CUMEM_SUCCESS);
    }
    // (a pool the capture made is held by its captures and graphs alone: gone with them)
    assert_eq!(cumem_graph_pool_release(pool), CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(cumem_stream_destroy(s), CUMEM_SUCCESS);
    for q in [x, y] {
        assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    }
}

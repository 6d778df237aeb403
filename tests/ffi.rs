//! The C ABI (`include/cumem.h`) through the `cumem::ffi` functions: every function and
//! every bad input.
//!
//! The engine behind the C ABI is a process-wide singleton configured from the
//! environment once, so each scenario runs in a process of its own: a parent test
//! re-executes this test binary (`--exact <child> --nocapture --test-threads=1`) with
//! the scenario's environment, and the child test named there does the work. Child
//! tests do nothing unless `CUMEM_FFI_CHILD` names them. Children use the host device
//! (`CUMEM_DEVICE=host`), or CUDA with `CUMEM_TEST_CUDA=1`.

mod common;

use common::*;
use cumem::Stats;
use cumem::ffi::*;
use std::ffi::{CStr, c_char, c_void};
use std::process::Command;

const MARK: &str = "CUMEM_FFI_CHILD";

/// Every variable of the configuration table (docs/contract.md); children start without any
/// of them inherited from the parent.
const CONFIG_VARS: [&str; 9] = [
    "JULIA_CUDA_MEMORY_POOL",
    "JULIA_CUDA_MEMORY_LIMIT",
    "CUMEM_DEVICE",
    "CUMEM_HOST_CAPACITY",
    "CUMEM_DEBUG",
    "CUMEM_LOG",
    "CUMEM_FAULT",
    "CUMEM_PINNED_LIMIT",
    "CUMEM_THREAD_CACHE",
];

/// Runs child test `child` in a fresh process of this test binary with `env` set (and
/// `CUMEM_DEVICE` forced to `host`, or `cuda` with `CUMEM_TEST_CUDA=1`, unless `env`
/// sets it), and fails unless the child ran and passed.
fn spawn(child: &str, env: &[(&str, &str)]) {
    let env: Vec<(&str, std::ffi::OsString)> = env.iter().map(|&(k, v)| (k, v.into())).collect();
    spawn_os(child, &env);
}

/// As [`spawn`], with values that need not be UTF-8.
fn spawn_os(child: &str, env: &[(&str, std::ffi::OsString)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"]);
    for v in CONFIG_VARS {
        cmd.env_remove(v);
    }
    cmd.env(MARK, child);
    cmd.env("CUMEM_DEVICE", if cuda() { "cuda" } else { "host" });
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("re-executing the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ran = stdout.contains(&format!("child {child} done"));
    assert!(
        out.status.success() && ran,
        "child {child} with {env:?} failed ({}; ran: {ran})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

/// True in the child process started for `name`.
fn child(name: &str) -> bool {
    std::env::var(MARK).is_ok_and(|v| v == name)
}

fn done(name: &str) {
    println!("child {name} done");
}

fn last_error() -> String {
    // SAFETY: cumem_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(cumem_last_error()) }.to_str().unwrap().to_owned()
}

fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the ABI returns valid NUL-terminated static strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

fn alloc(bytes: u64) -> (i32, u64) {
    let mut p = 0xdead_beef;
    // SAFETY: `p` is writable.
    let rc = unsafe { cumem_alloc(bytes, &mut p) };
    (rc, p)
}

fn alloc_ok(bytes: u64) -> u64 {
    let (rc, p) = alloc(bytes);
    assert_eq!(rc, CUMEM_SUCCESS, "alloc({bytes}): {}", last_error());
    p
}

fn stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: `s` is writable.
    assert_eq!(unsafe { cumem_get_stats(&mut s) }, CUMEM_SUCCESS);
    s
}

/// Statistics without the device timings.
fn untimed() -> Stats {
    let mut s = stats();
    s.device_alloc_ns = 0;
    s.device_free_ns = 0;
    s
}

/// The `memory_status` text, fetched as a C caller would: ask for the length, then
/// fetch with a buffer one larger. On a GPU shared with other processes the usage line
/// can change length between calls, so grow and fetch again until it fits.
fn status() -> String {
    // SAFETY: null with length 0 writes nothing.
    let mut n = unsafe { cumem_memory_status(std::ptr::null_mut(), 0) };
    loop {
        let mut buf = vec![0xaau8; n + 1];
        // SAFETY: `buf` is writable for its length.
        let m = unsafe { cumem_memory_status(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if m <= n {
            assert_eq!(buf[m], 0, "not NUL-terminated");
            if !cuda() {
                assert_eq!(m, n, "the text changed length on the host device");
            }
            return String::from_utf8(buf[..m].to_vec()).unwrap();
        }
        assert_eq!(buf[n], 0, "truncated text not NUL-terminated");
        n = m;
    }
}

fn upload(dst: u64, data: &[u8]) -> i32 {
    // SAFETY: `data` is readable for its length.
    unsafe { cumem_copy_htod(dst, data.as_ptr() as *const c_void, data.len() as u64) }
}

fn download(src: u64, len: usize) -> (i32, Vec<u8>) {
    let mut buf = vec![0x5a; len];
    // SAFETY: `buf` is writable for its length.
    let rc = unsafe { cumem_copy_dtoh(buf.as_mut_ptr() as *mut c_void, src, len as u64) };
    (rc, buf)
}

fn download_ok(src: u64, len: usize) -> Vec<u8> {
    let (rc, buf) = download(src, len);
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    buf
}

fn expect_err(rc: i32, code: i32, words: &[&str]) {
    assert_eq!(rc, code, "last error: {}", last_error());
    let msg = last_error();
    for w in words {
        assert!(msg.contains(w), "error message lacks {w:?}: {msg}");
    }
}

// ---- parents ------------------------------------------------------------------------

#[test]
fn api_on_each_pool() {
    for pool in ["binned", "split", "expandable", "simple", "none"] {
        spawn("child_api", &[("JULIA_CUDA_MEMORY_POOL", pool), ("CUMEM_HOST_CAPACITY", "1GiB")]);
    }
}

#[test]
fn default_configuration() {
    spawn("child_defaults", &[]);
}

#[test]
fn limit_of_one_byte() {
    for pool in ["binned", "split", "expandable", "simple", "none"] {
        spawn("child_limit_one", &[("JULIA_CUDA_MEMORY_LIMIT", "1"), ("JULIA_CUDA_MEMORY_POOL", pool)]);
    }
}

#[test]
fn limits_and_capacities() {
    spawn(
        "child_limits",
        &[
            ("JULIA_CUDA_MEMORY_LIMIT", "50%"),
            ("CUMEM_HOST_CAPACITY", "256MiB"),
            ("CUMEM_LOG", "cumem=debug"),
            ("JULIA_CUDA_MEMORY_POOL", "Binned"),
        ],
    );
}

#[test]
fn tracking_at_debug_2() {
    spawn("child_debug", &[("CUMEM_DEBUG", "2")]);
}

#[test]
fn threads_through_the_abi() {
    for pool in ["binned", "split", "expandable"] {
        spawn("child_threads", &[("JULIA_CUDA_MEMORY_POOL", pool)]);
    }
}

/// Every malformed value of every variable: `cumem_init` returns `CUMEM_ERROR_CONFIG`
/// and the message names the variable and the value.
#[test]
fn malformed_environment() {
    let cases: &[(&str, &[&str])] = &[
        ("JULIA_CUDA_MEMORY_POOL", &["bogus", "binned2", "cached", "0"]),
        (
            "JULIA_CUDA_MEMORY_LIMIT",
            &[
                "lots",
                "0",
                "-1",
                "12XB",
                "4 GiB extra",
                "101%",
                "0%",
                "-5%",
                "abc%",
                "%",
                "99999999999999999999",
                "20000000TiB",
                "1..5GiB",
                "1e400", // exponent notation is a number (`1e9`), this one too large
                "1.5",   // not a whole number of bytes
                "0.0001B",
            ],
        ),
        ("CUMEM_DEVICE", &["tpu", "gpu", "cuda0", "1"]),
        ("CUMEM_HOST_CAPACITY", &["1QB", "0", "150%", "much", "-4GiB"]),
        ("CUMEM_DEBUG", &["3", "yes", "-1", "2.0", "true"]),
        ("CUMEM_LOG", &["loud==", "cumem=verbose", "a b", "=", "debug,,warn"]),
        (
            "CUMEM_FAULT",
            &["alloc", "alloc:1.5", "free:-1", "copy:x", "oom:0.1", "seed=-3", "alloc:0.1,alloc:0.2"],
        ),
        ("CUMEM_PINNED_LIMIT", &["lots", "0", "101%", "1QB"]),
        ("CUMEM_THREAD_CACHE", &["2", "on", "-1"]),
    ];
    for &(var, values) in cases {
        for &value in values {
            spawn(
                "child_bad_env",
                &[(var, value), ("CUMEM_FFI_BAD_VAR", var), ("CUMEM_FFI_BAD_VALUE", value)],
            );
        }
    }
}

/// A value that is not UTF-8 is refused like any other bad value, for every variable the
/// engine reads (`std::env::var` reports such a value as absent).
#[test]
fn non_utf8_values_are_config_errors() {
    use std::os::unix::ffi::OsStringExt;
    for var in CONFIG_VARS {
        spawn_os(
            "child_bad_env",
            &[
                (var, std::ffi::OsString::from_vec(b"\xff128MiB".to_vec())),
                ("CUMEM_FFI_BAD_VAR", var.into()),
                ("CUMEM_FFI_BAD_VALUE", "\\xFF128MiB".into()),
            ],
        );
    }
}

/// `CUMEM_FAULT` through the C ABI: injected failures surface with their codes and
/// messages, and failed device frees are counted.
#[test]
fn fault_injection() {
    spawn(
        "child_faults",
        &[("CUMEM_FAULT", "alloc:0.2,free:0.5,copy:0.2,seed=3"), ("JULIA_CUDA_MEMORY_POOL", "none")],
    );
}

#[test]
fn child_faults() {
    if !child("child_faults") {
        return;
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    assert!(cstr(cumem_device_name()).ends_with("(with CUMEM_FAULT)"));
    let (mut ooms, mut device_errors, mut ok) = (0, 0, 0);
    for i in 0..400u64 {
        let (rc, p) = alloc(4096 + i);
        if rc == CUMEM_ERROR_OUT_OF_MEMORY {
            assert!(last_error().contains("CUMEM_FAULT"), "{}", last_error());
            assert_eq!(p, 0xdead_beef);
            ooms += 1;
            continue;
        }
        assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
        ok += 1;
        match cumem_memset(p, 7, 4096) {
            CUMEM_SUCCESS => {}
            rc => {
                expect_err(rc, CUMEM_ERROR_DEVICE, &["CUMEM_FAULT"]);
                device_errors += 1;
            }
        }
        assert_eq!(cumem_free(p), CUMEM_SUCCESS, "a failed device free is not the caller's error");
    }
    assert!(ooms > 0 && device_errors > 0 && ok > 0, "{ooms} {device_errors} {ok}");
    let s = stats();
    assert_eq!((s.num_allocations, s.num_frees, s.num_ooms), (ok, ok, ooms));
    assert!(s.num_device_free_errors > 0 && s.num_device_free_errors < s.num_device_frees, "{s:#?}");
    assert_eq!((s.reserved_bytes, s.allocated_bytes), (0, 0));
    done("child_faults");
}

/// `CUMEM_DEVICE=cuda` without a usable GPU is `CUMEM_ERROR_DEVICE`; with one, success.
#[test]
fn cuda_device_choice() {
    let have_gpu = cumem::device::CudaDevice::new(0).is_ok();
    let expect = if have_gpu { "ok" } else { "device" };
    spawn("child_cuda_choice", &[("CUMEM_DEVICE", "cuda"), ("CUMEM_FFI_EXPECT", expect)]);
    // `auto` always works: CUDA if present, else the host device.
    spawn(
        "child_cuda_choice",
        &[("CUMEM_DEVICE", "auto"), ("CUMEM_FFI_EXPECT", if have_gpu { "ok" } else { "host" })],
    );
}

// ---- children -----------------------------------------------------------------------

#[test]
fn child_api() {
    if !child("child_api") {
        return;
    }
    let pool = std::env::var("JULIA_CUDA_MEMORY_POOL").unwrap();
    assert_eq!(last_error(), "", "no error yet on this thread");
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "idempotent");
    assert_eq!(cstr(cumem_pool_name()), pool);
    let dev = cstr(cumem_device_name());
    let (mut free, mut total) = (0u64, 0u64);
    // SAFETY: both are writable.
    assert_eq!(unsafe { cumem_device_memory(&mut free, &mut total) }, CUMEM_SUCCESS);
    assert!(free <= total && total > 0);
    if !cuda() {
        assert_eq!(dev, "host memory (no GPU)");
        assert_eq!((free, total), (GIB, GIB));
    } else {
        assert!(!dev.is_empty() && !dev.contains("host"), "{dev}");
    }
    let s0 = stats();
    assert_eq!(s0.num_allocations, 0);
    assert_eq!(s0.limit_bytes, 0);

    // Null out-pointers.
    // SAFETY: null pointers are what is being tested; the functions check them.
    unsafe {
        expect_err(cumem_alloc(8, std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE, &["null"]);
        expect_err(cumem_get_stats(std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE, &["null"]);
        expect_err(
            cumem_device_memory(std::ptr::null_mut(), &mut total),
            CUMEM_ERROR_INVALID_VALUE,
            &["free", "null"],
        );
        expect_err(
            cumem_device_memory(&mut free, std::ptr::null_mut()),
            CUMEM_ERROR_INVALID_VALUE,
            &["total", "null"],
        );
    }
    assert_eq!(stats().num_allocations, 0, "a refused alloc allocated");

    // 0 bytes and freeing 0.
    assert_eq!(alloc(0), (CUMEM_SUCCESS, 0));
    assert_eq!(cumem_free(0), CUMEM_SUCCESS);

    // Sizes above 2^63 − 1: refused without overflowing; below: out of memory.
    for n in [u64::MAX, u64::MAX - 1, u64::MAX - 255, u64::MAX - (2 << 20) + 1, 1 << 63] {
        let (rc, p) = alloc(n);
        expect_err(rc, CUMEM_ERROR_INVALID_VALUE, &[&n.to_string()]);
        assert_eq!(p, 0xdead_beef, "the out-pointer was written on failure");
    }
    for n in [(1u64 << 63) - 1, 1 << 60, (1 << 48) + 1] {
        let (rc, p) = alloc(n);
        expect_err(rc, CUMEM_ERROR_OUT_OF_MEMORY, &["out of memory", &format!("({n} bytes)"), "any device"]);
        assert_eq!(p, 0xdead_beef, "the out-pointer was written on failure");
    }
    for n in [1u64 << 48, (1 << 48) - 1, (1 << 48) - 4096, 1 << 47] {
        let (rc, _) = alloc(n);
        expect_err(
            rc,
            CUMEM_ERROR_OUT_OF_MEMORY,
            &["out of memory", &format!("({n} bytes)"), "reserved", "cached", "limit", "device free"],
        );
    }
    let s = stats();
    assert_eq!(s.num_ooms, 3 + 4);
    assert_eq!(s.num_allocations, 0);
    assert_eq!(s.reserved_bytes, 0);

    // Allocations, aligned, with contents.
    let sizes = [1u64, 100, 4096, 5000, 3 << 20];
    let ptrs: Vec<u64> = sizes.iter().map(|&n| alloc_ok(n)).collect();
    for (&p, &n) in ptrs.iter().zip(&sizes) {
        assert_ne!(p, 0);
        assert_eq!(p % 256, 0);
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
        assert_eq!(upload(p, &data), CUMEM_SUCCESS, "{}", last_error());
        assert_eq!(download_ok(p, n as usize), data);
    }
    let s = stats();
    assert_eq!(s.num_allocations, sizes.len() as u64);
    assert_eq!(s.requested_bytes, sizes.iter().sum::<u64>());
    assert!(s.allocated_bytes >= s.requested_bytes);
    assert!(s.reserved_bytes >= s.allocated_bytes);
    assert_eq!(s.cached_bytes, s.reserved_bytes - s.allocated_bytes);
    assert_eq!(s.peak_requested_bytes, s.requested_bytes);
    // (the 4 failed lookups above; sizes beyond any device never reach the pool)
    assert_eq!(s.num_cache_hits + s.num_cache_misses, s.num_allocations + 4);
    let lookups = (s.num_cache_hits + s.num_cache_misses) as f64;
    assert_eq!(s.cache_hit_rate, s.num_cache_hits as f64 / lookups);
    assert_eq!(s.fragmentation_ratio, s.cached_bytes as f64 / s.reserved_bytes as f64);
    assert!(s.num_device_allocations >= 1);

    let (a, b) = (ptrs[3], ptrs[2]); // 5000 and 4096 bytes
    let a_data = download_ok(a, 5000);
    let b_data = download_ok(b, 4096);

    // Copies that cross the end of a block: refused, destination unchanged.
    for (off, len) in [(0u64, 5001usize), (4999, 2), (5000, 1), (4096, 4096)] {
        expect_err(upload(a + off, &vec![0xee; len]), CUMEM_ERROR_INVALID_VALUE, &["crosses the end"]);
        let (rc, buf) = download(a + off, len);
        expect_err(rc, CUMEM_ERROR_INVALID_VALUE, &[]);
        assert!(buf.iter().all(|&x| x == 0x5a), "host buffer written on failure");
        expect_err(cumem_memset(a + off, 0xee, len as u64), CUMEM_ERROR_INVALID_VALUE, &[]);
        expect_err(cumem_copy_dtod(a + off, b, len as u64), CUMEM_ERROR_INVALID_VALUE, &[]);
    }
    expect_err(cumem_copy_dtod(b, a, 4097), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_copy_dtod(a, b + 1, 4096), CUMEM_ERROR_INVALID_VALUE, &[]);
    assert_eq!(download_ok(a, 5000), a_data, "destination changed by a refused copy");
    assert_eq!(download_ok(b, 4096), b_data);
    // Ranges that overflow or lie outside every allocation.
    expect_err(cumem_memset(a, 1, u64::MAX), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_memset(u64::MAX - 3, 1, 8), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_memset(0x1000, 1, 8), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_memset(0, 1, 8), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(upload(0x1000, &[1, 2, 3]), CUMEM_ERROR_INVALID_VALUE, &[]);
    // Null host pointers with bytes > 0; zero bytes always succeed.
    // SAFETY: null pointers are refused before use; 0 bytes touch nothing.
    unsafe {
        expect_err(cumem_copy_htod(a, std::ptr::null(), 8), CUMEM_ERROR_INVALID_VALUE, &["null"]);
        expect_err(cumem_copy_dtoh(std::ptr::null_mut(), a, 8), CUMEM_ERROR_INVALID_VALUE, &["null"]);
        assert_eq!(cumem_copy_htod(a, std::ptr::null(), 0), CUMEM_SUCCESS);
        // Byte counts no host buffer can have: refused by the range check, before any
        // slice of that length is formed.
        let mut small = [0x5au8; 16];
        for n in [u64::MAX, 1 << 63, (1 << 48) + 1, 5001] {
            expect_err(
                cumem_copy_htod(a, small.as_ptr() as *const c_void, n),
                CUMEM_ERROR_INVALID_VALUE,
                &[],
            );
            expect_err(
                cumem_copy_dtoh(small.as_mut_ptr() as *mut c_void, a, n),
                CUMEM_ERROR_INVALID_VALUE,
                &[],
            );
            assert_eq!(small, [0x5a; 16]);
            expect_err(cumem_copy_dtod(a, b, n), CUMEM_ERROR_INVALID_VALUE, &[]);
            expect_err(cumem_memset(a, 0, n), CUMEM_ERROR_INVALID_VALUE, &[]);
        }
        assert_eq!(cumem_copy_dtoh(std::ptr::null_mut(), a, 0), CUMEM_SUCCESS);
    }
    assert_eq!(cumem_memset(0x1000, 1, 0), CUMEM_SUCCESS);
    assert_eq!(cumem_copy_dtod(0x1000, 0x2000, 0), CUMEM_SUCCESS);

    // memset ranges: inside, at the edges, offsets.
    assert_eq!(cumem_memset(a, 0x11, 5000), CUMEM_SUCCESS);
    assert_eq!(cumem_memset(a + 1000, 0x22, 1000), CUMEM_SUCCESS);
    assert_eq!(cumem_memset(a + 4999, 0x33, 1), CUMEM_SUCCESS);
    let got = download_ok(a, 5000);
    assert!(got[..1000].iter().all(|&x| x == 0x11));
    assert!(got[1000..2000].iter().all(|&x| x == 0x22));
    assert!(got[2000..4999].iter().all(|&x| x == 0x11));
    assert_eq!(got[4999], 0x33);
    // dtod between blocks and overlapping within one.
    assert_eq!(cumem_copy_dtod(b, a + 900, 200), CUMEM_SUCCESS);
    let got = download_ok(b, 200);
    assert!(got[..100].iter().all(|&x| x == 0x11) && got[100..].iter().all(|&x| x == 0x22));
    assert_eq!(cumem_copy_dtod(a + 1, a, 4999), CUMEM_SUCCESS);
    let got = download_ok(a, 3);
    assert_eq!(got, [0x11, 0x11, 0x11]);

    // Unknown and double frees: refused, no statistic changes.
    let before = untimed();
    for bad in [0x1000, a + 256, a + 1, u64::MAX, b + 512] {
        expect_err(cumem_free(bad), CUMEM_ERROR_INVALID_VALUE, &["not a live allocation"]);
    }
    assert_eq!(untimed(), before);
    assert_eq!(cumem_free(b), CUMEM_SUCCESS);
    let before = untimed();
    expect_err(cumem_free(b), CUMEM_ERROR_INVALID_VALUE, &[&format!("{b:#x}")]);
    assert_eq!(untimed(), before, "double free changed the statistics");
    // Copies into freed memory.
    expect_err(upload(b, &[1; 16]), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_memset(b, 1, 16), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_copy_dtod(b, a, 16), CUMEM_ERROR_INVALID_VALUE, &[]);
    expect_err(cumem_copy_dtod(a, b, 16), CUMEM_ERROR_INVALID_VALUE, &[]);
    assert_eq!(download_ok(a, 3), [0x11, 0x11, 0x11]);

    // The error message is per thread and stays until the next failure.
    let here = last_error();
    std::thread::spawn(|| {
        assert_eq!(last_error(), "");
        expect_err(cumem_free(0x42_0000), CUMEM_ERROR_INVALID_VALUE, &["0x420000"]);
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), here);
    assert_eq!(cumem_free(0), CUMEM_SUCCESS);
    assert_eq!(last_error(), here, "success does not clear the last error");

    // Frees from another thread (as Julia finalizers do).
    let c = ptrs[4];
    std::thread::spawn(move || assert_eq!(cumem_free(c), CUMEM_SUCCESS)).join().unwrap();

    // memory_status: snprintf semantics.
    let text = status();
    let n = text.len();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("Effective GPU memory usage: "));
    let type_name = match pool.as_str() {
        "binned" => "BinnedPool",
        "split" => "SplitPool",
        "expandable" => "ExpandablePool",
        "simple" => "SimplePool",
        _ => "NoPool",
    };
    assert!(lines[2].starts_with(&format!("{type_name} usage: ")), "{text}");
    assert_eq!(cstr(cumem_pool_type_name()), type_name);
    // Without the outstanding allocations (there are none at CUMEM_DEBUG=0): the same
    // text. Unknown flags: nothing written, an error recorded.
    let mut small = [0xaau8; 8];
    // SAFETY: `small` is writable for 8 bytes; null with length 0 writes nothing.
    unsafe {
        let m = cumem_memory_status_ex(std::ptr::null_mut(), 0, CUMEM_STATUS_NO_ALLOCATIONS);
        assert!(cuda() || m == n, "{m} vs {n}");
        assert_eq!(cumem_memory_status_ex(small.as_mut_ptr() as *mut c_char, 8, 2), 0);
    }
    assert_eq!(small[0], 0);
    assert!(last_error().contains("unknown flags 0x2"), "{}", last_error());
    if cuda() {
        assert!(lines[1].starts_with("CUDA GPU memory usage: "), "{text}");
    } else {
        assert!(lines[1].starts_with("Host memory (no GPU) usage: "), "{text}");
    }
    // (On CUDA, the first line's numbers follow the GPU's memory, which other processes
    // change: there the lengths are checked against each call's own result.)
    let exact = |m: usize| {
        if !cuda() {
            assert_eq!(m, n, "the full length, whatever the buffer");
        }
        assert!(m > 40, "{m}");
        m
    };
    let mut buf = vec![0xaau8; n + 64];
    let p = buf.as_mut_ptr() as *mut c_char;
    // SAFETY: `buf` is writable for every length passed (at most its length).
    unsafe {
        exact(cumem_memory_status(p, 0));
        assert!(buf.iter().all(|&x| x == 0xaa), "len 0 wrote");
        exact(cumem_memory_status(p, 1));
        assert_eq!((buf[0], buf[1]), (0, 0xaa), "len 1: only the NUL");
        exact(cumem_memory_status(p, 11));
        assert_eq!(&buf[..10], b"Effective ");
        assert_eq!(buf[10], 0, "truncated text is NUL-terminated");
        assert_eq!(buf[11], 0xaa, "wrote past len");
        // A buffer one byte short: all but the last character, then the NUL.
        let m = exact(cumem_memory_status(p, n));
        let k = m.min(n - 1);
        assert_eq!(buf[k], 0);
        assert!(buf[..k].starts_with(b"Effective GPU memory usage: "));
        if !cuda() {
            assert_eq!(&buf[..n - 1], &text.as_bytes()[..n - 1]);
        }
        // Large enough: the whole text, its NUL, nothing after.
        buf.fill(0xaa);
        let m = exact(cumem_memory_status(p, n + 64));
        assert_eq!(buf[m], 0);
        assert_eq!(buf[m + 1], 0xaa);
        let full = std::str::from_utf8(&buf[..m]).unwrap();
        assert_eq!(full.lines().count(), 3);
        assert_eq!(full.lines().nth(2), text.lines().nth(2), "the pool line is stable");
        if !cuda() {
            assert_eq!(full, text);
        }
        exact(cumem_memory_status(std::ptr::null_mut(), 100));
    }

    // Reclaim, reset, and the end state.
    for &p in &ptrs {
        if p != b && p != c {
            assert_eq!(cumem_free(p), CUMEM_SUCCESS, "{}", last_error());
        }
    }
    let s = stats();
    assert_eq!((s.requested_bytes, s.allocated_bytes), (0, 0));
    assert_eq!(s.num_frees, sizes.len() as u64);
    let reserved = s.reserved_bytes;
    let released = cumem_reclaim(u64::MAX);
    assert_eq!(released, reserved);
    let s = stats();
    assert_eq!(s.reserved_bytes, 0);
    assert_eq!(s.cached_bytes, 0);
    assert_eq!(s.fragmentation_ratio, 0.0);
    assert_eq!(cumem_reclaim(u64::MAX), 0);
    assert!(s.peak_reserved_bytes >= 3 << 20);
    cumem_reset_stats();
    let s = stats();
    assert_eq!(
        (s.num_allocations, s.num_frees, s.num_ooms, s.num_cache_hits, s.num_cache_misses),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(
        (s.num_device_allocations, s.num_device_frees, s.device_alloc_ns, s.device_free_ns),
        (0, 0, 0, 0)
    );
    assert_eq!(s.peak_reserved_bytes, 0);
    assert_eq!(s.peak_requested_bytes, 0);
    assert_eq!(s.cache_hit_rate, 0.0);
    // Still works.
    let p = alloc_ok(64);
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    done("child_api");
}

#[test]
fn child_defaults() {
    if !child("child_defaults") {
        return;
    }
    // Without cumem_init, the first call initialises the engine.
    assert_eq!(cstr(cumem_pool_name()), "binned");
    let s = stats();
    assert_eq!(s.limit_bytes, 0);
    let p = alloc_ok(8);
    let text = status();
    assert!(
        text.lines()
            .nth(2)
            .unwrap()
            .starts_with("BinnedPool usage: 512 bytes (512 bytes allocated, 0 bytes cached)"),
        "{text}"
    );
    assert!(!text.contains("Outstanding"), "{text}");
    assert!(!text.contains("Memory limit"), "{text}");
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    done("child_defaults");
}

#[test]
fn child_limit_one() {
    if !child("child_limit_one") {
        return;
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(stats().limit_bytes, 1);
    for n in [1u64, 2, 511, 512, 4096, 1 << 20, 1 << 30] {
        let (rc, p) = alloc(n);
        expect_err(
            rc,
            CUMEM_ERROR_OUT_OF_MEMORY,
            // the size once: "1 byte", "1.000 MiB (1048576 bytes)" (issue 22)
            &[
                "out of memory",
                &format!("cannot allocate {}:", cumem::format::format_bytes_exact(n)),
                "limit 1 byte",
                "JULIA_CUDA_MEMORY_LIMIT",
            ],
        );
        assert_eq!(p, 0xdead_beef);
    }
    assert_eq!(alloc(0), (CUMEM_SUCCESS, 0));
    let s = stats();
    assert_eq!(s.num_ooms, 7);
    assert_eq!(s.num_allocations, 0);
    assert_eq!(s.reserved_bytes, 0);
    assert_eq!(s.peak_reserved_bytes, 0);
    assert!(status().contains("Memory limit: 1 byte\n"));
    done("child_limit_one");
}

#[test]
fn child_limits() {
    if !child("child_limits") {
        return;
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cstr(cumem_pool_name()), "binned");
    let (mut free, mut total) = (0, 0);
    // SAFETY: both are writable.
    assert_eq!(unsafe { cumem_device_memory(&mut free, &mut total) }, 0);
    let limit = stats().limit_bytes;
    if cuda() {
        assert_eq!(limit, (total as f64 * 0.5) as u64);
    } else {
        assert_eq!(total, 256 << 20);
        assert_eq!(limit, 128 << 20);
    }
    assert!(status().contains(&format!("Memory limit: {}", cumem::format::format_bytes(limit))));
    // Up to the limit, then out of memory; the cache is released to make room (the
    // request's class, 128 MiB on the host, fits only without the cached 64 MiB block).
    let seg = 20 << 20;
    let a = alloc_ok(limit / 2);
    assert_eq!(cumem_free(a), CUMEM_SUCCESS);
    let b = alloc_ok(limit / 2 + seg);
    let s = stats();
    assert_eq!(s.num_alloc_retries, 1, "{s:#?}");
    assert!(s.reserved_bytes <= limit);
    let (rc, _) = alloc(limit / 2 + seg);
    expect_err(rc, CUMEM_ERROR_OUT_OF_MEMORY, &["limit"]);
    assert_eq!(cumem_free(b), CUMEM_SUCCESS);
    assert!(cumem_reclaim(1) > 0);
    assert_eq!(stats().reserved_bytes, 0);
    if !cuda() {
        // Above the host capacity (without a limit in the way it would be the device that
        // refuses; here the limit comes first).
        let (rc, _) = alloc(300 << 20);
        expect_err(rc, CUMEM_ERROR_OUT_OF_MEMORY, &["300.000 MiB"]);
    }
    done("child_limits");
}

/// The allocation sites of `child_debug`, kept out of line so their names are in the
/// recorded frames even in release builds without debug information.
#[inline(never)]
fn allocation_site_for_tracking() -> u64 {
    let mut p = 0;
    // SAFETY: `p` is writable.
    assert_eq!(unsafe { cumem_alloc(100, &mut p) }, CUMEM_SUCCESS);
    p
}

#[inline(never)]
fn second_allocation_site() -> u64 {
    let mut p = 0;
    // SAFETY: `p` is writable.
    assert_eq!(unsafe { cumem_alloc(3000, &mut p) }, CUMEM_SUCCESS);
    p
}

#[test]
fn child_debug() {
    if !child("child_debug") {
        return;
    }
    let p = allocation_site_for_tracking();
    let q = second_allocation_site();
    let text = status();
    assert!(text.contains(&format!("Outstanding memory allocation of 100 bytes at {p:#x}\n")), "{text}");
    assert!(text.contains(&format!("Outstanding memory allocation of 3000 bytes at {q:#x}\n")), "{text}");
    // The first frame under each allocation is the caller of the C ABI: CuMem's own
    // frames (the engine, the C entry point, its panic guard) are removed.
    for (ptr, site) in [(p, "ffi::allocation_site_for_tracking"), (q, "ffi::second_allocation_site")] {
        let first = text.split(&format!("at {ptr:#x}\n")).nth(1).unwrap().lines().next().unwrap();
        assert!(first.trim_start().starts_with(site), "{site} should come first:\n{text}");
    }
    assert!(!text.contains("cumem::") && !text.contains("cumem_alloc"), "{text}");
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    let text = status();
    assert!(!text.contains(&format!("{p:#x}")), "{text}");
    assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    assert!(!status().contains("Outstanding"));
    done("child_debug");
}

#[test]
fn child_threads() {
    if !child("child_threads") {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel::<(u64, u8)>();
    let rx = std::sync::Mutex::new(rx);
    std::thread::scope(|sc| {
        for t in 0..4u8 {
            let tx = tx.clone();
            let rx = &rx;
            sc.spawn(move || {
                for i in 0..5_000u64 {
                    let n = 1 + (i * 37 + t as u64 * 101) % 5000;
                    let p = alloc_ok(n);
                    let tag = t.wrapping_mul(31).wrapping_add(i as u8);
                    assert_eq!(cumem_memset(p, tag, 1), CUMEM_SUCCESS);
                    if i % 3 == 0 {
                        tx.send((p, tag)).unwrap();
                    } else {
                        assert_eq!(download_ok(p, 1)[0], tag);
                        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
                    }
                    if i % 5 == 0 {
                        let got = rx.lock().unwrap().try_recv();
                        if let Ok((q, tag)) = got {
                            assert_eq!(download_ok(q, 1)[0], tag);
                            assert_eq!(cumem_free(q), CUMEM_SUCCESS, "{}", last_error());
                        }
                    }
                }
            });
        }
    });
    drop(tx);
    for (q, tag) in rx.into_inner().unwrap() {
        assert_eq!(download_ok(q, 1)[0], tag);
        assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    }
    let s = stats();
    assert_eq!(s.num_allocations, 20_000);
    assert_eq!(s.num_frees, 20_000);
    assert_eq!(s.allocated_bytes, 0);
    cumem_reclaim(u64::MAX);
    assert_eq!(stats().reserved_bytes, 0);
    done("child_threads");
}

#[test]
fn child_bad_env() {
    if !child("child_bad_env") {
        return;
    }
    let var = std::env::var("CUMEM_FFI_BAD_VAR").unwrap();
    let value = std::env::var("CUMEM_FFI_BAD_VALUE").unwrap();
    let rc = cumem_init();
    let msg = last_error();
    let msg_ptr = cumem_last_error();
    assert_eq!(rc, CUMEM_ERROR_CONFIG, "{var}={value:?}: {msg}");
    assert!(
        msg.contains(&format!("{var}=")) && msg.contains(&value) && msg.contains("accepted"),
        "the message must name {var}, the value {value:?} and what is accepted: {msg}"
    );
    // Nothing works with a half-read configuration; every entry point says why.
    let (rc, p) = alloc(8);
    assert_eq!((rc, p), (CUMEM_ERROR_CONFIG, 0xdead_beef));
    let mut s = Stats::default();
    // SAFETY: `s` is writable.
    assert_eq!(unsafe { cumem_get_stats(&mut s) }, CUMEM_ERROR_CONFIG);
    assert_eq!(cumem_free(0x1000), CUMEM_ERROR_CONFIG);
    assert_eq!(cumem_reclaim(u64::MAX), 0);
    assert_eq!(cstr(cumem_pool_name()), "");
    assert_eq!(cstr(cumem_pool_type_name()), "");
    assert_eq!(cstr(cumem_device_name()), "");
    // SAFETY: null with length 0 writes nothing.
    assert_eq!(unsafe { cumem_memory_status(std::ptr::null_mut(), 0) }, 0);
    // snprintf semantics hold on failure too: an empty, terminated string.
    let mut buf = [0xaau8; 16];
    // SAFETY: `buf` is writable for 16 bytes.
    assert_eq!(unsafe { cumem_memory_status(buf.as_mut_ptr() as *mut c_char, 16) }, 0);
    assert_eq!((buf[0], buf[1]), (0, 0xaa));
    assert_eq!(cumem_memset(0x1000, 0, 1), CUMEM_ERROR_CONFIG);
    assert!(last_error().contains(&var));
    // The initialisation's error stays put: a pointer taken before all these calls is
    // still the current one, with the same text.
    assert_eq!(cumem_last_error(), msg_ptr, "the init error was replaced by a later call");
    assert_eq!(cstr(msg_ptr), msg);
    // A later call tries again: with the variable fixed, initialisation succeeds.
    // SAFETY: the child runs this one test; no other thread reads the environment.
    unsafe { std::env::remove_var(&var) };
    if var == "CUMEM_DEVICE" {
        // SAFETY: as above.
        unsafe { std::env::set_var("CUMEM_DEVICE", if cuda() { "cuda" } else { "host" }) };
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    let p = alloc_ok(8);
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    done("child_bad_env");
}

#[test]
fn child_cuda_choice() {
    if !child("child_cuda_choice") {
        return;
    }
    let expect = std::env::var("CUMEM_FFI_EXPECT").unwrap();
    let rc = cumem_init();
    match expect.as_str() {
        "device" => {
            expect_err(rc, CUMEM_ERROR_DEVICE, &["CUDA"]);
            assert_eq!(cstr(cumem_device_name()), "");
        }
        "host" => {
            assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
            assert_eq!(cstr(cumem_device_name()), "host memory (no GPU)");
        }
        _ => {
            assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
            assert_ne!(cstr(cumem_device_name()), "host memory (no GPU)");
            let p = alloc_ok(1 << 20);
            assert_eq!(cumem_memset(p, 7, 1 << 20), CUMEM_SUCCESS);
            assert_eq!(download_ok(p + 1000, 3), [7, 7, 7]);
            assert_eq!(cumem_free(p), CUMEM_SUCCESS);
        }
    }
    done("child_cuda_choice");
}

#[test]
fn alloc_ex_and_device_kind() {
    spawn("child_alloc_ex", &[("JULIA_CUDA_MEMORY_POOL", "binned"), ("JULIA_CUDA_MEMORY_LIMIT", "8MiB")]);
}

#[test]
fn child_alloc_ex() {
    if !child("child_alloc_ex") {
        return;
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_device_is_host(), if cuda() { 0 } else { 1 });
    // 4 MiB cached, then 8 MiB asked for under an 8 MiB limit.
    let p = alloc_ok(4 << 20);
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    let mut q = 0xdead_beef_u64;
    // SAFETY: `q` is a writable u64.
    let rc = unsafe { cumem_alloc_ex(8 << 20, &mut q, CUMEM_ALLOC_NO_RECLAIM) };
    expect_err(rc, CUMEM_ERROR_OUT_OF_MEMORY, &["JULIA_CUDA_MEMORY_LIMIT"]);
    assert_eq!(q, 0xdead_beef, "nothing written on failure");
    let s = stats();
    assert_eq!(
        (s.cached_bytes, s.num_ooms, s.num_alloc_retries),
        (4 << 20, 0, 0),
        "cache kept, nothing counted"
    );
    // Without the flag the engine releases its cache and retries.
    let rc = unsafe { cumem_alloc_ex(8 << 20, &mut q, 0) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    let s = stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms, s.reserved_bytes), (1, 0, 8 << 20));
    assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    // Bad input changes nothing.
    expect_err(unsafe { cumem_alloc_ex(512, &mut q, 8) }, CUMEM_ERROR_INVALID_VALUE, &["flags"]);
    expect_err(
        unsafe { cumem_alloc_ex(512, std::ptr::null_mut(), CUMEM_ALLOC_NO_RECLAIM) },
        CUMEM_ERROR_INVALID_VALUE,
        &["null"],
    );
    assert_eq!(stats().num_allocations, 2);
    done("child_alloc_ex");
}

/// Log capture: with `cumem_log_capture(1)` before `cumem_init`, the engine's messages
/// (here `CUMEM_LOG=debug`: the device allocation of a first request) are queued, not
/// printed, and `cumem_log_next` hands them out oldest first, keeping a message that did
/// not fit the buffer.
#[test]
fn log_capture() {
    spawn("child_log_capture", &[("CUMEM_LOG", "debug")]);
}

#[test]
fn child_log_capture() {
    if !child("child_log_capture") {
        return;
    }
    let next = |buf: &mut [u8]| {
        let mut level = -1;
        // SAFETY: `level` and `buf` are writable.
        let n = unsafe { cumem_log_next(&mut level, buf.as_mut_ptr() as *mut c_char, buf.len()) };
        (level, n)
    };
    let mut big = [0u8; 4096];
    assert_eq!(cumem_log_capture(1), 0);
    assert_eq!(next(&mut big), (0, 0), "nothing queued before any message");
    assert_eq!(cumem_init(), CUMEM_SUCCESS);
    while next(&mut big).0 != 0 {} // initialisation's own messages, if any
    let (code, p) = alloc(1 << 20);
    assert_eq!(code, CUMEM_SUCCESS);
    // a buffer too small: the length is reported, a truncated copy written, the message kept
    let mut small = [0u8; 8];
    let (level, n) = next(&mut small);
    assert_eq!(level, 4, "a debug message");
    assert!(n > small.len());
    assert_eq!(small[7], 0);
    let (level2, n2) = next(&mut big);
    assert_eq!((level2, n2), (level, n), "the same message, now taken");
    let msg = std::str::from_utf8(&big[..n2]).unwrap();
    assert!(msg.contains("device allocation of"), "{msg}");
    assert_eq!(big[n2], 0);
    // null buffers and levels are accepted
    // SAFETY: null pointers are allowed.
    unsafe { cumem_log_next(std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    assert_eq!(cumem_log_capture(0), 1);
    assert!(cstr(cumem_version()).starts_with(env!("CARGO_PKG_VERSION")));
    done("child_log_capture");
}

/// The memory tools' C functions (src/ffi/tools.rs) on every pool: history, snapshot,
/// leaks, checkpoints, limits, compaction, retry flags, and their bad inputs.
#[test]
fn memory_tools_on_each_pool() {
    for pool in ["binned", "split", "expandable", "simple", "none"] {
        spawn("child_tools", &[("JULIA_CUDA_MEMORY_POOL", pool), ("CUMEM_HOST_CAPACITY", "1GiB")]);
    }
}

#[test]
fn child_tools() {
    use cumem::history::Event;
    use cumem::snapshot::{BlockInfo, Compaction, Leak, SegmentInfo};
    if !child("child_tools") {
        return;
    }
    assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    // History: off at start, bad max_entries refused, events in time order.
    assert_eq!(unsafe { cumem_memory_events(std::ptr::null_mut(), 0) }, 0);
    expect_err(cumem_record_memory_history(1, 0), CUMEM_ERROR_INVALID_VALUE, &["max_entries"]);
    assert_eq!(cumem_record_memory_history(1, 1000), CUMEM_SUCCESS);
    cumem_set_next_origin(42);
    let a = alloc_ok(5000);
    assert_eq!(cumem_free(a), CUMEM_SUCCESS);
    assert_eq!(cumem_record_memory_history(0, 0), CUMEM_SUCCESS);
    let n = unsafe { cumem_memory_events(std::ptr::null_mut(), 0) };
    assert!(n >= 2);
    let mut ev = vec![Event::default(); n as usize + 3];
    assert_eq!(unsafe { cumem_memory_events(ev.as_mut_ptr(), ev.len() as u64) }, n);
    ev.truncate(n as usize);
    let mine: Vec<&Event> =
        ev.iter().filter(|e| e.kind == CUMEM_EVENT_ALLOC || e.kind == CUMEM_EVENT_FREE).collect();
    assert_eq!(mine.len(), 2, "{ev:#?}");
    assert_eq!((mine[0].kind, mine[0].addr, mine[0].requested_bytes), (CUMEM_EVENT_ALLOC, a, 5000));
    assert_eq!((mine[1].kind, mine[1].addr), (CUMEM_EVENT_FREE, a));
    assert_eq!(mine[0].origin, 42 | CUMEM_ORIGIN_CALLER, "the caller's origin id");
    assert_eq!(mine[1].origin, mine[0].origin, "the free carries it too");
    // A capacity of 1 copies one event and still returns the count.
    let mut one = [Event::default(); 1];
    assert_eq!(unsafe { cumem_memory_events(one.as_mut_ptr(), 1) }, n);
    assert_eq!(one[0], ev[0]);
    // Origin texts: none for 0 and for caller ids.
    assert_eq!(unsafe { cumem_origin_text(0, std::ptr::null_mut(), 0) }, 0);
    assert_eq!(unsafe { cumem_origin_text(mine[0].origin, std::ptr::null_mut(), 0) }, 0);

    // Snapshot: two calls; too small a capacity copies nothing.
    let live = alloc_ok(3 << 20);
    let (mut ns, mut nb) = (0u64, 0u64);
    assert_eq!(
        unsafe { cumem_memory_snapshot(std::ptr::null_mut(), 0, std::ptr::null_mut(), 0, &mut ns, &mut nb) },
        CUMEM_SUCCESS
    );
    assert!(ns >= 1 && nb >= 1);
    let mut segs = vec![SegmentInfo::default(); ns as usize];
    let mut blocks = vec![BlockInfo::default(); nb as usize];
    let mut small = vec![BlockInfo::default(); nb as usize - 1];
    assert_eq!(
        unsafe { cumem_memory_snapshot(segs.as_mut_ptr(), ns, small.as_mut_ptr(), nb - 1, &mut ns, &mut nb) },
        CUMEM_SUCCESS
    );
    assert!(segs.iter().all(|s| s.size == 0), "nothing copied when one array is too small");
    assert_eq!(
        unsafe { cumem_memory_snapshot(segs.as_mut_ptr(), ns, blocks.as_mut_ptr(), nb, &mut ns, &mut nb) },
        CUMEM_SUCCESS
    );
    let st = stats();
    assert_eq!(segs.iter().map(|s| s.size).sum::<u64>(), st.reserved_bytes);
    let active: Vec<&BlockInfo> = blocks.iter().filter(|b| b.state == CUMEM_BLOCK_ACTIVE).collect();
    assert_eq!(active.len(), 1);
    assert_eq!((active[0].addr, active[0].requested), (live, 3 << 20));
    expect_err(
        unsafe {
            cumem_memory_snapshot(
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                &mut nb,
            )
        },
        CUMEM_ERROR_INVALID_VALUE,
        &["num_segments"],
    );

    // Leaks and checkpoints.
    let (mut da, mut dr) = (0i64, 0i64);
    assert_eq!(unsafe { cumem_memory_checkpoint(&mut da, &mut dr) }, CUMEM_SUCCESS);
    assert_eq!(da, st.allocated_bytes as i64);
    let mark = cumem_leak_mark();
    let b = alloc_ok(700);
    let mut count = 0u64;
    let mut leaks = [Leak::default(); 4];
    assert_eq!(unsafe { cumem_leaks_since(mark, leaks.as_mut_ptr(), 4, &mut count) }, CUMEM_SUCCESS);
    assert_eq!((count, leaks[0].addr, leaks[0].requested_bytes), (1, b, 700));
    assert_eq!(unsafe { cumem_check_memory_leaks(leaks.as_mut_ptr(), 4, &mut count) }, CUMEM_SUCCESS);
    assert_eq!(count, 1);
    expect_err(
        unsafe { cumem_leaks_since(1 << 40, leaks.as_mut_ptr(), 4, &mut count) },
        CUMEM_ERROR_INVALID_VALUE,
        &["mark"],
    );
    expect_err(
        unsafe { cumem_check_memory_leaks(leaks.as_mut_ptr(), 4, std::ptr::null_mut()) },
        CUMEM_ERROR_INVALID_VALUE,
        &["count"],
    );
    assert_eq!(cumem_free(b), CUMEM_SUCCESS);
    assert_eq!(unsafe { cumem_memory_checkpoint(std::ptr::null_mut(), std::ptr::null_mut()) }, CUMEM_SUCCESS);

    // Limits.
    expect_err(cumem_set_memory_limit(1 << 20), CUMEM_ERROR_INVALID_VALUE, &["live"]);
    assert_eq!(stats().limit_bytes, 0);
    assert_eq!(unsafe { cumem_set_memory_limit_str(c"16MiB".as_ptr()) }, CUMEM_SUCCESS);
    assert_eq!(stats().limit_bytes, 16 << 20);
    assert!((cumem_memory_pressure() - stats().reserved_bytes as f64 / (16u64 << 20) as f64).abs() < 1e-12);
    expect_err(unsafe { cumem_set_memory_limit_str(c"lots".as_ptr()) }, CUMEM_ERROR_CONFIG, &["lots"]);
    expect_err(unsafe { cumem_set_memory_limit_str(std::ptr::null()) }, CUMEM_ERROR_INVALID_VALUE, &["null"]);
    assert_eq!(stats().limit_bytes, 16 << 20, "bad input changes nothing");
    assert_eq!(unsafe { cumem_set_memory_limit_str(c"none".as_ptr()) }, CUMEM_SUCCESS);
    assert_eq!(stats().limit_bytes, 0);
    expect_err(cumem_set_memory_fraction(2.0), CUMEM_ERROR_INVALID_VALUE, &["fraction"]);
    assert_eq!(cumem_set_memory_fraction(0.25), CUMEM_SUCCESS);
    let (mut free, mut total) = (0, 0);
    assert_eq!(unsafe { cumem_device_memory(&mut free, &mut total) }, CUMEM_SUCCESS);
    assert_eq!(stats().limit_bytes, total / 4);
    assert_eq!(cumem_set_memory_limit(0), CUMEM_SUCCESS);
    assert_eq!(stats().limit_bytes, 0);

    // Cache cap and compaction.
    assert_eq!(cumem_get_cache_limit(), u64::MAX);
    assert_eq!(cumem_set_cache_limit(0), CUMEM_SUCCESS);
    assert_eq!(cumem_get_cache_limit(), 0);
    assert_eq!(cumem_free(live), CUMEM_SUCCESS);
    assert_eq!(stats().reserved_bytes, 0, "a cap of 0 keeps nothing cached");
    assert_eq!(cumem_set_cache_limit(u64::MAX), CUMEM_SUCCESS);
    let c = alloc_ok(2 << 20);
    assert_eq!(cumem_free(c), CUMEM_SUCCESS);
    let before = stats();
    let mut out = Compaction::default();
    assert_eq!(unsafe { cumem_compact(&mut out) }, CUMEM_SUCCESS);
    assert_eq!(out.released_bytes, before.reserved_bytes);
    assert_eq!((out.fragmentation_before, out.fragmentation_after), (before.fragmentation_ratio, 0.0));
    expect_err(unsafe { cumem_compact(std::ptr::null_mut()) }, CUMEM_ERROR_INVALID_VALUE, &["null"]);

    // Retry flags of cumem_alloc_ex.
    let mut q = 0u64;
    assert_eq!(
        unsafe { cumem_alloc_ex(100, &mut q, CUMEM_ALLOC_NO_RECLAIM | CUMEM_ALLOC_GC_RETRY) },
        CUMEM_SUCCESS
    );
    assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    assert_eq!(unsafe { cumem_alloc_ex(100, &mut q, CUMEM_ALLOC_RECLAIM_RETRY) }, CUMEM_SUCCESS);
    assert_eq!(cumem_free(q), CUMEM_SUCCESS);
    let s = stats();
    assert_eq!((s.num_gc_retries, s.num_reclaim_retries), (1, 1));
    done("child_tools");
}

//! The pinned host pool (`cumem::pinned`) and its C ABI (`cumem_host_*`,
//! `cumem_is_pinned`), on the host device: allocation, cache hits, the limit, the
//! statistics, `is_pinned`, registration, and bad input (a clear error that changes
//! nothing).
//!
//! The C ABI's pool is a process-wide value configured from the environment, so those
//! scenarios run in child processes of this test binary, as in tests/ffi.rs.

use cumem::config::Amount;
use cumem::device::{Device, HostRegistrar, LockedHostDevice, NoRegistrar};
use cumem::error::{CUMEM_ERROR_INVALID_VALUE, CUMEM_ERROR_OUT_OF_MEMORY, CUMEM_SUCCESS};
use cumem::pinned::PinnedHost;
use cumem::{Config, Engine, Error, Stats};
use parking_lot::Mutex;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

/// True when the C ABI scenarios and [`cuda_pinned_device`] run on a GPU
/// (`CUMEM_TEST_CUDA=1`, as the other suites).
fn cuda() -> bool {
    std::env::var("CUMEM_TEST_CUDA").is_ok_and(|v| v.trim() == "1")
}

fn pool_with(cfg: &Config, registrar: Box<dyn HostRegistrar>) -> PinnedHost {
    PinnedHost::with_device(cfg, Box::new(LockedHostDevice::new(Some(1 << 30))), registrar, 1).unwrap()
}

fn pool() -> PinnedHost {
    pool_with(&Config::default(), Box::new(NoRegistrar))
}

fn invariants(s: &Stats) {
    assert!(s.requested_bytes <= s.allocated_bytes && s.allocated_bytes <= s.reserved_bytes, "{s:?}");
    assert_eq!(s.cached_bytes, s.reserved_bytes - s.allocated_bytes, "{s:?}");
}

#[test]
fn alloc_free_and_cache_hit() {
    let p = pool();
    let a = p.alloc(1000).unwrap();
    assert_ne!(a, 0);
    assert_eq!(a % 512, 0, "blocks are at least 512-byte aligned");
    // The memory is the process's: write and read it directly.
    // SAFETY: `a` is a live block of at least 1000 bytes.
    unsafe {
        std::ptr::write_bytes(a as *mut u8, 0x5c, 1000);
        assert_eq!(*(a as *const u8).add(999), 0x5c);
    }
    let s = p.stats();
    assert_eq!((s.num_allocations, s.num_cache_misses, s.num_cache_hits), (1, 1, 0));
    assert_eq!(s.requested_bytes, 1000);
    assert_eq!(s.allocated_bytes, 1024, "binned: the power-of-two class");
    invariants(&s);
    p.free(a).unwrap();
    let s = p.stats();
    assert_eq!((s.num_frees, s.allocated_bytes, s.cached_bytes), (1, 0, 1024));
    // Same size class again: served from the cache, same block, no device call.
    let b = p.alloc(900).unwrap();
    assert_eq!(b, a);
    let s = p.stats();
    assert_eq!((s.num_cache_hits, s.num_device_allocations), (1, 1));
    p.free(b).unwrap();
    assert_eq!(p.alloc(0).unwrap(), 0, "0 bytes is the null address");
    assert_eq!(p.free(0), Ok(()));
    assert_eq!(p.reclaim(u64::MAX), 1024);
    let s = p.stats();
    assert_eq!((s.reserved_bytes, s.num_device_frees), (0, 1));
    p.reset_stats();
    assert_eq!(p.stats().num_allocations, 0);
}

#[test]
fn large_batches_are_not_rounded_to_powers_of_two() {
    let p = pool();
    let a = p.alloc(129 * MIB).unwrap();
    assert_eq!(p.stats().allocated_bytes, 130 * MIB, "2 MiB steps above 128 MiB");
    p.free(a).unwrap();
    assert_eq!(p.alloc(129 * MIB).unwrap(), a);
    assert_eq!(p.stats().num_cache_hits, 1);
    p.free(a).unwrap();
}

#[test]
fn bad_frees_change_nothing() {
    let p = pool();
    let a = p.alloc(4096).unwrap();
    let before = p.stats();
    for bad in [a + 8, 0x1000, a + 4096] {
        let e = p.free(bad).unwrap_err();
        assert_eq!(e.code(), CUMEM_ERROR_INVALID_VALUE);
        assert!(e.to_string().contains("not a live allocation of the pinned host pool"), "{e}");
    }
    let mut after = p.stats();
    after.device_alloc_ns = before.device_alloc_ns;
    assert_eq!(after, before);
    p.free(a).unwrap();
    assert!(p.free(a).unwrap_err().to_string().contains("already freed"));
}

#[test]
fn the_limit_is_its_own() {
    let cfg = Config { pinned_limit: Some(Amount::Bytes(4 * MIB)), ..Config::default() };
    let p = pool_with(&cfg, Box::new(NoRegistrar));
    assert_eq!(p.stats().limit_bytes, 4 * MIB);
    assert_eq!(p.engine().config().limit, Some(Amount::Bytes(4 * MIB)));
    assert_eq!(p.engine().config().pinned_limit, None);
    let a = p.alloc(2 * MIB).unwrap();
    let e = p.alloc(4 * MIB).unwrap_err();
    assert_eq!(e.code(), CUMEM_ERROR_OUT_OF_MEMORY);
    let m = e.to_string();
    assert!(m.contains("pinned host memory") && m.contains("CUMEM_PINNED_LIMIT"), "{m}");
    assert!(!m.contains("JULIA_CUDA_MEMORY_LIMIT"), "{m}");
    assert_eq!(p.stats().num_ooms, 1);
    // The cache is released on out of memory before the retry: a freed 2 MiB block does
    // not keep a 4 MiB request from fitting.
    p.free(a).unwrap();
    let b = p.alloc(4 * MIB).unwrap();
    let s = p.stats();
    assert_eq!((s.reserved_bytes, s.num_alloc_retries), (4 * MIB, 1));
    p.free(b).unwrap();
    // The device engine's limit is not the pinned pool's.
    let cfg = Config { limit: Some(Amount::Bytes(MIB)), ..Config::default() };
    let p = pool_with(&cfg, Box::new(NoRegistrar));
    assert_eq!(p.stats().limit_bytes, 0);
    p.free(p.alloc(8 * MIB).unwrap()).unwrap();
}

#[test]
fn is_pinned_knows_pool_blocks_and_registered_ranges() {
    let p = pool();
    let a = p.alloc(3000).unwrap();
    assert!(p.is_pinned(a) && p.is_pinned(a + 2999));
    assert!(!p.is_pinned(a + 3000), "past the requested bytes");
    assert!(!p.is_pinned(0));
    let host = vec![0u8; 10_000];
    let h = host.as_ptr() as u64;
    assert!(!p.is_pinned(h));
    // SAFETY: `host` outlives the registration (unregistered below).
    unsafe { p.register(h, 10_000) }.unwrap();
    assert!(p.is_pinned(h) && p.is_pinned(h + 9_999) && !p.is_pinned(h + 10_000));
    assert_eq!(p.registered(), (1, 10_000));
    p.unregister(h).unwrap();
    assert!(!p.is_pinned(h));
    assert_eq!(p.registered(), (0, 0));
    p.free(a).unwrap();
    assert!(!p.is_pinned(a), "a freed (cached) block is no array's");
}

/// A registrar that records its calls and fails on demand.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(&'static str, u64, u64)>>,
    fail: Mutex<bool>,
}

struct RecorderHandle(Arc<Recorder>);

impl HostRegistrar for RecorderHandle {
    unsafe fn register(&self, ptr: u64, bytes: u64) -> cumem::Result<()> {
        if *self.0.fail.lock() {
            return Err(Error::Device("cuMemHostRegister failed: injected".into()));
        }
        self.0.calls.lock().push(("register", ptr, bytes));
        Ok(())
    }
    unsafe fn unregister(&self, ptr: u64) -> cumem::Result<()> {
        if *self.0.fail.lock() {
            return Err(Error::Device("cuMemHostUnregister failed: injected".into()));
        }
        self.0.calls.lock().push(("unregister", ptr, 0));
        Ok(())
    }
}

#[test]
fn registration_checks_its_input_and_changes_nothing_on_error() {
    let rec = Arc::new(Recorder::default());
    let p = pool_with(&Config::default(), Box::new(RecorderHandle(rec.clone())));
    let host = vec![0u8; 1 << 16];
    let h = host.as_ptr() as u64;
    // SAFETY (all registrations below): `host` outlives the pool.
    unsafe {
        p.register(h + 4096, 8192).unwrap();
        let bad = |ptr: u64, bytes: u64, words: &[&str]| {
            let e = p.register(ptr, bytes).unwrap_err();
            assert_eq!(e.code(), CUMEM_ERROR_INVALID_VALUE, "{e}");
            for w in words {
                assert!(e.to_string().contains(w), "{ptr:#x}+{bytes}: {e} lacks {w:?}");
            }
        };
        bad(0, 100, &["null"]);
        bad(h, 0, &["empty"]);
        bad(u64::MAX - 10, 100, &["overflows"]);
        bad(h + 4096, 8192, &["overlaps the registered range"]);
        bad(h, 4097, &["overlaps the registered range"]);
        bad(h + 8192, 100, &["overlaps the registered range"]);
        bad(h + 12287, 1, &["overlaps the registered range"]);
        let blk = p.alloc(4096).unwrap();
        bad(blk + 100, 10, &["live block of the pinned host pool"]);
        p.free(blk).unwrap();
        // Adjacent ranges are fine.
        p.register(h, 4096).unwrap();
        p.register(h + 12288, 4096).unwrap();
        assert_eq!(p.registered(), (3, 16384));
        // A driver failure: nothing recorded.
        *rec.fail.lock() = true;
        assert_eq!(p.register(h + 20000, 10).unwrap_err().code(), cumem::error::CUMEM_ERROR_DEVICE);
        assert!(!p.is_pinned(h + 20000));
        assert_eq!(p.unregister(h).unwrap_err().code(), cumem::error::CUMEM_ERROR_DEVICE);
        assert!(p.is_pinned(h), "a failed unregister keeps the range");
        *rec.fail.lock() = false;
    }
    let e = p.unregister(h + 5000).unwrap_err();
    assert_eq!(e.code(), CUMEM_ERROR_INVALID_VALUE);
    assert!(e.to_string().contains(&format!("inside the registered range {:#x}+8192", h + 4096)), "{e}");
    let e = p.unregister(h + 30000).unwrap_err();
    assert!(e.to_string().contains("no registered host range starts there"), "{e}");
    assert_eq!(p.registered(), (3, 16384));
    p.unregister(h + 4096).unwrap();
    assert_eq!(p.unregister(h + 4096).unwrap_err().code(), CUMEM_ERROR_INVALID_VALUE);
    let calls = rec.calls.lock().clone();
    assert_eq!(
        calls,
        vec![
            ("register", h + 4096, 8192),
            ("register", h, 4096),
            ("register", h + 12288, 4096),
            ("unregister", h + 4096, 0)
        ]
    );
    // What is left is unregistered when the pool goes.
    drop(p);
    let calls = rec.calls.lock().clone();
    assert_eq!(calls.len(), 6);
    assert!(calls[4..].iter().all(|c| c.0 == "unregister"));
}

#[test]
fn device_copies_take_pinned_pointers() {
    let dev_engine =
        Engine::with_device(Config::default(), Box::new(cumem::device::HostDevice::new(Some(1 << 30))), 1)
            .unwrap();
    let p = pool();
    let n = 1 << 20;
    let src = p.alloc(n).unwrap();
    let dst = p.alloc(n).unwrap();
    // SAFETY: both are live pinned blocks of `n` bytes.
    let (s, d) = unsafe {
        (
            std::slice::from_raw_parts_mut(src as *mut u8, n as usize),
            std::slice::from_raw_parts_mut(dst as *mut u8, n as usize),
        )
    };
    for (i, b) in s.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let g = dev_engine.alloc(n).unwrap();
    dev_engine.copy_htod(g, s).unwrap();
    dev_engine.copy_dtoh(d, g).unwrap();
    assert_eq!(s, d);
    dev_engine.free(g).unwrap();
    p.free(src).unwrap();
    p.free(dst).unwrap();
}

#[test]
fn locked_host_device_allocates_page_aligned_memory() {
    let d = LockedHostDevice::new(Some(64 * MIB));
    let a = d.alloc(10_000).unwrap();
    assert_eq!(a % 4096, 0);
    // SAFETY: `a` is 10000 bytes of this device.
    unsafe {
        d.memset(a, 7, 10_000).unwrap();
        assert_eq!(*((a + 9_999) as *const u8), 7);
        d.free(a, 10_000).unwrap();
    }
    assert!(d.is_host());
    assert_eq!(d.alloc(65 * MIB).unwrap_err().code(), CUMEM_ERROR_OUT_OF_MEMORY);
}

/// On a GPU (`CUMEM_TEST_CUDA=1`): cuMemHostAlloc'ed blocks and cuMemHostRegister'ed
/// ranges are page-locked for the driver, pageable memory is not, and a device
/// engine's copies take both.
#[test]
fn cuda_pinned_device() {
    if !cuda() {
        return;
    }
    let p = PinnedHost::new(&Config::default(), true).expect("CUMEM_TEST_CUDA=1 but CUDA is not usable");
    let dev = Engine::with_device(Config::default(), Box::new(cumem::device::CudaDevice::new(0).unwrap()), 1)
        .unwrap();
    let n = 8 * MIB;
    let a = p.alloc(n).unwrap();
    let host = vec![3u8; n as usize];
    let h = host.as_ptr() as u64;
    assert!(p.is_pinned(a) && !p.is_pinned(h));
    // SAFETY: `host` outlives its registration.
    unsafe { p.register(h, n) }.unwrap();
    assert!(p.is_pinned(h + n - 1));
    let g = dev.alloc(n).unwrap();
    // SAFETY: `a` is a live pinned block of `n` bytes.
    let pinned = unsafe { std::slice::from_raw_parts_mut(a as *mut u8, n as usize) };
    dev.copy_htod(g, &host).unwrap();
    dev.copy_dtoh(pinned, g).unwrap();
    assert!(pinned.iter().all(|&b| b == 3));
    p.unregister(h).unwrap();
    assert!(!p.is_pinned(h), "the driver forgets an unregistered range");
    dev.free(g).unwrap();
    p.free(a).unwrap();
    assert_eq!(p.reclaim(u64::MAX), n);
    assert!(!p.is_pinned(a), "freed with cuMemFreeHost");
}

// ---- the C ABI, in child processes ---------------------------------------------------

use cumem::ffi::*;
use std::ffi::{CStr, c_char, c_void};

const MARK: &str = "CUMEM_PINNED_CHILD";

fn spawn(child: &str, env: &[(&str, &str)]) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"]);
    for v in cumem::config::ENGINE_VARS {
        cmd.env_remove(v);
    }
    cmd.env(MARK, child).env("CUMEM_DEVICE", if cuda() { "cuda" } else { "host" });
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("child {child} done")),
        "child {child} failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn child(name: &str) -> bool {
    std::env::var(MARK).is_ok_and(|v| v == name)
}

fn last_error() -> String {
    // SAFETY: cumem_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(cumem_last_error()) }.to_str().unwrap().to_owned()
}

fn status() -> String {
    let mut buf = vec![0u8; 8192];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { cumem_memory_status(buf.as_mut_ptr() as *mut c_char, buf.len()) };
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

fn host_stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: `s` is writable.
    assert_eq!(unsafe { cumem_host_get_stats(&mut s) }, CUMEM_SUCCESS);
    s
}

fn host_alloc(bytes: u64) -> (i32, *mut c_void) {
    let mut p = 0xdead_beef_usize as *mut c_void;
    // SAFETY: `p` is writable.
    let rc = unsafe { cumem_host_alloc(bytes, &mut p) };
    (rc, p)
}

#[test]
fn c_abi() {
    spawn("child_c_abi", &[("CUMEM_PINNED_LIMIT", "16MiB")]);
}

#[test]
fn c_abi_bad_limit() {
    spawn("child_bad_limit", &[("CUMEM_PINNED_LIMIT", "lots")]);
}

#[test]
fn child_c_abi() {
    if !child("child_c_abi") {
        return;
    }
    assert!(!status().contains("Pinned host memory"), "no lines before the pool is used");
    let (rc, p) = host_alloc(1 << 20);
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_is_pinned(p), 1);
    // SAFETY: `p` is a live pinned block of 1 MiB.
    unsafe { (p as *mut u8).add(12345).write(9) };
    assert_eq!(cumem_is_pinned(unsafe { (p as *const u8).add((1 << 20) - 1) } as *const c_void), 1);
    // Device copies take the pinned pointer as any host pointer.
    let mut d = 0;
    // SAFETY: `d` is writable; `p` readable/writable for 1 MiB.
    unsafe {
        assert_eq!(cumem_alloc(1 << 20, &mut d), CUMEM_SUCCESS);
        assert_eq!(cumem_copy_htod(d, p, 1 << 20), CUMEM_SUCCESS);
        (p as *mut u8).add(12345).write(0);
        assert_eq!(cumem_copy_dtoh(p, d, 1 << 20), CUMEM_SUCCESS);
        assert_eq!((p as *const u8).add(12345).read(), 9);
    }
    assert_eq!(cumem_free(d), CUMEM_SUCCESS);
    let s = host_stats();
    assert_eq!((s.num_allocations, s.requested_bytes, s.limit_bytes), (1, 1 << 20, 16 << 20));
    // The device engine's statistics do not count pinned memory.
    let mut ds = Stats::default();
    // SAFETY: `ds` is writable.
    unsafe { cumem_get_stats(&mut ds) };
    assert_eq!((ds.num_allocations, ds.requested_bytes), (1, 0));
    let st = status();
    assert!(
        st.contains("Pinned host memory usage: 1024.000 KiB (1024.000 KiB allocated, 0 bytes cached)\n"),
        "{st}"
    );
    assert!(st.contains("Pinned host memory limit: 16.000 MiB\n"), "{st}");
    // Registration.
    let host = vec![0u8; 100_000];
    let h = host.as_ptr() as *mut c_void;
    assert_eq!(cumem_is_pinned(h), 0);
    // SAFETY: `host` outlives its registration.
    assert_eq!(unsafe { cumem_host_register(h, 100_000) }, CUMEM_SUCCESS);
    assert_eq!(cumem_is_pinned(h), 1);
    let (mut n, mut b) = (0, 0);
    // SAFETY: both writable.
    assert_eq!(unsafe { cumem_host_registered(&mut n, &mut b) }, CUMEM_SUCCESS);
    assert_eq!((n, b), (1, 100_000));
    assert!(status().contains("Registered host memory: 97.656 KiB in 1 range\n"), "{}", status());
    // SAFETY: as above.
    assert_eq!(unsafe { cumem_host_register(h, 10) }, CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("overlaps the registered range"));
    assert_eq!(cumem_host_unregister(h), CUMEM_SUCCESS);
    assert_eq!(cumem_host_unregister(h), CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("no registered host range starts there"), "{}", last_error());
    // SAFETY: null pointers are refused before use.
    unsafe {
        assert_eq!(cumem_host_register(std::ptr::null_mut(), 10), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_host_register(h, 0), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_host_alloc(8, std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_host_get_stats(std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_host_registered(&mut n, std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE);
    }
    assert_eq!(cumem_is_pinned(std::ptr::null()), 0);
    // The limit, with the variable's name in the message; the pointer is left alone.
    let (rc, q) = host_alloc(32 << 20);
    assert_eq!(rc, CUMEM_ERROR_OUT_OF_MEMORY);
    assert_eq!(q as usize, 0xdead_beef);
    assert!(last_error().contains("CUMEM_PINNED_LIMIT"), "{}", last_error());
    // Frees: the block, then refusals that change nothing.
    assert_eq!(cumem_host_free(p), CUMEM_SUCCESS);
    // A cached block is no array's; on a GPU the driver still knows it as page-locked.
    assert_eq!(cumem_is_pinned(p), cuda() as i32);
    assert_eq!(cumem_host_free(p), CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("not a live allocation of the pinned host pool"));
    assert_eq!(cumem_host_free(h), CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(cumem_host_free(std::ptr::null_mut()), CUMEM_SUCCESS);
    // A device pointer is not a pinned block, nor the other way round.
    assert_eq!(cumem_free(p as u64), CUMEM_ERROR_INVALID_VALUE);
    let s = host_stats();
    assert_eq!((s.num_frees, s.cached_bytes, s.num_ooms), (1, 1 << 20, 1));
    assert_eq!(cumem_host_reclaim(u64::MAX), 1 << 20);
    assert_eq!(host_stats().reserved_bytes, 0);
    cumem_host_reset_stats();
    assert_eq!(host_stats().num_allocations, 0);
    let (rc, z) = host_alloc(0);
    assert_eq!((rc, z), (CUMEM_SUCCESS, std::ptr::null_mut()));
    println!("child child_c_abi done");
}

#[test]
fn child_bad_limit() {
    if !child("child_bad_limit") {
        return;
    }
    assert_eq!(cumem_init(), cumem::error::CUMEM_ERROR_CONFIG);
    let m = last_error();
    assert!(m.contains("CUMEM_PINNED_LIMIT=\"lots\"") && m.contains("accepted"), "{m}");
    let (rc, p) = host_alloc(8);
    assert_eq!((rc, p as usize), (cumem::error::CUMEM_ERROR_CONFIG, 0xdead_beef));
    assert_eq!(cumem_is_pinned(std::ptr::null()), -1);
    println!("child child_bad_limit done");
}

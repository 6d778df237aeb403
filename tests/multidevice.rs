//! Several devices behind the C ABI: per-device engines (pool, statistics, limit), the
//! per-thread current device, frees and copies found by address, and copies between
//! devices (peer or staged through the host).
//!
//! As in tests/ffi.rs, the C ABI's engines are process-wide, so each scenario runs in a
//! child process of this test binary: on two host stand-ins (`CUMEM_DEVICE=host:2`), or
//! with `CUMEM_TEST_CUDA=1` on CUDA devices 0 and 1 (skipped with a note when the machine
//! has fewer than two GPUs).

mod common;

use common::*;
use cumem::Stats;
use cumem::ffi::*;
use std::ffi::{CStr, c_void};
use std::process::Command;

const MARK: &str = "CUMEM_MULTI_CHILD";
const MIB: u64 = 1 << 20;

fn spawn(child: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"]);
    for v in [
        "JULIA_CUDA_MEMORY_POOL",
        "JULIA_CUDA_MEMORY_LIMIT",
        "CUMEM_HOST_CAPACITY",
        "CUMEM_DEBUG",
        "CUMEM_FAULT",
    ] {
        cmd.env_remove(v);
    }
    cmd.env(MARK, child);
    cmd.env("CUMEM_DEVICE", if cuda() { "cuda" } else { "host:2" });
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("re-executing the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stdout.contains(&format!("child {child} skipped")) {
        eprintln!("{child}: skipped (fewer than two GPUs)");
        return;
    }
    assert!(
        out.status.success() && stdout.contains(&format!("child {child} done")),
        "child {child} with {env:?} failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

fn child(name: &str) -> bool {
    std::env::var(MARK).is_ok_and(|v| v == name)
}

fn last_error() -> String {
    // SAFETY: cumem_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(cumem_last_error()) }.to_str().unwrap().to_owned()
}

fn alloc(bytes: u64) -> (i32, u64) {
    let mut p = 0;
    // SAFETY: `p` is writable.
    let rc = unsafe { cumem_alloc(bytes, &mut p) };
    (rc, p)
}

fn alloc_ok(bytes: u64) -> u64 {
    let (rc, p) = alloc(bytes);
    assert_eq!(rc, CUMEM_SUCCESS, "alloc({bytes}) on device {}: {}", cumem_get_device(), last_error());
    p
}

fn stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: `s` is writable.
    assert_eq!(unsafe { cumem_get_stats(&mut s) }, CUMEM_SUCCESS);
    s
}

fn upload(dst: u64, data: &[u8]) -> i32 {
    // SAFETY: `data` is readable for its length.
    unsafe { cumem_copy_htod(dst, data.as_ptr() as *const c_void, data.len() as u64) }
}

fn download(src: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: `v` is writable for its length.
    let rc = unsafe { cumem_copy_dtoh(v.as_mut_ptr() as *mut c_void, src, len as u64) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    v
}

fn copy_peer(dst: u64, src: u64, bytes: u64, flags: u32) -> (i32, i32) {
    let mut path = -7;
    // SAFETY: `path` is writable.
    let rc = unsafe { cumem_copy_peer(dst, src, bytes, flags, &mut path) };
    (rc, path)
}

/// True (and the child reports itself skipped) on a machine with fewer than 2 GPUs.
fn fewer_than_two(name: &str) -> bool {
    let n = cumem_device_count();
    assert!(n >= 1, "{}", last_error());
    if n < 2 {
        println!("child {name} skipped");
        return true;
    }
    false
}

#[test]
fn devices_have_their_own_engines() {
    spawn("child_devices", &[]);
}

#[test]
fn child_devices() {
    if !child("child_devices") || fewer_than_two("child_devices") {
        return;
    }
    if !cuda() {
        assert_eq!(cumem_device_count(), 2);
    }
    assert_eq!(cumem_get_device(), 0);
    assert_eq!(cumem_device_is_open(0), 1);
    assert_eq!(cumem_device_is_open(1), 0, "device 1 is opened only on first use");
    assert_eq!(cumem_device_is_open(64), -1);

    let p0 = alloc_ok(3 * MIB);
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_get_device(), 1);
    assert_eq!(cumem_device_is_open(1), 1);
    let s1 = stats();
    assert_eq!((s1.requested_bytes, s1.num_allocations), (0, 0), "device 1 has statistics of its own");
    let p1 = alloc_ok(5 * MIB);
    assert_eq!(stats().requested_bytes, 5 * MIB);
    assert_eq!(cumem_set_device(0), CUMEM_SUCCESS);
    assert_eq!(stats().requested_bytes, 3 * MIB);

    // Bad ordinals change nothing.
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS);
    let n = cumem_device_count();
    assert_eq!(cumem_set_device(n), CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains(&format!("there is no device {n}")), "{}", last_error());
    assert_eq!(cumem_set_device(-1), CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(cumem_get_device(), 1, "a failed switch keeps the current device");

    // The current device is per OS thread.
    std::thread::spawn(|| {
        assert_eq!(cumem_get_device(), 0);
        assert_eq!(cumem_set_device(1), CUMEM_SUCCESS);
    })
    .join()
    .unwrap();
    assert_eq!(cumem_get_device(), 1);

    // Addresses find their device: upload to device 0's block with device 1 current.
    let data: Vec<u8> = (0..3 * MIB).map(|i| (i * 7 + 3) as u8).collect();
    assert_eq!(upload(p0, &data), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(download(p0, data.len()), data);

    // Peer copy: device 0 → device 1 (direct between host stand-ins; on GPUs where
    // cuDeviceCanAccessPeer allows).
    let direct = cumem_can_access_peer(1, 0);
    assert!(direct == 0 || direct == 1, "{}", last_error());
    if !cuda() {
        assert_eq!(direct, 1);
    }
    let (rc, path) = copy_peer(p1, p0, 3 * MIB, 0);
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(path, if direct == 1 { CUMEM_COPY_PATH_PEER } else { CUMEM_COPY_PATH_HOST });
    assert_eq!(download(p1, data.len()), data);

    // Staged through the host on request, at an offset.
    assert_eq!(cumem_memset(p1, 0, 5 * MIB), CUMEM_SUCCESS);
    let (rc, path) = copy_peer(p1 + MIB, p0 + 4096, 2 * MIB, CUMEM_COPY_STAGED);
    assert_eq!((rc, path), (CUMEM_SUCCESS, CUMEM_COPY_PATH_HOST), "{}", last_error());
    let got = download(p1, 5 * MIB as usize);
    assert!(got[..MIB as usize].iter().all(|&b| b == 0));
    assert_eq!(&got[MIB as usize..3 * MIB as usize], &data[4096..4096 + 2 * MIB as usize]);
    assert!(got[3 * MIB as usize..].iter().all(|&b| b == 0));

    // One device: a device-to-device copy. cumem_copy_dtod crosses devices too.
    let (rc, path) = copy_peer(p1, p1 + MIB, MIB, 0);
    assert_eq!((rc, path), (CUMEM_SUCCESS, CUMEM_COPY_PATH_SAME));
    assert_eq!(cumem_copy_dtod(p0, p1, MIB), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(download(p0, MIB as usize), &data[4096..4096 + MIB as usize]);

    // Bad input writes nothing: a source range crossing its block's end, unknown flags.
    let before = download(p1, 5 * MIB as usize);
    let (rc, _) = copy_peer(p1, p0 + 2 * MIB, 2 * MIB, 0);
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("crosses the end"), "{}", last_error());
    assert_eq!(copy_peer(p1, p0, MIB, 0x80).0, CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(download(p1, 5 * MIB as usize), before);

    // Frees find their device: device 0's block freed with device 1 current.
    assert_eq!(cumem_free(p0), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_free(p0), CUMEM_ERROR_INVALID_VALUE, "a double free is refused");
    assert_eq!(stats().requested_bytes, 5 * MIB, "device 1's statistics are untouched");
    assert_eq!(cumem_set_device(0), CUMEM_SUCCESS);
    let s0 = stats();
    assert_eq!((s0.requested_bytes, s0.num_frees), (0, 1));
    assert_eq!(cumem_free(p1), CUMEM_SUCCESS);
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS);
    assert_eq!(stats().requested_bytes, 0);

    // Reclaim and memory_status act on the current device.
    assert!(cumem_reclaim(u64::MAX) >= 5 * MIB);
    assert_eq!(stats().reserved_bytes, 0);
    println!("child child_devices done");
}

#[test]
fn the_limit_is_per_device() {
    spawn("child_limit", &[("JULIA_CUDA_MEMORY_LIMIT", "64MiB")]);
}

#[test]
fn child_limit() {
    if !child("child_limit") || fewer_than_two("child_limit") {
        return;
    }
    let a = alloc_ok(48 * MIB);
    assert_eq!(alloc(32 * MIB).0, CUMEM_ERROR_OUT_OF_MEMORY, "device 0 is at its limit");
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS);
    let b = alloc_ok(48 * MIB);
    assert_eq!(stats().limit_bytes, 64 * MIB);
    assert_eq!(alloc(32 * MIB).0, CUMEM_ERROR_OUT_OF_MEMORY, "device 1 is at its own limit");
    assert_eq!(stats().num_ooms, 1);
    assert_eq!(cumem_free(a), CUMEM_SUCCESS);
    assert_eq!(cumem_free(b), CUMEM_SUCCESS);
    println!("child child_limit done");
}

#[test]
fn kernels_belong_to_their_device() {
    spawn("child_kernels", &[]);
}

#[test]
fn child_kernels() {
    if !child("child_kernels") || fewer_than_two("child_kernels") {
        return;
    }
    if !cuda() {
        // Kernels need a GPU; the host stand-ins refuse them as the single host device does.
        let mut k = 0;
        let rc = unsafe {
            cumem_kernel_load(c"extern \"C\" __global__ void k() {}".as_ptr(), c"k".as_ptr(), &mut k)
        };
        assert_eq!(rc, CUMEM_ERROR_NOT_SUPPORTED);
        println!("child child_kernels done");
        return;
    }
    let src = c"extern \"C\" __global__ void fill(unsigned char* p, unsigned char v) { p[threadIdx.x] = v; }";
    let mut k0 = 0;
    assert_eq!(
        unsafe { cumem_kernel_load(src.as_ptr(), c"fill".as_ptr(), &mut k0) },
        CUMEM_SUCCESS,
        "{}",
        last_error()
    );
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS);
    let p = alloc_ok(256);
    let mut v: u8 = 9;
    let mut addr = p;
    let mut args = [&mut addr as *mut u64 as *mut c_void, &mut v as *mut u8 as *mut c_void];
    let rc = unsafe { cumem_kernel_launch(k0, 1, 1, 1, 256, 1, 1, 0, args.as_mut_ptr()) };
    assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE, "a device-0 kernel launched on device 1");
    assert!(last_error().contains("loaded on device 0"), "{}", last_error());
    let mut k1 = 0;
    assert_eq!(unsafe { cumem_kernel_load(src.as_ptr(), c"fill".as_ptr(), &mut k1) }, CUMEM_SUCCESS);
    assert_ne!(k0, k1);
    let rc = unsafe { cumem_kernel_launch(k1, 1, 1, 1, 256, 1, 1, 0, args.as_mut_ptr()) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_synchronize(), CUMEM_SUCCESS);
    assert_eq!(download(p, 256), vec![9u8; 256]);
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    println!("child child_kernels done");
}

/// Without `host:N` there is one device, and asking for another is a clear error.
#[test]
fn one_device_by_default() {
    if cuda() {
        return;
    }
    spawn("child_one", &[("CUMEM_DEVICE", "host")]);
}

#[test]
fn child_one() {
    if !child("child_one") {
        return;
    }
    assert_eq!(cumem_device_count(), 1);
    assert_eq!(cumem_set_device(1), CUMEM_ERROR_INVALID_VALUE);
    assert!(last_error().contains("CUMEM_DEVICE=host:N"), "{}", last_error());
    assert_eq!(cumem_set_device(0), CUMEM_SUCCESS);
    let p = alloc_ok(MIB);
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    assert_eq!(cumem_free(p), CUMEM_ERROR_INVALID_VALUE);
    println!("child child_one done");
}

#[test]
fn streams_and_events_act_on_their_own_device() {
    spawn("child_streams", &[]);
}

/// Stream and event handles are unique across devices: each device's are refused by the
/// other for allocations, and the stream/event functions find the handle's own device
/// whatever the current one (a GC finalizer may destroy a stream on any thread).
#[test]
fn child_streams() {
    if !child("child_streams") || fewer_than_two("child_streams") {
        return;
    }
    let new_stream = || {
        let mut s = 0;
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cumem_stream_create(0, &mut s) }, CUMEM_SUCCESS, "{}", last_error());
        s
    };
    let new_event = || {
        let mut ev = 0;
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cumem_event_create(0, &mut ev) }, CUMEM_SUCCESS, "{}", last_error());
        ev
    };
    let s0 = new_stream();
    let e0 = new_event();
    assert_eq!(cumem_set_device(1), CUMEM_SUCCESS, "{}", last_error());
    let s1 = new_stream();
    let e1 = new_event();
    assert!(
        s0 != s1 && e0 != e1 && s0 != e1 && e0 != s1,
        "handles {s0} {s1} {e0} {e1} repeat across devices"
    );
    // Device 1 current: device 0's stream is not one to allocate on here (its array would
    // be on the wrong device), and nothing is allocated.
    let mut p = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_alloc_async(4096, s0, &mut p, 0) }, CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(p, 0);
    assert!(last_error().contains("stream"), "{}", last_error());
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_alloc_async(4096, s1, &mut p, 0) }, CUMEM_SUCCESS, "{}", last_error());
    // Device 0's stream and event work from here, on device 0.
    assert_eq!(cumem_event_record(e0, s0), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_stream_synchronize(s0), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_event_synchronize(e0), CUMEM_SUCCESS, "{}", last_error());
    let mut done = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cumem_event_query(e0, &mut done) }, CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(done, 1);
    // A stream and an event of different devices do not mix.
    assert_eq!(cumem_event_record(e0, s1), CUMEM_ERROR_INVALID_VALUE);
    // Destroying device 0's stream from here destroys that one, not device 1's.
    assert_eq!(cumem_stream_destroy(s0), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_stream_synchronize(s0), CUMEM_ERROR_INVALID_VALUE, "destroyed");
    assert_eq!(cumem_stream_synchronize(s1), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_event_destroy(e0), CUMEM_SUCCESS, "{}", last_error());
    assert_eq!(cumem_event_destroy(e0), CUMEM_ERROR_INVALID_VALUE, "destroyed twice");
    assert_eq!(cumem_free(p), CUMEM_SUCCESS);
    assert_eq!(cumem_event_destroy(e1), CUMEM_SUCCESS);
    assert_eq!(cumem_stream_destroy(s1), CUMEM_SUCCESS, "{}", last_error());
    println!("child child_streams done");
}

#[test]
fn the_registry_is_usable_from_rust() {
    spawn("child_registry", &[]);
}

/// `cumem::engines`, the layer below the C ABI, called directly: the same engines the C
/// functions use, the calling thread's current device, and the routing of an address to
/// the device that owns it.
#[test]
fn child_registry() {
    use cumem::engines;
    if !child("child_registry") || fewer_than_two("child_registry") {
        return;
    }
    assert_eq!(engines::current_device(), 0);
    let e0 = engines::engine().unwrap();
    assert_eq!(e0.ordinal(), 0);
    assert_eq!(engines::is_open(1).unwrap(), Some(false), "device 1 is opened only on first use");
    assert_eq!(engines::is_open(64).unwrap(), None);
    assert!(!engines::several_open());
    let n = engines::device_count().unwrap();
    let err = engines::set_device(n).err().expect("no device past the count");
    assert_eq!(err.code(), CUMEM_ERROR_INVALID_VALUE, "{err}");
    assert_eq!(engines::current_device(), 0, "a bad ordinal leaves the current device");

    let e1 = engines::set_device(1).unwrap();
    assert_eq!((e1.ordinal(), engines::current_device(), cumem_get_device()), (1, 1, 1));
    assert!(std::ptr::eq(engines::engine().unwrap(), e1), "engine() is the current device's");
    assert!(std::ptr::eq(engines::engine_at(0).unwrap(), e0));
    assert!(engines::several_open() && engines::is_open(1).unwrap() == Some(true));
    assert_eq!(engines::open_engines().map(|e| e.ordinal()).collect::<Vec<_>>(), vec![0, 1]);
    // A block of device 1, looked up from device 0: owner() and on_owner() route it.
    let p = e1.alloc(MIB).unwrap();
    let p0 = alloc_ok(MIB); // through the C ABI, on the current device (1)
    engines::set_device(0).unwrap();
    assert!(std::ptr::eq(engines::owner(p).unwrap(), e1));
    assert!(std::ptr::eq(engines::owner(0xdead_0000).unwrap(), e0), "unowned: the current device's");
    let seen = std::cell::RefCell::new(Vec::new());
    engines::on_owner(e0, p, |e| {
        seen.borrow_mut().push(e.ordinal());
        e.free(p)
    })
    .unwrap();
    assert_eq!(seen.into_inner(), vec![0, 1], "tried the current device, then the owner");
    assert_eq!(engines::on_owner(e0, p, |e| e.free(p)).unwrap_err().code(), CUMEM_ERROR_INVALID_VALUE);
    assert_eq!(cumem_free(p0), CUMEM_SUCCESS, "the C ABI frees device 1's block from device 0");
    // The pinned host pool: one per process, made on first use.
    assert!(engines::pinned_started().is_none());
    let h = engines::pinned_host(e0).unwrap();
    assert!(std::ptr::eq(engines::pinned_host(e1).unwrap(), h));
    assert!(engines::pinned_started().is_some());
    println!("child child_registry done");
}

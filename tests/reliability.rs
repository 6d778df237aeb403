//! Issue 22 (reliability, round 3): one test per defect of the engine's Rust side, each
//! failing before its fix. Runs on the host device, or on CUDA with `CUMEM_TEST_CUDA=1`
//! where the test says so.

mod common;

use common::*;
use cumem::device::{Device, HostDevice};
use cumem::upstream::Upstream;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

/// A host device whose device frees (and unmappings) return the memory and then, for
/// `gate` bytes or more, announce themselves on `entered` and wait for `go`: the window
/// between the device taking its memory back and the caller's bookkeeping.
struct SlowFreeDevice {
    inner: HostDevice,
    gate: u64,
    entered: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}

impl SlowFreeDevice {
    fn after_free(&self, bytes: u64) {
        if bytes >= self.gate {
            self.entered.lock().unwrap().send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
        }
    }
}

impl Device for SlowFreeDevice {
    forward_device!();
    fn alloc(&self, bytes: u64) -> cumem::Result<u64> {
        self.inner.alloc(bytes)
    }
    unsafe fn free(&self, ptr: u64, bytes: u64) -> cumem::Result<()> {
        let r = unsafe { self.inner.free(ptr, bytes) };
        self.after_free(bytes);
        r
    }
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        unsafe { self.inner.vm_map(addr, bytes) }
    }
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        let r = unsafe { self.inner.vm_unmap(addr, bytes) };
        self.after_free(bytes);
        r
    }
}

/// An upstream (no limit) over an 8 MiB host device whose frees of 8 MiB wait at the
/// gate after returning the memory; the receiver of the announcements and the sender
/// that lets a free go on.
fn slow_free_upstream() -> (Upstream, Receiver<()>, Sender<()>) {
    let (entered_tx, entered) = channel();
    let (go, go_rx) = channel();
    let dev = SlowFreeDevice {
        inner: HostDevice::new(Some(8 * MIB)),
        gate: 8 * MIB,
        entered: Mutex::new(entered_tx),
        go: Mutex::new(go_rx),
    };
    (Upstream::new(Box::new(dev), None), entered, go)
}

/// Item 6: `peak_reserved_bytes` above the device's capacity. A segment being returned
/// must stop counting as reserved before the device can hand its memory to another
/// thread, so reserved bytes and their peak never exceed what the device holds.
#[test]
fn reserved_never_counts_a_segment_the_device_gave_back() {
    let (up, entered, go) = slow_free_upstream();
    let p = up.shard(0).alloc(8 * MIB).unwrap();
    std::thread::scope(|sc| {
        let go = go;
        let freeing = sc.spawn(|| up.shard(0).free(p, 8 * MIB));
        entered.recv().unwrap();
        // The device has the 8 MiB back; another thread obtains them.
        let q = up.shard(1).alloc(8 * MIB).unwrap();
        assert!(up.reserved() <= 8 * MIB, "reserved {} MiB on an 8 MiB device", up.reserved() / MIB);
        assert!(up.peak_reserved() <= 8 * MIB, "peak {} MiB on an 8 MiB device", up.peak_reserved() / MIB);
        go.send(()).unwrap();
        freeing.join().unwrap();
        assert_eq!(up.reserved(), 8 * MIB);
        go.send(()).unwrap(); // for the free of q below
        up.shard(1).free(q, 8 * MIB);
    });
    assert_eq!(up.reserved(), 0);
}

/// Item 6, the expandable pool's path: an unmapping, like a free.
#[test]
fn reserved_never_counts_a_mapping_the_device_gave_back() {
    let (up, entered, go) = slow_free_upstream();
    let base = up.shard(0).vm_reserve(32 * MIB).unwrap();
    up.shard(0).vm_map(base, 8 * MIB).unwrap();
    std::thread::scope(|sc| {
        let go = go;
        let unmapping = sc.spawn(|| up.shard(0).vm_unmap(base, 8 * MIB));
        entered.recv().unwrap();
        up.shard(0).vm_map(base + 16 * MIB, 8 * MIB).unwrap();
        assert!(up.peak_reserved() <= 8 * MIB, "peak {} MiB on an 8 MiB device", up.peak_reserved() / MIB);
        go.send(()).unwrap();
        unmapping.join().unwrap();
        go.send(()).unwrap();
        up.shard(0).vm_unmap(base + 16 * MIB, 8 * MIB);
    });
    up.shard(0).vm_release(base, 32 * MIB);
    assert_eq!(up.reserved(), 0);
}

/// Item 8: `CUMEM_FAULT` reaches the asynchronous copies (`copy:P`, as the synchronous
/// ones), the stream and event calls (`stream:P`), and the pinned host pool (whose
/// allocations fail with `alloc:P` as the device's do).
#[test]
fn injected_faults_reach_async_copies_streams_events_and_the_pinned_pool() {
    use cumem::config::FaultSpec;
    use cumem::device::FaultyDevice;
    use cumem::pinned::PinnedHost;

    // Asynchronous copies fail like synchronous ones, writing nothing.
    let d = FaultyDevice::new(Box::new(HostDevice::new(Some(64 * MIB))), FaultSpec::parse("copy:1").unwrap());
    let s = d.stream_create(false).unwrap();
    let p = d.alloc(4096).unwrap();
    let src = [7u8; 64];
    let mut dst = [1u8; 64];
    // SAFETY: `p` is 4096 bytes of the device; the host buffers outlive the synchronize.
    unsafe {
        std::ptr::write_bytes(p as *mut u8, 5, 64);
        let e = d.copy_htod_async(p, src.as_ptr(), 64, s).unwrap_err();
        assert!(e.to_string().contains("CUMEM_FAULT"), "{e}");
        assert!(d.copy_dtoh_async(dst.as_mut_ptr(), p, 64, s).is_err());
        d.stream_synchronize(s).unwrap();
        assert_eq!(*(p as *const [u8; 64]), [5u8; 64], "a failed upload wrote");
        assert_eq!(dst, [1u8; 64], "a failed download wrote");
        d.free(p, 4096).unwrap();
    }
    d.stream_destroy(s).unwrap();

    // Stream and event calls fail with `stream:1`, as a device error.
    let d =
        FaultyDevice::new(Box::new(HostDevice::new(Some(64 * MIB))), FaultSpec::parse("stream:1").unwrap());
    for r in [d.stream_create(false).map(drop), d.event_create(false).map(drop), d.stream_synchronize(0)] {
        let e = r.unwrap_err();
        assert!(matches!(e, cumem::Error::Device(_)) && e.to_string().contains("CUMEM_FAULT"), "{e}");
    }

    // The pinned host pool is built over a faulty device too.
    let cfg = cumem::Config { fault: Some(FaultSpec::parse("alloc:1").unwrap()), ..cumem::Config::default() };
    let pinned = PinnedHost::new(&cfg, false).unwrap();
    assert!(pinned.engine().device().name().ends_with("(with CUMEM_FAULT)"));
    assert!(pinned.alloc(1 << 20).unwrap_err().is_oom());
    assert_eq!(pinned.engine().stats().reserved_bytes, 0);
}

/// The range of the mapping of `/proc/self/maps` that contains `addr`, if any.
fn mapping_containing(addr: u64) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().find_map(|l| {
        let range = l.split_whitespace().next()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
        (a <= addr && addr < b).then_some((a, b))
    })
}

/// Item 10: the host device's large segments go back to the operating system when they
/// are freed (their range is unmapped), so a long run's RSS follows its reserved bytes
/// instead of keeping every segment it ever freed in the C allocator's heap. The first
/// allocation and free raise glibc's mmap threshold above the size, so with `malloc` the
/// later segments came from the heap and stayed mapped after their free.
#[test]
fn large_host_segments_are_unmapped_when_freed() {
    let d = HostDevice::new(Some(GIB));
    for round in 0..4 {
        let segs: Vec<u64> = (0..8).map(|_| d.alloc(4 * MIB).unwrap()).collect();
        for &p in &segs {
            // SAFETY: `p` is 4 MiB of host memory.
            unsafe { std::ptr::write_bytes(p as *mut u8, round as u8, (4 * MIB) as usize) };
            let (a, b) = mapping_containing(p).expect("a live segment is mapped");
            assert!(a <= p && p + 4 * MIB <= b);
        }
        for &p in &segs {
            // SAFETY: allocated above with these bytes.
            unsafe { d.free(p, 4 * MIB) }.unwrap();
            assert_eq!(mapping_containing(p), None, "round {round}: a freed 4 MiB segment is still mapped");
        }
    }
}

/// Item 11: amounts of memory as people write them. `1e400` is a number too large, not
/// an unknown unit; `1.5` (bytes) is not a whole number of bytes rather than 1 byte;
/// `none` means no limit in the variables as in `cumem_set_memory_limit_str`.
#[test]
fn memory_limit_values() {
    use cumem::config::{Amount, parse_amount};
    let p = |s| parse_amount("JULIA_CUDA_MEMORY_LIMIT", s);
    let msg = |s| p(s).unwrap_err().to_string();
    assert!(msg("1e400").contains("too large"), "{}", msg("1e400"));
    assert_eq!(p("1e9"), Ok(Amount::Bytes(1_000_000_000)));
    assert_eq!(p("2.5e3 KiB"), Ok(Amount::Bytes(2_560_000)));
    assert!(msg("1.5").contains("not a whole number of bytes"), "{}", msg("1.5"));
    assert!(msg("0.5").contains("50%"), "{}", msg("0.5"));
    assert_eq!(p("1.5KiB"), Ok(Amount::Bytes(1536)));
    assert!(msg("12XB").contains("unknown unit"));
    let cfg = |k: &'static str, v: &'static str| {
        cumem::Config::from_lookup(move |q| (q == k).then(|| v.to_string()))
    };
    assert_eq!(cfg("JULIA_CUDA_MEMORY_LIMIT", "none").unwrap().limit, None);
    assert_eq!(cfg("JULIA_CUDA_MEMORY_LIMIT", " NONE ").unwrap().limit, None);
    assert_eq!(cfg("CUMEM_PINNED_LIMIT", "none").unwrap().pinned_limit, None);
    assert!(cfg("CUMEM_HOST_CAPACITY", "none").is_err(), "a capacity is never none");
}

/// Item 11: messages give a size once: `1024 bytes`, not `1024 bytes (1024 bytes)`; a
/// size that `format_bytes` rounds keeps its exact count beside it.
#[test]
fn out_of_memory_messages_give_a_size_once() {
    let cfg = cumem::Config { pool: cumem::PoolKind::None, ..cumem::Config::default() };
    let e = cumem::Engine::with_device(cfg, Box::new(HostDevice::new(Some(512))), 1).unwrap();
    let m = e.alloc(1024).unwrap_err().to_string();
    assert!(m.contains("cannot allocate 1024 bytes:"), "{m}");
    let m = e.alloc(1536).unwrap_err().to_string();
    assert!(m.contains("cannot allocate 1.500 KiB (1536 bytes):"), "{m}");
}

/// Item 4: an asynchronous upload from a block of the pinned host pool keeps that block
/// until the copy has run, though the caller frees it at once: the block is not handed
/// to the next pinned allocation (whose writes the upload would read) nor released by a
/// reclaim (whose unmapping the upload would read: SIGSEGV on the host device). The
/// copy is queued behind a 300 ms sleep of the stream, so it runs after all of that.
#[test]
fn async_uploads_keep_their_pinned_block() {
    use cumem::ffi::*;
    const N: u64 = 4 * MIB;
    let mut s = 0u64;
    let mut d = 0u64;
    // SAFETY: every pointer below is valid for what the call writes or reads; the pinned
    // blocks are N bytes of host memory while live.
    unsafe {
        assert_eq!(cumem_stream_create(0, &mut s), 0);
        assert_eq!(cumem_alloc(N, &mut d), 0);
        for reuse in [true, false] {
            assert_eq!(cumem_memset(d, 0, N), 0);
            let mut h = std::ptr::null_mut();
            assert_eq!(cumem_host_alloc(N, &mut h), 0);
            std::ptr::write_bytes(h as *mut u8, 1, N as usize);
            assert_eq!(cumem_stream_sleep(s, 300_000_000), 0);
            assert_eq!(cumem_copy_htod_async(d, h, N, s), 0);
            assert_eq!(cumem_host_free(h), 0); // at once, as a GC finalizer may
            if reuse {
                let mut h2 = std::ptr::null_mut();
                assert_eq!(cumem_host_alloc(N, &mut h2), 0);
                assert_ne!(h2, h, "the block of a queued upload was handed out again");
                std::ptr::write_bytes(h2 as *mut u8, 2, N as usize);
                assert_eq!(cumem_host_free(h2), 0);
            } else {
                cumem_host_reclaim(u64::MAX);
            }
            assert_eq!(cumem_stream_synchronize(s), 0);
            let mut back = vec![0u8; N as usize];
            assert_eq!(cumem_copy_dtoh(back.as_mut_ptr().cast(), d, N), 0);
            assert!(back.iter().all(|&b| b == 1), "the upload read other data (reuse: {reuse})");
        }
        // Once the copies have run, the blocks go back to the pool and can be released.
        cumem_host_reclaim(u64::MAX);
        let mut st = std::mem::zeroed();
        assert_eq!(cumem_host_get_stats(&mut st), 0);
        assert_eq!((st.allocated_bytes, st.reserved_bytes), (0, 0));
        assert_eq!(cumem_free(d), 0);
        assert_eq!(cumem_stream_destroy(s), 0);
    }
}

/// Item 1: a copy, memset or `record_stream` at an address inside a block allocated on a
/// stream works whatever the first block of its segment is (the split and expandable
/// pools carve several blocks out of one segment; the engine asked the default pool,
/// which does not own the stream pool's segment, and pinned the segment's first block).
#[test]
fn interior_addresses_of_stream_blocks() {
    for pool in cumem::PoolKind::ALL {
        let e = engine(pool, 1);
        let s = e.stream_create(false).unwrap();
        let other = e.stream_create(false).unwrap();
        let a = e.alloc_on(1000, s, true).unwrap();
        let b = e.alloc_on(1000, s, true).unwrap();
        e.copy_htod(b + 16, &[7u8; 16]).unwrap_or_else(|err| panic!("{pool:?}: {err}"));
        e.memset(b + 40, 9, 8).unwrap_or_else(|err| panic!("{pool:?}: {err}"));
        e.record_stream(b + 100, other).unwrap_or_else(|err| panic!("{pool:?}: {err}"));
        let mut back = [0u8; 48];
        e.copy_dtoh(&mut back, b + 8).unwrap();
        assert_eq!(&back[8..24], &[7u8; 16], "{pool:?}");
        assert_eq!(&back[32..40], &[9u8; 8], "{pool:?}");
        assert_eq!(e.block_stream(b + 999).unwrap(), s, "{pool:?}");
        // the end of the block is still the end
        assert!(e.copy_htod(b + 990, &[0u8; 16]).is_err(), "{pool:?}");
        for p in [a, b] {
            e.free(p).unwrap();
        }
        e.stream_destroy(s).unwrap();
        e.stream_destroy(other).unwrap();
    }
}

/// Item 2: `memory_snapshot` lists the segments of the streams' pools, each with its
/// stream, so that at quiescence its sums equal the statistics (reserved bytes: every
/// segment; allocated bytes: the active blocks).
#[test]
fn snapshot_includes_stream_pools() {
    for pool in cumem::PoolKind::ALL {
        let e = engine(pool, 2);
        let s = e.stream_create(false).unwrap();
        let a = e.alloc_on(1000, s, true).unwrap();
        let b = e.alloc_on(3 * MIB, s, true).unwrap();
        let c = e.alloc(5000).unwrap();
        let d = e.alloc_on(2000, s, true).unwrap();
        e.free(d).unwrap(); // cached in the stream's pool
        let snap = e.snapshot();
        let st = e.stats();
        let total: u64 = snap.segments.iter().map(|g| g.size).sum();
        assert_eq!(total, st.reserved_bytes, "{pool:?}: segments {:?}", snap.segments);
        let active: u64 = snap.blocks.iter().filter(|k| k.state == 0).map(|k| k.size).sum();
        assert_eq!(active, st.allocated_bytes, "{pool:?}");
        let seg_of = |p: u64| snap.segments.iter().find(|g| g.addr <= p && p < g.addr + g.size);
        for p in [a, b] {
            let g = seg_of(p).unwrap_or_else(|| panic!("{pool:?}: no segment holds {p:#x}"));
            assert_eq!(g.stream, s, "{pool:?}: the segment of a stream's block");
        }
        assert_eq!(seg_of(c).unwrap().stream, 0, "{pool:?}");
        if let Some(g) = seg_of(d) {
            assert_eq!(g.stream, s, "{pool:?}: a block cached in the stream's pool");
        }
        for p in [a, b, c] {
            e.free(p).unwrap();
        }
        e.stream_destroy(s).unwrap();
        e.reclaim(u64::MAX);
        assert_eq!(e.stats().reserved_bytes, 0, "{pool:?}");
    }
}

//! Streams, events and stream-ordered reuse of memory.
//!
//! Runs on the host device, whose streams are worker threads (so the orderings below are
//! real: a queued operation runs later, on another thread), and with `CUMEM_TEST_CUDA=1`
//! on GPU 0, where the slow operation is a kernel spinning on the GPU's timer.
//!
//! The reuse tests follow one pattern: work queued behind a slow operation still reads a
//! block when the block is freed; the next allocation then writes other data wherever
//! the pool puts it; the queued read must still see the original data.

mod common;

use common::{MIB, cuda, engine};
use cumem::compute::module;
use cumem::{Engine, Error, PoolKind};

/// How long the slow operation takes: long enough that the rest of each test is queued
/// (and the competing writes done) well before it ends.
const SLOW_NS: u64 = 300_000_000;

const POOLS: [PoolKind; 4] = [PoolKind::Binned, PoolKind::Split, PoolKind::Simple, PoolKind::Expandable];

/// A host buffer for asynchronous downloads: page-locked on a GPU (from pageable memory
/// CUDA would finish the download before returning, and there would be nothing queued
/// left to protect), a plain vector on the host device.
struct HostBuf {
    ptr: *mut u8,
    len: usize,
    vec: Vec<u8>,
}

impl HostBuf {
    fn new(e: &Engine, len: usize) -> HostBuf {
        if !cuda() {
            let mut vec = vec![0u8; len];
            return HostBuf { ptr: vec.as_mut_ptr(), len, vec };
        }
        e.device().make_current().unwrap();
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; a context is current.
        unsafe { cudarc::driver::sys::cuMemHostAlloc(&mut p, len, 0) }.result().expect("cuMemHostAlloc");
        // SAFETY: `len` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, len) };
        HostBuf { ptr: p as *mut u8, len, vec: Vec::new() }
    }

    fn data(&self) -> &[u8] {
        // SAFETY: `len` bytes owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.vec.is_empty() {
            // SAFETY: allocated by cuMemHostAlloc, no copy in flight (streams synchronised).
            unsafe { cudarc::driver::sys::cuMemFreeHost(self.ptr as *mut std::ffi::c_void) };
        }
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn stream(e: &Engine) -> u64 {
    e.stream_create(false).expect("stream")
}

fn slow(e: &Engine, s: u64) {
    module::sleep(e.device(), s, SLOW_NS).expect("slow operation");
}

fn sync(e: &Engine, s: u64) {
    e.device().stream_synchronize(s).expect("synchronize");
}

#[test]
fn events_order_work_across_streams_and_time_it() {
    let e = engine(PoolKind::Binned, 1);
    let dev = e.device();
    let (s1, s2) = (stream(&e), stream(&e));
    let n = MIB as usize;
    let x = e.alloc(n as u64).unwrap();
    e.memset(x, 0, n as u64).unwrap();
    let p = pattern(n, 7);
    let (start, ready) = (dev.event_create(true).unwrap(), dev.event_create(true).unwrap());
    dev.event_record(start, s1).unwrap();
    slow(&e, s1);
    // SAFETY: `p` outlives the copy (s1 is synchronised below).
    unsafe { e.copy_htod_async(x, p.as_ptr(), n as u64, s1) }.unwrap();
    dev.event_record(ready, s1).unwrap();
    // s2 waits for the upload on s1, then reads x.
    dev.stream_wait_event(s2, ready).unwrap();
    let mut h = vec![0u8; n];
    // SAFETY: `h` outlives the copy (s2 is synchronised below).
    unsafe { e.copy_dtoh_async(h.as_mut_ptr(), x, n as u64, s2) }.unwrap();
    sync(&e, s2);
    assert!(h == p, "the read on s2 ran before the upload on s1 it waited for");
    assert!(dev.event_query(ready).unwrap() && dev.stream_query(s1).unwrap());
    // The slow operation lies between the two events.
    let ms = dev.event_elapsed_ms(start, ready).unwrap();
    assert!(ms as f64 >= SLOW_NS as f64 / 1e6 * 0.99, "{ms} ms between the events");
    // An event without timing cannot be timed; one never recorded is complete.
    let quiet = dev.event_create(false).unwrap();
    assert!(dev.event_query(quiet).unwrap());
    assert!(matches!(dev.event_elapsed_ms(start, quiet), Err(Error::InvalidValue(_))));
    for ev in [start, ready, quiet] {
        dev.event_destroy(ev).unwrap();
    }
    assert!(matches!(dev.event_query(quiet), Err(Error::InvalidValue(_))));
    e.free(x).unwrap();
    for s in [s1, s2] {
        e.stream_destroy(s).unwrap();
    }
}

#[test]
fn a_block_freed_on_its_stream_is_reused_at_once_there_only() {
    for pool in POOLS {
        let e = engine(pool, 1);
        let (s1, s2) = (stream(&e), stream(&e));
        let a = e.alloc_on(MIB, s1, true).unwrap();
        assert_eq!(e.block_stream(a).unwrap(), s1);
        slow(&e, s1); // s1 is busy: reuse on s1 is still safe, its work is ordered
        e.free(a).unwrap();
        assert_eq!(e.alloc_on(MIB, s1, true).unwrap(), a, "{pool:?}: not reused at once on its stream");
        let b = e.alloc_on(MIB, s2, true).unwrap();
        let c = e.alloc(MIB).unwrap();
        assert!(b != a && c != a, "{pool:?}: another stream got a block of s1");
        assert_eq!(e.block_stream(c).unwrap(), 0);
        for p in [a, b, c] {
            e.free(p).unwrap();
        }
        for s in [s1, s2] {
            e.stream_destroy(s).unwrap();
        }
    }
}

/// A block of stream s1 read by a slow copy on s2 and freed meanwhile: the next block of
/// s1 is another one, written at once; the read sees the original data; after s2's work
/// is done the block comes back.
#[test]
fn cross_stream_reuse_waits_for_the_reads_queued_on_other_streams() {
    for pool in POOLS {
        let e = engine(pool, 1);
        let (s1, s2) = (stream(&e), stream(&e));
        let n = MIB as usize;
        let x = e.alloc_on(n as u64, s1, true).unwrap();
        let p = pattern(n, 1);
        e.copy_htod(x, &p).unwrap();
        slow(&e, s2);
        let h = HostBuf::new(&e, n);
        // SAFETY: `h` outlives the copy (s2 is synchronised below). The copy records
        // the use of x on s2.
        unsafe { e.copy_dtoh_async(h.ptr, x, n as u64, s2) }.unwrap();
        e.free(x).unwrap();
        let y = e.alloc_on(n as u64, s1, true).unwrap();
        assert_ne!(y, x, "{pool:?}: reused while a read on another stream was queued");
        e.copy_htod(y, &pattern(n, 2)).unwrap();
        let z = e.alloc(n as u64).unwrap();
        e.memset(z, 0xee, n as u64).unwrap();
        sync(&e, s2);
        assert!(h.data() == p, "{pool:?}: the queued read saw data written after the free");
        if matches!(pool, PoolKind::Binned | PoolKind::Simple) {
            // The event has completed: the next allocation of s1 gets x back.
            assert_eq!(e.alloc_on(n as u64, s1, true).unwrap(), x, "{pool:?}");
            e.free(x).unwrap();
        }
        for q in [y, z] {
            e.free(q).unwrap();
        }
        for s in [s1, s2] {
            e.stream_destroy(s).unwrap();
        }
    }
}

/// The same with a block of the default stream and an explicit `record_stream`, and the
/// control: without it the pool hands the block out again at once (PyTorch's contract),
/// which is what makes the test able to fail.
#[test]
fn record_stream_defers_reuse_of_a_default_stream_block() {
    let e = engine(PoolKind::Binned, 1);
    let s2 = stream(&e);
    let n = MIB as usize;
    let p = pattern(n, 3);
    // Control: work queued on s2 through the device directly is unknown to the engine.
    let x = e.alloc(n as u64).unwrap();
    e.copy_htod(x, &p).unwrap();
    slow(&e, s2);
    let h = HostBuf::new(&e, n);
    // SAFETY: `h` and x outlive the copy: s2 is synchronised before either goes.
    unsafe { e.device().copy_dtoh_async(h.ptr, x, n as u64, s2) }.unwrap();
    e.free(x).unwrap();
    let y = e.alloc(n as u64).unwrap();
    assert_eq!(y, x, "without record_stream the block is reused at once");
    sync(&e, s2);
    // With record_stream.
    e.copy_htod(y, &p).unwrap();
    slow(&e, s2);
    // SAFETY: as above.
    unsafe { e.device().copy_dtoh_async(h.ptr, y, n as u64, s2) }.unwrap();
    e.record_stream(y, s2).unwrap();
    e.free(y).unwrap();
    let z = e.alloc(n as u64).unwrap();
    assert_ne!(z, y, "reused while a read recorded on s2 was queued");
    e.copy_htod(z, &pattern(n, 4)).unwrap();
    sync(&e, s2);
    assert!(h.data() == p, "the queued read saw data written after the free");
    e.free(z).unwrap();
    // A pending free is waited for by reclaim: everything goes back to the device.
    let w = e.alloc(n as u64).unwrap();
    slow(&e, s2);
    e.record_stream(w, s2).unwrap();
    e.free(w).unwrap();
    e.reclaim(u64::MAX);
    assert_eq!(e.stats().reserved_bytes, 0);
    e.stream_destroy(s2).unwrap();
}

/// On a GPU: a kernel (not a copy) that spins and then reads its input, the case
/// `record_stream` exists for.
#[test]
fn record_stream_protects_a_block_a_queued_kernel_reads() {
    if !cuda() {
        return; // host compute does not run on streams; the copies above are its case
    }
    const SRC: &str = r#"
extern "C" __global__ void slow_copy(const unsigned char* src, unsigned char* dst, unsigned long long n,
                                     unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"#;
    let e = engine(PoolKind::Binned, 1);
    let dev = e.device();
    let k = module::load(dev, SRC, "slow_copy").unwrap();
    let s2 = stream(&e);
    let n = 4 * MIB as usize;
    let p = pattern(n, 5);
    for record in [false, true] {
        let x = e.alloc(n as u64).unwrap();
        let out = e.alloc_on(n as u64, s2, true).unwrap();
        e.copy_htod(x, &p).unwrap();
        let (mut a0, mut a1, mut a2, mut a3) = (x, out, n as u64, SLOW_NS);
        let mut args = [
            &mut a0 as *mut u64 as *mut std::ffi::c_void,
            &mut a1 as *mut u64 as *mut std::ffi::c_void,
            &mut a2 as *mut u64 as *mut std::ffi::c_void,
            &mut a3 as *mut u64 as *mut std::ffi::c_void,
        ];
        let g = module::Launch { grid: (132, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
        // SAFETY: four 8-byte parameters; x and out are live device blocks of n bytes.
        unsafe { module::launch(dev, k, s2, g, args.as_mut_ptr()) }.unwrap();
        if record {
            e.record_stream(x, s2).unwrap();
        }
        e.free(x).unwrap();
        let y = e.alloc(n as u64).unwrap();
        assert_eq!(y == x, !record, "record_stream {record}");
        e.memset(y, 0xee, n as u64).unwrap();
        sync(&e, s2);
        let mut h = vec![0u8; n];
        e.copy_dtoh(&mut h, out).unwrap();
        if record {
            assert!(h == p, "the kernel read data written after the free");
        } else {
            assert!(h != p, "control: without record_stream the kernel reads the new data");
        }
        e.free(y).unwrap();
        e.free(out).unwrap();
    }
    e.stream_destroy(s2).unwrap();
}

#[test]
fn the_legacy_stream_waits_for_blocking_streams() {
    let e = engine(PoolKind::Binned, 1);
    let b = e.stream_create(true).unwrap();
    let n = MIB as usize;
    let x = e.alloc(n as u64).unwrap();
    e.memset(x, 0, n as u64).unwrap();
    let p = pattern(n, 9);
    slow(&e, b);
    // SAFETY: `p` outlives the copy: the synchronous download below waits for it.
    unsafe { e.copy_htod_async(x, p.as_ptr(), n as u64, b) }.unwrap();
    let mut h = vec![0u8; n];
    e.copy_dtoh(&mut h, x).unwrap(); // legacy stream: after the blocking stream's work
    assert!(h == p);
    e.free(x).unwrap();
    e.stream_destroy(b).unwrap();
}

#[test]
fn a_destroyed_streams_blocks_stay_valid_and_bad_handles_are_refused() {
    let e = engine(PoolKind::Split, 1);
    let s = stream(&e);
    let a = e.alloc_on(3 * MIB, s, true).unwrap();
    e.copy_htod(a, &pattern(4096, 1)).unwrap();
    e.stream_destroy(s).unwrap();
    let mut h = vec![0u8; 4096];
    e.copy_dtoh(&mut h, a).unwrap();
    assert!(h == pattern(4096, 1));
    e.free(a).unwrap();
    assert_eq!(e.stats().reserved_bytes, 0, "a dead stream's pool keeps no cache");
    for bad in [s, 12345] {
        assert!(matches!(e.alloc_on(MIB, bad, true), Err(Error::InvalidValue(_))));
        assert!(matches!(e.stream_destroy(bad), Err(Error::InvalidValue(_))));
        assert!(matches!(e.device().stream_synchronize(bad), Err(Error::InvalidValue(_))));
    }
    assert!(matches!(e.stream_destroy(0), Err(Error::InvalidValue(_))));
    let s2 = stream(&e);
    assert!(matches!(e.record_stream(0x1000, s2), Err(Error::InvalidValue(_))));
    let x = e.alloc(MIB).unwrap();
    assert!(matches!(e.record_stream(x, 999), Err(Error::InvalidValue(_))));
    e.free(x).unwrap();
    e.stream_destroy(s2).unwrap();
    let st = e.stats();
    assert_eq!((st.allocated_bytes, st.requested_bytes), (0, 0));
}

/// The C functions refuse bad input with `CUMEM_ERROR_INVALID_VALUE` and change nothing.
#[test]
fn the_c_functions_refuse_bad_input() {
    use cumem::ffi::*;
    const BAD: i32 = CUMEM_ERROR_INVALID_VALUE;
    let mut h = 0u64;
    let mut d = 0i32;
    // SAFETY: every pointer is null or valid for its type.
    unsafe {
        assert_eq!(cumem_stream_create(7, &mut h), BAD);
        assert_eq!(cumem_stream_create(0, std::ptr::null_mut()), BAD);
        assert_eq!(cumem_stream_create(CUMEM_STREAM_BLOCKING, &mut h), CUMEM_SUCCESS);
        let s = h;
        assert_eq!(cumem_stream_query(s, std::ptr::null_mut()), BAD);
        assert_eq!(cumem_stream_query(s, &mut d), CUMEM_SUCCESS);
        assert_eq!(d, 1);
        assert_eq!(cumem_event_create(4, &mut h), BAD);
        assert_eq!(cumem_event_create(CUMEM_EVENT_DISABLE_TIMING, &mut h), CUMEM_SUCCESS);
        let e = h;
        let mut ms = 0f32;
        assert_eq!(cumem_event_record(e, s), CUMEM_SUCCESS);
        assert_eq!(cumem_event_synchronize(e), CUMEM_SUCCESS);
        assert_eq!(cumem_event_elapsed(e, e, &mut ms), BAD); // no timing
        assert_eq!(cumem_event_elapsed(e, e, std::ptr::null_mut()), BAD);
        assert_eq!(cumem_stream_wait_event(s, 98765), BAD);
        assert_eq!(cumem_event_record(e, 98765), BAD);
        assert_eq!(cumem_alloc_async(1024, 98765, &mut h, 0), BAD);
        assert_eq!(cumem_alloc_async(1024, s, &mut h, 8), BAD);
        assert_eq!(cumem_alloc_async(1024, s, std::ptr::null_mut(), 0), BAD);
        assert_eq!(cumem_alloc_async(1024, s, &mut h, 0), CUMEM_SUCCESS);
        let p = h;
        assert_eq!(cumem_block_stream(p, &mut h), CUMEM_SUCCESS);
        assert_eq!(h, s);
        assert_eq!(cumem_record_stream(p + 4096, s), BAD); // past the allocation
        let buf = [0u8; 2048];
        assert_eq!(cumem_copy_htod_async(p, buf.as_ptr().cast(), 2048, s), BAD); // crosses the end
        assert_eq!(cumem_copy_htod_async(p, std::ptr::null(), 16, s), BAD);
        assert_eq!(cumem_copy_htod_async(p, buf.as_ptr().cast(), 1024, s), CUMEM_SUCCESS);
        assert_eq!(cumem_stream_synchronize(s), CUMEM_SUCCESS);
        assert_eq!(cumem_free(p), CUMEM_SUCCESS);
        assert_eq!(cumem_event_destroy(e), CUMEM_SUCCESS);
        assert_eq!(cumem_event_destroy(e), BAD);
        assert_eq!(cumem_stream_destroy(0), BAD);
        assert_eq!(cumem_stream_destroy(s), CUMEM_SUCCESS);
        assert_eq!(cumem_stream_synchronize(s), BAD);
    }
}

/// Small blocks come from the thread caches (default stream only): `record_stream` on
/// one moves it to its shard, and its free then waits for the stream like any other.
#[test]
fn record_stream_works_for_blocks_of_the_thread_caches() {
    let e = engine(PoolKind::Binned, 1);
    assert!(e.config().thread_cache);
    let s2 = stream(&e);
    let n = 4096usize;
    let p = pattern(n, 6);
    let warm = e.alloc(n as u64).unwrap();
    e.free(warm).unwrap(); // now in the thread cache
    let x = e.alloc(n as u64).unwrap();
    assert_eq!(x, warm, "served by the thread cache");
    e.copy_htod(x, &p).unwrap();
    slow(&e, s2);
    let h = HostBuf::new(&e, n);
    // SAFETY: `h` and x outlive the copy: s2 is synchronised before either goes.
    unsafe { e.device().copy_dtoh_async(h.ptr, x, n as u64, s2) }.unwrap();
    e.record_stream(x, s2).unwrap();
    e.free(x).unwrap();
    let y = e.alloc(n as u64).unwrap();
    assert_ne!(y, x, "reused while a read recorded on s2 was queued");
    e.copy_htod(y, &pattern(n, 8)).unwrap();
    sync(&e, s2);
    assert!(h.data() == p);
    e.free(y).unwrap();
    e.stream_destroy(s2).unwrap();
}

//! Shared helpers of the integration test suites (pools, properties, threads, ffi).
//!
//! Every suite runs against the host device by default. With `CUMEM_TEST_CUDA=1` in the
//! environment the same tests run against CUDA device 0 instead: [`device`] returns a
//! `CudaDevice`, memory is read and written only through the engine's copies
//! ([`fill`], [`check`]), and out-of-memory situations are made with a memory limit
//! rather than a small host capacity ([`small_memory`]).

#![allow(dead_code)]

use cumem::config::Amount;
use cumem::device::{CudaDevice, Device, HostDevice};
use cumem::{Config, Engine, PoolKind, Stats};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Capacity of the host device the suites use by default.
pub const HOST_CAPACITY: u64 = 4 * GIB;

/// True when the suites run against a real GPU (`CUMEM_TEST_CUDA=1`).
pub fn cuda() -> bool {
    std::env::var("CUMEM_TEST_CUDA").is_ok_and(|v| v.trim() == "1")
}

/// The device under test: CUDA device 0 with `CUMEM_TEST_CUDA=1`, else a host device
/// of [`HOST_CAPACITY`] bytes.
pub fn device() -> Box<dyn Device> {
    device_with_capacity(HOST_CAPACITY)
}

/// As [`device`], with a host device of `capacity` bytes (ignored on CUDA, whose
/// capacity is the GPU's).
pub fn device_with_capacity(capacity: u64) -> Box<dyn Device> {
    if cuda() {
        Box::new(CudaDevice::new(0).expect("CUMEM_TEST_CUDA=1 but CUDA device 0 is not usable"))
    } else {
        Box::new(HostDevice::new(Some(capacity)))
    }
}

/// An engine with `pool` and `shards` shards over [`device`].
pub fn engine(pool: PoolKind, shards: usize) -> Engine {
    engine_with(Config { pool, ..Config::default() }, shards)
}

/// An engine with configuration `cfg` and `shards` shards over [`device`].
pub fn engine_with(cfg: Config, shards: usize) -> Engine {
    Engine::with_device(cfg, device(), shards).expect("engine")
}

/// An engine whose memory is `bytes`: on the host device a capacity of `bytes`; on CUDA
/// (whose capacity cannot be chosen) a `JULIA_CUDA_MEMORY_LIMIT` of `bytes`. Out-of-memory
/// tests use it so they run on both.
pub fn small_memory(pool: PoolKind, bytes: u64, shards: usize) -> Engine {
    let cfg = Config { pool, ..Config::default() };
    if cuda() {
        Engine::with_device(Config { limit: Some(Amount::Bytes(bytes)), ..cfg }, device(), shards)
            .expect("engine")
    } else {
        Engine::with_device(cfg, Box::new(HostDevice::new(Some(bytes))), shards).expect("engine")
    }
}

/// Sets the `len` bytes at device address `ptr` to `byte` through the engine's checked
/// `memset` (host: `write_bytes`; CUDA: `cuMemsetD8`).
pub fn fill(e: &Engine, ptr: u64, len: u64, byte: u8) {
    e.memset(ptr, byte, len).unwrap_or_else(|err| panic!("fill {ptr:#x}+{len}: {err}"));
}

/// Reads `len` bytes at `ptr` through the engine's checked copy.
pub fn read(e: &Engine, ptr: u64, len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    e.copy_dtoh(&mut buf, ptr).unwrap_or_else(|err| panic!("read {ptr:#x}+{len}: {err}"));
    buf
}

/// Checks that the `len` bytes at `ptr` all equal `byte`; panics naming the first
/// differing offset. The range must lie inside a live allocation (checked by the
/// engine). On the host device the memory is read in place through its address (the
/// address is a host pointer); on CUDA it is downloaded with `copy_dtoh`.
pub fn check(e: &Engine, ptr: u64, len: u64, byte: u8) {
    if len == 0 {
        return;
    }
    e.check_range(ptr, len).unwrap_or_else(|err| panic!("check {ptr:#x}+{len}: {err}"));
    let owned;
    let got: &[u8] = if e.device().is_host() {
        // SAFETY: the engine just confirmed the range lies inside a live allocation of
        // the host device, whose addresses are host pointers; nothing frees it meanwhile.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) }
    } else {
        owned = read(e, ptr, len);
        &owned
    };
    // All bytes equal `byte`: the first is, and each equals its predecessor. Slice
    // equality is a memcmp even in debug builds; find the offset only on failure.
    if got[0] != byte || got[1..] != got[..got.len() - 1] {
        let at = got.iter().position(|&b| b != byte).unwrap();
        panic!(
            "block {ptr:#x}+{len}: byte {at} is {:#04x}, expected {byte:#04x} (memory overwritten)",
            got[at]
        );
    }
}

/// The statistics after checking the invariants of docs/contract.md that hold after every
/// operation at quiescence: requested ≤ allocated ≤ reserved, cached = reserved −
/// allocated, peaks at least the current values, the derived ratios consistent.
pub fn invariants(e: &Engine) -> Stats {
    let s = e.stats();
    assert!(s.requested_bytes <= s.allocated_bytes, "requested > allocated: {s:#?}");
    assert!(s.allocated_bytes <= s.reserved_bytes, "allocated > reserved: {s:#?}");
    assert_eq!(
        s.cached_bytes,
        s.reserved_bytes - s.allocated_bytes,
        "cached != reserved - allocated: {s:#?}"
    );
    assert!(s.inactive_split_bytes <= s.cached_bytes, "inactive split > cached: {s:#?}");
    assert!(s.peak_requested_bytes >= s.requested_bytes, "{s:#?}");
    assert!(s.peak_allocated_bytes >= s.allocated_bytes, "{s:#?}");
    assert!(s.peak_cached_bytes >= s.cached_bytes, "{s:#?}");
    assert!(s.peak_reserved_bytes >= s.reserved_bytes, "{s:#?}");
    let lookups = s.num_cache_hits + s.num_cache_misses;
    let rate = if lookups == 0 { 0.0 } else { s.num_cache_hits as f64 / lookups as f64 };
    assert!((s.cache_hit_rate - rate).abs() < 1e-12, "{s:#?}");
    let frag = if s.reserved_bytes == 0 { 0.0 } else { s.cached_bytes as f64 / s.reserved_bytes as f64 };
    assert!((s.fragmentation_ratio - frag).abs() < 1e-12, "{s:#?}");
    s
}

/// Frees nothing, releases all cached memory and checks that nothing stays reserved
/// (call with nothing live).
pub fn reclaim_all_and_check_empty(e: &Engine) {
    e.reclaim(u64::MAX);
    let s = invariants(e);
    assert_eq!(s.requested_bytes, 0, "{s:#?}");
    assert_eq!(s.allocated_bytes, 0, "{s:#?}");
    assert_eq!(s.reserved_bytes, 0, "{s:#?}");
    assert_eq!(s.cached_bytes, 0, "{s:#?}");
    assert_eq!(s.inactive_split_bytes, 0, "{s:#?}");
    assert!(e.outstanding().is_empty());
}

/// `n` rounded up to a multiple of `m` (a power of two).
pub fn round_up(n: u64, m: u64) -> u64 {
    (n + m - 1) & !(m - 1)
}

/// The block size `pool` hands out for a request of `bytes` (> 0), where it is
/// determined by the request alone; for `split`, the smallest possible size (a block may
/// keep up to 1 MiB more when the remainder is not worth splitting off).
pub fn block_size(pool: PoolKind, bytes: u64) -> u64 {
    match pool {
        PoolKind::Binned if bytes <= 128 * MIB => bytes.max(512).next_power_of_two(),
        PoolKind::Binned => round_up(bytes, 2 * MIB),
        PoolKind::Split | PoolKind::Expandable | PoolKind::Simple | PoolKind::None => round_up(bytes, 512),
    }
}

/// A device that passes everything to an inner device and counts the bytes it holds,
/// so tests can compare the engine's `reserved_bytes` with what the device really
/// handed out, and check that dropping an engine returns everything. The inner device
/// may be shared by several engines (one device, several consumers).
pub struct Counted {
    inner: std::sync::Arc<dyn Device>,
    pub held: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// `inner` wrapped in [`Counted`], with the shared counter of bytes it holds.
pub fn counted(
    inner: std::sync::Arc<dyn Device>,
) -> (Box<dyn Device>, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let held = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    (Box::new(Counted { inner, held: held.clone() }), held)
}

/// [`device`] wrapped in [`Counted`], with the shared counter of bytes it holds.
pub fn counted_device() -> (Box<dyn Device>, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    counted(std::sync::Arc::from(device()))
}

/// The `Device` methods a wrapping test device passes unchanged to its `inner` device:
/// all but `alloc`, `free`, `vm_map` and `vm_unmap`, which each wrapper writes itself.
macro_rules! forward_device {
    () => {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn is_host(&self) -> bool {
            self.inner.is_host()
        }
        fn mem_info(&self) -> cumem::Result<(u64, u64)> {
            self.inner.mem_info()
        }
        unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: u64) -> cumem::Result<()> {
            unsafe { self.inner.copy_htod(dst, src, bytes) }
        }
        unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: u64) -> cumem::Result<()> {
            unsafe { self.inner.copy_dtoh(dst, src, bytes) }
        }
        unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: u64) -> cumem::Result<()> {
            unsafe { self.inner.copy_dtod(dst, src, bytes) }
        }
        unsafe fn memset(&self, dst: u64, value: u8, bytes: u64) -> cumem::Result<()> {
            unsafe { self.inner.memset(dst, value, bytes) }
        }
        fn vm_granularity(&self) -> cumem::Result<u64> {
            self.inner.vm_granularity()
        }
        fn vm_reserve(&self, bytes: u64) -> cumem::Result<u64> {
            self.inner.vm_reserve(bytes)
        }
        unsafe fn vm_release(&self, base: u64, bytes: u64) -> cumem::Result<()> {
            unsafe { self.inner.vm_release(base, bytes) }
        }
    };
}
// Not every test crate that includes this module wraps a device.
#[allow(unused_imports)]
pub(crate) use forward_device;

impl Device for Counted {
    forward_device!();
    fn alloc(&self, bytes: u64) -> cumem::Result<u64> {
        let p = self.inner.alloc(bytes)?;
        self.held.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        Ok(p)
    }
    unsafe fn free(&self, ptr: u64, bytes: u64) -> cumem::Result<()> {
        self.held.fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        unsafe { self.inner.free(ptr, bytes) }
    }
    unsafe fn vm_map(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        unsafe { self.inner.vm_map(addr, bytes) }?;
        self.held.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    unsafe fn vm_unmap(&self, addr: u64, bytes: u64) -> cumem::Result<()> {
        self.held.fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        unsafe { self.inner.vm_unmap(addr, bytes) }
    }
}

/// xorshift64*: a small deterministic generator (one per thread in the threaded tests).
/// The seed must not be 0.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (> 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

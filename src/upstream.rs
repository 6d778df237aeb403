//! The layer between the pools and the device (RMM's "upstream resource" with its
//! limiting and statistics adaptors folded into one small type): it enforces
//! `JULIA_CUDA_MEMORY_LIMIT` on reserved bytes, counts and times device calls, and keeps
//! the map of device segments that copies use to find the allocation around an address.
//! Only cache misses and releases reach it.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::history::{Event, EventKind, History};
use crate::stats::DeviceStats;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// A segment: one device allocation, owned by the pool of one shard.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    /// Size in bytes.
    pub size: u64,
    /// Index of the engine shard whose pool owns it.
    pub shard: usize,
}

/// The device plus the memory limit and device-call counters.
pub struct Upstream {
    device: Box<dyn Device>,
    /// Cap on reserved bytes; `u64::MAX` when there is none. Atomic so that
    /// [`Upstream::set_limit`] can change it while other threads allocate.
    limit: AtomicU64,
    /// Whether a limit was set (a limit of `u64::MAX` bytes is still one to report).
    has_limit: AtomicBool,
    /// Bytes claimed against the limit: `reserved` plus device allocations in flight.
    /// A miss claims first, so concurrent misses cannot overshoot the limit.
    claimed: AtomicU64,
    /// Bytes obtained from the device (successful allocations only): what the
    /// statistics and their peak report, so a request that fails never shows in them.
    reserved: AtomicU64,
    /// The highest `reserved` ever reached, never reset (unlike the statistics' peak):
    /// the pools' growth policy uses it.
    all_time_peak: AtomicU64,
    /// Device-call counters and the peak of reserved bytes.
    stats: DeviceStats,
    segments: Mutex<BTreeMap<u64, Segment>>,
    /// The allocation history (off unless recording was asked for); device events are
    /// recorded here, the engine's through [`Upstream::history`].
    history: History,
}

impl Upstream {
    /// Wraps `device`, capping reserved bytes at `limit` (None: no cap).
    pub fn new(device: Box<dyn Device>, limit: Option<u64>) -> Upstream {
        Upstream {
            device,
            limit: AtomicU64::new(limit.unwrap_or(u64::MAX)),
            has_limit: AtomicBool::new(limit.is_some()),
            claimed: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            all_time_peak: AtomicU64::new(0),
            stats: DeviceStats::default(),
            segments: Mutex::new(BTreeMap::new()),
            history: History::new(),
        }
    }

    /// The allocation history.
    #[inline]
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Records a device event of `kind` for `bytes` at `addr` that started at tick `t0`,
    /// on shard `shard`'s ring.
    #[cold]
    fn record(&self, kind: EventKind, shard: usize, addr: u64, bytes: u64, t0: u64) {
        let h = &self.history;
        h.record(
            shard,
            Event {
                time_ns: t0,
                duration_ns: h.now().saturating_sub(t0),
                addr,
                size_bytes: bytes,
                kind: kind as u32,
                thread: crate::tracking::thread_index(),
                device: self.device().ordinal(),
                ..Event::default()
            },
        );
    }

    /// Sets the cap on reserved bytes (None: no cap). Requests in flight finish under the
    /// cap they were claimed against; reserved bytes above a lowered cap are not released
    /// here (the engine releases cache first, see `Engine::set_memory_limit`), only no
    /// more is obtained until they fall below it.
    pub fn set_limit(&self, limit: Option<u64>) {
        self.limit.store(limit.unwrap_or(u64::MAX), Relaxed);
        self.has_limit.store(limit.is_some(), Relaxed);
    }

    /// Every segment (base, size) owned by the pool of shard `shard`, by address.
    pub fn segments_of(&self, shard: usize) -> Vec<(u64, u64)> {
        self.segments.lock().iter().filter(|(_, s)| s.shard == shard).map(|(&b, s)| (b, s.size)).collect()
    }

    /// The device below.
    pub fn device(&self) -> &dyn Device {
        &*self.device
    }

    /// The limit on reserved bytes, if any.
    pub fn limit(&self) -> Option<u64> {
        self.has_limit.load(Relaxed).then(|| self.limit.load(Relaxed))
    }

    /// Bytes currently obtained from the device.
    #[inline]
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Relaxed)
    }

    /// High-water mark of [`Upstream::reserved`] since start or the last reset of the
    /// statistics.
    pub fn peak_reserved(&self) -> u64 {
        self.stats.peak_reserved()
    }

    /// The device-call counters.
    pub(crate) fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    /// How far obtaining `bytes` more would lift reserved memory above its all-time
    /// peak (0 if it would not). The split pool, about to grow, releases that
    /// much of its cache first, so cached memory that does not fit the request never
    /// raises the peak, while growth below the old peak keeps the cache warm. (The binned
    /// and simple pools do not: their blocks fit one size each, and releasing them made
    /// warm passes of a training loop call the device again and again.)
    pub fn growth_excess(&self, bytes: u64) -> u64 {
        (self.reserved() + bytes).saturating_sub(self.all_time_peak.load(Relaxed))
    }

    /// The upstream as the pool of engine shard `shard` sees it.
    #[inline]
    pub fn shard(&self, shard: usize) -> ShardUpstream<'_> {
        ShardUpstream { up: self, shard }
    }

    /// Claims `bytes` more against the limit before a device request (an allocation or
    /// a mapping), returning the claim before. Claiming first means concurrent misses
    /// cannot overshoot the limit. A request that does not fit leaves the claim
    /// untouched: a concurrent request that fits is not refused meanwhile. The caller
    /// counts the bytes as reserved once the device call succeeds, or unclaims them.
    fn claim(&self, bytes: u64) -> Result<u64> {
        self.claimed
            .fetch_update(Relaxed, Relaxed, |r| {
                r.checked_add(bytes).filter(|&n| n <= self.limit.load(Relaxed))
            })
            .map_err(|prev| {
                Error::OutOfMemory(format!(
                    "{} more would cross JULIA_CUDA_MEMORY_LIMIT of {} ({} reserved or being obtained)",
                    format_bytes(bytes),
                    format_bytes(self.limit.load(Relaxed)),
                    format_bytes(prev)
                ))
            })
    }

    /// Obtains a segment of `bytes` for the pool of `shard`. Errors:
    /// [`Error::OutOfMemory`] when the limit would be crossed or the device is full.
    fn alloc(&self, bytes: u64, shard: usize) -> Result<u64> {
        self.claim(bytes)?;
        let rec = self.history.on().then(|| self.history.now());
        let t = Instant::now();
        self.stats.on_device_call();
        let r = self.device.alloc(bytes);
        let ns = t.elapsed().as_nanos() as u64;
        match r {
            Ok(ptr) => {
                // Only now is the segment reserved; the peak is taken from obtained
                // memory alone, never from claims of requests that may yet fail.
                let now = self.reserved.fetch_add(bytes, Relaxed) + bytes;
                self.stats.on_device_alloc(ns, Some(now));
                self.all_time_peak.fetch_max(now, Relaxed);
                self.segments.lock().insert(ptr, Segment { size: bytes, shard });
                if let Some(t0) = rec {
                    self.record(EventKind::DeviceAlloc, shard, ptr, bytes, t0);
                }
                log::debug!("device allocation of {} at {ptr:#x}", format_bytes(bytes));
                Ok(ptr)
            }
            Err(e) => {
                self.stats.on_device_alloc(ns, None);
                self.claimed.fetch_sub(bytes, Relaxed);
                Err(e)
            }
        }
    }

    /// Returns a segment obtained by [`ShardUpstream::alloc`] to the device.
    ///
    /// The segment stops counting as reserved before the device call, and its claim on
    /// the limit only after: once the device has the memory back another thread may
    /// obtain it, and counted the other way round that moment showed the segment twice
    /// (a peak of reserved bytes above the device's capacity), while a claim released
    /// early would let a request pass the limit while the memory is still held.
    fn free(&self, ptr: u64, bytes: u64, shard: usize) {
        self.segments.lock().remove(&ptr);
        self.reserved.fetch_sub(bytes, Relaxed);
        let rec = self.history.on().then(|| self.history.now());
        let t = Instant::now();
        // SAFETY: the pools only return segments they obtained from `alloc(bytes)`.
        self.stats.on_device_call();
        if let Err(e) = unsafe { self.device.free(ptr, bytes) } {
            self.stats.on_device_free_error();
            log::error!("freeing device segment {ptr:#x} of {bytes} bytes failed: {e}");
        }
        self.stats.on_device_free(t.elapsed().as_nanos() as u64);
        if let Some(t0) = rec {
            self.record(EventKind::DeviceFree, shard, ptr, bytes, t0);
        }
        self.claimed.fetch_sub(bytes, Relaxed);
        log::debug!("device free of {} at {ptr:#x}", format_bytes(bytes));
    }

    /// Granules in `bytes` mapped or unmapped at once: each is one physical allocation
    /// of the device, and counts as one device allocation or free.
    fn granules(&self, bytes: u64) -> u64 {
        self.device.vm_granularity().map_or(1, |g| bytes.div_ceil(g).max(1))
    }

    /// Reserves `bytes` of address space for the pool of `shard` (see
    /// [`ShardUpstream::vm_reserve`]). Its time counts as device-allocation time; it is
    /// no device allocation (no memory) and reserved bytes do not change.
    fn vm_reserve(&self, bytes: u64, shard: usize) -> Result<u64> {
        let t = Instant::now();
        self.stats.on_device_call();
        let r = self.device.vm_reserve(bytes);
        self.stats.on_device_alloc(t.elapsed().as_nanos() as u64, None);
        let base = r?;
        self.segments.lock().insert(base, Segment { size: bytes, shard });
        log::debug!("reserved {} of addresses at {base:#x}", format_bytes(bytes));
        Ok(base)
    }

    fn vm_release(&self, base: u64, bytes: u64) {
        self.segments.lock().remove(&base);
        let t = Instant::now();
        // SAFETY: the pool returns only ranges it reserved, with nothing mapped.
        self.stats.on_device_call();
        if let Err(e) = unsafe { self.device.vm_release(base, bytes) } {
            log::error!("releasing the address range {base:#x} of {bytes} bytes failed: {e}");
        }
        self.stats.on_device_alloc(t.elapsed().as_nanos() as u64, None);
    }

    /// Maps `bytes` at `addr` (see [`ShardUpstream::vm_map`]): claimed like an
    /// allocation, reserved only once the mapping succeeded.
    fn vm_map(&self, addr: u64, bytes: u64, shard: usize) -> Result<()> {
        self.claim(bytes)?;
        let rec = self.history.on().then(|| self.history.now());
        let t = Instant::now();
        // SAFETY: the pool maps only unmapped granules of ranges it reserved.
        self.stats.on_device_call();
        let r = unsafe { self.device.vm_map(addr, bytes) };
        let ns = t.elapsed().as_nanos() as u64;
        match r {
            Ok(()) => {
                // As in `alloc`: reserved, and its peak, count mapped memory only.
                let now = self.reserved.fetch_add(bytes, Relaxed) + bytes;
                self.stats.on_device_alloc(ns, Some(now));
                for _ in 1..self.granules(bytes) {
                    self.stats.on_device_alloc(0, Some(now));
                }
                self.all_time_peak.fetch_max(now, Relaxed);
                if let Some(t0) = rec {
                    self.record(EventKind::DeviceAlloc, shard, addr, bytes, t0);
                }
                Ok(())
            }
            Err(e) => {
                self.stats.on_device_alloc(ns, None);
                self.claimed.fetch_sub(bytes, Relaxed);
                Err(e)
            }
        }
    }

    /// Unmaps a mapping of [`Upstream::vm_map`]; reserved and claimed bytes change in the
    /// order of [`Upstream::free`], for the same reason.
    fn vm_unmap(&self, addr: u64, bytes: u64, shard: usize) {
        self.reserved.fetch_sub(bytes, Relaxed);
        let rec = self.history.on().then(|| self.history.now());
        let t = Instant::now();
        // SAFETY: the pool unmaps only mapped granules that no block uses.
        self.stats.on_device_call();
        if let Err(e) = unsafe { self.device.vm_unmap(addr, bytes) } {
            // One failed device call, however many granules it covered.
            self.stats.on_device_free_error();
            log::error!("unmapping {bytes} bytes at {addr:#x} failed: {e}");
        }
        self.stats.on_device_free(t.elapsed().as_nanos() as u64);
        for _ in 1..self.granules(bytes) {
            self.stats.on_device_free(0);
        }
        if let Some(t0) = rec {
            self.record(EventKind::DeviceFree, shard, addr, bytes, t0);
        }
        self.claimed.fetch_sub(bytes, Relaxed);
    }

    /// Moves the memory mapped at `from` to `to` (see [`ShardUpstream::vm_move`]):
    /// reserved and claimed bytes do not change on success; counted as a device free and
    /// a device allocation per granule (as the unmapping and mapping it replaces), its
    /// time as allocation time. On error the memory of `from` is gone, as after
    /// [`Upstream::vm_unmap`], and `to` is not mapped.
    fn vm_move(&self, from: u64, to: u64, bytes: u64, shard: usize) -> Result<()> {
        let rec = self.history.on().then(|| self.history.now());
        let t = Instant::now();
        // SAFETY: the pool moves only idle mapped granules to unmapped granules of its
        // reserved ranges.
        self.stats.on_device_call();
        let r = unsafe { self.device.vm_move(from, to, bytes) };
        let ns = t.elapsed().as_nanos() as u64;
        for _ in 0..self.granules(bytes) {
            self.stats.on_device_free(0);
        }
        match r {
            Ok(()) => {
                let now = self.reserved.load(Relaxed);
                self.stats.on_device_alloc(ns, Some(now));
                for _ in 1..self.granules(bytes) {
                    self.stats.on_device_alloc(0, Some(now));
                }
                if let Some(t0) = rec {
                    self.record(EventKind::DeviceFree, shard, from, bytes, t0);
                    self.record(EventKind::DeviceAlloc, shard, to, bytes, t0);
                }
                Ok(())
            }
            Err(e) => {
                self.stats.on_device_free_error();
                log::error!("moving {bytes} bytes of memory from {from:#x} to {to:#x} failed: {e}");
                self.reserved.fetch_sub(bytes, Relaxed);
                self.claimed.fetch_sub(bytes, Relaxed);
                if let Some(t0) = rec {
                    self.record(EventKind::DeviceFree, shard, from, bytes, t0);
                }
                Err(e)
            }
        }
    }

    /// The segment containing `addr`, as `(base, segment)`.
    pub fn segment_containing(&self, addr: u64) -> Option<(u64, Segment)> {
        let segs = self.segments.lock();
        let (&base, &seg) = segs.range(..=addr).next_back()?;
        (addr < base + seg.size).then_some((base, seg))
    }
}

/// The upstream as the pool of one engine shard sees it: a pool obtains and returns
/// segments through this view, which records each segment as its shard's (copies find
/// the shard that owns an address through that record). Two words, passed by value.
#[derive(Clone, Copy)]
pub struct ShardUpstream<'a> {
    up: &'a Upstream,
    shard: usize,
}

impl ShardUpstream<'_> {
    /// Obtains a segment of `bytes` (> 0) from the device for this shard's pool. Errors:
    /// [`Error::OutOfMemory`] when `JULIA_CUDA_MEMORY_LIMIT` would be crossed or the
    /// device is full; [`Error::Device`] when the device fails otherwise.
    #[inline]
    pub fn alloc(self, bytes: u64) -> Result<u64> {
        self.up.alloc(bytes, self.shard)
    }

    /// Returns a segment obtained by [`ShardUpstream::alloc`] with the same `bytes` to
    /// the device (a device failure is logged: the memory is gone either way).
    #[inline]
    pub fn free(self, ptr: u64, bytes: u64) {
        self.up.free(ptr, bytes, self.shard)
    }

    /// Bytes currently obtained from the device, by all shards.
    #[inline]
    pub fn reserved(self) -> u64 {
        self.up.reserved()
    }

    /// See [`Upstream::growth_excess`].
    #[inline]
    pub fn growth_excess(self, bytes: u64) -> u64 {
        self.up.growth_excess(bytes)
    }

    /// The device's virtual-memory granule in bytes (see [`Device::vm_granularity`]).
    /// Errors: [`Error::Device`] when the device cannot map memory on demand.
    #[inline]
    pub fn vm_granularity(self) -> Result<u64> {
        self.up.device.vm_granularity()
    }

    /// The device's total memory in bytes (`cuMemGetInfo`), which sizes the address
    /// ranges the expandable pool reserves.
    pub fn device_total(self) -> Result<u64> {
        Ok(self.up.device.mem_info()?.1)
    }

    /// Reserves `bytes` (whole granules) of address space with no memory behind it for
    /// this shard's pool, and records it as the shard's segment (copies find blocks in
    /// it through that record). Reserved bytes do not change: address space costs no
    /// memory. Errors as [`Device::vm_reserve`].
    pub fn vm_reserve(self, bytes: u64) -> Result<u64> {
        self.up.vm_reserve(bytes, self.shard)
    }

    /// Returns a range of [`ShardUpstream::vm_reserve`] with nothing mapped in it (a
    /// device failure is logged).
    pub fn vm_release(self, base: u64, bytes: u64) {
        self.up.vm_release(base, bytes)
    }

    /// Maps physical memory at `[addr, addr+bytes)` (whole, unmapped granules of a
    /// reserved range), counting `bytes` as reserved and each granule as one device
    /// allocation (one physical allocation of the device). Errors: [`Error::OutOfMemory`]
    /// when `JULIA_CUDA_MEMORY_LIMIT` would be crossed or the device is full (nothing is
    /// mapped then); [`Error::Device`] otherwise.
    pub fn vm_map(self, addr: u64, bytes: u64) -> Result<()> {
        self.up.vm_map(addr, bytes, self.shard)
    }

    /// Unmaps `[addr, addr+bytes)` (whole granules mapped by [`ShardUpstream::vm_map`],
    /// no block in them), counting `bytes` as no longer reserved and each granule as one
    /// device free. A device failure is logged and counted once in
    /// `num_device_free_errors`, like a failed [`ShardUpstream::free`]: the memory is
    /// gone either way.
    pub fn vm_unmap(self, addr: u64, bytes: u64) {
        self.up.vm_unmap(addr, bytes, self.shard)
    }

    /// Moves the memory behind `[from, from+bytes)` (mapped by [`ShardUpstream::vm_map`],
    /// no block in it) to the unmapped `[to, to+bytes)` of a range this shard reserved
    /// ([`Device::vm_move`]): an unmapping and a mapping that keep the physical memory,
    /// so reserved bytes stay as they are; counted as a device free and a device
    /// allocation per granule. On error (logged and counted in
    /// `num_device_free_errors`) the memory of `from` is returned to the device, as by
    /// [`ShardUpstream::vm_unmap`], and `to` is not mapped.
    pub fn vm_move(self, from: u64, to: u64, bytes: u64) -> Result<()> {
        self.up.vm_move(from, to, bytes, self.shard)
    }
}

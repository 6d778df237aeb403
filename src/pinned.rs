//! The pinned host pool: page-locked host memory for fast copies to and from the GPU,
//! cached by the same pool machinery as device memory (a second [`Engine`], over a
//! pinned host device of [`crate::device`]), with its own statistics and limit
//! (`CUMEM_PINNED_LIMIT`), plus the registration of host memory allocated elsewhere
//! (`cuMemHostRegister`).
//!
//! Where the behaviour comes from: PyTorch's `CachingHostAllocator` (`pin_memory=True`,
//! `Tensor.pin_memory()`, `is_pinned()`), which caches `cudaHostAlloc` blocks in
//! power-of-two size classes; RMM's `pinned_memory_resource` under a pool; CUDA.jl's
//! `Mem.alloc(Mem.Host)` and `CUDA.pin` (`cuMemHostRegister`).
//!
//! The pool is `binned`: its size classes are PyTorch's (powers of two; above 128 MiB,
//! 2 MiB steps, so a 256 MiB batch takes 256 MiB), a cache hit is one free-list
//! operation (the fastest of the pools), and data loading asks for the same few batch
//! sizes again and again, for which size classes waste nothing after the first round.
//! The split pool's advantage, carving small requests out of large segments, buys
//! little here: pinned buffers are few and large.

use crate::config::{Config, PoolKind};
use crate::device::{self, Device, HostRegistrar};
use crate::engine::{self, Engine};
use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Device work queued on a stream that reads or writes a pinned block (an asynchronous
/// copy): the pool keeps the block out of other hands until [`DeviceUse::done`] says the
/// work has completed (PyTorch's `CachingHostAllocator::recordEvent`). Dropped once done.
pub trait DeviceUse: Send {
    /// Whether the work has completed; polled, never waits.
    fn done(&mut self) -> bool;
}

/// The [`DeviceUse`] of an event recorded on a stream after the work: done once the
/// event has completed; the event is destroyed with it. A query that fails counts as
/// not done (polled again later: the block is kept rather than reused early).
pub struct EventUse {
    device: &'static dyn Device,
    event: u64,
}

impl EventUse {
    /// Records an event on `stream` of `device` after the work queued there so far.
    /// Errors: the device's, when the event cannot be created or recorded (nothing is
    /// left behind).
    pub fn record(device: &'static dyn Device, stream: u64) -> Result<EventUse> {
        let event = device.event_create(false)?;
        if let Err(e) = device.event_record(event, stream) {
            let _ = device.event_destroy(event);
            return Err(e);
        }
        Ok(EventUse { device, event })
    }
}

impl DeviceUse for EventUse {
    fn done(&mut self) -> bool {
        self.device.event_query(self.event).unwrap_or(false)
    }
}

impl Drop for EventUse {
    fn drop(&mut self) {
        if let Err(e) = self.device.event_destroy(self.event) {
            log::debug!("destroying the event of a pinned block's use: {e}");
        }
    }
}

/// A live block of the pool and the device work that still uses it.
struct LiveBlock {
    bytes: u64,
    uses: Vec<Box<dyn DeviceUse>>,
}

/// The pinned host pool and the registered host ranges. Thread-safe.
pub struct PinnedHost {
    engine: Engine,
    registrar: Box<dyn HostRegistrar>,
    /// Registered ranges: start → bytes. Registration is rare (once per array), so a
    /// mutex around an ordered map is plenty.
    registered: Mutex<BTreeMap<u64, u64>>,
    /// The pool's live blocks by address (pinned buffers are few and large), with the
    /// device work recorded against each ([`PinnedHost::record_use`]).
    live: Mutex<BTreeMap<u64, LiveBlock>>,
    /// Blocks freed while device work still used them: returned to the pool once every
    /// use is done, polled on the next allocation, free or reclaim.
    deferred: Mutex<Vec<(u64, Vec<Box<dyn DeviceUse>>)>>,
}

impl PinnedHost {
    /// The configuration of the pinned engine, from the device engine's: the binned pool
    /// (see the module's documentation), `CUMEM_PINNED_LIMIT` as its limit, the same
    /// `CUMEM_DEBUG` level and `CUMEM_THREAD_CACHE` switch and `CUMEM_FAULT`'s faults
    /// ([`PinnedHost::new`] wraps the pinned device in a [`device::FaultyDevice`]).
    pub fn config_for(device_cfg: &Config) -> Config {
        Config {
            pool: PoolKind::Binned,
            limit: device_cfg.pinned_limit,
            debug: device_cfg.debug,
            thread_cache: device_cfg.thread_cache,
            fault: device_cfg.fault,
            ..Config::default()
        }
    }

    /// The pool for a device engine configured with `device_cfg`: on CUDA's page-locked
    /// memory when `gpu`, else on the host device's (see [`device::open_pinned`]).
    /// Errors: those of [`device::open_pinned`] and [`Engine::with_device`].
    pub fn new(device_cfg: &Config, gpu: bool) -> Result<PinnedHost> {
        let (dev, reg) = device::open_pinned(gpu)?;
        // CUMEM_FAULT applies to the pinned host memory as to the device's.
        let dev: Box<dyn Device> = match device_cfg.fault {
            Some(spec) => Box::new(device::FaultyDevice::new(dev, spec)),
            None => dev,
        };
        PinnedHost::with_device(device_cfg, dev, reg, engine::default_shards())
    }

    /// The pool over `device` (a pinned host device: its addresses are host addresses)
    /// with `registrar` for [`PinnedHost::register`], and `shards` engine shards. Errors:
    /// [`Error::Device`] when a percentage limit cannot be resolved.
    pub fn with_device(
        device_cfg: &Config,
        device: Box<dyn Device>,
        registrar: Box<dyn HostRegistrar>,
        shards: usize,
    ) -> Result<PinnedHost> {
        let engine = Engine::with_device(PinnedHost::config_for(device_cfg), device, shards)?;
        Ok(PinnedHost {
            engine,
            registrar,
            registered: Mutex::new(BTreeMap::new()),
            live: Mutex::new(BTreeMap::new()),
            deferred: Mutex::new(Vec::new()),
        })
    }

    /// The engine below (its statistics are the pool's, `memory_stats(:host)`).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Allocates `bytes` of page-locked host memory (aligned to at least 512 bytes; 0
    /// bytes gives the null address 0), from the cache when a block of its size class is
    /// free. On out of memory the cache is released and the request retried once, as on
    /// the device. Errors: [`Error::OutOfMemory`] when `CUMEM_PINNED_LIMIT` would be
    /// crossed or the driver cannot lock more (the message names the limit and the
    /// pool's state); [`Error::InvalidValue`] for sizes above 2^63 − 1.
    pub fn alloc(&self, bytes: u64) -> Result<u64> {
        self.process_deferred();
        let p = self.engine.alloc(bytes).map_err(|e| match e {
            // The engine's message names the device engine's limit variable.
            Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                "pinned host memory: {}",
                m.replace("JULIA_CUDA_MEMORY_LIMIT", "CUMEM_PINNED_LIMIT")
            )),
            e => e,
        })?;
        if p != 0 {
            self.live.lock().insert(p, LiveBlock { bytes, uses: Vec::new() });
        }
        Ok(p)
    }

    /// Returns a block of [`PinnedHost::alloc`] to the pool; 0 does nothing. A block that
    /// queued device work still uses ([`PinnedHost::record_use`]) stops being the
    /// caller's at once but reaches the pool's cache, and so the next allocation or a
    /// reclaim, only once that work is done (until then it counts as allocated). Errors:
    /// [`Error::InvalidValue`] for an address that is not a live pinned allocation
    /// (nothing changes).
    pub fn free(&self, ptr: u64) -> Result<()> {
        let not_live = || {
            Error::InvalidValue(format!(
                "pinned host free of {ptr:#x}, which is not a live allocation of the pinned host pool \
                 (not from cumem_host_alloc / CuMem.pinned, or already freed)"
            ))
        };
        if ptr == 0 {
            return Ok(());
        }
        let Some(mut blk) = self.live.lock().remove(&ptr) else {
            return Err(not_live());
        };
        blk.uses.retain_mut(|u| !u.done());
        if blk.uses.is_empty() {
            self.engine.free(ptr).map_err(|_| not_live())?;
        } else {
            log::debug!("pinned block {ptr:#x} freed while device work uses it: returned once it is done");
            self.deferred.lock().push((ptr, blk.uses));
        }
        self.process_deferred();
        Ok(())
    }

    /// Records that device work queued now reads or writes the pinned memory at `addr`
    /// (an asynchronous copy from or to it): until `u` is done, a free of the block
    /// containing `addr` does not hand it to anyone else, and a reclaim does not release
    /// it (PyTorch's `CachingHostAllocator::recordEvent`). Returns false, dropping `u`,
    /// when `addr` is not inside a live block of the pool (registered or pageable memory:
    /// keeping it is the caller's part).
    pub fn record_use(&self, addr: u64, u: Box<dyn DeviceUse>) -> bool {
        let mut live = self.live.lock();
        match live.range_mut(..=addr).next_back() {
            Some((&base, blk)) if addr < base + blk.bytes.max(1) => {
                blk.uses.retain_mut(|u| !u.done());
                blk.uses.push(u);
                true
            }
            _ => false,
        }
    }

    /// Whether `addr` lies inside a live block of the pool (the answer may be stale as
    /// soon as it is returned).
    pub fn is_pool_block(&self, addr: u64) -> bool {
        let live = self.live.lock();
        live.range(..=addr).next_back().is_some_and(|(&b, blk)| addr < b + blk.bytes.max(1))
    }

    /// Blocks freed while in use whose work has completed go back to the pool.
    fn process_deferred(&self) {
        let ready: Vec<u64> = {
            let mut d = self.deferred.lock();
            if d.is_empty() {
                return;
            }
            let mut ready = Vec::new();
            d.retain_mut(|(ptr, uses)| {
                uses.retain_mut(|u| !u.done());
                if uses.is_empty() {
                    ready.push(*ptr);
                    false
                } else {
                    true
                }
            });
            ready
        };
        for ptr in ready {
            if let Err(e) = self.engine.free(ptr) {
                log::error!("returning the pinned block {ptr:#x} after its device work: {e}");
            }
        }
    }

    /// How many blocks were freed while device work still uses them and are not yet back
    /// in the pool.
    pub fn deferred_blocks(&self) -> usize {
        self.deferred.lock().len()
    }

    /// Page-locks `[ptr, ptr+bytes)`, host memory allocated elsewhere, for fast copies
    /// (`cuMemHostRegister` with `CU_MEMHOSTREGISTER_PORTABLE`; on the host device the
    /// range is only recorded), until [`PinnedHost::unregister`]. Errors, with nothing
    /// changed: [`Error::InvalidValue`] for a null `ptr`, 0 bytes, a range that overflows
    /// or overlaps a registered range or a live block of the pinned pool (already
    /// page-locked); the driver's error otherwise.
    ///
    /// # Safety
    /// The range must be memory of this process that stays allocated until it is
    /// unregistered.
    pub unsafe fn register(&self, ptr: u64, bytes: u64) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidValue(format!("cannot register {ptr:#x}+{bytes}: {why}")));
        if ptr == 0 {
            return bad("null pointer".into());
        }
        if bytes == 0 {
            return bad("an empty range".into());
        }
        let Some(end) = ptr.checked_add(bytes) else {
            return bad("the range overflows 64 bits".into());
        };
        if self.in_pool(ptr) || self.in_pool(end - 1) {
            return bad(
                "it overlaps a live block of the pinned host pool, which is page-locked already".into()
            );
        }
        let mut reg = self.registered.lock();
        // The range before `end` that starts last is the only one that can overlap.
        if let Some((&b, &n)) = reg.range(..end).next_back()
            && b + n > ptr
        {
            return bad(format!("it overlaps the registered range {b:#x}+{n}"));
        }
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.registrar.register(ptr, bytes) }?;
        reg.insert(ptr, bytes);
        log::debug!("registered {} of host memory at {ptr:#x}", format_bytes(bytes));
        Ok(())
    }

    /// Undoes [`PinnedHost::register`] of the range starting at `ptr`
    /// (`cuMemHostUnregister`). Errors, with nothing changed: [`Error::InvalidValue`]
    /// when no registered range starts at `ptr` (naming the range it lies in, if any);
    /// the driver's error.
    pub fn unregister(&self, ptr: u64) -> Result<()> {
        let mut reg = self.registered.lock();
        let Some(&bytes) = reg.get(&ptr) else {
            let inside = reg.range(..=ptr).next_back().filter(|&(&b, &n)| ptr < b + n);
            return Err(Error::InvalidValue(match inside {
                Some((b, n)) => format!(
                    "cannot unregister {ptr:#x}: it lies inside the registered range {b:#x}+{n}; \
                     unregister that range by its start"
                ),
                None => format!("cannot unregister {ptr:#x}: no registered host range starts there"),
            }));
        };
        // SAFETY: `ptr` starts a registered range.
        unsafe { self.registrar.unregister(ptr) }?;
        reg.remove(&ptr);
        log::debug!("unregistered {} of host memory at {ptr:#x}", format_bytes(bytes));
        Ok(())
    }

    /// Whether `ptr` lies in page-locked memory: a live block of the pinned pool, a
    /// registered range, or (on a GPU) memory the driver reports as page-locked host
    /// memory, whoever locked it (PyTorch's `is_pinned`). False for 0.
    pub fn is_pinned(&self, ptr: u64) -> bool {
        if ptr == 0 {
            return false;
        }
        let registered = {
            let reg = self.registered.lock();
            reg.range(..=ptr).next_back().is_some_and(|(&b, &n)| ptr < b + n)
        };
        registered || self.in_pool(ptr) || self.registrar.driver_pinned(ptr)
    }

    /// Whether `ptr` lies inside a live block of the pool.
    fn in_pool(&self, ptr: u64) -> bool {
        self.engine.check_range(ptr, 1).is_ok()
    }

    /// `(ranges, bytes)` registered now.
    pub fn registered(&self) -> (u64, u64) {
        let reg = self.registered.lock();
        (reg.len() as u64, reg.values().sum())
    }

    /// A snapshot of the pool's statistics (the fields of the device engine's; the limit
    /// is `CUMEM_PINNED_LIMIT`'s).
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    /// Resets the pool's counters and peaks (see [`Engine::reset_stats`]).
    pub fn reset_stats(&self) {
        self.engine.reset_stats()
    }

    /// Unlocks and frees cached pinned memory until at least `bytes` were released
    /// (`u64::MAX`: all). Returns the bytes released.
    pub fn reclaim(&self, bytes: u64) -> u64 {
        self.process_deferred();
        self.engine.reclaim(bytes)
    }
}

impl Drop for PinnedHost {
    /// Unregisters what is still registered (the engine then frees its memory).
    fn drop(&mut self) {
        for (&ptr, _) in self.registered.get_mut().iter() {
            // SAFETY: `ptr` starts a registered range.
            if let Err(e) = unsafe { self.registrar.unregister(ptr) } {
                log::error!("unregistering host memory at {ptr:#x}: {e}");
            }
        }
    }
}

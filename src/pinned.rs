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

/// The pinned host pool and the registered host ranges. Thread-safe.
pub struct PinnedHost {
    engine: Engine,
    registrar: Box<dyn HostRegistrar>,
    /// Registered ranges: start → bytes. Registration is rare (once per array), so a
    /// mutex around an ordered map is plenty.
    registered: Mutex<BTreeMap<u64, u64>>,
}

impl PinnedHost {
    /// The configuration of the pinned engine, from the device engine's: the binned pool
    /// (see the module's documentation), `CUMEM_PINNED_LIMIT` as its limit, the same
    /// `CUMEM_DEBUG` level and `CUMEM_THREAD_CACHE` switch; no injected faults.
    pub fn config_for(device_cfg: &Config) -> Config {
        Config {
            pool: PoolKind::Binned,
            limit: device_cfg.pinned_limit,
            debug: device_cfg.debug,
            thread_cache: device_cfg.thread_cache,
            ..Config::default()
        }
    }

    /// The pool for a device engine configured with `device_cfg`: on CUDA's page-locked
    /// memory when `gpu`, else on the host device's (see [`device::open_pinned`]).
    /// Errors: those of [`device::open_pinned`] and [`Engine::with_device`].
    pub fn new(device_cfg: &Config, gpu: bool) -> Result<PinnedHost> {
        let (dev, reg) = device::open_pinned(gpu)?;
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
        Ok(PinnedHost { engine, registrar, registered: Mutex::new(BTreeMap::new()) })
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
        self.engine.alloc(bytes).map_err(|e| match e {
            // The engine's message names the device engine's limit variable.
            Error::OutOfMemory(m) => Error::OutOfMemory(format!(
                "pinned host memory: {}",
                m.replace("JULIA_CUDA_MEMORY_LIMIT", "CUMEM_PINNED_LIMIT")
            )),
            e => e,
        })
    }

    /// Returns a block of [`PinnedHost::alloc`] to the pool; 0 does nothing. Errors:
    /// [`Error::InvalidValue`] for an address that is not a live pinned allocation
    /// (nothing changes).
    pub fn free(&self, ptr: u64) -> Result<()> {
        self.engine.free(ptr).map_err(|_| {
            Error::InvalidValue(format!(
                "pinned host free of {ptr:#x}, which is not a live allocation of the pinned host pool \
                 (not from cumem_host_alloc / CuMem.pinned, or already freed)"
            ))
        })
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

//! The process's engines: one [`Engine`] per device ordinal (its own pool, statistics and
//! limit), made on first use from the environment, the calling thread's current device,
//! the routing of an address to the device that owns it, and the process-wide pinned host
//! pool (RAPIDS RMM's `per_device_resource.hpp` plays this role). The C ABI
//! ([`crate::ffi`]) is a translation of these functions; Rust programs that want the same
//! registry (rather than engines of their own, [`Engine::new`]) call them directly.
//!
//! Each OS thread has a current device (0 until [`set_device`]), and the calls that take
//! no address act on it, as CUDA's runtime and PyTorch's `torch.cuda.set_device` do.
//! Calls that take an address find the device that owns it ([`owner`], [`on_owner`]): on
//! the current device first and, once a second device was opened, on the others, so a
//! Julia finalizer frees an array on whatever thread and device it runs. With one device
//! nothing changes and nothing is searched.

use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::pinned::PinnedHost;
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// The engines, one slot per device ordinal, made on first use.
struct Engines {
    cfg: Config,
    /// Device 0 is a host stand-in (so are all the others).
    host: bool,
    slots: Box<[OnceLock<Engine>]>,
}

static ENGINES: OnceLock<Engines> = OnceLock::new();
static INIT: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
/// Set once an engine other than device 0's exists: only then do address-taking calls
/// search other devices.
static MULTI: AtomicBool = AtomicBool::new(false);
/// Device 0's engine while it is the only one open (null before it exists and once a
/// second device is opened): then every thread's current device is 0, and [`engine`]
/// returns it after one load, without reading the thread-local current device (in a
/// shared library each thread-local access is a call to `__tls_get_addr`) or the two
/// `OnceLock`s. Set under `INIT` when device 0's engine is made; cleared under `INIT`
/// before a second engine is published, so a thread that made another device current
/// (which goes through [`engine_at`]) sees it cleared.
static SOLE: AtomicPtr<Engine> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// This thread's current device ([`set_device`]).
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// The engines, built from the environment on first use with device 0's engine (so a
/// bad configuration or a missing GPU fails the first call); after a failure, the next
/// call tries again.
fn engines() -> Result<&'static Engines> {
    if let Some(es) = ENGINES.get() {
        return Ok(es);
    }
    let _guard = INIT.lock();
    if let Some(es) = ENGINES.get() {
        return Ok(es);
    }
    let cfg = Config::from_env()?;
    let filter = cfg.log.clone().unwrap_or_else(|| "warn".into());
    crate::logging::init(&filter);
    let e0 = Engine::new(cfg.clone())?;
    let host = e0.device().is_host();
    let n = crate::device::count(&cfg, host)?.max(1) as usize;
    let slots: Box<[OnceLock<Engine>]> = (0..n).map(|_| OnceLock::new()).collect();
    let _ = slots[0].set(e0);
    let es = ENGINES.get_or_init(|| Engines { cfg, host, slots });
    if let Some(e0) = es.slots[0].get()
        && !MULTI.load(Relaxed)
    {
        SOLE.store(e0 as *const Engine as *mut Engine, Release);
    }
    Ok(es)
}

/// The calling thread's current device's engine (device 0's until [`set_device`]),
/// built from the environment on first use (the configuration table of
/// docs/contract.md). Errors: [`Error::Config`] for a bad variable, the device's errors
/// when it cannot be opened (e.g. `CUMEM_DEVICE=cuda` without a usable GPU); after a
/// failure, the next call tries again.
#[inline]
pub fn engine() -> Result<&'static Engine> {
    let sole = SOLE.load(Acquire);
    if !sole.is_null() {
        // SAFETY: SOLE only ever holds null or device 0's engine, which lives in the
        // `ENGINES` static and is never dropped.
        return Ok(unsafe { &*sole });
    }
    engine_current()
}

/// [`engine`] once several devices may be open (or before the first).
#[inline(never)]
fn engine_current() -> Result<&'static Engine> {
    let i = CURRENT.with(|c| c.get()) as usize;
    if let Some(e) = ENGINES.get().and_then(|es| es.slots.get(i)?.get()) {
        return Ok(e);
    }
    engine_at(i)
}

/// Device `ordinal`'s engine, opened on first use. Errors: [`Error::InvalidValue`] for
/// an ordinal past the device count; the device's errors when it cannot be opened.
pub fn engine_at(ordinal: usize) -> Result<&'static Engine> {
    let es = engines()?;
    let Some(slot) = es.slots.get(ordinal) else {
        let n = es.slots.len();
        return Err(Error::InvalidValue(format!(
            "there is no device {ordinal}: {n} device{} (ordinals 0 to {}){}",
            if n == 1 { "" } else { "s" },
            n - 1,
            if es.host { "; CUMEM_DEVICE=host:N sets N host stand-in devices" } else { "" }
        )));
    };
    if let Some(e) = slot.get() {
        return Ok(e);
    }
    let _guard = INIT.lock();
    if let Some(e) = slot.get() {
        return Ok(e);
    }
    let e = Engine::open(es.cfg.clone(), ordinal as u32, es.host)?;
    SOLE.store(std::ptr::null_mut(), Release);
    let e = slot.get_or_init(|| e);
    MULTI.store(true, Relaxed);
    Ok(e)
}

/// The number of devices (`CUMEM_DEVICE=host:N`'s N, or CUDA's device count). Errors as
/// [`engine`] (it starts the engines).
pub fn device_count() -> Result<usize> {
    Ok(engines()?.slots.len())
}

/// Whether device `ordinal`'s engine is open (it was made current, or is device 0):
/// `Some(false)` when not yet, None for an ordinal out of range. Opens nothing beyond
/// device 0. Errors as [`engine`].
pub fn is_open(ordinal: usize) -> Result<Option<bool>> {
    Ok(engines()?.slots.get(ordinal).map(|s| s.get().is_some()))
}

/// Makes device `ordinal` the calling OS thread's current device, opening its engine on
/// first use (on CUDA: retaining its primary context), and returns that engine. Errors:
/// [`Error::InvalidValue`] for an ordinal out of range (the current device stays), the
/// device's errors when it cannot be opened.
pub fn set_device(ordinal: usize) -> Result<&'static Engine> {
    let e = engine_at(ordinal)?;
    CURRENT.with(|c| c.set(ordinal as u32));
    Ok(e)
}

/// The calling OS thread's current device (0 until [`set_device`]). Never fails and
/// starts nothing.
pub fn current_device() -> u32 {
    CURRENT.with(|c| c.get())
}

/// Whether an engine other than device 0's was ever opened (only then do the calls that
/// take an address or a handle look beyond the current device).
#[inline]
pub fn several_open() -> bool {
    MULTI.load(Relaxed)
}

/// The engines opened so far, by ordinal.
pub fn open_engines() -> impl Iterator<Item = &'static Engine> {
    ENGINES.get().into_iter().flat_map(|es| es.slots.iter().filter_map(|s| s.get()))
}

/// The engine that owns address `addr` other than `not`, if another device is open.
fn other_owner(not: &Engine, addr: u64) -> Option<&'static Engine> {
    if !several_open() {
        return None;
    }
    open_engines().find(|o| !std::ptr::eq(*o, not) && o.owns(addr))
}

/// Runs `f` on the engine that owns `addr`: `e` (the current device's), or, when `f`
/// finds the address is not its ([`Error::InvalidValue`], nothing done) and other
/// devices are open, the one among them that owns it. Errors: `f`'s on the owner, or
/// `e`'s `InvalidValue` when no open device owns `addr`.
#[inline]
pub fn on_owner(e: &'static Engine, addr: u64, f: impl Fn(&'static Engine) -> Result<()>) -> Result<()> {
    match f(e) {
        Err(Error::InvalidValue(m)) => on_other_owner(e, addr, m, f),
        r => r,
    }
}

#[cold]
#[inline(never)]
fn on_other_owner(
    e: &'static Engine,
    addr: u64,
    m: String,
    f: impl Fn(&'static Engine) -> Result<()>,
) -> Result<()> {
    match other_owner(e, addr) {
        Some(o) => f(o),
        None => Err(Error::InvalidValue(m)),
    }
}

/// The engine owning `addr`: the current device's when it owns it (or no other device
/// is open), else the open device's that does; the current one when none does (whose
/// check then reports the bad address). Errors as [`engine`].
pub fn owner(addr: u64) -> Result<&'static Engine> {
    let e = engine()?;
    if !several_open() || e.owns(addr) {
        return Ok(e);
    }
    Ok(other_owner(e, addr).unwrap_or(e))
}

static PINNED: OnceLock<PinnedHost> = OnceLock::new();
static PINNED_INIT: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// The process-wide pinned host pool, created on first use over the memory of `e`'s
/// kind (CUDA when `e` runs on a GPU, else the host device). Its own value beside the
/// device engines, so that the device engine can change (one per GPU) without touching
/// it. Errors: the device's, when the driver cannot be opened; the configuration's (a
/// bad `CUMEM_PINNED_LIMIT` already failed the device engine's initialisation).
pub fn pinned_host(e: &Engine) -> Result<&'static PinnedHost> {
    if let Some(p) = PINNED.get() {
        return Ok(p);
    }
    let _guard = PINNED_INIT.lock();
    if let Some(p) = PINNED.get() {
        return Ok(p);
    }
    let p = PinnedHost::new(e.config(), !e.device().is_host())?;
    Ok(PINNED.get_or_init(|| p))
}

/// The pinned host pool if something created it (None while it was never used).
pub fn pinned_started() -> Option<&'static PinnedHost> {
    PINNED.get()
}

//! The allocation history (PyTorch's `torch.cuda.memory._record_memory_history`): while
//! recording is on, every allocation, free, device allocation, device free and out of
//! memory of the engine is written as an [`Event`] into a bounded ring buffer of the
//! shard it happened on; [`History::events`] merges the rings in time order.
//!
//! Off (the default) it costs the engine one relaxed load of [`History::on`] and a
//! predictable branch per call. On, each event reads a cycle counter twice (the call's
//! start and end; `rdtsc` on x86-64 with an invariant TSC, else [`Instant`]) and takes its
//! shard's ring lock (uncontended: a thread records on its home shard); ticks are turned
//! into nanoseconds only when the events are read.
//!
//! Origins: an event's `origin` is 0 or an id. Ids below [`CALLER_ORIGIN`] name native
//! stacks the engine captured itself (`CUMEM_DEBUG=2`), interned once per distinct stack
//! and rendered by [`History::origin_text`]; ids with that bit set were given by the
//! caller ([`set_next_origin`]: the Julia package passes its `-g2` stack ids this way) and
//! mean nothing to the engine.

use crate::sync::ShardMutex;
use crate::tracking::Symbolizer;
use backtrace::Backtrace;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;

/// What an event records (C: `cumem_event_kind`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A successful allocation of at least one byte.
    Alloc = 0,
    /// A successful free of a live allocation.
    Free = 1,
    /// Memory obtained from the device (a segment, or a mapping of the expandable pool).
    DeviceAlloc = 2,
    /// Memory returned to the device.
    DeviceFree = 3,
    /// An allocation that failed with out of memory (counted in `num_ooms`).
    Oom = 4,
}

impl EventKind {
    /// The kind with code `k` (`Event::kind`), None for an unknown code.
    pub fn from_u32(k: u32) -> Option<EventKind> {
        Some(match k {
            0 => EventKind::Alloc,
            1 => EventKind::Free,
            2 => EventKind::DeviceAlloc,
            3 => EventKind::DeviceFree,
            4 => EventKind::Oom,
            _ => return None,
        })
    }
}

/// One allocation-history entry (C: `cumem_event_t`, 80 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// When the call started, ns since the engine started.
    pub time_ns: u64,
    /// The call's duration, ns.
    pub duration_ns: u64,
    /// Block (alloc/free) or segment (device alloc/free) address; 0 for an OOM.
    pub addr: u64,
    /// Alloc/OOM: bytes asked for; free: the block's request; device events: 0.
    pub requested_bytes: u64,
    /// Block size (alloc/free) or segment size (device events), bytes.
    pub size_bytes: u64,
    /// Free: ns since the block's allocation (0 when it was allocated before recording
    /// started); else 0.
    pub lifetime_ns: u64,
    /// 0: none; else an id for `cumem_origin_text` (tracking on), or the caller's id
    /// (bit 63 set, see `cumem_set_next_origin`).
    pub origin: u64,
    /// 0: the default stream.
    pub stream: u64,
    /// `CUMEM_EVENT_*` (`EventKind` as u32).
    pub kind: u32,
    /// The engine's thread index (tracking::thread_index).
    pub thread: u32,
    /// The ordinal of the engine's device.
    pub device: u32,
    /// 1: served from the cache; 0: not (or not an alloc).
    pub hit: u32,
}

/// Origin ids with this bit set were given by the caller ([`set_next_origin`]).
pub const CALLER_ORIGIN: u64 = 1 << 63;

/// The largest `max_entries` accepted (each event is 80 bytes).
pub const MAX_ENTRIES: u64 = 1 << 24;

/// Rings: one per engine shard (at most 64 shards).
const RINGS: usize = 64;

thread_local! {
    static NEXT_ORIGIN: Cell<u64> = const { Cell::new(0) };
}

/// Sets the origin id the calling thread's next recorded allocation carries (and its
/// free, later); [`CALLER_ORIGIN`] is or-ed in. 0 clears it.
pub fn set_next_origin(id: u64) {
    NEXT_ORIGIN.with(|c| c.set(if id == 0 { 0 } else { id | CALLER_ORIGIN }));
}

/// Takes the origin id set by [`set_next_origin`] on this thread (0 if none).
pub fn take_next_origin() -> u64 {
    NEXT_ORIGIN.with(|c| c.replace(0))
}

/// Puts back an origin id taken by [`take_next_origin`] (with [`CALLER_ORIGIN`] set) for
/// the next allocation, when the one that took it failed and the caller will retry.
pub fn restore_next_origin(id: u64) {
    if id & CALLER_ORIGIN != 0 {
        NEXT_ORIGIN.with(|c| c.set(id));
    }
}

/// A cheap monotonic tick counter and its conversion to ns.
struct Clock {
    start: Instant,
    start_ticks: u64,
    tsc: bool,
}

impl Clock {
    fn new() -> Clock {
        let tsc = invariant_tsc();
        let start = Instant::now();
        let mut c = Clock { start, start_ticks: 0, tsc };
        c.start_ticks = c.ticks();
        c
    }

    #[inline]
    fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc {
            // SAFETY: rdtsc has no preconditions; `tsc` says the counter is invariant.
            return unsafe { core::arch::x86_64::_rdtsc() };
        }
        self.start.elapsed().as_nanos() as u64
    }

    /// Nanoseconds per tick, measured over the engine's life so far (at least 2 ms).
    fn ns_per_tick(&self) -> f64 {
        if !self.tsc {
            return 1.0;
        }
        while self.start.elapsed().as_micros() < 2000 {
            std::hint::spin_loop();
        }
        let (t, ns) = (self.ticks(), self.start.elapsed().as_nanos() as f64);
        ns / (t.saturating_sub(self.start_ticks)).max(1) as f64
    }
}

/// True on x86-64 CPUs whose time-stamp counter runs at a constant rate in every state
/// (CPUID 0x8000_0007, EDX bit 8).
fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        if max >= 0x8000_0007 {
            return core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0;
        }
    }
    false
}

/// One shard's ring of events (times in ticks).
#[derive(Default)]
struct Ring {
    buf: Vec<Event>,
    /// Events written since recording started; the next goes to `written % cap`.
    written: u64,
    cap: u64,
}

impl Ring {
    #[inline]
    fn push(&mut self, e: Event) {
        if (self.buf.len() as u64) < self.cap {
            self.buf.push(e);
        } else {
            self.buf[(self.written % self.cap) as usize] = e;
        }
        self.written += 1;
    }
}

#[repr(align(128))]
#[derive(Default)]
struct Padded(ShardMutex<Ring>);

/// The engine's event recorder: a flag, per-shard rings and the table of interned
/// native origins.
pub struct History {
    on: AtomicBool,
    clock: Clock,
    rings: Box<[Padded]>,
    /// The cap recording was last started with, and the clock's ns per tick measured
    /// then (fixed for the recording, so that every read converts its events alike).
    max_entries: parking_lot::Mutex<(u64, f64)>,
    origins: parking_lot::Mutex<Origins>,
}

#[derive(Default)]
struct Origins {
    /// Instruction pointers of each interned stack → its id (1-based index).
    ids: FxHashMap<Vec<usize>, u64>,
    stacks: Vec<Backtrace>,
    sym: Symbolizer,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// A recorder that is off, its clock starting now.
    pub fn new() -> History {
        History {
            on: AtomicBool::new(false),
            clock: Clock::new(),
            rings: (0..RINGS).map(|_| Padded::default()).collect(),
            max_entries: parking_lot::Mutex::new((0, 1.0)),
            origins: parking_lot::Mutex::new(Origins::default()),
        }
    }

    /// Whether recording is on (one relaxed load: the engine's hot paths test it).
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// The clock's current tick (see [`Event`]: times are converted when read).
    #[inline]
    pub fn now(&self) -> u64 {
        self.clock.ticks()
    }

    /// Starts recording with rings of `max_entries` events each (the events recorded
    /// before are dropped), or stops it (`enabled` false: the events stay readable).
    /// `max_entries` must be in 1..=[`MAX_ENTRIES`] when enabling; the caller checks.
    pub fn set_enabled(&self, enabled: bool, max_entries: u64) {
        if !enabled {
            self.on.store(false, Relaxed);
            return;
        }
        let cap = max_entries.clamp(1, MAX_ENTRIES);
        self.on.store(false, Relaxed);
        // Measured over the engine's life so far: usually long before recording starts,
        // so the rate is accurate (a fresh engine waits until 2 ms have passed).
        *self.max_entries.lock() = (cap, self.clock.ns_per_tick());
        for r in self.rings.iter() {
            let mut r = r.0.lock();
            *r = Ring { cap, ..Ring::default() };
        }
        self.on.store(true, Relaxed);
    }

    /// Records `e` (times in ticks) in ring `shard`. A free's lifetime and origin are
    /// filled in when the events are read, from its allocation's event.
    #[inline]
    pub fn record(&self, shard: usize, e: Event) {
        self.rings[shard % RINGS].0.lock().push(e);
    }

    /// Every retained event in time order, times in ns since the engine started: the
    /// latest `max_entries` events over all shards (each ring keeps its shard's latest
    /// `max_entries`, so none of those can have been overwritten). A free gets the
    /// lifetime and origin of the latest earlier allocation event at its address among
    /// all retained events (of every shard: a block may be freed on another thread);
    /// without one (allocated before recording started, or its event overwritten) both
    /// stay 0. Joining here keeps the recording path free of any lookup.
    pub fn events(&self) -> Vec<Event> {
        let mut all = Vec::new();
        for r in self.rings.iter() {
            all.extend_from_slice(&r.0.lock().buf);
        }
        all.sort_by_key(|e| e.time_ns);
        let mut born: FxHashMap<u64, (u64, u64)> = FxHashMap::default();
        for e in &mut all {
            match EventKind::from_u32(e.kind) {
                Some(EventKind::Alloc) => {
                    born.insert(e.addr, (e.time_ns, e.origin));
                }
                Some(EventKind::Free) => {
                    if let Some((t, origin)) = born.remove(&e.addr) {
                        e.lifetime_ns = e.time_ns.saturating_sub(t);
                        e.origin = origin;
                    }
                }
                _ => {}
            }
        }
        let (cap, k) = *self.max_entries.lock();
        let cap = cap as usize;
        if all.len() > cap {
            all.drain(..all.len() - cap);
        }
        let t0 = self.clock.start_ticks;
        let ns = |t: u64| (t as f64 * k) as u64;
        for e in &mut all {
            e.time_ns = ns(e.time_ns.saturating_sub(t0));
            e.duration_ns = ns(e.duration_ns);
            e.lifetime_ns = ns(e.lifetime_ns);
        }
        all
    }

    /// Interns the stack `bt`, returning its origin id (≥ 1, below [`CALLER_ORIGIN`]).
    pub fn intern(&self, bt: Backtrace) -> u64 {
        let ips: Vec<usize> = bt.frames().iter().map(|f| f.ip() as usize).collect();
        let mut o = self.origins.lock();
        if let Some(&id) = o.ids.get(&ips) {
            return id;
        }
        o.stacks.push(bt);
        let id = o.stacks.len() as u64;
        o.ids.insert(ips, id);
        id
    }

    /// Interns the stack of the calling thread (see [`History::intern`]).
    pub fn capture_origin(&self) -> u64 {
        self.intern(Backtrace::new_unresolved())
    }

    /// The frames of origin `id`, innermost first, one `name at file:line` per line
    /// (the engine's own frames removed); None for 0, an unknown id or a caller's id.
    pub fn origin_text(&self, id: u64) -> Option<String> {
        if id == 0 || id & CALLER_ORIGIN != 0 {
            return None;
        }
        let mut o = self.origins.lock();
        let o = &mut *o;
        let bt = o.stacks.get(id as usize - 1)?;
        Some(o.sym.frames(bt).join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, kind: EventKind, addr: u64) -> Event {
        Event { time_ns: t, kind: kind as u32, addr, ..Event::default() }
    }

    #[test]
    fn rings_keep_the_latest_and_merge_in_time_order() {
        let h = History::new();
        h.set_enabled(true, 3);
        let t = h.now();
        for i in 0..5u64 {
            h.record(0, ev(t + 10 * i, EventKind::Alloc, 512 * (i + 1)));
            h.record(1, ev(t + 10 * i + 5, EventKind::Alloc, 512 * (i + 100)));
        }
        let ev = h.events();
        assert_eq!(ev.len(), 3, "the latest max_entries over all rings");
        let addrs: Vec<u64> = ev.iter().map(|e| e.addr / 512).collect();
        assert_eq!(addrs, vec![103, 5, 104]);
        assert!(ev.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    }

    #[test]
    fn free_takes_lifetime_and_origin_from_its_allocation_on_any_ring() {
        let h = History::new();
        h.set_enabled(true, 100);
        let t = h.now();
        h.record(2, Event { time_ns: t, addr: 4096, origin: 7, ..Event::default() });
        h.record(5, Event { time_ns: t + 1000, addr: 4096, kind: 1, ..Event::default() });
        h.record(5, Event { time_ns: t + 2000, addr: 8192, kind: 1, ..Event::default() });
        let ev = h.events();
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[1].origin, 7);
        assert!(ev[1].lifetime_ns > 0);
        assert_eq!((ev[2].origin, ev[2].lifetime_ns), (0, 0), "allocated before recording");
    }

    #[test]
    fn off_records_nothing_and_restart_clears() {
        let h = History::new();
        assert!(!h.on());
        h.set_enabled(true, 10);
        h.record(0, ev(h.now(), EventKind::Oom, 0));
        h.set_enabled(false, 0);
        assert_eq!(h.events().len(), 1, "stopping keeps the events");
        h.set_enabled(true, 10);
        assert!(h.events().is_empty(), "starting again drops them");
    }

    #[test]
    fn origins_are_interned_per_stack() {
        let h = History::new();
        let ids: Vec<u64> = (0..3).map(|_| h.capture_origin()).collect();
        assert_eq!(ids, vec![1, 1, 1], "one call site, one id");
        assert!(h.origin_text(1).is_some());
        assert_eq!(h.origin_text(0), None);
        assert_eq!(h.origin_text(99), None);
        assert_eq!(h.origin_text(CALLER_ORIGIN | 1), None);
        set_next_origin(5);
        assert_eq!(take_next_origin(), CALLER_ORIGIN | 5);
        assert_eq!(take_next_origin(), 0);
        restore_next_origin(CALLER_ORIGIN | 5);
        restore_next_origin(3); // an engine id is not the caller's: not kept
        assert_eq!(take_next_origin(), CALLER_ORIGIN | 5);
        restore_next_origin(3);
        assert_eq!(take_next_origin(), 0);
    }
}

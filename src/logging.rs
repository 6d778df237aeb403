//! The engine's log messages: `log` records filtered by `CUMEM_LOG` (an `env_logger`
//! filter, default `warn`).
//!
//! By default they are written to stderr by `env_logger`. A host that has its own logging
//! (the Julia package, whose users silence messages with `Logging`) turns on *capture*
//! with `cumem_log_capture(1)`, before `cumem_init` to catch the messages of
//! initialisation: records are then kept in a bounded queue and taken one at a time with
//! `cumem_log_next`. The queue holds at most 256 messages; older ones are
//! dropped (and counted) when nobody drains it.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The most messages kept while capturing; when full, the oldest is dropped.
const QUEUE_CAPACITY: usize = 256;

static CAPTURE: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static QUEUE: Mutex<VecDeque<(log::Level, String)>> = Mutex::new(VecDeque::new());

/// Routes records to the queue while capturing, else to `env_logger`.
struct EngineLogger {
    inner: env_logger::Logger,
}

impl log::Log for EngineLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &log::Record) {
        if !self.inner.matches(record) {
            return;
        }
        if CAPTURE.load(Relaxed) {
            let mut q = QUEUE.lock();
            if q.len() >= QUEUE_CAPACITY {
                q.pop_front();
                DROPPED.fetch_add(1, Relaxed);
            }
            q.push_back((record.level(), record.args().to_string()));
        } else {
            self.inner.log(record);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Installs the engine's logger with `filter` (env_logger syntax). Does nothing when the
/// process already has a logger (e.g. a Rust program that set up its own).
pub fn init(filter: &str) {
    let inner = env_logger::Builder::new().parse_filters(filter).build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(EngineLogger { inner })).is_ok() {
        log::set_max_level(max);
    }
}

/// Turns capture on or off; returns whether it was on.
pub fn set_capture(on: bool) -> bool {
    CAPTURE.swap(on, Relaxed)
}

/// Calls `f` with the oldest captured message and its level, and removes the message if
/// `f` returns true. Returns `None` when the queue is empty.
pub fn with_next<R>(f: impl FnOnce(log::Level, &str) -> (R, bool)) -> Option<R> {
    let mut q = QUEUE.lock();
    let (level, msg) = q.front()?;
    let (r, take) = f(*level, msg);
    if take {
        q.pop_front();
    }
    Some(r)
}

/// Messages dropped because the queue was full.
pub fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

//! Streams and events of the host device, emulated faithfully enough that the ordering
//! logic above them (stream-ordered reuse in the engine, the prefetching iterator) is
//! tested in CI without a GPU.
//!
//! Each stream is a worker thread with a FIFO queue of operations (copies, sleeps,
//! waits on events): operations of one stream run one after another, operations of
//! different streams run concurrently, as on a GPU. An event is a (stream, sequence
//! number) pair: it has completed once that stream's worker has finished that many
//! operations. Handle 0 is CUDA's legacy default stream: on the host device its work is
//! done synchronously by the calling thread, after waiting for the work queued on every
//! *blocking* stream (CUDA's implicit synchronisation of the legacy stream; streams
//! created non-blocking, as PyTorch's and CuMem's own, are not waited for).

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One queued operation.
pub(crate) type Op = Box<dyn FnOnce() + Send>;

struct Queue {
    ops: VecDeque<Op>,
    /// Operations ever queued / finished: an event recorded after the `n`th completes
    /// when `completed >= n`.
    submitted: u64,
    completed: u64,
    closing: bool,
}

/// One host stream: its queue and the condition its worker and waiters use.
pub(crate) struct Stream {
    blocking: bool,
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Stream {
    /// Waits until the stream has finished its `seq`th operation.
    fn wait_for(&self, seq: u64) {
        let mut q = self.q.lock();
        while q.completed < seq {
            self.cv.wait(&mut q);
        }
    }

    /// Waits until everything queued so far is done.
    fn drain(&self) {
        let target = self.q.lock().submitted;
        self.wait_for(target);
    }

    fn done(&self, seq: u64) -> bool {
        self.q.lock().completed >= seq
    }

    /// Queues `op`; returns its sequence number.
    fn push(&self, op: Op) -> u64 {
        let mut q = self.q.lock();
        q.ops.push_back(op);
        q.submitted += 1;
        self.cv.notify_all();
        q.submitted
    }

    fn work(self: Arc<Stream>) {
        loop {
            let op = {
                let mut q = self.q.lock();
                loop {
                    if let Some(op) = q.ops.pop_front() {
                        break op;
                    }
                    if q.closing {
                        return;
                    }
                    self.cv.wait(&mut q);
                }
            };
            // A panicking operation must not stop the stream: its waiters would hang.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(op)).is_err() {
                log::error!("an operation of a host stream panicked");
            }
            let mut q = self.q.lock();
            q.completed += 1;
            self.cv.notify_all();
        }
    }
}

/// Where an event was last recorded.
#[derive(Clone)]
enum Mark {
    /// Never recorded (CUDA: complete).
    Never,
    /// Recorded on the legacy stream at that instant (complete at once on the host).
    At(Instant),
    /// Recorded on a stream as its `seq`th operation; `time` is set when it runs.
    Queued { stream: Arc<Stream>, seq: u64, time: Arc<Mutex<Option<Instant>>> },
}

struct Event {
    timing: bool,
    mark: Mutex<Mark>,
}

impl Event {
    fn done(&self) -> bool {
        match &*self.mark.lock() {
            Mark::Never | Mark::At(_) => true,
            Mark::Queued { stream, seq, .. } => stream.done(*seq),
        }
    }
}

/// The streams and events of one host device.
#[derive(Default)]
pub(crate) struct HostStreams {
    streams: Mutex<FxHashMap<u64, Arc<Stream>>>,
    events: Mutex<FxHashMap<u64, Arc<Event>>>,
    /// Streams alive, so the legacy stream's barrier costs one load when there are none.
    live: AtomicUsize,
}

fn unknown(what: &str, h: u64) -> Error {
    Error::InvalidValue(format!("{h} is not a {what} of this device (never created, or destroyed)"))
}

impl HostStreams {
    fn id(&self) -> u64 {
        super::new_handle()
    }

    fn stream(&self, s: u64) -> Result<Arc<Stream>> {
        self.streams.lock().get(&s).cloned().ok_or_else(|| unknown("stream", s))
    }

    fn event(&self, e: u64) -> Result<Arc<Event>> {
        self.events.lock().get(&e).cloned().ok_or_else(|| unknown("event", e))
    }

    /// Before work of the legacy stream: waits for the work queued on blocking streams
    /// (`all`: on every stream, as `cuCtxSynchronize` and `cuMemFree` do).
    pub(crate) fn barrier(&self, all: bool) {
        if self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let streams: Vec<Arc<Stream>> =
            self.streams.lock().values().filter(|s| all || s.blocking).cloned().collect();
        for s in streams {
            s.drain();
        }
    }

    pub(crate) fn create(&self, blocking: bool) -> Result<u64> {
        let s = Arc::new(Stream {
            blocking,
            q: Mutex::new(Queue { ops: VecDeque::new(), submitted: 0, completed: 0, closing: false }),
            cv: Condvar::new(),
        });
        let id = self.id();
        let w = s.clone();
        std::thread::Builder::new()
            .name(format!("cumem-stream-{id}"))
            .spawn(move || w.work())
            .map_err(|e| Error::Device(format!("cannot start the thread of a host stream: {e}")))?;
        self.streams.lock().insert(id, s);
        self.live.fetch_add(1, Ordering::Release);
        Ok(id)
    }

    /// Destroys stream `s`: as `cuStreamDestroy`, work already queued still runs.
    pub(crate) fn destroy(&self, s: u64) -> Result<()> {
        let st = self.streams.lock().remove(&s).ok_or_else(|| unknown("stream", s))?;
        self.live.fetch_sub(1, Ordering::Release);
        st.q.lock().closing = true;
        st.cv.notify_all();
        Ok(())
    }

    /// Queues `op` on stream `s`; on the legacy stream (0) runs it now, after the barrier.
    pub(crate) fn enqueue(&self, s: u64, op: Op) -> Result<()> {
        if s == 0 {
            self.barrier(false);
            op();
            return Ok(());
        }
        self.stream(s)?.push(op);
        Ok(())
    }

    pub(crate) fn check(&self, s: u64) -> Result<()> {
        if s != 0 {
            self.stream(s)?;
        }
        Ok(())
    }

    pub(crate) fn synchronize(&self, s: u64) -> Result<()> {
        if s == 0 {
            self.barrier(false);
        } else {
            self.stream(s)?.drain();
        }
        Ok(())
    }

    pub(crate) fn query(&self, s: u64) -> Result<bool> {
        if s == 0 {
            return Ok(true);
        }
        let st = self.stream(s)?;
        let q = st.q.lock();
        Ok(q.completed >= q.submitted)
    }

    pub(crate) fn event_create(&self, timing: bool) -> Result<u64> {
        let id = self.id();
        self.events.lock().insert(id, Arc::new(Event { timing, mark: Mutex::new(Mark::Never) }));
        Ok(id)
    }

    pub(crate) fn event_destroy(&self, e: u64) -> Result<()> {
        self.events.lock().remove(&e).map(drop).ok_or_else(|| unknown("event", e))
    }

    pub(crate) fn record(&self, e: u64, s: u64) -> Result<()> {
        let ev = self.event(e)?;
        if s == 0 {
            self.barrier(false);
            *ev.mark.lock() = Mark::At(Instant::now());
            return Ok(());
        }
        let st = self.stream(s)?;
        let time = Arc::new(Mutex::new(None));
        let t = time.clone();
        // The mark is set under the event's lock before the operation can run, so a
        // query never sees a sequence number that is not yet this record's.
        let mut mark = ev.mark.lock();
        let seq = st.push(Box::new(move || *t.lock() = Some(Instant::now())));
        *mark = Mark::Queued { stream: st, seq, time };
        Ok(())
    }

    pub(crate) fn event_query(&self, e: u64) -> Result<bool> {
        Ok(self.event(e)?.done())
    }

    pub(crate) fn event_synchronize(&self, e: u64) -> Result<()> {
        let mark = self.event(e)?.mark.lock().clone();
        if let Mark::Queued { stream, seq, .. } = mark {
            stream.wait_for(seq);
        }
        Ok(())
    }

    /// Makes stream `s`'s later work wait for event `e` as recorded now.
    pub(crate) fn wait_event(&self, s: u64, e: u64) -> Result<()> {
        let mark = self.event(e)?.mark.lock().clone();
        let Mark::Queued { stream, seq, .. } = mark else {
            return self.check(s); // never recorded or already complete: nothing to wait for
        };
        self.enqueue(s, Box::new(move || stream.wait_for(seq)))
    }

    pub(crate) fn elapsed_ms(&self, start: u64, end: u64) -> Result<f32> {
        let time = |e: u64| -> Result<Instant> {
            let ev = self.event(e)?;
            if !ev.timing {
                return Err(Error::InvalidValue(format!("event {e} was created without timing")));
            }
            match &*ev.mark.lock() {
                Mark::Never => Err(Error::InvalidValue(format!("event {e} was never recorded"))),
                Mark::At(t) => Ok(*t),
                Mark::Queued { time, .. } => (*time.lock())
                    .ok_or_else(|| Error::InvalidValue(format!("event {e} has not completed yet"))),
            }
        };
        let (a, b) = (time(start)?, time(end)?);
        let ms = if b >= a { (b - a).as_secs_f64() * 1e3 } else { -((a - b).as_secs_f64() * 1e3) };
        Ok(ms as f32)
    }

    /// Queues a sleep of `ns` nanoseconds (the test's slow kernel).
    pub(crate) fn sleep(&self, s: u64, ns: u64) -> Result<()> {
        self.enqueue(s, Box::new(move || std::thread::sleep(Duration::from_nanos(ns))))
    }
}

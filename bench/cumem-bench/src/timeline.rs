//! `replay --timeline FILE`: the memory timeline of one cold pass of a trace through a
//! pool, drawn by the engine's renderer (`cumem::timeline`, the one the C ABI and Julia
//! use).
//!
//! The events are built here from the replay itself: each trace event is run through a
//! fresh engine, and the engine's statistics after it give the block size
//! (`allocated_bytes` grew by it), a cache hit (`num_cache_hits` grew) and device calls
//! (`reserved_bytes` changed: one device event of the difference, before an allocation
//! or after a free). So the picture shows the pool's own reserved memory, without
//! depending on the engine's event history being switched on. Times are those of the
//! replay (ns since its start; each call's duration measured around the call alone).

use crate::Common;
use crate::trace::{Op, Trace};
use cumem::history::{Event, EventKind};
use cumem::timeline::{self, Format, Options};
use cumem::{Engine, PoolKind};
use std::time::Instant;

/// The events of one cold pass of `ops` through `engine` (which should be fresh).
pub fn replay_events(engine: &Engine, ops: &[Op], slots: usize) -> Vec<Event> {
    let mut ptrs = vec![0u64; slots];
    let mut req = vec![0u64; slots];
    let mut size = vec![0u64; slots];
    let mut born = vec![0u64; slots];
    let mut out = Vec::with_capacity(ops.len() + ops.len() / 8);
    let t0 = Instant::now();
    let mut prev = engine.stats();
    for op in ops {
        let s = op.slot as usize;
        let start = t0.elapsed().as_nanos() as u64;
        let (r, dur) = if op.is_free() {
            let p = std::mem::take(&mut ptrs[s]);
            if p == 0 {
                continue; // its allocation failed
            }
            let c = Instant::now();
            let r = engine.free(p).map(|_| p);
            (r, c.elapsed().as_nanos() as u64)
        } else {
            let c = Instant::now();
            let r = engine.alloc(op.bytes);
            (r, c.elapsed().as_nanos() as u64)
        };
        let st = engine.stats();
        let dres = st.reserved_bytes as i128 - prev.reserved_bytes as i128;
        let device = |kind: EventKind, bytes: u64| Event {
            time_ns: start,
            duration_ns: dur,
            size_bytes: bytes,
            kind: kind as u32,
            ..Event::default()
        };
        if op.is_free() {
            if let Ok(p) = r {
                out.push(Event {
                    time_ns: start,
                    duration_ns: dur,
                    addr: p,
                    requested_bytes: req[s],
                    size_bytes: size[s],
                    lifetime_ns: start - born[s],
                    kind: EventKind::Free as u32,
                    ..Event::default()
                });
            }
            if dres != 0 {
                let k = if dres > 0 { EventKind::DeviceAlloc } else { EventKind::DeviceFree };
                out.push(device(k, dres.unsigned_abs() as u64));
            }
        } else {
            if dres != 0 {
                let k = if dres > 0 { EventKind::DeviceAlloc } else { EventKind::DeviceFree };
                out.push(device(k, dres.unsigned_abs() as u64));
            }
            match r {
                Ok(p) => {
                    ptrs[s] = p;
                    req[s] = op.bytes;
                    size[s] = st.allocated_bytes - prev.allocated_bytes;
                    born[s] = start;
                    out.push(Event {
                        time_ns: start,
                        duration_ns: dur,
                        addr: p,
                        requested_bytes: op.bytes,
                        size_bytes: size[s],
                        hit: (st.num_cache_hits > prev.num_cache_hits) as u32,
                        kind: EventKind::Alloc as u32,
                        ..Event::default()
                    });
                }
                Err(_) => out.push(Event {
                    time_ns: start,
                    duration_ns: dur,
                    requested_bytes: op.bytes,
                    kind: EventKind::Oom as u32,
                    ..Event::default()
                }),
            }
        }
        prev = st;
    }
    for p in ptrs {
        if p != 0 {
            let _ = engine.free(p);
        }
    }
    out
}

/// The file name for (trace, pool): `{trace}` and `{pool}` in `template` replaced.
pub fn file_name(template: &str, trace: &str, pool: PoolKind) -> String {
    template.replace("{trace}", trace).replace("{pool}", pool.name())
}

/// Draws the timeline of one cold pass of `trace` through `pool` into `path` (format
/// from `format`, else from the file's extension). Returns a line for the log.
pub fn draw(common: &Common, trace: &Trace, pool: PoolKind, path: &str, format: Option<Format>) -> Result<String, String> {
    let format = format
        .or_else(|| Format::from_path(path))
        .ok_or_else(|| format!("--timeline {path}: say --timeline-format svg|html|json|chrome, or end the name in .svg, .html, .json or .trace.json"))?;
    let engine = common.engine(pool)?;
    let events = replay_events(&engine, &trace.ops, trace.slots);
    let opts = Options {
        title: format!(
            "{}: {} pool, one cold pass (cumem-bench replay on the {} device)",
            trace.name,
            pool.name(),
            common.device.name()
        ),
        ..Options::default()
    };
    let t = timeline::Timeline::new(&events, None).map_err(|e| e.to_string())?;
    std::fs::write(path, t.render(format, &opts)).map_err(|e| format!("cannot write {path}: {e}"))?;
    Ok(format!(
        "timeline of {} ({} pool, {} events): {path} (peak allocated {}, peak reserved {})",
        trace.name,
        pool.name(),
        events.len(),
        cumem::format::format_bytes(t.peak_allocated()),
        cumem::format::format_bytes(t.peak_reserved())
    ))
}

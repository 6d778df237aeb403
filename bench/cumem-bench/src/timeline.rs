//! `replay --timeline FILE`: the memory timeline of one cold pass of a trace through a
//! pool, drawn by the engine's renderer (`cumem::timeline`, the one the C ABI and Julia
//! use).
//!
//! The events are the engine's own allocation history (`Engine::record_memory_history`,
//! what Julia's `record_memory_history` turns on): a fresh engine records while the
//! trace's events run through it once, then stops before the blocks the trace leaves live
//! are freed. So the picture shows the pool's own block sizes, cache hits and device
//! calls (the reserved line), with the replay's times.

use crate::Common;
use crate::trace::{Op, Trace};
use cumem::history::Event;
use cumem::timeline::{self, Format, Options};
use cumem::{Engine, PoolKind};

/// The recorded events of one pass of `ops` through `engine` (which should be fresh).
pub fn replay_events(engine: &Engine, ops: &[Op], slots: usize) -> Result<Vec<Event>, String> {
    // Every event of the pass fits in one shard's ring (device calls included: at most
    // one per allocation and one per free, and a few for releases).
    let max = (3 * ops.len() as u64 + 1024).min(cumem::history::MAX_ENTRIES);
    engine.record_memory_history(true, max).map_err(|e| e.to_string())?;
    let mut ptrs = vec![0u64; slots];
    for op in ops {
        let slot = &mut ptrs[op.slot as usize];
        if op.is_free() {
            let p = std::mem::take(slot);
            if p != 0 {
                engine.free(p).map_err(|e| format!("free refused in the timeline replay: {e}"))?;
            }
        } else {
            *slot = engine.alloc(op.bytes).unwrap_or(0);
        }
    }
    engine.record_memory_history(false, 0).map_err(|e| e.to_string())?;
    let events = engine.memory_events();
    for p in ptrs {
        if p != 0 {
            let _ = engine.free(p);
        }
    }
    Ok(events)
}

/// The file name for (trace, pool): `{trace}` and `{pool}` in `template` replaced.
pub fn file_name(template: &str, trace: &str, pool: PoolKind) -> String {
    template.replace("{trace}", trace).replace("{pool}", pool.name())
}

/// Draws the timeline of one cold pass of `trace` through `pool` into `path` (format
/// from `format`, else from the file's extension), with at most `bands` blocks drawn on
/// their own (`None`: the renderer's default). Returns a line for the log.
pub fn draw(
    common: &Common,
    trace: &Trace,
    pool: PoolKind,
    path: &str,
    format: Option<Format>,
    bands: Option<usize>,
) -> Result<String, String> {
    let format = format
        .or_else(|| Format::from_path(path))
        .ok_or_else(|| format!("--timeline {path}: say --timeline-format svg|html|json|chrome, or end the name in .svg, .html, .json or .trace.json"))?;
    let engine = common.engine(pool)?;
    let events = replay_events(&engine, &trace.ops, trace.slots)?;
    let opts = Options {
        title: format!(
            "{}: {} pool, one cold pass (cumem-bench replay on the {} device)",
            trace.name,
            pool.name(),
            common.device.name()
        ),
        max_bands: bands.unwrap_or(Options::default().max_bands),
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

//! `replay`: every trace through every pool. One engine per (trace, pool), kept across
//! passes: pass 1 starts from an empty pool (cold), later passes find the cache the
//! previous ones left (warm). Each pass is timed as a whole with one `Instant` around the
//! event loop; blocks alive at the end of a pass are freed after its timing.

use crate::report::{self, Table};
use crate::trace::{Op, Trace, default_traces};
use crate::{Common, median};
use clap::Args;
use cumem::{Engine, PoolKind};
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

/// Events replayed per trace with `--quick` (the rest of the trace is dropped; blocks
/// alive after them are freed after the pass, as at the end of any pass).
pub const QUICK_EVENTS: usize = 20_000;
/// Passes with `--quick`: one cold, one warm.
pub const QUICK_PASSES: usize = 2;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Trace files (default: every data/*.trace).
    pub traces: Vec<PathBuf>,
    /// Passes per (trace, pool), at least 2: the first is cold, the others warm.
    #[arg(long, default_value_t = 5)]
    pub passes: usize,
    /// Also draw the memory timeline of one cold pass (live bytes stacked by allocation,
    /// allocated and reserved lines) into FILE; with several traces or pools, FILE must
    /// contain `{trace}` and/or `{pool}` (e.g. `{trace}-{pool}.svg`). The format comes
    /// from the extension (.svg, .html, .json, .trace.json for Chrome) or
    /// `--timeline-format`. `--quick` truncates the trace here too.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<String>,
    /// The timeline's format: svg, html, json or chrome (default: from FILE's extension).
    #[arg(long, value_name = "FORMAT", requires = "timeline")]
    pub timeline_format: Option<String>,
    /// The timeline's largest blocks drawn as bands of their own (the rest summed into
    /// one); fewer bands make a smaller file (the renderer's default: 10 000).
    #[arg(long, value_name = "N", requires = "timeline")]
    pub timeline_bands: Option<usize>,
    /// `--quick`: 2 passes and at most the first 20 000 events of each trace.
    #[command(flatten)]
    pub common: Common,
}

/// One replay result (a JSON line with `--json`).
#[derive(Serialize, Debug, Clone)]
pub struct ReplayRow {
    pub bench: &'static str,
    pub trace: String,
    pub pool: &'static str,
    pub device: &'static str,
    /// Events replayed per pass (allocations + frees).
    pub events: usize,
    pub allocs: usize,
    /// Blocks the trace leaves alive (freed after each pass's timing).
    pub live_at_end: usize,
    pub passes: usize,
    /// Median over the warm passes (2..=passes).
    pub ns_per_event_warm: f64,
    pub ns_per_event_cold: f64,
    /// Highest live requested bytes, computed from the trace.
    pub peak_live: u64,
    /// Peak reserved bytes of the cold pass (the engine starts empty).
    pub peak_reserved: u64,
    /// `peak_reserved / peak_live`.
    pub reserved_over_live: f64,
    /// Peak reserved bytes over the warm passes, the cache from the cold pass included
    /// (what anchor_bench.py's warm figures measure).
    pub peak_reserved_warm: u64,
    pub reserved_over_live_warm: f64,
    /// Cache hit rate over the warm passes.
    pub hit_rate: f64,
    pub hit_rate_cold: f64,
    /// Device allocations in the cold pass.
    pub device_allocs_cold: u64,
    /// Device allocations in all warm passes together.
    pub device_allocs_warm: u64,
    /// Device frees in the cold pass (the expandable pool: granules unmapped).
    pub device_frees_cold: u64,
    /// Device frees in all warm passes together.
    pub device_frees_warm: u64,
    /// Calls into the device's memory functions (map, unmap, move, allocate, free,
    /// reserve, release: one per call however many granules it covers) in the cold pass.
    pub device_calls_cold: u64,
    /// The same per warm pass (their mean).
    pub device_calls_per_warm_pass: f64,
    /// The same in the last warm pass alone: 0 when the pool's steady state, once the
    /// pattern repeats, calls the device no more.
    pub device_calls_last_pass: u64,
    /// Failed allocations (out of memory), all passes together.
    pub failed: u64,
    /// Bytes the pool holds once the last pass's blocks are freed.
    pub reserved_at_end: u64,
}

/// What one pass did.
pub struct PassOut {
    /// Time of the event loop, ns.
    pub ns: f64,
    /// Allocations that failed.
    pub failed: u64,
    /// Frees the engine refused (a bug if ever non-zero).
    pub free_errors: u64,
}

/// One pass: the timed event loop, then the freeing of what is still alive.
pub fn pass(engine: &Engine, ops: &[Op], ptrs: &mut [u64]) -> PassOut {
    pass_observed(engine, ops, ptrs, |_, _| {})
}

/// As [`pass`], calling `observe` after each event inside the timed loop (fragcheck's
/// snapshots at the peak; [`pass`]'s no-op compiles away).
#[inline]
pub fn pass_observed(
    engine: &Engine,
    ops: &[Op],
    ptrs: &mut [u64],
    mut observe: impl FnMut(&Engine, &Op),
) -> PassOut {
    let mut failed = 0u64;
    let mut free_errors = 0u64;
    let t0 = Instant::now();
    for op in ops {
        let slot = &mut ptrs[op.slot as usize];
        if op.is_free() {
            let p = std::mem::take(slot);
            if p != 0 && engine.free(black_box(p)).is_err() {
                free_errors += 1;
            }
        } else {
            match engine.alloc(black_box(op.bytes)) {
                Ok(p) => *slot = p,
                Err(_) => {
                    failed += 1;
                    *slot = 0;
                }
            }
        }
        observe(engine, op);
    }
    let ns = t0.elapsed().as_nanos() as f64;
    black_box(&ptrs);
    for p in ptrs.iter_mut() {
        if *p != 0 && engine.free(std::mem::take(p)).is_err() {
            free_errors += 1;
        }
    }
    PassOut { ns, failed, free_errors }
}

/// Replays `trace` `passes` times through a fresh engine with `pool`.
pub fn replay_one(
    common: &Common,
    trace: &Trace,
    pool: PoolKind,
    passes: usize,
    mut on_pass: impl FnMut(),
) -> Result<ReplayRow, String> {
    let engine = common.engine(pool)?;
    let mut ptrs = vec![0u64; trace.slots];
    let events = trace.ops.len();
    let mut warm = Vec::with_capacity(passes);
    let (mut failed, mut free_errors) = (0, 0);

    let cold = pass(&engine, &trace.ops, &mut ptrs);
    on_pass();
    let sc = engine.stats();
    let calls_cold = engine.device_calls();
    engine.reset_stats();
    let mut calls_last = 0;
    failed += cold.failed;
    free_errors += cold.free_errors;
    for _ in 1..passes {
        let before = engine.device_calls();
        let p = pass(&engine, &trace.ops, &mut ptrs);
        calls_last = engine.device_calls() - before;
        on_pass();
        warm.push(p.ns / events.max(1) as f64);
        failed += p.failed;
        free_errors += p.free_errors;
    }
    let sw = engine.stats();
    if free_errors > 0 {
        eprintln!(
            "cumem-bench: warning: {free_errors} frees of live blocks failed ({}, {} pool)",
            trace.name,
            pool.name()
        );
    }
    let ratio = |r: u64| {
        if trace.peak_live == 0 { f64::NAN } else { r as f64 / trace.peak_live as f64 }
    };
    Ok(ReplayRow {
        bench: "replay",
        trace: trace.name.clone(),
        pool: pool.name(),
        device: common.device.name(),
        events,
        allocs: trace.ops.iter().filter(|o| !o.is_free()).count(),
        live_at_end: trace.live_at_end,
        passes,
        ns_per_event_warm: median(&warm),
        ns_per_event_cold: cold.ns / events.max(1) as f64,
        peak_live: trace.peak_live,
        peak_reserved: sc.peak_reserved_bytes,
        reserved_over_live: ratio(sc.peak_reserved_bytes),
        peak_reserved_warm: sw.peak_reserved_bytes,
        reserved_over_live_warm: ratio(sw.peak_reserved_bytes),
        hit_rate: sw.cache_hit_rate,
        hit_rate_cold: sc.cache_hit_rate,
        device_allocs_cold: sc.num_device_allocations,
        device_allocs_warm: sw.num_device_allocations,
        device_frees_cold: sc.num_device_frees,
        device_frees_warm: sw.num_device_frees,
        device_calls_cold: calls_cold,
        device_calls_per_warm_pass: engine.device_calls() as f64 / (passes - 1) as f64,
        device_calls_last_pass: calls_last,
        failed,
        reserved_at_end: sw.reserved_bytes,
    })
}

pub fn run(a: &ReplayArgs) -> Result<(), String> {
    let pools = a.common.pools()?;
    let passes = if a.common.quick { QUICK_PASSES } else { a.passes };
    if passes < 2 {
        return Err("--passes must be at least 2 (one cold pass, then warm ones)".into());
    }
    let paths = if a.traces.is_empty() { default_traces()? } else { a.traces.clone() };
    let mut traces = Vec::new();
    for p in &paths {
        let t = Trace::load(p)?;
        traces.push(if a.common.quick { t.truncated(QUICK_EVENTS) } else { t });
    }
    let timeline_format = match &a.timeline_format {
        Some(f) => Some(cumem::timeline::Format::parse(f).map_err(|e| format!("--timeline-format: {e}"))?),
        None => None,
    };
    if let Some(t) = &a.timeline {
        if (traces.len() > 1 && !t.contains("{trace}")) || (pools.len() > 1 && !t.contains("{pool}")) {
            return Err(format!(
                "--timeline {t}: {} traces and {} pools would write one file; put {{trace}} and/or {{pool}} in the name",
                traces.len(),
                pools.len()
            ));
        }
    }
    let mut bar = a.common.progress((traces.len() * pools.len() * passes) as u64);
    let mut rows = Vec::new();
    for t in &traces {
        for &pool in &pools {
            bar.set_message(format!("{} / {}", t.name, pool.name()));
            let row = replay_one(&a.common, t, pool, passes, || bar.inc())?;
            if let Some(tl) = &a.timeline {
                let path = crate::timeline::file_name(tl, &t.name, pool);
                let line =
                    crate::timeline::draw(&a.common, t, pool, &path, timeline_format, a.timeline_bands)?;
                eprintln!("{line}");
            }
            if a.common.json {
                report::json_line(&row);
            }
            rows.push(row);
        }
    }
    bar.finish();
    if !a.common.json {
        print_table(&rows, a.common.device.name(), passes);
    }
    Ok(())
}

fn print_table(rows: &[ReplayRow], device: &str, passes: usize) {
    println!(
        "replay on {device}: {passes} passes per trace and pool (1 cold, {} warm; warm = median)",
        passes - 1
    );
    let mut t = Table::new(
        &[
            "trace",
            "pool",
            "events",
            "ns/ev warm",
            "ns/ev cold",
            "peak live",
            "peak reserved",
            "res/live",
            "res/live warm",
            "hit rate",
            "dev allocs cold",
            "dev allocs warm",
            "dev calls cold",
            "dev calls/warm pass",
            "dev calls last pass",
            "failed",
        ],
        2,
    );
    for r in rows {
        t.row(vec![
            r.trace.clone(),
            r.pool.into(),
            report::group(r.events as u64),
            report::ns(r.ns_per_event_warm),
            report::ns(r.ns_per_event_cold),
            report::bytes(r.peak_live),
            report::bytes(r.peak_reserved),
            format!("{:.3}", r.reserved_over_live),
            format!("{:.3}", r.reserved_over_live_warm),
            format!("{:.4}", r.hit_rate),
            report::group(r.device_allocs_cold),
            report::group(r.device_allocs_warm),
            report::group(r.device_calls_cold),
            format!("{:.1}", r.device_calls_per_warm_pass),
            report::group(r.device_calls_last_pass),
            report::group(r.failed),
        ]);
    }
    t.print();
}

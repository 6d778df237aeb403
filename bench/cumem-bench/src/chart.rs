//! `chart`: an SVG (plotters) of CuMem's results beside the anchors of
//! `anchor_bench.py`, as grouped bars, one panel per measure:
//!
//! 1. replay, ns per event (warm; log scale), per trace;
//! 2. replay, peak reserved ÷ peak live (warm pass with the cold pass's cache kept, as
//!    the anchors measure it), per trace;
//! 3. alloc+free pair, ns (log scale), per size, when pair results are present;
//! 4. threads, aggregate ns per pair (log scale), per thread count, when present.
//!
//! Input lines that are not JSON objects, or are of another kind, are skipped.

use clap::Args;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ChartArgs {
    /// cumem-bench JSON lines (replay, pair, threads); may be given several times.
    #[arg(long, required = true)]
    pub input: Vec<PathBuf>,
    /// anchor_bench.py's JSON lines (optional).
    #[arg(long)]
    pub anchor: Option<PathBuf>,
    /// The SVG to write.
    #[arg(long, default_value = "docs/perf.svg")]
    pub out: PathBuf,
    /// A title line (default: from the devices in the input).
    #[arg(long)]
    pub title: Option<String>,
}

/// One allocator's bars in one panel: a value (or none) per category.
struct Series {
    name: String,
    color: RGBColor,
    values: Vec<Option<f64>>,
}

const POOL_COLORS: [(&str, RGBColor); 5] = [
    ("binned", RGBColor(31, 119, 180)),
    ("split", RGBColor(44, 160, 44)),
    ("expandable", RGBColor(140, 86, 75)),
    ("simple", RGBColor(148, 103, 189)),
    ("none", RGBColor(127, 160, 200)),
];
/// (key prefix in anchor replay lines, pair key, threads key, label, colour)
const ANCHORS: [(&str, &str, &str, &str, RGBColor); 4] = [
    (
        "torch_caching",
        "torch_caching_ns",
        "torch_caching_ns_per_pair",
        "PyTorch caching",
        RGBColor(255, 127, 14),
    ),
    (
        "torch_expandable",
        "torch_expandable_ns",
        "torch_expandable_ns_per_pair",
        "PyTorch expandable segments",
        RGBColor(227, 119, 194),
    ),
    (
        "cuda_async_pool",
        "cuda_async_pool_ns",
        "cuda_async_ns_per_pair",
        "cudaMallocAsync pool",
        RGBColor(214, 39, 40),
    ),
    ("cudaMalloc", "cudaMalloc_ns", "", "cudaMalloc", RGBColor(120, 120, 120)),
];

fn read_lines(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .collect())
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite() && *x > 0.0)
}

fn bench(v: &Value) -> &str {
    s(v, "bench").unwrap_or("")
}

fn trace_name(v: &Value) -> Option<String> {
    s(v, "trace").map(|t| t.strip_suffix(".trace").unwrap_or(t).to_string())
}

/// Categories in order of first appearance.
fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

/// CuMem's series keys (pool, device) in order of appearance, pools in `POOL_COLORS` order.
fn cumem_keys(rows: &[Value], kind: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    for r in rows.iter().filter(|r| bench(r) == kind) {
        if let (Some(p), Some(d)) = (s(r, "pool"), s(r, "device")) {
            push_unique(&mut keys, (p.to_string(), d.to_string()));
        }
    }
    keys.sort_by_key(|(p, d)| (d.clone(), POOL_COLORS.iter().position(|(n, _)| n == p).unwrap_or(9)));
    keys
}

fn cumem_series(
    rows: &[Value],
    kind: &str,
    multi_device: bool,
    cats: usize,
    value: impl Fn(&Value) -> Option<(usize, f64)>,
) -> Vec<Series> {
    cumem_keys(rows, kind)
        .into_iter()
        .map(|(pool, dev)| {
            let mut values = vec![None; cats];
            for r in rows
                .iter()
                .filter(|r| bench(r) == kind && s(r, "pool") == Some(&pool) && s(r, "device") == Some(&dev))
            {
                if let Some((i, x)) = value(r) {
                    values[i] = Some(x);
                }
            }
            let color = POOL_COLORS.iter().find(|(n, _)| *n == pool).map_or(BLACK, |c| c.1);
            let color = if dev == "host" && multi_device {
                color.mix(0.55).to_rgba().rgb_tuple()
            } else {
                (color.0, color.1, color.2)
            };
            Series {
                name: if multi_device { format!("CuMem {pool} ({dev})") } else { format!("CuMem {pool}") },
                color: RGBColor(color.0, color.1, color.2),
                values,
            }
        })
        .collect()
}

trait RgbTuple {
    fn rgb_tuple(&self) -> (u8, u8, u8);
}
impl RgbTuple for RGBAColor {
    fn rgb_tuple(&self) -> (u8, u8, u8) {
        // Blend with white by the alpha, for a flat, lighter colour.
        let a = self.3;
        let m = |c: u8| (c as f64 * a + 255.0 * (1.0 - a)).round() as u8;
        (m(self.0), m(self.1), m(self.2))
    }
}

/// Compact number for a bar's label: `441`, `12.3`, `1.07`, `23.1k`, `1.2M`.
fn short(v: f64, ratio: bool) -> String {
    if ratio {
        format!("{v:.2}")
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
}

/// One panel of grouped bars: a group per category, a bar per series with a value.
#[allow(clippy::too_many_arguments)]
fn panel<Y>(
    root: &DrawingArea<SVGBackend, Shift>,
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    ylabel: &str,
    cats: &[String],
    series: &[Series],
    y: Y,
    base: f64,
    ratio: bool,
) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let present: Vec<&Series> = series.iter().filter(|s| s.values.iter().any(Option::is_some)).collect();
    let n = cats.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .margin_bottom(30)
        .x_label_area_size(8)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(ylabel)
        .y_label_formatter(&|v| {
            if ratio { format!("{v:.2}") } else { short(*v, false) }
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    let k = present.len().max(1) as f64;
    let group = 0.8;
    let w = group / k;
    for (j, s) in present.iter().enumerate() {
        let bars: Vec<_> = s.values.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v))).collect();
        let x0 = |i: usize| i as f64 + (1.0 - group) / 2.0 + j as f64 * w;
        chart
            .draw_series(bars.iter().map(|&(i, v)| {
                Rectangle::new([(x0(i) + w * 0.06, base), (x0(i) + w * 0.94, v)], s.color.filled())
            }))
            .map_err(err)?;
        let label_size = if k > 6.0 { 10 } else { 11 };
        chart
            .draw_series(bars.iter().map(|&(i, v)| {
                Text::new(
                    short(v, ratio),
                    (x0(i) + w / 2.0, v),
                    ("sans-serif", label_size)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )
            }))
            .map_err(err)?;
    }
    if ratio {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (n, 1.0)],
                BLACK.mix(0.4).stroke_width(1),
            )))
            .map_err(err)?;
    }
    // Category names under the groups, in the root's (absolute) pixel coordinates.
    for (i, c) in cats.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, base));
        root.draw(&Text::new(
            c.clone(),
            (px, py + 8),
            ("sans-serif", 15).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// Log-scale bounds around positive values, with headroom for the labels.
fn log_bounds(series: &[Series]) -> Option<(f64, f64)> {
    let vals: Vec<f64> = series.iter().flat_map(|s| s.values.iter().flatten().copied()).collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(0.0, f64::max);
    if vals.is_empty() {
        return None;
    }
    Some((10f64.powf((lo / 1.5).log10().floor()), 10f64.powf((hi * 2.0).log10().ceil())))
}

pub fn run(a: &ChartArgs) -> Result<(), String> {
    let mut rows = Vec::new();
    for p in &a.input {
        rows.extend(read_lines(p)?);
    }
    let anchors = match &a.anchor {
        Some(p) => read_lines(p)?,
        None => Vec::new(),
    };
    let mut devices = Vec::new();
    for r in &rows {
        if let Some(d) = s(r, "device") {
            push_unique(&mut devices, d.to_string());
        }
    }
    let multi = devices.len() > 1;

    // Replay: categories are traces (CuMem's, then any only the anchors have).
    let mut traces = Vec::new();
    for r in rows.iter().chain(&anchors).filter(|r| bench(r) == "replay") {
        if let Some(t) = trace_name(r) {
            push_unique(&mut traces, t);
        }
    }
    let ti = |r: &Value| trace_name(r).and_then(|t| traces.iter().position(|x| *x == t));
    let mut ns_series =
        cumem_series(&rows, "replay", multi, traces.len(), |r| Some((ti(r)?, f(r, "ns_per_event_warm")?)));
    let mut ratio_series = cumem_series(&rows, "replay", multi, traces.len(), |r| {
        Some((ti(r)?, f(r, "reserved_over_live_warm").or_else(|| f(r, "reserved_over_live"))?))
    });
    for (key, _, _, label, color) in ANCHORS {
        let (mut ns, mut ratio) = (vec![None; traces.len()], vec![None; traces.len()]);
        for r in anchors.iter().filter(|r| bench(r) == "replay") {
            let Some(i) = ti(r) else { continue };
            ns[i] = f(r, &format!("{key}_ns_per_event"));
            ratio[i] = f(r, &format!("{key}_peak_reserved")).zip(f(r, "peak_live_bytes")).map(|(a, b)| a / b);
        }
        let name = format!("{label} (anchor)");
        ns_series.push(Series { name: name.clone(), color, values: ns });
        ratio_series.push(Series { name, color, values: ratio });
    }

    // Pair: categories are sizes.
    let mut sizes: Vec<u64> = Vec::new();
    for r in rows.iter().filter(|r| bench(r) == "pair") {
        if let Some(b) = r.get("size").and_then(Value::as_u64) {
            push_unique(&mut sizes, b);
        }
    }
    sizes.sort_unstable();
    let si = |b: Option<u64>| b.and_then(|b| sizes.iter().position(|&x| x == b));
    let mut pair_series = cumem_series(&rows, "pair", multi, sizes.len(), |r| {
        Some((si(r.get("size")?.as_u64())?, f(r, "ns_per_pair")?))
    });
    // Threads: categories are thread counts.
    let mut counts: Vec<u64> = Vec::new();
    for r in rows.iter().filter(|r| bench(r) == "threads") {
        if let Some(n) = r.get("threads").and_then(Value::as_u64) {
            push_unique(&mut counts, n);
        }
    }
    counts.sort_unstable();
    let ci = |n: Option<u64>| n.and_then(|n| counts.iter().position(|&x| x == n));
    let mut thread_series = cumem_series(&rows, "threads", multi, counts.len(), |r| {
        Some((ci(r.get("threads")?.as_u64())?, f(r, "ns_per_pair")?))
    });
    for (_, pair_key, threads_key, label, color) in ANCHORS {
        let mut pv = vec![None; sizes.len()];
        let mut tv = vec![None; counts.len()];
        for r in &anchors {
            match bench(r) {
                "pair" => {
                    if let Some(i) = si(r.get("bytes").and_then(Value::as_u64)) {
                        pv[i] = f(r, pair_key);
                    }
                }
                "threads" if !threads_key.is_empty() => {
                    if let Some(i) = ci(r.get("threads").and_then(Value::as_u64)) {
                        tv[i] = f(r, threads_key);
                    }
                }
                _ => {}
            }
        }
        let name = format!("{label} (anchor)");
        pair_series.push(Series { name: name.clone(), color, values: pv });
        thread_series.push(Series { name, color, values: tv });
    }

    let has = |v: &[Series]| v.iter().any(|s| s.values.iter().any(Option::is_some));
    let mut panels = 0;
    let show_replay = !traces.is_empty() && has(&ns_series);
    if show_replay {
        panels += 2;
    }
    let show_pair = !sizes.is_empty() && has(&pair_series);
    let show_threads = !counts.is_empty() && has(&thread_series);
    panels += show_pair as u32 + show_threads as u32;
    if panels == 0 {
        return Err("chart: no replay, pair or threads results in the input".into());
    }

    // Legend: every series that has a value somewhere, in order.
    let mut legend: Vec<(String, RGBColor)> = Vec::new();
    for s in ns_series.iter().chain(&ratio_series).chain(&pair_series).chain(&thread_series) {
        if s.values.iter().any(Option::is_some) && !legend.iter().any(|(n, _)| *n == s.name) {
            legend.push((s.name.clone(), s.color));
        }
    }

    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let (width, panel_h, head) = (1400u32, 380u32, 110u32);
    let root = SVGBackend::new(&a.out, (width, head + panels * panel_h)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = a.title.clone().unwrap_or_else(|| {
        format!(
            "CuMem pools vs. anchor allocators — device: {}",
            if devices.is_empty() { "?".into() } else { devices.join(", ") }
        )
    });
    root.draw(&Text::new(
        title,
        (width as i32 / 2, 14),
        ("sans-serif", 24).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(err)?;
    // Legend rows.
    let (mut x, mut yrow) = (80i32, 56i32);
    for (name, color) in &legend {
        let wtext = (name.chars().count() as i32) * 8 + 40;
        if x + wtext > width as i32 - 40 {
            x = 80;
            yrow += 24;
        }
        root.draw(&Rectangle::new([(x, yrow), (x + 16, yrow + 14)], color.filled())).map_err(err)?;
        root.draw(&Text::new(name.clone(), (x + 22, yrow + 1), ("sans-serif", 15).into_font().color(&BLACK)))
            .map_err(err)?;
        x += wtext;
    }
    let body = root.margin(head, 0, 0, 0);
    let areas = body.split_evenly((panels as usize, 1));
    let mut areas = areas.iter();

    if show_replay {
        let (lo, hi) = log_bounds(&ns_series).unwrap_or((1.0, 1e6));
        panel(
            &root,
            areas.next().unwrap(),
            "Trace replay: ns per event (warm; log scale; lower is better)",
            "ns per event",
            &traces,
            &ns_series,
            (lo..hi).log_scale(),
            lo,
            false,
        )?;
        let vals: Vec<f64> = ratio_series.iter().flat_map(|s| s.values.iter().flatten().copied()).collect();
        let top = vals.iter().copied().fold(1.0, f64::max);
        let bottom = vals.iter().copied().fold(1.0, f64::min).min(1.0) - 0.05;
        let bottom = (bottom * 10.0).floor() / 10.0;
        let top = top + (top - bottom) * 0.12;
        panel(
            &root,
            areas.next().unwrap(),
            "Trace replay: peak reserved ÷ peak live bytes (lower is better; 1 = no overhead)",
            "reserved ÷ live",
            &traces,
            &ratio_series,
            bottom..top,
            bottom,
            true,
        )?;
    }
    if show_pair {
        let (lo, hi) = log_bounds(&pair_series).unwrap_or((1.0, 1e6));
        let cats: Vec<String> = sizes.iter().map(|&b| crate::report::size_label(b)).collect();
        panel(
            &root,
            areas.next().unwrap(),
            "alloc+free pair of a cache hit, by size: ns (log scale; lower is better)",
            "ns per pair",
            &cats,
            &pair_series,
            (lo..hi).log_scale(),
            lo,
            false,
        )?;
    }
    if show_threads {
        let (lo, hi) = log_bounds(&thread_series).unwrap_or((1.0, 1e6));
        let cats: Vec<String> =
            counts.iter().map(|&n| format!("{n} thread{}", if n == 1 { "" } else { "s" })).collect();
        panel(
            &root,
            areas.next().unwrap(),
            &format!(
                "Concurrent {} alloc+free pairs: aggregate ns per pair (wall ÷ pairs; log scale; lower is better)",
                rows.iter()
                    .find(|r| bench(r) == "threads")
                    .and_then(|r| r.get("size")?.as_u64())
                    .map_or("4 KiB".into(), crate::report::size_label)
            ),
            "ns per pair",
            &cats,
            &thread_series,
            (lo..hi).log_scale(),
            lo,
            false,
        )?;
    }
    root.present().map_err(err)?;
    eprintln!("cumem-bench: wrote {}", a.out.display());
    Ok(())
}

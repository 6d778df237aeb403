//! The SVG picture: axes, the stacked bands of the live blocks, the allocated and reserved
//! lines, out-of-memory marks and the legend, over the timeline's layout.

use super::{Layout, Options, Timeline};
use crate::format::format_bytes;
use std::fmt::Write;

const MARGIN_LEFT: f64 = 72.0;
const MARGIN_RIGHT: f64 = 18.0;
const MARGIN_TOP: f64 = 62.0;
const MARGIN_BOTTOM: f64 = 58.0;
const ALLOCATED_COLOR: &str = "#1a1a1a";
const RESERVED_COLOR: &str = "#d62728";
const SUMMARY_COLOR: &str = "#c7c7c7";

impl Timeline<'_> {
    pub(super) fn svg(&self, opts: &Options, for_html: bool) -> (String, Layout) {
        let (w, h) = (opts.width.max(300) as f64, opts.height.max(200) as f64);
        let (pw, ph) = (w - MARGIN_LEFT - MARGIN_RIGHT, h - MARGIN_TOP - MARGIN_BOTTOM);
        let ymax_data = self.peak_reserved().max(self.peak_allocated()).max(1);
        let (ystep, yunit) = nice_bytes_step(ymax_data as f64 / 5.0);
        let ymax = ((ymax_data as f64 / ystep).ceil() * ystep).max(ystep);
        let scale = ph / ymax;
        // Blocks under a quarter of a pixel would only be slivers: summarized.
        let min_band = (0.25 / scale).ceil() as u64;
        let lay = self.layout(pw as usize, opts.max_bands, min_band);
        let colw = if lay.cols == 0 { pw } else { pw / lay.cols as f64 };
        let x = |c: usize| MARGIN_LEFT + c as f64 * colw;
        let y = |v: u64| MARGIN_TOP + ph - v as f64 * scale;

        let mut o = String::with_capacity(1 << 20);
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = write!(o, "\n<title>{}</title>\n", esc(&opts.title));
        let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        // Graph pools' blocks: their band's colour under a hatching of this pattern.
        let _ = writeln!(
            o,
            r##"<defs><pattern id="graph-pool" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2.2" height="6" fill="#000" fill-opacity="0.45"/></pattern></defs>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{MARGIN_LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
            esc(&opts.title)
        );
        let _ = writeln!(
            o,
            r##"<text x="{MARGIN_LEFT}" y="40" fill="#444">{} events, {} allocations; peak allocated {}, peak reserved {}</text>"##,
            self.events.len(),
            self.blocks.iter().filter(|b| b.alloc_event.is_some()).count(),
            format_bytes(self.peak_allocated()),
            format_bytes(self.peak_reserved())
        );
        // grid and y axis
        let _ = writeln!(o, r##"<g id="axes" stroke="#e4e4e4">"##);
        let mut v = 0.0;
        while v <= ymax + 0.5 {
            let yy = MARGIN_TOP + ph - v * scale;
            let _ = writeln!(
                o,
                r#"<line x1="{MARGIN_LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}"/>"#,
                MARGIN_LEFT + pw
            );
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" stroke="none" fill="#333">{}</text>"##,
                MARGIN_LEFT - 6.0,
                yy + 4.0,
                bytes_label(v, yunit)
            );
            v += ystep;
        }
        // x axis: event numbers, and the time since the first event under them
        let n = self.events.len();
        if n > 0 {
            let xstep = nice_step(n as f64 / 8.0).max(1.0) as usize;
            let t0 = self.events[0].time_ns;
            let mut i = 0;
            while i <= n {
                let xx = MARGIN_LEFT + pw * i as f64 / n as f64;
                let _ = writeln!(
                    o,
                    r#"<line x1="{xx:.1}" y1="{MARGIN_TOP}" x2="{xx:.1}" y2="{:.1}"/>"#,
                    MARGIN_TOP + ph
                );
                let _ = writeln!(
                    o,
                    r##"<text x="{xx:.1}" y="{:.1}" text-anchor="middle" stroke="none" fill="#333">{}</text>"##,
                    MARGIN_TOP + ph + 16.0,
                    count_label(i as u64)
                );
                let e = &self.events[i.min(n - 1)];
                let _ = writeln!(
                    o,
                    r##"<text x="{xx:.1}" y="{:.1}" text-anchor="middle" stroke="none" fill="#888" font-size="10">{}</text>"##,
                    MARGIN_TOP + ph + 29.0,
                    time_label(e.time_ns.saturating_sub(t0))
                );
                i += xstep;
            }
        }
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" stroke="none" fill="#333">event (allocation or free); time since the first event below</text></g>"##,
            MARGIN_LEFT + pw / 2.0,
            h - 8.0
        );
        // the summarized band, then one band per large block
        if lay.cols > 0 && lay.small.iter().any(|&s| s > 0) {
            let mut pts = Pts::default();
            for (c, &s) in lay.small.iter().enumerate() {
                pts.step(x(c), x(c + 1), y(s));
            }
            let mut p = pts.0;
            p.push((x(lay.cols), y(0)));
            p.push((x(0), y(0)));
            let _ = writeln!(
                o,
                r#"<polygon id="summarized" data-a="-1" fill="{SUMMARY_COLOR}" points="{}"><title>{} allocations smaller than {} each, summed</title></polygon>"#,
                points(&p),
                lay.small_blocks,
                format_bytes(lay.small_max.saturating_add(1))
            );
        }
        let _ = writeln!(o, r#"<g id="bands">"#);
        for (k, band) in lay.bands.iter().enumerate() {
            let b = &self.blocks[band.block];
            let c0 = band.first_col;
            let mut top = Pts::default();
            for (j, &bot) in band.bottoms.iter().enumerate() {
                top.step(x(c0 + j), x(c0 + j + 1), y(bot + b.size));
            }
            let mut bottom = Pts::default();
            for j in (0..band.bottoms.len()).rev() {
                bottom.step(x(c0 + j + 1), x(c0 + j), y(band.bottoms[j]));
            }
            let mut p = top.0;
            p.extend(bottom.0);
            let label = self.label(b).map(first_line).unwrap_or("");
            let graph = opts.graph_pool_of(b);
            let pts = points(&p);
            let _ = write!(
                o,
                r#"<polygon data-a="{k}" fill="{}" points="{pts}">"#,
                color(band.block, self.label(b))
            );
            if !for_html {
                // Native tooltips in an SVG viewer (the HTML page has its own).
                let _ = write!(
                    o,
                    "<title>{}{}{}{}</title>",
                    format_bytes(b.size),
                    graph.map(|g| format!(" in graph pool {g}")).unwrap_or_default(),
                    if label.is_empty() { "" } else { ": " },
                    esc(&truncate(label, 160))
                );
            }
            let _ = writeln!(o, "</polygon>");
            if let Some(g) = graph {
                // the hatching over it (the pointer still reaches the band beneath)
                let _ = writeln!(
                    o,
                    r#"<polygon class="graph-pool" data-pool="{g}" fill="url(#graph-pool)" pointer-events="none" points="{pts}"/>"#
                );
            }
        }
        let _ = writeln!(o, "</g>");
        // totals and out-of-memory marks
        for (id, vals, col, width) in [
            ("reserved", &lay.reserved, RESERVED_COLOR, 1.6),
            ("allocated", &lay.allocated, ALLOCATED_COLOR, 1.2),
        ] {
            if lay.cols == 0 {
                break;
            }
            let mut pts = Pts::default();
            for (c, &v) in vals.iter().enumerate() {
                pts.step(x(c), x(c + 1), y(v));
            }
            let _ = writeln!(
                o,
                r#"<polyline id="{id}" fill="none" stroke="{col}" stroke-width="{width}" points="{}"/>"#,
                points(&pts.0)
            );
        }
        for &i in &self.ooms {
            let xx = MARGIN_LEFT + pw * (i as f64 + 0.5) / n.max(1) as f64;
            let _ = writeln!(
                o,
                r#"<line class="oom" x1="{xx:.1}" y1="{MARGIN_TOP}" x2="{xx:.1}" y2="{:.1}" stroke="{RESERVED_COLOR}" stroke-dasharray="4 3"><title>out of memory: {} requested</title></line>"#,
                MARGIN_TOP + ph,
                format_bytes(self.events[i].requested_bytes)
            );
        }
        let _ = writeln!(
            o,
            r##"<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#999"/>"##
        );
        // legend (top right)
        let lx = MARGIN_LEFT + pw - 440.0;
        let _ = writeln!(
            o,
            r#"<g id="legend"><line x1="{lx}" y1="36" x2="{}" y2="36" stroke="{RESERVED_COLOR}" stroke-width="1.6"/><text x="{}" y="40">reserved</text><line x1="{}" y1="36" x2="{}" y2="36" stroke="{ALLOCATED_COLOR}" stroke-width="1.2"/><text x="{}" y="40">allocated</text><rect x="{}" y="30" width="14" height="10" fill="{SUMMARY_COLOR}"/><text x="{}" y="40">smaller blocks, summed</text><rect x="{}" y="30" width="14" height="10" fill="hsl(200,55%,62%)"/><text x="{}" y="40">one block</text></g>"#,
            lx + 18.0,
            lx + 22.0,
            lx + 90.0,
            lx + 108.0,
            lx + 112.0,
            lx + 185.0,
            lx + 203.0,
            lx + 365.0,
            lx + 383.0
        );
        if lay.bands.iter().any(|band| opts.graph_pool_of(&self.blocks[band.block]).is_some()) {
            let _ = writeln!(
                o,
                r#"<g id="legend-graph-pool"><rect x="{}" y="44" width="14" height="10" fill="hsl(200,55%,62%)"/><rect x="{}" y="44" width="14" height="10" fill="url(#graph-pool)"/><text x="{}" y="54">in a graph pool</text></g>"#,
                lx + 365.0,
                lx + 365.0,
                lx + 383.0
            );
        }
        let _ = writeln!(o, "</svg>");
        (o, lay)
    }
}

/// A polyline of steps: a flat segment per column, points only where the height changes
/// (to a tenth of a pixel), which is what keeps long-lived bands to a few points.
#[derive(Default)]
struct Pts(Vec<(f64, f64)>);

impl Pts {
    fn step(&mut self, x0: f64, x1: f64, y: f64) {
        let y = (y * 10.0).round() / 10.0;
        let n = self.0.len();
        if n >= 2 && self.0[n - 1].1 == y && self.0[n - 2].1 == y {
            self.0[n - 1].0 = x1;
        } else {
            self.0.push((x0, y));
            self.0.push((x1, y));
        }
    }
}

fn points(p: &[(f64, f64)]) -> String {
    let mut s = String::with_capacity(p.len() * 12);
    for (k, (x, y)) in p.iter().enumerate() {
        if k > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{},{}", trim(*x), trim(*y));
    }
    s
}

/// A coordinate with at most one decimal and no trailing `.0`.
fn trim(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() { format!("{}", r as i64) } else { format!("{r:.1}") }
}

/// A band's fill: a hue from its origin's text (the same call site, the same colour) or,
/// without one, from its index (neighbours differ: the golden angle).
fn color(block: usize, label: Option<&str>) -> String {
    let hue = match label {
        Some(l) => {
            // FNV-1a
            let mut h: u64 = 0xcbf29ce484222325;
            for b in l.bytes() {
                h = (h ^ b as u64).wrapping_mul(0x100000001b3);
            }
            (h % 360) as f64
        }
        None => (block as f64 * 137.508) % 360.0,
    };
    format!("hsl({hue:.0},55%,62%)")
}

/// A round step (1, 2, 2.5 or 5 × 10^k) near `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let f = raw / p;
    p * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A round step of bytes near `raw` in the binary unit that suits it: (step, unit).
fn nice_bytes_step(raw: f64) -> (f64, f64) {
    let mut unit = 1.0;
    while raw / unit >= 1024.0 && unit < (1u64 << 50) as f64 {
        unit *= 1024.0;
    }
    ((nice_step(raw / unit) * unit).max(1.0), unit)
}

fn bytes_label(v: f64, unit: f64) -> String {
    let name = match unit as u64 {
        1 => "B",
        1024 => "KiB",
        1_048_576 => "MiB",
        1_073_741_824 => "GiB",
        1_099_511_627_776 => "TiB",
        _ => "PiB",
    };
    let x = v / unit;
    if x == 0.0 {
        "0".into()
    } else if x == x.trunc() {
        format!("{} {name}", x as u64)
    } else {
        format!("{x:.1} {name}")
    }
}

fn count_label(n: u64) -> String {
    if n >= 1_000_000 && n % 100_000 == 0 {
        format!("{}M", n as f64 / 1e6)
    } else if n >= 1000 && n % 100 == 0 {
        format!("{}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

fn time_label(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1000 {
        format!("{ns} ns")
    } else if v < 1e6 {
        format!("{:.1} µs", v / 1e3)
    } else if v < 1e9 {
        format!("{:.1} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).chain(['…']).collect() }
}

/// XML text and attribute escaping.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_merge() {
        let mut p = Pts::default();
        for c in 0..10 {
            p.step(c as f64, c as f64 + 1.0, 5.0);
        }
        assert_eq!(p.0, vec![(0.0, 5.0), (10.0, 5.0)]);
        assert_eq!(nice_step(3.7), 5.0);
        assert_eq!(nice_bytes_step(300.0 * 1048576.0), (500.0 * 1048576.0, 1048576.0));
    }
}

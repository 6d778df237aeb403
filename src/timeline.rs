//! Memory timeline pictures of an allocation history: PyTorch memory_viz's "active memory
//! timeline" (live bytes stacked by allocation, with the allocated and reserved totals as
//! lines over the events), as SVG, as an HTML page that shows an allocation's size and
//! origin under the pointer, as JSON data, and as Chrome trace-event JSON for Perfetto or
//! `chrome://tracing`. The one renderer: the C ABI (`cumem_save_memory_timeline`, which
//! the Julia package's `save_memory_timeline` calls) and `cumem-bench replay --timeline`
//! both use it.
//!
//! How the picture is built (after `torch/cuda/_memory_viz.py`, `process_alloc_data`):
//! - x is the event number (each allocation or free is one step; times are on the axis
//!   below and in the HTML page), so bursts of small allocations are not squeezed into a
//!   pixel;
//! - every live block is a band whose height is its size; bands are stacked in the order
//!   the blocks were allocated, so when one is freed the bands above it move down;
//! - only the `max_bands` largest blocks are drawn on their own (whole sizes at a time:
//!   blocks of one size are all drawn or all summed), and none under a quarter of a
//!   pixel; the others are summed into one grey band at the bottom (memory_viz's
//!   "summarized" entry);
//! - with more events than pixel columns, each column shows the live blocks at the
//!   event of that column where the allocated total is highest, so every peak is drawn at
//!   its true height (memory_viz draws every event, which makes files of tens of MB for a
//!   training run; this keeps a GPT-2 trace's SVG under a few MB). The lines are each
//!   column's maxima.
//!
//! What an event list cannot say is estimated: blocks freed in the window but allocated
//! before it were live from its start (their size counts in the allocated total from the
//! first event); the reserved total at the start is the least that keeps it at least the
//! allocated total and never negative (exact when the history starts with the engine).
//! Blocks allocated before the window and never freed in it are invisible.
//!
//! The SVG is written directly rather than with `plotters`: the HTML page needs each
//! band to carry the index of its allocation (`data-a`) and a `<title>`, which plotters'
//! SVG backend cannot attach to an element, and its per-element style attributes would
//! triple the file's size for thousands of bands.

use crate::error::{Error, Result};
use crate::format::format_bytes;
use crate::history::{Event, EventKind};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// `format` of `cumem_save_memory_timeline`: an SVG picture.
pub const CUMEM_TIMELINE_SVG: u32 = 0;
/// `format` of `cumem_save_memory_timeline`: an HTML page with the SVG and a script
/// that shows an allocation's size and origin under the pointer.
pub const CUMEM_TIMELINE_HTML: u32 = 1;
/// `format` of `cumem_save_memory_timeline`: the data as JSON (totals after each event,
/// every allocation with its lifetime and origin).
pub const CUMEM_TIMELINE_JSON: u32 = 2;
/// `format` of `cumem_save_memory_timeline`: Chrome trace-event JSON (Perfetto,
/// `chrome://tracing`): counters for the totals, an async slice per allocation.
pub const CUMEM_TIMELINE_CHROME: u32 = 3;

/// What [`render`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SVG picture ([`CUMEM_TIMELINE_SVG`]).
    Svg,
    /// HTML page: the SVG, hover details, a marker element the tests look for
    /// ([`CUMEM_TIMELINE_HTML`]).
    Html,
    /// The timeline's data ([`CUMEM_TIMELINE_JSON`]).
    Json,
    /// Chrome trace-event JSON ([`CUMEM_TIMELINE_CHROME`]).
    Chrome,
}

impl Format {
    /// The format of a C `format` code; `InvalidValue` for an unknown one.
    pub fn from_code(code: u32) -> Result<Format> {
        Ok(match code {
            CUMEM_TIMELINE_SVG => Format::Svg,
            CUMEM_TIMELINE_HTML => Format::Html,
            CUMEM_TIMELINE_JSON => Format::Json,
            CUMEM_TIMELINE_CHROME => Format::Chrome,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "unknown timeline format {code}: accepted 0 (svg), 1 (html), 2 (json), 3 (chrome)"
                )));
            }
        })
    }

    /// The format named `svg`, `html`, `json` or `chrome` (any case).
    pub fn parse(name: &str) -> Result<Format> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "svg" => Format::Svg,
            "html" | "htm" => Format::Html,
            "json" => Format::Json,
            "chrome" => Format::Chrome,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "{name:?} is not a timeline format: accepted svg, html, json, chrome"
                )));
            }
        })
    }

    /// The format a file name asks for: `.svg`, `.html`/`.htm`, `.json` (`.trace.json`
    /// or `.chrome.json`: [`Format::Chrome`]); `None` for another extension.
    pub fn from_path(path: &str) -> Option<Format> {
        let p = path.to_ascii_lowercase();
        if p.ends_with(".trace.json") || p.ends_with(".chrome.json") {
            Some(Format::Chrome)
        } else if p.ends_with(".json") {
            Some(Format::Json)
        } else if p.ends_with(".svg") {
            Some(Format::Svg)
        } else if p.ends_with(".html") || p.ends_with(".htm") {
            Some(Format::Html)
        } else {
            None
        }
    }
}

/// How the picture looks.
#[derive(Debug, Clone)]
pub struct Options {
    /// The heading (SVG, HTML, and `title` of the JSON formats).
    pub title: String,
    /// Blocks drawn as bands of their own (the largest); the rest are summed into one.
    pub max_bands: usize,
    /// Picture size in pixels (the plot is the picture less 90 px across, 120 down).
    pub width: u32,
    pub height: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options { title: "CuMem memory timeline".into(), max_bands: 10_000, width: 1200, height: 560 }
    }
}

/// One block seen in the events.
#[derive(Debug, Clone)]
pub struct Block {
    pub addr: u64,
    /// Block size (bytes).
    pub size: u64,
    /// Bytes asked for.
    pub requested: u64,
    /// Index of its allocation event; `None` when it was allocated before the first.
    pub alloc_event: Option<usize>,
    /// Index of its free event; `None` when still live after the last.
    pub free_event: Option<usize>,
    /// Engine time of the allocation (ns): the event's, or free time − lifetime.
    pub alloc_ns: u64,
    pub free_ns: Option<u64>,
    /// The event whose label names the block's origin (its allocation, else its free).
    pub label_event: usize,
    pub thread: u32,
    pub stream: u64,
    /// Served from the cache.
    pub hit: bool,
}

/// An event list, digested: its blocks and the totals after each event.
pub struct Timeline<'a> {
    events: &'a [Event],
    labels: Vec<Option<&'a str>>,
    /// Every block, in order of first appearance.
    pub blocks: Vec<Block>,
    /// Sum of live block sizes after each event (bytes).
    pub allocated: Vec<u64>,
    /// Reserved bytes after each event.
    pub reserved: Vec<u64>,
    /// Allocated and reserved bytes before the first event (estimates: see the module's
    /// documentation).
    pub allocated_start: u64,
    pub reserved_start: u64,
    /// Indices of the out-of-memory events.
    pub ooms: Vec<usize>,
}

impl<'a> Timeline<'a> {
    /// Digests `events` (in time order, as `cumem_memory_events` returns them). `labels`,
    /// when given, has one entry per event: the origin of an allocation (e.g. a Julia
    /// stack trace), `None` for none. Errors (`InvalidValue`): labels of another length,
    /// an event of unknown kind.
    pub fn new(events: &'a [Event], labels: Option<&[Option<&'a str>]>) -> Result<Timeline<'a>> {
        let labels = match labels {
            Some(l) if l.len() != events.len() => {
                return Err(Error::InvalidValue(format!(
                    "{} labels for {} events: give one per event, or none",
                    l.len(),
                    events.len()
                )));
            }
            Some(l) => l.to_vec(),
            None => Vec::new(),
        };
        let mut blocks: Vec<Block> = Vec::new();
        let mut open: HashMap<u64, usize> = HashMap::new();
        let mut ooms = Vec::new();
        // Signed running totals; the start values are fixed afterwards.
        let (mut alloc, mut res) = (0i128, 0i128);
        let (mut alloc_d, mut res_d) = (Vec::with_capacity(events.len()), Vec::with_capacity(events.len()));
        let mut pre_window = 0i128;
        // Device calls made inside an allocation call are recorded after it (they start
        // later); their bytes count from the allocation's event, so that reserved covers
        // the block from the moment it appears.
        let mut early = vec![false; events.len()];
        for (i, e) in events.iter().enumerate() {
            match kind_of(e.kind, i)? {
                EventKind::Alloc => {
                    let end = e.time_ns.saturating_add(e.duration_ns);
                    for (j, d) in events.iter().enumerate().skip(i + 1) {
                        if d.time_ns > end {
                            break;
                        }
                        let device =
                            d.kind == EventKind::DeviceAlloc as u32 || d.kind == EventKind::DeviceFree as u32;
                        if device && d.thread == e.thread && !early[j] {
                            early[j] = true;
                            res += if d.kind == EventKind::DeviceAlloc as u32 { 1 } else { -1 }
                                * d.size_bytes as i128;
                        }
                    }
                    if let Some(prev) = open.remove(&e.addr) {
                        // Its free was lost (the history dropped it): it ends here.
                        blocks[prev].free_event = Some(i);
                        blocks[prev].free_ns = Some(e.time_ns);
                        alloc -= blocks[prev].size as i128;
                    }
                    open.insert(e.addr, blocks.len());
                    blocks.push(Block {
                        addr: e.addr,
                        size: e.size_bytes,
                        requested: e.requested_bytes,
                        alloc_event: Some(i),
                        free_event: None,
                        alloc_ns: e.time_ns,
                        free_ns: None,
                        label_event: i,
                        thread: e.thread,
                        stream: e.stream,
                        hit: e.hit != 0,
                    });
                    alloc += e.size_bytes as i128;
                }
                EventKind::Free => {
                    if let Some(b) = open.remove(&e.addr) {
                        blocks[b].free_event = Some(i);
                        blocks[b].free_ns = Some(e.time_ns);
                        alloc -= blocks[b].size as i128;
                    } else {
                        // Allocated before the first event: live from the start.
                        blocks.push(Block {
                            addr: e.addr,
                            size: e.size_bytes,
                            requested: e.requested_bytes,
                            alloc_event: None,
                            free_event: Some(i),
                            alloc_ns: e.time_ns.saturating_sub(e.lifetime_ns),
                            free_ns: Some(e.time_ns),
                            label_event: i,
                            thread: e.thread,
                            stream: e.stream,
                            hit: false,
                        });
                        pre_window += e.size_bytes as i128;
                        alloc -= e.size_bytes as i128;
                    }
                }
                EventKind::DeviceAlloc if !early[i] => res += e.size_bytes as i128,
                EventKind::DeviceFree if !early[i] => res -= e.size_bytes as i128,
                EventKind::DeviceAlloc | EventKind::DeviceFree => {}
                EventKind::Oom => ooms.push(i),
            }
            alloc_d.push(alloc);
            res_d.push(res);
        }
        let allocated_start = pre_window;
        // The least start that keeps reserved ≥ allocated and ≥ 0 throughout.
        let mut reserved_start = allocated_start;
        for (a, r) in alloc_d.iter().zip(&res_d) {
            reserved_start = reserved_start.max(allocated_start + a - r).max(-r);
        }
        let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
        Ok(Timeline {
            events,
            labels,
            blocks,
            allocated: alloc_d.iter().map(|&a| clamp(allocated_start + a)).collect(),
            reserved: res_d.iter().map(|&r| clamp(reserved_start + r)).collect(),
            allocated_start: clamp(allocated_start),
            reserved_start: clamp(reserved_start),
            ooms,
        })
    }

    /// The events digested.
    pub fn events(&self) -> &[Event] {
        self.events
    }

    /// The origin label of `block`, if any.
    pub fn label(&self, block: &Block) -> Option<&'a str> {
        self.labels.get(block.label_event).copied().flatten().filter(|s| !s.is_empty())
    }

    /// Highest allocated total (bytes), the start included.
    pub fn peak_allocated(&self) -> u64 {
        self.allocated.iter().copied().fold(self.allocated_start, u64::max)
    }

    /// Highest reserved total (bytes), the start included.
    pub fn peak_reserved(&self) -> u64 {
        self.reserved.iter().copied().fold(self.reserved_start, u64::max)
    }

    /// The file's text in `format`.
    pub fn render(&self, format: Format, opts: &Options) -> String {
        match format {
            Format::Svg => self.svg(opts, false).0,
            Format::Html => self.html(opts),
            Format::Json => self.json(opts),
            Format::Chrome => self.chrome(opts),
        }
    }
}

fn kind_of(k: u32, i: usize) -> Result<EventKind> {
    EventKind::from_u32(k)
        .ok_or_else(|| Error::InvalidValue(format!("event {i} has an unknown kind {k} (0 to 4)")))
}

/// Renders `events` (with optional per-event `labels`) in `format` and writes the file
/// at `path`. Errors (`InvalidValue`, nothing written): bad labels or events (see
/// [`Timeline::new`]), a file that cannot be written.
pub fn save(
    path: &str,
    events: &[Event],
    labels: Option<&[Option<&str>]>,
    format: Format,
    opts: &Options,
) -> Result<()> {
    let text = Timeline::new(events, labels)?.render(format, opts);
    std::fs::write(path, text)
        .map_err(|e| Error::InvalidValue(format!("cannot write the timeline to {path:?}: {e}")))
}

// ---------------------------------------------------------------------------------------
// The picture

const MARGIN_LEFT: f64 = 72.0;
const MARGIN_RIGHT: f64 = 18.0;
const MARGIN_TOP: f64 = 62.0;
const MARGIN_BOTTOM: f64 = 58.0;
const ALLOCATED_COLOR: &str = "#1a1a1a";
const RESERVED_COLOR: &str = "#d62728";
const SUMMARY_COLOR: &str = "#c7c7c7";

/// A band: one block's bottom edge in each column it is live in.
struct Band {
    block: usize,
    first_col: usize,
    bottoms: Vec<u64>,
}

/// The sampled stack.
struct Layout {
    cols: usize,
    /// Column maxima of the totals.
    allocated: Vec<u64>,
    reserved: Vec<u64>,
    /// The summarized band's height per column.
    small: Vec<u64>,
    bands: Vec<Band>,
    /// Blocks below the band threshold (all of them, drawn or not).
    small_blocks: usize,
    small_max: u64,
}

impl Timeline<'_> {
    fn layout(&self, plot_width: usize, max_bands: usize, min_band: u64) -> Layout {
        let n = self.events.len();
        let cols = n.min(plot_width.max(1));
        let mut samples = Vec::with_capacity(cols);
        let (mut allocated, mut reserved) = (Vec::with_capacity(cols), Vec::with_capacity(cols));
        for c in 0..cols {
            let (lo, hi) = (c * n / cols, ((c + 1) * n / cols).max(c * n / cols + 1));
            let mut best = lo;
            for i in lo..hi {
                if self.allocated[i] > self.allocated[best] {
                    best = i;
                }
            }
            samples.push(best);
            allocated.push(self.allocated[best]);
            reserved.push(self.reserved[lo..hi].iter().copied().max().unwrap_or(0));
        }
        // The largest blocks get bands of their own, whole sizes at a time (blocks of one
        // size are all drawn or all summed, so a loop's steps look alike).
        let mut sizes: Vec<u64> = self.blocks.iter().map(|b| b.size).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let cutoff = match sizes.get(max_bands) {
            // more blocks than bands: only sizes above the first one left out
            Some(&s) => s.saturating_add(1),
            None => 1,
        }
        .max(min_band)
        .max(1);
        let own: Vec<bool> = self.blocks.iter().map(|b| b.size >= cutoff).collect();
        let small_blocks = own.iter().filter(|&&o| !o).count();
        let small_max =
            (0..self.blocks.len()).filter(|&b| !own[b]).map(|b| self.blocks[b].size).max().unwrap_or(0);
        // Stack order: blocks from before the window first (by allocation time), then
        // by allocation event.
        let mut pre: Vec<usize> =
            (0..self.blocks.len()).filter(|&b| self.blocks[b].alloc_event.is_none()).collect();
        pre.sort_by_key(|&b| (self.blocks[b].alloc_ns, b));
        let npre = pre.len();
        let mut key = vec![0usize; self.blocks.len()];
        for (r, &b) in pre.iter().enumerate() {
            key[b] = r;
        }
        let mut by_alloc_event: HashMap<usize, usize> = HashMap::new();
        let mut by_free_event: HashMap<usize, usize> = HashMap::new();
        for (b, blk) in self.blocks.iter().enumerate() {
            if let Some(i) = blk.alloc_event {
                key[b] = npre + i;
                by_alloc_event.insert(i, b);
            }
            if let Some(i) = blk.free_event {
                by_free_event.insert(i, b);
            }
        }
        let mut live: BTreeMap<usize, usize> = BTreeMap::new();
        let mut small_live = 0u64;
        let mut band_of: HashMap<usize, usize> = HashMap::new();
        let mut bands: Vec<Band> = Vec::new();
        let mut small = Vec::with_capacity(cols);
        for &b in &pre {
            if own[b] {
                live.insert(key[b], b);
            } else {
                small_live += self.blocks[b].size;
            }
        }
        let mut next_col = 0;
        for i in 0..n {
            if next_col >= cols {
                break;
            }
            // A free first: an allocation at the same event index cannot also be a free.
            if let Some(&b) = by_free_event.get(&i) {
                if own[b] {
                    live.remove(&key[b]);
                } else {
                    small_live = small_live.saturating_sub(self.blocks[b].size);
                }
            }
            if let Some(&b) = by_alloc_event.get(&i) {
                if own[b] {
                    live.insert(key[b], b);
                } else {
                    small_live += self.blocks[b].size;
                }
            }
            while next_col < cols && samples[next_col] == i {
                let c = next_col;
                small.push(small_live);
                let mut bottom = small_live;
                for &b in live.values() {
                    let k = *band_of.entry(b).or_insert_with(|| {
                        bands.push(Band { block: b, first_col: c, bottoms: Vec::new() });
                        bands.len() - 1
                    });
                    bands[k].bottoms.push(bottom);
                    bottom += self.blocks[b].size;
                }
                next_col += 1;
            }
        }
        Layout { cols, allocated, reserved, small, bands, small_blocks, small_max }
    }

    fn svg(&self, opts: &Options, for_html: bool) -> (String, Layout) {
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
            let _ = write!(
                o,
                r#"<polygon data-a="{k}" fill="{}" points="{}">"#,
                color(band.block, self.label(b)),
                points(&p)
            );
            if !for_html {
                // Native tooltips in an SVG viewer (the HTML page has its own).
                let _ = write!(
                    o,
                    "<title>{}{}{}</title>",
                    format_bytes(b.size),
                    if label.is_empty() { "" } else { ": " },
                    esc(&truncate(label, 160))
                );
            }
            let _ = writeln!(o, "</polygon>");
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
        let _ = writeln!(o, "</svg>");
        (o, lay)
    }

    fn html(&self, opts: &Options) -> String {
        // The bands' blocks in band order are the SVG's `data-a` indices.
        let (lay_svg, lay) = self.svg(opts, true);
        let t0 = self.events.first().map(|e| e.time_ns).unwrap_or(0);
        // Origins once each (a loop makes thousands of blocks from a few call sites).
        let mut origin_index: HashMap<&str, usize> = HashMap::new();
        let mut origins = String::from("[");
        let mut data = String::from("[");
        for (k, band) in lay.bands.iter().enumerate() {
            let b = &self.blocks[band.block];
            if k > 0 {
                data.push_str(",\n");
            }
            let _ = write!(
                data,
                "[\"{:#x}\",{},{},{},{},{},{},{},{},{}]",
                b.addr,
                b.size,
                b.requested,
                opt_num(b.alloc_event.map(|i| i as u64)),
                opt_num(b.free_event.map(|i| i as u64)),
                b.alloc_ns as i128 - t0 as i128,
                opt_num(b.free_ns.map(|f| f.saturating_sub(b.alloc_ns))),
                b.thread,
                b.hit as u8,
                match self.label(b) {
                    None => "null".to_string(),
                    Some(l) => {
                        let n = origin_index.len();
                        let k = *origin_index.entry(l).or_insert_with(|| {
                            if n > 0 {
                                origins.push_str(",\n");
                            }
                            origins.push_str(&json_str(l));
                            n
                        });
                        k.to_string()
                    }
                }
            );
        }
        data.push(']');
        origins.push(']');
        let mut o = String::with_capacity(lay_svg.len() + data.len() + 8192);
        let _ = write!(
            o,
            r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 16px; color: #222; }}
#chart {{ position: relative; display: inline-block; }}
#bands polygon:hover, #summarized:hover {{ stroke: black; stroke-width: 1.5; }}
#tip {{ position: absolute; pointer-events: none; background: #fffff4; border: 1px solid #888;
        padding: 6px 8px; font-size: 12px; max-width: 640px; white-space: pre-wrap; box-shadow: 2px 2px 6px #0003; }}
#cumem-timeline-loaded {{ color: #777; font-size: 12px; margin-top: 6px; }}
</style></head>
<body>
<div id="chart">{svg}<div id="tip" hidden></div></div>
<p style="font-size:12px;color:#555">Each band is one allocation (height: its block size), stacked in the order they were made;
hover over one to see its size, lifetime and origin. Grey: allocations too small for a band of their own, summed.
Lines: the allocated and reserved totals. Made by CuMem (src/timeline.rs).</p>
<script>
"use strict";
// [address, block bytes, requested bytes, allocation event, free event, allocated at (ns since the first event), lifetime (ns), thread, cache hit, origin (index into ORIGINS)]
var ALLOCS = {data};
var ORIGINS = {origins};
(function () {{
  function fmt(b) {{
    if (b <= 1) return b + (b == 1 ? " byte" : " bytes");
    var u = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"], k = Math.min(u.length, Math.max(1, Math.ceil(Math.log(b) / Math.log(1024))));
    return k == 1 ? b + " bytes" : (b / Math.pow(1024, k - 1)).toFixed(3) + " " + u[k - 1];
  }}
  function time(ns) {{
    return ns < 1e3 ? ns + " ns" : ns < 1e6 ? (ns / 1e3).toFixed(1) + " µs" : ns < 1e9 ? (ns / 1e6).toFixed(3) + " ms" : (ns / 1e9).toFixed(3) + " s";
  }}
  var chart = document.getElementById("chart"), tip = document.getElementById("tip");
  function describe(a) {{
    var s = fmt(a[1]) + " block (" + a[2] + " bytes requested) at " + a[0] + "\n";
    s += (a[3] === null ? "allocated before the first event" : "allocated at event " + a[3] + ", t = " + time(a[5])) + (a[8] ? " (cache hit)" : "") + ", thread " + a[7] + "\n";
    s += a[4] === null ? "still live after the last event" : "freed at event " + a[4] + " after " + time(a[6]);
    s += "\norigin: " + (a[9] === null ? "unknown (start Julia with -g2 to record origins)" : ORIGINS[a[9]]);
    return s;
  }}
  chart.addEventListener("mousemove", function (ev) {{
    var t = ev.target, i = t.getAttribute ? t.getAttribute("data-a") : null;
    if (i === null) {{ tip.hidden = true; return; }}
    tip.textContent = i === "-1" ? t.textContent : describe(ALLOCS[+i]);
    var r = chart.getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - r.left + 14, r.width - 300) + "px";
    tip.style.top = (ev.clientY - r.top + 14) + "px";
    tip.hidden = false;
  }});
  chart.addEventListener("mouseleave", function () {{ tip.hidden = true; }});
  // A marker for tests and a line for readers: the script ran and what it loaded.
  var m = document.createElement("div");
  m.id = "cumem-timeline-loaded";
  m.setAttribute("data-allocations", String(ALLOCS.length));
  m.setAttribute("data-bands", String(document.querySelectorAll("#bands polygon").length));
  m.textContent = ALLOCS.length + " allocations drawn as bands ({total} events in all)";
  document.body.appendChild(m);
}})();
</script>
</body></html>
"##,
            title = esc(&opts.title),
            svg = lay_svg,
            data = data,
            origins = origins,
            total = self.events.len()
        );
        o
    }

    fn json(&self, opts: &Options) -> String {
        let mut o = String::with_capacity(64 * self.events.len() + 160 * self.blocks.len() + 1024);
        let _ = write!(
            o,
            "{{\"format\":\"cumem-memory-timeline\",\"version\":1,\"title\":{},\"events\":{},\"allocated_start_bytes\":{},\"reserved_start_bytes\":{},\"peak_allocated_bytes\":{},\"peak_reserved_bytes\":{},\n\"series\":{{\"time_ns\":[",
            json_str(&opts.title),
            self.events.len(),
            self.allocated_start,
            self.reserved_start,
            self.peak_allocated(),
            self.peak_reserved()
        );
        join(&mut o, self.events.iter().map(|e| e.time_ns));
        o.push_str("],\n\"allocated_bytes\":[");
        join(&mut o, self.allocated.iter().copied());
        o.push_str("],\n\"reserved_bytes\":[");
        join(&mut o, self.reserved.iter().copied());
        o.push_str("]},\n\"allocations\":[");
        for (k, b) in self.blocks.iter().enumerate() {
            if k > 0 {
                o.push_str(",\n");
            }
            let _ = write!(
                o,
                "{{\"addr\":\"{:#x}\",\"size_bytes\":{},\"requested_bytes\":{},\"alloc_event\":{},\"free_event\":{},\"alloc_time_ns\":{},\"free_time_ns\":{},\"thread\":{},\"stream\":{},\"hit\":{},\"origin\":{}}}",
                b.addr,
                b.size,
                b.requested,
                opt_num(b.alloc_event.map(|i| i as u64)),
                opt_num(b.free_event.map(|i| i as u64)),
                b.alloc_ns,
                opt_num(b.free_ns),
                b.thread,
                b.stream,
                b.hit,
                json_opt_str(self.label(b))
            );
        }
        o.push_str("],\n\"ooms\":[");
        for (k, &i) in self.ooms.iter().enumerate() {
            if k > 0 {
                o.push(',');
            }
            let e = &self.events[i];
            let _ = write!(
                o,
                "{{\"event\":{i},\"time_ns\":{},\"requested_bytes\":{}}}",
                e.time_ns, e.requested_bytes
            );
        }
        o.push_str("]}\n");
        o
    }

    /// Chrome's trace-event format ("JSON Object Format"): `C` counter events for the
    /// totals, `b`/`e` async events for each block's lifetime (blocks overlap, which
    /// complete events on one thread may not), `X` slices for device calls, `i` instants
    /// for out-of-memory failures. Times in µs since the engine started.
    fn chrome(&self, opts: &Options) -> String {
        let mut o = String::with_capacity(120 * self.events.len() + 400 * self.blocks.len() + 1024);
        let _ = write!(
            o,
            "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"title\":{}}},\"traceEvents\":[\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":\"CuMem\"}}}}",
            json_str(&opts.title)
        );
        let end_ns = self.events.last().map(|e| e.time_ns + e.duration_ns).unwrap_or(0);
        for (i, e) in self.events.iter().enumerate() {
            let _ = write!(
                o,
                ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":1,\"tid\":0,\"ts\":{},\"args\":{{\"allocated\":{},\"reserved\":{}}}}}",
                us(e.time_ns),
                self.allocated[i],
                self.reserved[i]
            );
            match e.kind {
                2 | 3 => {
                    let _ = write!(
                        o,
                        ",\n{{\"ph\":\"X\",\"cat\":\"device\",\"name\":\"device {} {}\",\"pid\":1,\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"addr\":\"{:#x}\",\"bytes\":{}}}}}",
                        if e.kind == 2 { "alloc" } else { "free" },
                        format_bytes(e.size_bytes),
                        e.thread,
                        us(e.time_ns),
                        us(e.duration_ns),
                        e.addr,
                        e.size_bytes
                    );
                }
                4 => {
                    let _ = write!(
                        o,
                        ",\n{{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"oom\",\"name\":\"out of memory ({} requested)\",\"pid\":1,\"tid\":{},\"ts\":{}}}",
                        format_bytes(e.requested_bytes),
                        e.thread,
                        us(e.time_ns)
                    );
                }
                _ => {}
            }
        }
        for (k, b) in self.blocks.iter().enumerate() {
            let name = format_bytes(b.size);
            let _ = write!(
                o,
                ",\n{{\"ph\":\"b\",\"cat\":\"allocation\",\"name\":\"{name}\",\"id\":\"{k:#x}\",\"pid\":1,\"tid\":{},\"ts\":{},\"args\":{{\"addr\":\"{:#x}\",\"size_bytes\":{},\"requested_bytes\":{},\"hit\":{},\"origin\":{}}}}}",
                b.thread,
                us(b.alloc_ns),
                b.addr,
                b.size,
                b.requested,
                b.hit,
                json_opt_str(self.label(b))
            );
            let _ = write!(
                o,
                ",\n{{\"ph\":\"e\",\"cat\":\"allocation\",\"name\":\"{name}\",\"id\":\"{k:#x}\",\"pid\":1,\"tid\":{},\"ts\":{}}}",
                b.thread,
                us(b.free_ns.unwrap_or(end_ns))
            );
        }
        o.push_str("\n]}\n");
        o
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

/// ns as µs with three decimals (Chrome's `ts` and `dur`).
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn first_line(s: &str) -> &str {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).chain(['…']).collect() }
}

/// XML text and attribute escaping.
fn esc(s: &str) -> String {
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

/// A JSON string literal; `<` and `>` escaped too, so it is safe inside `<script>`.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '<' => o.push_str("\\u003c"),
            '>' => o.push_str("\\u003e"),
            '&' => o.push_str("\\u0026"),
            '\u{2028}' => o.push_str("\\u2028"),
            '\u{2029}' => o.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_opt_str(s: Option<&str>) -> String {
    s.map(json_str).unwrap_or_else(|| "null".into())
}

fn opt_num(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "null".into())
}

fn join(o: &mut String, it: impl Iterator<Item = u64>) {
    for (k, v) in it.enumerate() {
        if k > 0 {
            o.push(',');
        }
        let _ = write!(o, "{v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, t: u64, addr: u64, size: u64) -> Event {
        Event {
            time_ns: t,
            addr,
            size_bytes: size,
            requested_bytes: size,
            kind: kind as u32,
            ..Event::default()
        }
    }

    #[test]
    fn totals_and_blocks() {
        let e = [
            ev(EventKind::DeviceAlloc, 1, 0x1000, 4096),
            ev(EventKind::Alloc, 2, 0x1000, 1024),
            ev(EventKind::Alloc, 3, 0x1400, 2048),
            ev(EventKind::Free, 4, 0x1000, 1024),
            ev(EventKind::Free, 5, 0x9000, 512), // allocated before the window
            ev(EventKind::Oom, 6, 0, 1 << 40),
        ];
        let t = Timeline::new(&e, None).unwrap();
        assert_eq!(t.allocated_start, 512);
        assert_eq!(t.allocated, vec![512, 1536, 3584, 2560, 2048, 2048]);
        // the block freed at event 4 was in memory reserved before the first event
        assert_eq!(t.reserved_start, 512);
        assert_eq!(t.reserved, vec![4608; 6]);
        assert_eq!(t.blocks.len(), 3);
        assert_eq!(t.blocks[2].alloc_event, None);
        assert_eq!(t.ooms, vec![5]);
        assert_eq!(t.peak_allocated(), 3584);
        assert!(Timeline::new(&e, Some(&[None; 2])).is_err());
        let mut bad = e;
        bad[0].kind = 9;
        assert!(Timeline::new(&bad, None).is_err());
    }

    #[test]
    fn device_calls_inside_an_allocation_count_from_it() {
        let mut a = ev(EventKind::Alloc, 100, 0x1000, 1 << 20);
        a.duration_ns = 50;
        let e = [a, ev(EventKind::DeviceAlloc, 120, 0x1000, 2 << 20), ev(EventKind::Alloc, 200, 0x9000, 64)];
        let t = Timeline::new(&e, None).unwrap();
        assert_eq!(t.reserved_start, 0);
        assert_eq!(t.reserved, vec![2 << 20; 3]);
        assert_eq!(t.allocated, vec![1 << 20, 1 << 20, (1 << 20) + 64]);
    }

    #[test]
    fn steps_merge() {
        let mut p = Pts::default();
        for c in 0..10 {
            p.step(c as f64, c as f64 + 1.0, 5.0);
        }
        assert_eq!(p.0, vec![(0.0, 5.0), (10.0, 5.0)]);
        assert_eq!(nice_step(3.7), 5.0);
        assert_eq!(nice_bytes_step(300.0 * 1048576.0), (500.0 * 1048576.0, 1048576.0));
        assert_eq!(json_str("a\"<\n"), "\"a\\\"\\u003c\\n\"");
    }
}

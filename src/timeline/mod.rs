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
//!
//! This file is the model: the digest of the events ([`Timeline::new`]) and the sampled
//! stack of bands the pictures draw (`layout`). The writers, as `impl Timeline` blocks:
//! `svg.rs` (the picture), `html.rs` (the page around it) and `data.rs` (JSON and Chrome
//! trace events).

use crate::error::{Error, Result};
use crate::history::{Event, EventKind};
use std::collections::{BTreeMap, HashMap};

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
    /// Whether blocks allocated in a CUDA graph's private pool (PyTorch's graph pools: an
    /// event whose `stream` is a graph pool's id, [`crate::engine::is_graph_pool_id`]) are
    /// drawn apart (default): the band is hatched and named, the data formats give its
    /// `graph_pool`, and Chrome's format gives its events the category `graph_pool`. With
    /// `false` every block is drawn alike.
    pub graph_pools: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            title: "CuMem memory timeline".into(),
            max_bands: 10_000,
            width: 1200,
            height: 560,
            graph_pools: true,
        }
    }
}

impl Options {
    /// The graph pool `block` was allocated in (its stream, when that is a graph pool's id
    /// and [`Options::graph_pools`] is set), else `None`.
    pub fn graph_pool_of(&self, block: &Block) -> Option<u64> {
        (self.graph_pools && crate::engine::is_graph_pool_id(block.stream)).then_some(block.stream)
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

mod data;
mod html;
mod svg;

// ---------------------------------------------------------------------------------------
// The picture's layout, shared by the SVG and the HTML page

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
}

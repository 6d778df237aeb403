//! The HTML page: the SVG picture with each band's allocation (size, lifetime, thread,
//! origin) as data and a script that shows it under the pointer.

use super::data::{json_str, opt_num};
use super::svg::esc;
use super::{Options, Timeline};
use std::collections::HashMap;
use std::fmt::Write;

impl Timeline<'_> {
    /// The HTML page: the SVG, the drawn blocks' data, and a script that shows a block's
    /// size, lifetime and origin under the pointer.
    pub(super) fn html(&self, opts: &Options) -> String {
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
                "[\"{:#x}\",{},{},{},{},{},{},{},{},{},{}]",
                b.addr,
                b.size,
                b.requested,
                opt_num(b.alloc_event.map(|i| i as u64)),
                opt_num(b.free_event.map(|i| i as u64)),
                b.alloc_ns as i128 - t0 as i128,
                opt_num(b.free_ns.map(|f| f.saturating_sub(b.alloc_ns))),
                b.thread,
                b.hit as u8,
                // a string: pool ids are u64, past a JavaScript number's exact range
                opts.graph_pool_of(b).map(|g| format!("\"{g}\"")).unwrap_or_else(|| "null".into()),
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
Hatched: allocations in a CUDA graph's private pool.
Lines: the allocated and reserved totals. Made by CuMem (src/timeline/).</p>
<script>
"use strict";
// [address, block bytes, requested bytes, allocation event, free event, allocated at (ns since the first event), lifetime (ns), thread, cache hit, graph pool (id or null), origin (index into ORIGINS)]
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
    if (a[9] !== null) s += "\nin graph pool " + a[9] + " (a CUDA graph's private memory)";
    s += "\norigin: " + (a[10] === null ? "unknown (start Julia with -g2 to record origins)" : ORIGINS[a[10]]);
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
}

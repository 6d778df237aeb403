//! The data formats: the timeline as JSON, and as Chrome trace-event JSON for Perfetto or
//! `chrome://tracing`.

use super::{Options, Timeline};
use crate::format::format_bytes;
use std::fmt::Write;

impl Timeline<'_> {
    /// The data as JSON (`"format":"cumem-memory-timeline"`, version 1): the totals
    /// after each event and every block with its lifetime, origin and graph pool (the
    /// pool's id, or null).
    pub(super) fn json(&self, opts: &Options) -> String {
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
                "{{\"addr\":\"{:#x}\",\"size_bytes\":{},\"requested_bytes\":{},\"alloc_event\":{},\"free_event\":{},\"alloc_time_ns\":{},\"free_time_ns\":{},\"thread\":{},\"stream\":{},\"hit\":{},\"graph_pool\":{},\"origin\":{}}}",
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
                opt_num(opts.graph_pool_of(b)),
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
    /// totals, `b`/`e` async events for each block's lifetime (category `allocation`, or
    /// `graph_pool` for a graph pool's blocks; blocks overlap, which
    /// complete events on one thread may not), `X` slices for device calls, `i` instants
    /// for out-of-memory failures. Times in µs since the engine started.
    pub(super) fn chrome(&self, opts: &Options) -> String {
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
            // a graph pool's blocks in a category of their own (a viewer's filter and tracks)
            let graph = opts.graph_pool_of(b);
            let cat = if graph.is_some() { "graph_pool" } else { "allocation" };
            let _ = write!(
                o,
                ",\n{{\"ph\":\"b\",\"cat\":\"{cat}\",\"name\":\"{name}\",\"id\":\"{k:#x}\",\"pid\":1,\"tid\":{},\"ts\":{},\"args\":{{\"addr\":\"{:#x}\",\"size_bytes\":{},\"requested_bytes\":{},\"hit\":{},\"graph_pool\":{},\"origin\":{}}}}}",
                b.thread,
                us(b.alloc_ns),
                b.addr,
                b.size,
                b.requested,
                b.hit,
                opt_num(graph),
                json_opt_str(self.label(b))
            );
            let _ = write!(
                o,
                ",\n{{\"ph\":\"e\",\"cat\":\"{cat}\",\"name\":\"{name}\",\"id\":\"{k:#x}\",\"pid\":1,\"tid\":{},\"ts\":{}}}",
                b.thread,
                us(b.free_ns.unwrap_or(end_ns))
            );
        }
        o.push_str("\n]}\n");
        o
    }
}

/// ns as µs with three decimals (Chrome's `ts` and `dur`).
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// A JSON string literal; `<` and `>` escaped too, so it is safe inside `<script>`.
pub(super) fn json_str(s: &str) -> String {
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

pub(super) fn opt_num(v: Option<u64>) -> String {
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

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"<\n"), "\"a\\\"\\u003c\\n\"");
    }
}

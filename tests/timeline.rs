//! The memory timeline (src/timeline/) and its C function: every format's structure
//! against totals computed here from the events, the size bound on a long history, bad
//! input, and the HTML page's script run by a real headless browser (Debian's
//! `chromium`; the test says SKIPPED where it is absent).

use cumem::ffi::*;
use cumem::history::{Event, EventKind};
use cumem::timeline::{Format, Options, Timeline};
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::process::Command;

fn ev(kind: EventKind, t: u64, addr: u64, size: u64) -> Event {
    Event {
        time_ns: t,
        duration_ns: 100,
        addr,
        size_bytes: size,
        requested_bytes: size,
        kind: kind as u32,
        ..Event::default()
    }
}

/// A small history: one segment, a dozen blocks of different sizes allocated and freed,
/// one freed block that was allocated before the first event, an out-of-memory failure;
/// labels on the allocations.
fn history() -> (Vec<Event>, Vec<Option<String>>) {
    let mut e = vec![ev(EventKind::DeviceAlloc, 10, 0x10_0000, 64 << 20)];
    let mut labels = vec![None];
    let mut t = 20;
    for k in 0..12u64 {
        let mut a = ev(EventKind::Alloc, t, 0x10_0000 + (k << 22), (k + 1) << 18);
        a.hit = (k % 2) as u32;
        a.requested_bytes -= 7;
        e.push(a);
        labels.push(Some(format!("f{k} at model.jl:{k}\n  caller at train.jl:3")));
        t += 1000;
        if k % 3 == 2 {
            let victim = k - 1;
            let mut f = ev(EventKind::Free, t, 0x10_0000 + (victim << 22), (victim + 1) << 18);
            f.lifetime_ns = 2000;
            e.push(f);
            labels.push(None);
            t += 1000;
        }
    }
    let mut pre = ev(EventKind::Free, t, 0x9990_0000, 3 << 20);
    pre.lifetime_ns = 1_000_000;
    e.push(pre);
    labels.push(Some("<made before & freed in> \"the window\"".into()));
    e.push(ev(EventKind::Oom, t + 10, 0, 1 << 40));
    labels.push(None);
    e.push(ev(EventKind::DeviceFree, t + 20, 0x2000_0000, 0));
    labels.push(None);
    (e, labels)
}

fn label_refs(l: &[Option<String>]) -> Vec<Option<&str>> {
    l.iter().map(|s| s.as_deref()).collect()
}

/// Live block bytes after each event, computed here independently of the renderer.
fn allocated_series(e: &[Event]) -> (u64, Vec<u64>) {
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut start = 0u64;
    for x in e {
        if x.kind == EventKind::Free as u32 && !live.contains_key(&x.addr) {
            start += x.size_bytes;
        }
        if x.kind == EventKind::Alloc as u32 {
            live.insert(x.addr, x.size_bytes);
        } else if x.kind == EventKind::Free as u32 {
            live.remove(&x.addr);
        }
    }
    let mut v = Vec::new();
    let mut cur = start;
    live.clear();
    for x in e {
        if x.kind == EventKind::Alloc as u32 {
            cur += x.size_bytes;
            live.insert(x.addr, x.size_bytes);
        } else if x.kind == EventKind::Free as u32 {
            cur -= live.remove(&x.addr).unwrap_or(x.size_bytes);
        }
        v.push(cur);
    }
    (start, v)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cumem-timeline-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn json_has_the_totals_and_every_allocation() {
    let (e, l) = history();
    let labels = label_refs(&l);
    let t = Timeline::new(&e, Some(&labels)).unwrap();
    let v: Value = serde_json::from_str(&t.render(Format::Json, &Options::default())).unwrap();
    let (start, series) = allocated_series(&e);
    assert_eq!(v["allocated_start_bytes"], start);
    let got: Vec<u64> =
        v["series"]["allocated_bytes"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert_eq!(got, series);
    assert_eq!(v["peak_allocated_bytes"], *series.iter().max().unwrap());
    let reserved: Vec<u64> =
        v["series"]["reserved_bytes"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert!(reserved.iter().zip(&series).all(|(r, a)| r >= a), "reserved covers allocated");
    assert_eq!(reserved[0], (64 << 20) + start, "the segment, and the memory of the block from before");
    let allocs = v["allocations"].as_array().unwrap();
    assert_eq!(allocs.len(), 13);
    assert_eq!(allocs[0]["origin"], "f0 at model.jl:0\n  caller at train.jl:3");
    assert_eq!(allocs[0]["requested_bytes"], (1u64 << 18) - 7);
    assert_eq!(allocs[1]["free_event"], 4, "freed after the third allocation");
    let pre = allocs.iter().find(|a| a["alloc_event"].is_null()).unwrap();
    assert_eq!(pre["origin"], "<made before & freed in> \"the window\"");
    assert_eq!(pre["alloc_time_ns"], pre["free_time_ns"].as_u64().unwrap().saturating_sub(1_000_000));
    assert_eq!(v["ooms"].as_array().unwrap().len(), 1);
    assert_eq!(v["series"]["time_ns"].as_array().unwrap().len(), e.len());
}

#[test]
fn chrome_trace_has_counters_and_a_slice_per_allocation() {
    let (e, l) = history();
    let labels = label_refs(&l);
    let t = Timeline::new(&e, Some(&labels)).unwrap();
    let v: Value = serde_json::from_str(&t.render(Format::Chrome, &Options::default())).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let count = |ph: &str| evs.iter().filter(|x| x["ph"] == ph).count();
    assert_eq!(count("C"), e.len());
    assert_eq!(count("b"), 13);
    assert_eq!(count("e"), 13);
    assert_eq!(count("i"), 1);
    assert_eq!(count("X"), 2, "the device alloc and free");
    let (_, series) = allocated_series(&e);
    let counters: Vec<&Value> = evs.iter().filter(|x| x["ph"] == "C").collect();
    for (c, a) in counters.iter().zip(&series) {
        assert_eq!(c["args"]["allocated"], *a);
    }
    // every slice begins no later than it ends, ids pair up
    let mut begin: HashMap<String, f64> = HashMap::new();
    for x in evs {
        let ts = x["ts"].as_f64().unwrap_or(0.0);
        match x["ph"].as_str().unwrap() {
            "b" => {
                begin.insert(x["id"].as_str().unwrap().into(), ts);
            }
            "e" => assert!(begin[x["id"].as_str().unwrap()] <= ts),
            _ => {}
        }
    }
    assert_eq!(begin.len(), 13);
}

/// Polygons with a `data-a` index ≥ 0 (one per band) in an SVG.
fn bands(svg: &str) -> usize {
    svg.matches("<polygon data-a=\"").count()
}

#[test]
fn svg_draws_a_band_per_block_and_both_lines() {
    let (e, l) = history();
    let labels = label_refs(&l);
    let t = Timeline::new(&e, Some(&labels)).unwrap();
    let svg = t.render(Format::Svg, &Options { title: "a & b".into(), ..Options::default() });
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("<title>a &amp; b</title>"));
    // few events: every block is drawn (no summarizing), each with its origin as tooltip
    assert_eq!(bands(&svg), 13);
    assert!(svg.contains("f3 at model.jl:3</title>"));
    assert!(svg.contains("&lt;made before &amp; freed in&gt;"));
    assert!(svg.contains("<polyline id=\"allocated\""));
    assert!(svg.contains("<polyline id=\"reserved\""));
    assert_eq!(svg.matches("class=\"oom\"").count(), 1);
    // the allocated line's highest point is the peak: the plot is scaled so that the
    // y axis's top tick is at or above it
    assert!(svg.contains(&format!("peak allocated {}", cumem::format::format_bytes(t.peak_allocated()))));
    // with a band limit the rest is summarized
    let svg3 = t.render(Format::Svg, &Options { max_bands: 3, ..Options::default() });
    assert_eq!(bands(&svg3), 3);
    assert!(svg3.contains("<polygon id=\"summarized\""));
    assert!(svg3.contains("10 allocations smaller than"));
}

#[test]
fn empty_history_renders() {
    let t = Timeline::new(&[], None).unwrap();
    for f in [Format::Svg, Format::Html, Format::Json, Format::Chrome] {
        let s = t.render(f, &Options::default());
        assert!(!s.is_empty());
        if matches!(f, Format::Json | Format::Chrome) {
            serde_json::from_str::<Value>(&s).unwrap();
        }
    }
}

/// A long history (300 000 events: layers of weights alive throughout, activations
/// that come and go, small temporaries) stays a small picture.
#[test]
fn long_history_is_bounded() {
    let mut e = Vec::new();
    let mut t = 0u64;
    let mut push = |e: &mut Vec<Event>, k: EventKind, addr: u64, size: u64| {
        t += 50;
        e.push(ev(k, t, addr, size));
    };
    push(&mut e, EventKind::DeviceAlloc, 1 << 40, 8 << 30);
    for w in 0..100u64 {
        push(&mut e, EventKind::Alloc, (1 << 40) + (w << 24), 4 << 20);
    }
    let mut addr = 1u64 << 41;
    while e.len() < 300_000 {
        let mut acts = Vec::new();
        for layer in 0..48u64 {
            addr += 1 << 26;
            push(&mut e, EventKind::Alloc, addr, (8 + layer % 5) << 20);
            acts.push((addr, (8 + layer % 5) << 20));
            for s in 0..20u64 {
                push(&mut e, EventKind::Alloc, addr + (1 << 25) + (s << 12), 2048);
                push(&mut e, EventKind::Free, addr + (1 << 25) + (s << 12), 2048);
            }
        }
        for (a, s) in acts.into_iter().rev() {
            push(&mut e, EventKind::Free, a, s);
        }
    }
    let t = Timeline::new(&e, None).unwrap();
    let opts = Options::default();
    let svg = t.render(Format::Svg, &opts);
    let html = t.render(Format::Html, &opts);
    assert!(svg.len() < 4 << 20, "SVG of {} bytes", svg.len());
    assert!(html.len() < 6 << 20, "HTML of {} bytes", html.len());
    let n = bands(&svg);
    assert!(n > 100 && n <= opts.max_bands, "{n} bands");
    assert!(svg.contains("<polygon id=\"summarized\""), "the 2 KiB temporaries are summed");
}

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].iter().map(PathBuf::from).find(|p| p.exists())
}

/// The HTML page in a real headless browser: its script runs and writes the marker
/// element with the number of allocations it loaded and the bands it found.
#[test]
fn html_page_script_runs_in_chromium() {
    let (e, l) = history();
    let labels = label_refs(&l);
    let t = Timeline::new(&e, Some(&labels)).unwrap();
    let html = t.render(Format::Html, &Options::default());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg xmlns"));
    assert!(html.contains("var ALLOCS = ["));
    assert!(html.contains("var ORIGINS = ["));
    // each origin once
    assert_eq!(html.matches("f3 at model.jl:3").count(), 1);
    // the origin strings reach the script safely escaped
    assert!(html.contains("\\u003cmade before \\u0026 freed in\\u003e \\\"the window\\\""));
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED html_page_script_runs_in_chromium: /usr/bin/chromium is absent (apt-get install chromium)"
        );
        return;
    };
    let page = tmp("page.html");
    std::fs::write(&page, &html).unwrap();
    let profile = tmp("chromium-profile");
    // (under coreutils' `timeout` where there is one, so a browser that hangs fails the
    // test instead of stalling the suite)
    let mut cmd = if Path::new("/usr/bin/timeout").exists() {
        let mut c = Command::new("/usr/bin/timeout");
        c.arg("120").arg(chromium);
        c
    } else {
        Command::new(chromium)
    };
    let out = cmd
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("running chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains(r#"id="cumem-timeline-loaded" data-allocations="13" data-bands="13""#),
        "the page's script did not run (status {}):\n{}\n--- stderr\n{}",
        out.status,
        &dom[..dom.len().min(2000)],
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(profile);
}

#[test]
fn c_function_writes_every_format_and_refuses_bad_input() {
    let (e, l) = history();
    let cl: Vec<Option<CString>> =
        l.iter().map(|s| s.as_ref().map(|s| CString::new(s.as_str()).unwrap())).collect();
    let lp: Vec<*const c_char> =
        cl.iter().map(|s| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())).collect();
    for (fmt, name) in [
        (CUMEM_TIMELINE_SVG, "t.svg"),
        (CUMEM_TIMELINE_HTML, "t.html"),
        (CUMEM_TIMELINE_JSON, "t.json"),
        (CUMEM_TIMELINE_CHROME, "t.trace.json"),
    ] {
        let p = tmp(name);
        let cp = CString::new(p.to_str().unwrap()).unwrap();
        let rc =
            unsafe { cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, lp.as_ptr(), cp.as_ptr(), fmt) };
        assert_eq!(rc, CUMEM_SUCCESS, "{name}");
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("CuMem memory timeline: "), "{name}: the title names the pool");
        if fmt == CUMEM_TIMELINE_JSON || fmt == CUMEM_TIMELINE_CHROME {
            serde_json::from_str::<Value>(&text).unwrap();
        }
        // no labels
        let rc = unsafe {
            cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, std::ptr::null(), cp.as_ptr(), fmt)
        };
        assert_eq!(rc, CUMEM_SUCCESS);
    }
    let never = tmp("never.svg");
    let cn = CString::new(never.to_str().unwrap()).unwrap();
    let bad = |rc: i32, what: &str| {
        assert_eq!(rc, CUMEM_ERROR_INVALID_VALUE, "{what}");
        let msg = unsafe { std::ffi::CStr::from_ptr(cumem_last_error()) }.to_string_lossy().into_owned();
        assert!(!msg.is_empty(), "{what}: a message");
        assert!(!never.exists(), "{what}: nothing written");
        msg
    };
    unsafe {
        let m = bad(
            cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, lp.as_ptr(), cn.as_ptr(), 9),
            "format",
        );
        assert!(m.contains("unknown timeline format 9"));
        bad(cumem_save_memory_timeline(std::ptr::null(), 3, std::ptr::null(), cn.as_ptr(), 0), "null events");
        bad(
            cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, std::ptr::null(), std::ptr::null(), 0),
            "null path",
        );
        let mut odd = e.clone();
        odd[2].kind = 77;
        let m = bad(
            cumem_save_memory_timeline(odd.as_ptr(), odd.len() as u64, std::ptr::null(), cn.as_ptr(), 0),
            "kind",
        );
        assert!(m.contains("unknown kind 77"));
        let badutf = [0xffu8, 0xfe, 0];
        let mut lp2 = lp.clone();
        lp2[1] = badutf.as_ptr() as *const c_char;
        let m = bad(
            cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, lp2.as_ptr(), cn.as_ptr(), 0),
            "label",
        );
        assert!(m.contains("label 1 is not UTF-8"));
        let nodir = CString::new("/nonexistent-dir/x.svg").unwrap();
        let m = bad(
            cumem_save_memory_timeline(e.as_ptr(), e.len() as u64, std::ptr::null(), nodir.as_ptr(), 0),
            "path",
        );
        assert!(m.contains("cannot write the timeline"));
        // zero events with null pointers is an empty timeline
        let empty = tmp("empty.json");
        let ce = CString::new(empty.to_str().unwrap()).unwrap();
        assert_eq!(
            cumem_save_memory_timeline(std::ptr::null(), 0, std::ptr::null(), ce.as_ptr(), 2),
            CUMEM_SUCCESS
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&empty).unwrap()).unwrap();
        assert_eq!(v["events"], 0);
    }
}

#[test]
fn formats_from_names_and_paths() {
    assert_eq!(Format::parse("SVG").unwrap(), Format::Svg);
    assert_eq!(Format::parse("chrome").unwrap(), Format::Chrome);
    assert!(Format::parse("png").is_err());
    assert_eq!(Format::from_path("a/b.trace.json"), Some(Format::Chrome));
    assert_eq!(Format::from_path("b.JSON"), Some(Format::Json));
    assert_eq!(Format::from_path("b.htm"), Some(Format::Html));
    assert_eq!(Format::from_path("b.png"), None);
    assert!(Format::from_code(4).is_err());
}

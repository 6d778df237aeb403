//! The `cumem-bench` binary end to end: `--quick --json` runs of `replay`, `pair` and
//! `threads` give plausible JSON lines, and `chart` writes an SVG.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the traces are in its `data/`).
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn bench(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_cumem-bench"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("cumem-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cumem-bench {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number {k:?} in {v}"))
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_else(|| panic!("no string {k:?} in {v}"))
}

/// Events (`a`/`f` lines) of a trace, counted independently of the tool's parser.
fn trace_events(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("a ") || l.starts_with("f "))
        .count()
}

#[test]
fn replay_quick_json() {
    let trace = Path::new(ROOT).join("data/gpt2_train.trace");
    let events = trace_events(&trace);
    assert!(events > 0 && events <= 20_000, "gpt2 fits --quick's cap");
    let rows = bench(&["replay", "data/gpt2_train.trace", "--pool", "all", "--quick", "--json"]);
    let pools: Vec<&str> = rows.iter().map(|r| str_of(r, "pool")).collect();
    assert_eq!(pools, ["binned", "split", "expandable", "simple", "none"]);
    for r in &rows {
        assert_eq!(str_of(r, "bench"), "replay");
        assert_eq!(str_of(r, "trace"), "gpt2_train");
        assert_eq!(str_of(r, "device"), "host");
        assert_eq!(num(r, "events") as usize, events, "{r}");
        for k in ["ns_per_event_warm", "ns_per_event_cold"] {
            assert!(num(r, k) > 0.0, "{k}: {r}");
        }
        let live = num(r, "peak_live");
        assert!(live > 8e9 && live < 9e9, "gpt2 peaks at 8.67 GB live: {r}");
        assert!(num(r, "peak_reserved") >= live, "{r}");
        assert!(num(r, "reserved_over_live") >= 1.0, "{r}");
        let hit = num(r, "hit_rate");
        assert!((0.0..=1.0).contains(&hit), "{r}");
        assert!(num(r, "device_allocs_cold") >= 1.0, "{r}");
        num(r, "device_allocs_warm");
        assert_eq!(num(r, "failed"), 0.0, "{r}");
    }
    // Caching pools serve warm passes mostly from the cache; `none` never does, and its
    // one warm pass (--quick) calls the device as often as the cold one.
    let none = &rows[4];
    assert_eq!(str_of(none, "pool"), "none");
    assert_eq!(num(none, "hit_rate"), 0.0);
    assert_eq!(num(none, "device_allocs_warm"), num(none, "device_allocs_cold"));
    for r in &rows[..4] {
        assert!(num(r, "hit_rate") > 0.0, "{r}");
    }
}

#[test]
fn pair_quick_json() {
    let rows = bench(&["pair", "--quick", "--json"]);
    assert_eq!(rows.len(), 5 * 5, "5 pools × 5 sizes");
    for r in &rows {
        assert_eq!(str_of(r, "bench"), "pair");
        assert!(num(r, "size") >= 512.0);
        let ns = num(r, "ns_per_pair");
        assert!(ns > 0.0 && ns < 1e7, "{r}");
        let hit = num(r, "hit_rate");
        assert!((0.0..=1.0).contains(&hit), "{r}");
        if str_of(r, "pool") != "none" {
            assert_eq!(hit, 1.0, "a warm pair always hits: {r}");
        }
    }
}

#[test]
fn threads_quick_json() {
    let rows = bench(&["threads", "--quick", "--json", "--threads", "1,2", "--pool", "binned,split"]);
    assert_eq!(rows.len(), 4);
    let counts: Vec<f64> = rows.iter().map(|r| num(r, "threads")).collect();
    assert_eq!(counts, [1.0, 2.0, 1.0, 2.0]);
    for r in &rows {
        assert_eq!(str_of(r, "bench"), "threads");
        assert_eq!(num(r, "size"), 4096.0);
        assert!(num(r, "ns_per_pair") > 0.0, "{r}");
        assert!(num(r, "shards") >= 1.0);
    }
}

#[test]
fn soak_quick_json() {
    let rows =
        bench(&["soak", "--quick", "--json", "--pool", "split", "--limit", "32MiB", "--interval", "0.5"]);
    assert!(rows.len() >= 3, "{rows:?}");
    for r in &rows {
        assert_eq!((str_of(r, "bench"), str_of(r, "pool")), ("soak", "split"));
        assert_eq!(num(r, "corrupted"), 0.0);
        assert!(num(r, "reserved_bytes") <= 32.0 * 1048576.0, "{r}");
        assert!(num(r, "rss_bytes") > 0.0);
    }
    assert!(rows[..rows.len() - 1].iter().all(|r| num(r, "ops_per_s") > 0.0));
    let end = rows.last().unwrap();
    assert_eq!(end.get("clean").and_then(Value::as_bool), Some(true), "{end}");
    assert_eq!(num(end, "reserved_bytes"), 0.0);
    assert!(num(end, "checked") > 0.0 && num(end, "ooms") > 0.0, "a 32 MiB limit must be hit: {end}");
    // Everything freed and reclaimed: every segment went back to the host device (mapped ones
    // unmapped), so the process keeps less than the limit (an RSS that kept what the run
    // used, as the split soak's once did, holds more).
    assert!(num(end, "rss_bytes") < num(end, "limit_bytes"), "RSS after the reclaim: {end}");
}

#[test]
fn bad_arguments_are_errors() {
    for args in [
        &["replay", "--pool", "bogus"][..],
        &["replay", "/nonexistent.trace"],
        &["pair", "--sizes", "4QB"],
        &["threads", "--threads", "0"],
    ] {
        let out =
            Command::new(env!("CARGO_BIN_EXE_cumem-bench")).args(args).current_dir(ROOT).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn chart_writes_svg() {
    let dir = std::env::temp_dir().join(format!("cumem-bench-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("results.jsonl");
    let anchor = dir.join("anchor.jsonl");
    let mut lines = String::new();
    for (trace, base) in [("gpt2_train", 40.0), ("random_seed1", 35.0)] {
        for (i, pool) in ["binned", "split", "simple", "none"].iter().enumerate() {
            lines += &format!(
                "{{\"bench\":\"replay\",\"trace\":\"{trace}\",\"pool\":\"{pool}\",\"device\":\"cuda\",\
                 \"events\":100,\"ns_per_event_warm\":{},\"ns_per_event_cold\":1000,\
                 \"peak_live\":1000,\"peak_reserved\":{},\"reserved_over_live\":{},\
                 \"reserved_over_live_warm\":{}}}\n",
                base * (i + 1) as f64,
                1000 + 100 * i,
                1.0 + 0.1 * i as f64,
                1.0 + 0.1 * i as f64
            );
        }
    }
    lines +=
        "{\"bench\":\"pair\",\"pool\":\"binned\",\"device\":\"cuda\",\"size\":4096,\"ns_per_pair\":50}\n";
    lines += "{\"bench\":\"threads\",\"pool\":\"split\",\"device\":\"cuda\",\"threads\":4,\"size\":4096,\"ns_per_pair\":90}\n";
    lines += "not json, skipped\n";
    std::fs::write(&input, lines).unwrap();
    std::fs::write(
        &anchor,
        "{\"built_ext_s\": 25.0}\n\
         {\"bench\": \"pair\", \"bytes\": 4096, \"torch_caching_ns\": 441.0, \"cuda_async_pool_ns\": 1002.0, \"cudaMalloc_ns\": 63600.0}\n\
         {\"bench\": \"threads\", \"threads\": 4, \"bytes\": 4096, \"torch_caching_ns_per_pair\": 1500.0, \"cuda_async_ns_per_pair\": 2000.0}\n\
         {\"bench\": \"replay\", \"trace\": \"gpt2_train.trace\", \"events\": 100, \"peak_live_bytes\": 1000, \
          \"torch_caching_ns_per_event\": 690.0, \"torch_caching_peak_reserved\": 1070, \"torch_caching_fails\": 0, \
          \"cuda_async_pool_ns_per_event\": 1685.0, \"cuda_async_pool_peak_reserved\": 1006, \"cuda_async_pool_fails\": 0, \
          \"cudaMalloc_ns_per_event\": 30000.0, \"cudaMalloc_peak_reserved\": 1000, \"cudaMalloc_fails\": 0}\n",
    )
    .unwrap();
    let out: PathBuf = dir.join("sub/perf.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_cumem-bench"))
        .args(["chart", "--input"])
        .arg(&input)
        .arg("--anchor")
        .arg(&anchor)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<svg") || svg.contains("<svg"), "an SVG");
    for text in [
        "gpt2_train",
        "random_seed1",
        "CuMem binned",
        "PyTorch caching (anchor)",
        "cudaMalloc (anchor)",
        "4 KiB",
        "4 threads",
        "690",
    ] {
        assert!(svg.contains(text), "the chart shows {text:?}");
    }
    assert!(svg.matches("<rect").count() > 20, "bars are drawn");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `replay --timeline`: one JSON timeline per pool whose allocations are the trace's and
/// whose peak reserved is the replay's cold peak (the same engine history, one pass).
#[test]
fn replay_timeline_per_pool() {
    let dir = std::env::temp_dir().join(format!("cumem-bench-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("{trace}-{pool}.json");
    let rows = bench(&[
        "replay",
        "data/gpt2_train.trace",
        "--pool",
        "binned,split",
        "--quick",
        "--json",
        "--timeline",
        template.to_str().unwrap(),
    ]);
    let trace = Path::new(ROOT).join("data/gpt2_train.trace");
    let allocs = std::fs::read_to_string(&trace).unwrap().lines().filter(|l| l.starts_with("a ")).count();
    for r in &rows {
        let pool = str_of(r, "pool");
        let text = std::fs::read_to_string(dir.join(format!("gpt2_train-{pool}.json"))).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["format"], "cumem-memory-timeline");
        let recorded =
            v["allocations"].as_array().unwrap().iter().filter(|a| !a["alloc_event"].is_null()).count();
        assert_eq!(recorded, allocs, "{pool}: every allocation of the trace");
        // binned is deterministic: its cold peak is the same in both replays
        if pool == "binned" {
            assert_eq!(num(&v, "peak_reserved_bytes"), num(r, "peak_reserved"), "{pool}");
        }
        assert!(num(&v, "peak_allocated_bytes") >= num(r, "peak_live"), "{pool}: blocks ≥ requests");
    }
    // several pools need {pool} in the name
    let out = Command::new(env!("CARGO_BIN_EXE_cumem-bench"))
        .args(["replay", "data/gpt2_train.trace", "--pool", "binned,split", "--quick", "--timeline", "x.svg"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("put {trace} and/or {pool} in the name"));
    let _ = std::fs::remove_dir_all(dir);
}

/// `--host-capacity` sizes the host device: a capacity below the trace's peak fails
/// allocations (counted), one above it none, and a bad value is refused with a message.
#[test]
fn host_capacity_sizes_the_host_device() {
    let args = |cap: &'static str| {
        [
            "replay",
            "data/resnet50_train.trace",
            "--pool",
            "expandable",
            "--quick",
            "--json",
            "--host-capacity",
            cap,
        ]
    };
    let big = bench(&args("16GiB"));
    assert_eq!(num(&big[0], "failed"), 0.0, "{}", big[0]);
    let small = bench(&args("64MiB"));
    assert!(num(&small[0], "failed") > 0.0, "{}", small[0]);
    let out = Command::new(env!("CARGO_BIN_EXE_cumem-bench"))
        .args(["replay", "--host-capacity", "0", "--quick"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--host-capacity"), "{out:?}");
}

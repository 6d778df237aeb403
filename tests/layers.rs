//! The engine's layers (docs/design.md, "Layers"): every module of `src/` may use only
//! modules of lower layers, so the import graph has no cycle and no arrow pointing up.
//! The test reads the sources and lists every `crate::<module>` reference that breaks
//! the order.

use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module of `src/` and its layer, bottom up. A new module goes in at the
/// layer of what it serves (docs/design.md draws them).
const LAYERS: &[(&str, u32)] = &[
    // leaves: used by every layer, using none
    ("error", 0),
    ("format", 0),
    ("stats", 0),
    ("sync", 0),
    ("tracking", 0),
    ("logging", 0),
    ("snapshot", 0),
    ("config", 1),
    ("live", 1),
    // the allocation-history rings (use tracking's thread index and symbolizer, sync)
    ("history", 1),
    ("device", 2),
    ("upstream", 3),
    ("pool", 4),
    // per-thread block caches in front of the engine's shards (uses live and stats)
    ("thread_cache", 4),
    ("engine", 5),
    ("report", 6),
    // the pinned host pool: a second engine over page-locked host memory
    ("pinned", 6),
    // memory timeline pictures of an event history (over history and format)
    ("timeline", 6),
    // kernels and cuBLAS over the engine's device and memory (their C functions are in
    // the C ABI, ffi/compute.rs)
    ("compute", 6),
    // the process's engines: one per device, the current device, address routing, the
    // pinned host pool (RMM's per_device_resource)
    ("engines", 7),
    // the C ABI, alone on the top floor: translation into status codes
    ("ffi", 8),
];

/// `crate::<name>` references in `text`, comments removed.
fn crate_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.push(name);
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn modules_use_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs");
        if top == "lib" {
            continue;
        }
        let Some(&mine) = layer.get(top) else {
            bad.push(format!(
                "src/{} is in no layer: add `{top}` to LAYERS in tests/layers.rs",
                rel.display()
            ));
            continue;
        };
        for dep in crate_refs(&std::fs::read_to_string(f).unwrap()) {
            if dep == top {
                continue;
            }
            match layer.get(dep.as_str()) {
                // Re-exports at the crate root (`crate::Engine`, ...) name no module.
                None if dep.chars().next().is_some_and(char::is_uppercase) => {}
                None => bad.push(format!("src/{} uses crate::{dep}, which is in no layer", rel.display())),
                Some(&theirs) if theirs >= mine => bad.push(format!(
                    "src/{} (layer {mine}, {top}) uses crate::{dep} (layer {theirs}): an arrow up or sideways",
                    rel.display()
                )),
                Some(_) => {}
            }
        }
    }
    assert!(bad.is_empty(), "the layering is broken:\n{}", bad.join("\n"));
    assert!(files.len() > LAYERS.len(), "read the sources");
}

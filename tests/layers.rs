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

/// A module of the crate, as the path of names from the crate root (`["pool",
/// "expandable", "arena"]`; the root is `[]`).
type ModPath = Vec<String>;

/// The module a source file is (`src/pool/mod.rs` → `pool`, `src/pool/binned.rs` →
/// `pool::binned`, `src/lib.rs` → the root).
fn module_of(rel: &Path) -> ModPath {
    let mut names: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(names.last().map(String::as_str), Some("mod" | "lib")) {
        names.pop();
    }
    names
}

/// The module paths that the code of one file names, resolved against the module
/// `here`: `crate::a::b…`, `super::…` (any number), `self::…`, and paths that start with
/// a child module the file declares (`mod arena;` then `use arena::Arena`). Comments
/// are removed; an inline module (`mod tests { … }`) resolves `super::`/`self::` from
/// itself, and counts as its file. Each path is returned whole (`pool::split::SMALL_SIZE`);
/// the caller cuts it to a module that exists.
fn module_refs(text: &str, here: &[String]) -> Vec<ModPath> {
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let code: Vec<&str> = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect();
    let children: Vec<String> = code
        .iter()
        .filter_map(|l| {
            let t = l.trim_start().trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ");
            let t = t.trim_start_matches("pub ");
            let rest = t.strip_prefix("mod ")?;
            rest.trim_end().ends_with(';').then(|| ident(rest))
        })
        .collect();
    // Inline modules open at a brace depth; `scope` is the module path at each point.
    let mut inline: Vec<(String, i64)> = Vec::new();
    let mut depth = 0i64;
    let mut out = Vec::new();
    for l in code {
        let mut scope: ModPath = here.to_vec();
        scope.extend(inline.iter().map(|(n, _)| n.clone()));
        let bytes = l.as_bytes();
        let mut i = 0;
        while i < l.len() {
            // A path starts where no identifier character or `::` comes before.
            let starts = i == 0 || {
                let p = bytes[i - 1];
                !(p.is_ascii_alphanumeric() || p == b'_' || p == b':')
            };
            let rest = &l[i..];
            if !starts || !rest.starts_with(|c: char| c.is_alphabetic() || c == '_') {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let mut segs: Vec<String> = Vec::new();
            let mut r = rest;
            loop {
                let id = ident(r);
                r = &r[id.len()..];
                segs.push(id);
                match r.strip_prefix("::") {
                    Some(t) if t.starts_with(|c: char| c.is_alphabetic() || c == '_') => r = t,
                    _ => break,
                }
            }
            i += rest.len() - r.len();
            if segs.len() < 2 && !r.starts_with("::{") {
                continue;
            }
            let mut base: ModPath;
            let mut k = 0;
            match segs[0].as_str() {
                "crate" => {
                    base = Vec::new();
                    k = 1;
                }
                "super" | "self" => {
                    base = scope.clone();
                    while k < segs.len() && matches!(segs[k].as_str(), "super" | "self") {
                        if segs[k] == "super" {
                            base.pop();
                        }
                        k += 1;
                    }
                }
                c if children.iter().any(|x| x == c) && inline.is_empty() => base = here.to_vec(),
                _ => continue,
            }
            // `use super::{a, b::C}`: each name in the braces on this line counts too.
            if r.starts_with("::{") {
                let inner = &r[3..r.find('}').unwrap_or(r.len())];
                for item in inner.split(',') {
                    let mut p = base.clone();
                    p.extend(segs[k..].iter().cloned());
                    p.extend(item.trim().split("::").map(ident).filter(|s| !s.is_empty() && s != "self"));
                    out.push(p);
                }
            }
            base.extend(segs[k..].iter().cloned());
            out.push(base);
        }
        for (j, c) in l.char_indices() {
            match c {
                '{' => {
                    depth += 1;
                    let before = l[..j].trim_end();
                    if let Some(p) = before.rfind("mod ") {
                        let name = ident(&before[p + 4..]);
                        if !name.is_empty() && before[p + 4..].trim() == name {
                            inline.push((name, depth));
                        }
                    }
                }
                '}' => {
                    if inline.last().is_some_and(|&(_, d)| d == depth) {
                        inline.pop();
                    }
                    depth -= 1;
                }
                _ => {}
            }
        }
    }
    out
}

/// No two modules of the crate import each other, directly or around a longer circle:
/// every `crate::`, `super::`, `self::` and child-module path of every file is cut to the
/// deepest module (source file) it names, and the graph of file → module must have no
/// cycle. A module's references to its own ancestors (`use super::Block` from a child of
/// `pool`) are left out: the parent declares the child, and its items are the child's
/// context, not a sibling's. A cycle is named in the failure (`a -> b -> a`); the way
/// out is to move the shared item to the lower module or to a small new one.
#[test]
fn modules_import_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeMap<ModPath, &std::path::PathBuf> =
        files.iter().map(|f| (module_of(f.strip_prefix(&src).unwrap()), f)).collect();
    let mut edges = Graph::new();
    for (m, f) in &modules {
        let text = std::fs::read_to_string(f).unwrap();
        let e = edges.entry(m.clone()).or_default();
        for mut p in module_refs(&text, m) {
            while !p.is_empty() && !modules.contains_key(&p) {
                p.pop();
            }
            if !m.starts_with(&p) {
                e.insert(p);
            }
        }
    }
    let cycles = find_cycles(&edges);
    assert!(
        cycles.is_empty(),
        "modules import each other (move the shared item down):\n{}",
        cycles.join("\n")
    );
    // The parser sees the imports it must: arena uses free_lists, which uses node.
    let arena: ModPath = ["pool", "expandable", "arena"].map(String::from).to_vec();
    let lists: ModPath = ["pool", "expandable", "free_lists"].map(String::from).to_vec();
    assert!(edges[&arena].contains(&lists), "arena -> free_lists not seen: {:?}", edges[&arena]);
    assert!(edges.values().map(|s| s.len()).sum::<usize>() > modules.len(), "too few imports seen");
}

type Graph = BTreeMap<ModPath, std::collections::BTreeSet<ModPath>>;

/// The cycles a depth-first search of `edges` meets, each named `a -> b -> a`.
fn find_cycles(edges: &Graph) -> Vec<String> {
    // Colours: 0 not seen, 1 on the stack (grey: reaching it again closes a cycle), 2 done.
    fn visit(
        m: &ModPath,
        edges: &Graph,
        colour: &mut BTreeMap<ModPath, u8>,
        stack: &mut Vec<ModPath>,
        cycles: &mut Vec<String>,
    ) {
        colour.insert(m.clone(), 1);
        stack.push(m.clone());
        for t in edges.get(m).into_iter().flatten() {
            match colour.get(t).copied().unwrap_or(0) {
                0 => visit(t, edges, colour, stack, cycles),
                1 => {
                    let from = stack.iter().position(|x| x == t).unwrap();
                    let mut names: Vec<String> = stack[from..].iter().map(|x| x.join("::")).collect();
                    names.push(t.join("::"));
                    cycles.push(names.join(" -> "));
                }
                _ => {}
            }
        }
        stack.pop();
        colour.insert(m.clone(), 2);
    }
    let (mut colour, mut cycles) = (BTreeMap::new(), Vec::new());
    for m in edges.keys() {
        if !colour.contains_key(m) {
            visit(m, edges, &mut colour, &mut Vec::new(), &mut cycles);
        }
    }
    cycles
}

fn path(names: &[&str]) -> ModPath {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_circle_check_reads_paths_and_finds_circles() {
    // Paths from a sibling (`super::b`), two levels up, the crate root, braces, and a
    // `super::` inside an inline `mod tests` (relative to the file's own module).
    let a = module_refs("use super::b::Thing;\nfn f() { super::super::c::g(); }", &path(&["x", "a"]));
    assert!(a.contains(&path(&["x", "b", "Thing"])), "{a:?}");
    assert!(a.contains(&path(&["c", "g"])), "{a:?}");
    let b = module_refs(
        "use crate::x::{a::Node, y};\nmod tests {\n    use super::helper::H;\n}\n// use crate::z::Q;",
        &path(&["x", "b"]),
    );
    assert!(b.contains(&path(&["x", "a", "Node"])), "{b:?}");
    assert!(b.contains(&path(&["x", "y"])), "{b:?}");
    assert!(b.contains(&path(&["x", "b", "helper", "H"])), "{b:?}");
    assert!(!b.iter().any(|p| p[0] == "z"), "a comment is no import: {b:?}");
    // x::a -> x::b -> x::a is a circle; x::c -> x::a is not part of one.
    let mut g = Graph::new();
    g.entry(path(&["x", "a"])).or_default().insert(path(&["x", "b"]));
    g.entry(path(&["x", "b"])).or_default().insert(path(&["x", "a"]));
    g.entry(path(&["x", "c"])).or_default().insert(path(&["x", "a"]));
    assert_eq!(find_cycles(&g), vec!["x::a -> x::b -> x::a".to_owned()]);
    g.get_mut(&path(&["x", "b"])).unwrap().clear();
    assert!(find_cycles(&g).is_empty());
}

//! `include/cumem.h` is generated from the Rust sources by cbindgen (`cbindgen.toml`).
//! This test regenerates it in memory and fails when the committed header differs;
//! `CUMEM_BLESS=1 cargo test --test header` (or `make header`) rewrites it. It also
//! checks the header against the contract (docs/contract.md, first written as a list of
//! prototypes before the code: every function, the statistics struct's
//! fields in order, the status codes) and, where a C compiler exists, that it compiles
//! and that the struct's layout in C matches the Rust `Stats`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn header_path() -> PathBuf {
    root().join("include/cumem.h")
}

fn generate() -> String {
    let dir = root();
    let cfg = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("reading cbindgen.toml");
    let bindings = cbindgen::generate_with_config(&dir, cfg).expect("cbindgen failed on the crate");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).unwrap()
}

/// The generated header, after rewriting the committed one when `CUMEM_BLESS=1` (only
/// `header_is_up_to_date` calls this, so tests running in parallel never see the file
/// half-written).
fn generated() -> String {
    let text = generate();
    if std::env::var("CUMEM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(header_path().parent().unwrap()).unwrap();
        std::fs::write(header_path(), &text).unwrap();
    }
    text
}

#[test]
fn header_is_up_to_date() {
    let text = generated();
    let committed = std::fs::read_to_string(header_path()).unwrap_or_default();
    if committed != text {
        let first = committed
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(text.lines().count()));
        panic!(
            "include/cumem.h is out of date with the Rust sources (first difference at line {}).\n\
             Regenerate it with `make header` or `CUMEM_BLESS=1 cargo test --test header`, \
             and commit it.\n--- committed: {:?}\n--- generated: {:?}",
            first + 1,
            committed.lines().nth(first),
            text.lines().nth(first)
        );
    }
}

/// Collapses whitespace, so prototypes compare independent of layout.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace(" (", "(").replace("( ", "(")
}

/// The prototypes the contract started with, verbatim (comments removed).
const DESIGN_FUNCTIONS: &[&str] = &[
    "int32_t cumem_init(void);",
    "const char *cumem_last_error(void);",
    "int32_t cumem_alloc(uint64_t bytes, uint64_t *ptr);",
    "int32_t cumem_free(uint64_t ptr);",
    "uint64_t cumem_reclaim(uint64_t bytes);",
    "int32_t cumem_get_stats(cumem_stats_t *out);",
    "void cumem_reset_stats(void);",
    "size_t cumem_memory_status(char *buf, size_t len);",
    "const char *cumem_pool_name(void);",
    "const char *cumem_device_name(void);",
    "int32_t cumem_device_memory(uint64_t *free, uint64_t *total);",
    "int32_t cumem_copy_htod(uint64_t dst, const void *src, uint64_t bytes);",
    "int32_t cumem_copy_dtoh(void *dst, uint64_t src, uint64_t bytes);",
    "int32_t cumem_copy_dtod(uint64_t dst, uint64_t src, uint64_t bytes);",
    "int32_t cumem_memset(uint64_t dst, uint8_t value, uint64_t bytes);",
    // GPU compute (src/ffi/compute.rs)
    "int32_t cumem_nvrtc_version(int32_t *major, int32_t *minor);",
    "int32_t cumem_compile_ptx(const char *source, const char *arch, char *buf, uint64_t cap, uint64_t *len);",
    "int32_t cumem_kernel_load(const char *source, const char *name, uint64_t *kernel);",
    "int32_t cumem_kernel_launch(uint64_t kernel, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared_bytes, void **args);",
    "int32_t cumem_kernel_block_size(uint64_t kernel, int32_t *threads);",
    "int32_t cumem_kernel_params(uint64_t kernel, int32_t *count, uint64_t *sizes, int32_t cap);",
    "int32_t cumem_kernel_attribute(uint64_t kernel, int32_t attr, int32_t *value);",
    "int32_t cumem_kernel_set_attribute(uint64_t kernel, int32_t attr, int32_t value);",
    "int32_t cumem_device_info(int32_t *cc_major, int32_t *cc_minor, int32_t *sm_count, int32_t *max_threads);",
    "int32_t cumem_synchronize(void);",
    "int32_t cumem_gemm(int32_t dtype, int32_t transa, int32_t transb, int64_t m, int64_t n, int64_t k, const void *alpha, uint64_t A, int64_t lda, uint64_t B, int64_t ldb, const void *beta, uint64_t C, int64_t ldc);",
];

/// The fields of `cumem_stats_t` in the contract's order.
const DESIGN_FIELDS: &[(&str, &str)] = &[
    ("uint64_t", "requested_bytes"),
    ("uint64_t", "allocated_bytes"),
    ("uint64_t", "cached_bytes"),
    ("uint64_t", "reserved_bytes"),
    ("uint64_t", "inactive_split_bytes"),
    ("uint64_t", "peak_requested_bytes"),
    ("uint64_t", "peak_allocated_bytes"),
    ("uint64_t", "peak_cached_bytes"),
    ("uint64_t", "peak_reserved_bytes"),
    ("uint64_t", "num_allocations"),
    ("uint64_t", "num_frees"),
    ("uint64_t", "num_cache_hits"),
    ("uint64_t", "num_cache_misses"),
    ("uint64_t", "num_device_allocations"),
    ("uint64_t", "num_device_frees"),
    ("uint64_t", "device_alloc_ns"),
    ("uint64_t", "device_free_ns"),
    ("uint64_t", "num_alloc_retries"),
    ("uint64_t", "num_ooms"),
    ("uint64_t", "limit_bytes"),
    ("double", "cache_hit_rate"),
    ("double", "fragmentation_ratio"),
    ("uint64_t", "num_device_free_errors"),
    ("uint64_t", "num_gc_retries"),
    ("uint64_t", "num_reclaim_retries"),
];

const DESIGN_CODES: &[(&str, i32)] = &[
    ("CUMEM_SUCCESS", 0),
    ("CUMEM_ERROR_OUT_OF_MEMORY", 1),
    ("CUMEM_ERROR_INVALID_VALUE", 2),
    ("CUMEM_ERROR_CONFIG", 3),
    ("CUMEM_ERROR_DEVICE", 4),
    ("CUMEM_ERROR_INTERNAL", 5),
    ("CUMEM_ERROR_NOT_SUPPORTED", 6),
    ("CUMEM_ERROR_COMPILE", 7),
];

/// The header without comments.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn header_matches_design() {
    let text = generate();
    assert!(text.contains("#ifndef CUMEM_H\n#define CUMEM_H\n"), "include guard CUMEM_H");
    assert!(text.trim_end().ends_with("#endif  /* CUMEM_H */"));
    assert!(text.contains("Do not edit") && text.contains("make header"), "generated-file notice");
    assert!(text.contains("#include <stdint.h>") && text.contains("#include <stddef.h>"));
    let flat = squash(&code(&text));
    for f in DESIGN_FUNCTIONS {
        assert!(flat.contains(&squash(f)), "the header lacks the contract's `{f}`");
    }
    // No other functions than those of §3 and later extensions named cumem_*.
    for line in code(&text).lines() {
        if line.contains('(') && line.trim_end().ends_with(");") {
            assert!(line.contains(" cumem_") || line.contains("*cumem_"), "unexpected declaration: {line}");
        }
    }
    // Status codes: exactly the CUMEM_* constants, with their values, and no other
    // engine constant.
    for (name, value) in DESIGN_CODES {
        assert!(text.contains(&format!("#define {name} {value}\n")), "the header lacks {name} = {value}");
    }
    for line in text.lines().filter(|l| l.starts_with("#define ")) {
        let name = line.split_whitespace().nth(1).unwrap();
        assert!(
            name.starts_with("CUMEM_"),
            "{name} is not part of the C ABI: add it to [export] exclude in cbindgen.toml"
        );
    }
    assert_eq!(cumem::ffi::CUMEM_ERROR_INTERNAL, 5, "the Rust constants are the header's source");
    // The statistics struct: a typedef named cumem_stats_t with §3's fields in order.
    let c = code(&text);
    let start = c.find("typedef struct {").expect("typedef struct { ... } cumem_stats_t;");
    let end = start + c[start..].find("} cumem_stats_t;").expect("typedef ... cumem_stats_t;");
    let fields: Vec<(String, String)> = c[start + "typedef struct {".len()..end]
        .split(';')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let mut w = f.split_whitespace();
            (w.next().unwrap().to_owned(), w.next().unwrap().to_owned())
        })
        .collect();
    let expected: Vec<(String, String)> =
        DESIGN_FIELDS.iter().map(|&(t, n)| (t.to_owned(), n.to_owned())).collect();
    assert_eq!(fields, expected, "cumem_stats_t's fields differ from the contract");
}

/// Every function of the header as (name, parameter list), whitespace collapsed.
fn prototypes(text: &str) -> Vec<(String, String)> {
    squash(&code(text))
        .split(';')
        .filter_map(|d| {
            let open = d.find('(')?;
            let name = d[..open].rsplit([' ', '*']).next()?;
            let close = d.rfind(')')?;
            name.starts_with("cumem_").then(|| (name.to_owned(), d[open + 1..close].to_owned()))
        })
        .collect()
}

/// "Takes a stream" has one spelling (CUDA's driver API: `cuMemcpyHtoDAsync`,
/// `cuMemAllocAsync`): a function with a stream argument ends in `_async`, and the
/// function of the same name without it works on the legacy default stream. Functions
/// whose subject is the stream or event handle itself (`cumem_stream_*`, `cumem_event_*`,
/// PyTorch's `record_stream`) are named for it.
#[test]
fn functions_that_take_a_stream_end_in_async() {
    let protos = prototypes(&generate());
    let n = code(&generate()).matches(");").count();
    assert_eq!(protos.len(), n, "every declaration was read");
    let names: Vec<&str> = protos.iter().map(|(n, _)| n.as_str()).collect();
    let mut async_fns = 0;
    for (name, params) in &protos {
        let takes_stream = params.split(',').any(|p| p.trim() == "uint64_t stream");
        let about_handle = name.starts_with("cumem_stream_")
            || name.starts_with("cumem_event_")
            || name == "cumem_record_stream";
        if takes_stream && !about_handle {
            assert!(name.ends_with("_async"), "{name} takes a stream: name it {name}_async");
        }
        if let Some(base) = name.strip_suffix("_async") {
            async_fns += 1;
            assert!(takes_stream, "{name} ends in _async but takes no stream");
            assert!(names.contains(&base), "{name} has no default-stream form {base}");
        }
    }
    assert!(async_fns >= 5, "found {async_fns} _async functions");
}

fn compiler(name: &str) -> Option<String> {
    let ok = Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success());
    ok.then(|| name.to_owned())
}

/// A translation unit that includes the header and asserts, at compile time, that
/// `cumem_stats_t` has the Rust `Stats` layout and the status codes their values.
fn layout_check_source() -> String {
    use cumem::Stats;
    use std::mem::{offset_of, size_of};
    let offsets = [
        ("requested_bytes", offset_of!(Stats, requested_bytes)),
        ("allocated_bytes", offset_of!(Stats, allocated_bytes)),
        ("cached_bytes", offset_of!(Stats, cached_bytes)),
        ("reserved_bytes", offset_of!(Stats, reserved_bytes)),
        ("inactive_split_bytes", offset_of!(Stats, inactive_split_bytes)),
        ("peak_requested_bytes", offset_of!(Stats, peak_requested_bytes)),
        ("peak_allocated_bytes", offset_of!(Stats, peak_allocated_bytes)),
        ("peak_cached_bytes", offset_of!(Stats, peak_cached_bytes)),
        ("peak_reserved_bytes", offset_of!(Stats, peak_reserved_bytes)),
        ("num_allocations", offset_of!(Stats, num_allocations)),
        ("num_frees", offset_of!(Stats, num_frees)),
        ("num_cache_hits", offset_of!(Stats, num_cache_hits)),
        ("num_cache_misses", offset_of!(Stats, num_cache_misses)),
        ("num_device_allocations", offset_of!(Stats, num_device_allocations)),
        ("num_device_frees", offset_of!(Stats, num_device_frees)),
        ("device_alloc_ns", offset_of!(Stats, device_alloc_ns)),
        ("device_free_ns", offset_of!(Stats, device_free_ns)),
        ("num_alloc_retries", offset_of!(Stats, num_alloc_retries)),
        ("num_ooms", offset_of!(Stats, num_ooms)),
        ("limit_bytes", offset_of!(Stats, limit_bytes)),
        ("cache_hit_rate", offset_of!(Stats, cache_hit_rate)),
        ("fragmentation_ratio", offset_of!(Stats, fragmentation_ratio)),
        ("num_device_free_errors", offset_of!(Stats, num_device_free_errors)),
        ("num_gc_retries", offset_of!(Stats, num_gc_retries)),
        ("num_reclaim_retries", offset_of!(Stats, num_reclaim_retries)),
    ];
    let mut src = String::from("#include \"cumem.h\"\n#include <stddef.h>\n");
    src += &format!(
        "_Static_assert(sizeof(cumem_stats_t) == {}, \"size of cumem_stats_t\");\n",
        size_of::<Stats>()
    );
    for (f, off) in offsets {
        src += &format!("_Static_assert(offsetof(cumem_stats_t, {f}) == {off}, \"offset of {f}\");\n");
    }
    for (name, value) in DESIGN_CODES {
        src += &format!("_Static_assert({name} == {value}, \"{name}\");\n");
    }
    // The records of the memory tools: sizes and the offsets of their last fields.
    {
        use cumem::history::Event;
        use cumem::snapshot::{BlockInfo, Compaction, Leak, SegmentInfo};
        for (c, size, last, off) in [
            ("cumem_event_t", size_of::<Event>(), "hit", offset_of!(Event, hit)),
            ("cumem_segment_t", size_of::<SegmentInfo>(), "shard", offset_of!(SegmentInfo, shard)),
            ("cumem_block_t", size_of::<BlockInfo>(), "segment", offset_of!(BlockInfo, segment)),
            ("cumem_leak_t", size_of::<Leak>(), "shard", offset_of!(Leak, shard)),
            (
                "cumem_compact_t",
                size_of::<Compaction>(),
                "fragmentation_after",
                offset_of!(Compaction, fragmentation_after),
            ),
        ] {
            src += &format!("_Static_assert(sizeof({c}) == {size}, \"size of {c}\");\n");
            src += &format!("_Static_assert(offsetof({c}, {last}) == {off}, \"offset in {c}\");\n");
        }
    }
    // Every function, called through a pointer of the §3 type.
    src += "int32_t (*f_alloc)(uint64_t, uint64_t *) = cumem_alloc;\n";
    src += "size_t (*f_status)(char *, size_t) = cumem_memory_status;\n";
    src += "int32_t (*f_stats)(cumem_stats_t *) = cumem_get_stats;\n";
    src += "int32_t (*f_htod)(uint64_t, const void *, uint64_t) = cumem_copy_htod;\n";
    src += "int32_t (*f_memset)(uint64_t, uint8_t, uint64_t) = cumem_memset;\n";
    src
}

fn syntax_check(cc: &str, std: &str, lang: &str, dir: &Path, file: &Path) {
    let out = Command::new(cc)
        .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(format!("-std={std}"))
        .args(["-x", lang])
        .arg("-I")
        .arg(dir)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cc} -std={std} -fsyntax-only failed on the header:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn header_compiles_with_the_rust_layout() {
    let Some(cc) = compiler("cc") else {
        eprintln!("no C compiler (cc): skipping the compile check of include/cumem.h");
        return;
    };
    let dir = std::env::temp_dir().join(format!("cumem-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The generated header (what is committed once header_is_up_to_date passes).
    std::fs::write(dir.join("cumem.h"), generate()).unwrap();
    let c = dir.join("check.c");
    std::fs::write(&c, layout_check_source()).unwrap();
    syntax_check(&cc, "c11", "c", &dir, &c);
    // The header alone, as C99 and C11.
    let h = dir.join("only.c");
    std::fs::write(&h, "#include \"cumem.h\"\n#include \"cumem.h\"\n").unwrap();
    syntax_check(&cc, "c99", "c", &dir, &h);
    syntax_check(&cc, "c11", "c", &dir, &h);
    // And as C++ (cpp_compat: extern "C").
    if let Some(cxx) = compiler("c++") {
        syntax_check(&cxx, "c++11", "c++", &dir, &h);
    }
    std::fs::remove_dir_all(&dir).ok();
}

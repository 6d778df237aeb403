//! Presentation: the text of `memory_status`, written here only. The C ABI returns it
//! (`cumem_memory_status`), and the Julia package prints it, adding only what the engine
//! cannot know (frees refused in finalizers, Julia stack traces of live arrays).

use crate::engine::Engine;
use crate::format::format_bytes;
use std::fmt::Write;

/// What [`memory_status`] lists after the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocations {
    /// At `CUMEM_DEBUG` ≥ 1, every live allocation (with native frames at level 2).
    Listed,
    /// None: for callers that list them with stack traces of their own.
    Omitted,
}

/// The text of CUDA.jl's `memory_status()`:
///
/// ```text
/// Effective GPU memory usage: 10.52% (1.656 GiB/15.744 GiB)
/// CUDA GPU memory usage: 8.000 KiB
/// BinnedPool usage: 8.000 KiB (8.000 KiB allocated, 0 bytes cached)
/// ```
///
/// The first line is the device's own view (`cuMemGetInfo`: every process and context),
/// the second what CuMem obtained from it (on the host device it reads `Host memory (no
/// GPU) usage: …`), the third how the pool (its CUDA.jl type name) splits that between
/// live allocations and cache. `Memory limit: …` follows when `JULIA_CUDA_MEMORY_LIMIT`
/// is set. One `Graph pool ID: …` line per graph pool alive follows (its memory is part
/// of the totals above; `src/engine/graphs.rs`). With [`Allocations::Listed`] and at `CUMEM_DEBUG` ≥ 1 one `Outstanding memory
/// allocation of N bytes at 0x…` line per live allocation follows (ending `in graph
/// pool ID` for a block of a graph pool alive), with its native frames at level 2. Byte counts as Julia's `Base.format_bytes` writes them.
pub fn memory_status(e: &Engine, allocations: Allocations) -> String {
    let st = e.stats();
    let (free, total) = e.device_memory().unwrap_or((0, 0));
    let used = total.saturating_sub(free);
    let pct = if total == 0 { 0.0 } else { 100.0 * used as f64 / total as f64 };
    let mut o = String::new();
    let _ =
        writeln!(o, "Effective GPU memory usage: {pct:.2}% ({}/{})", format_bytes(used), format_bytes(total));
    let what = if e.device().is_host() { "Host memory (no GPU)" } else { "CUDA GPU memory" };
    let _ = writeln!(o, "{what} usage: {}", format_bytes(st.reserved_bytes));
    let _ = writeln!(
        o,
        "{} usage: {} ({} allocated, {} cached)",
        e.pool_kind().type_name(),
        format_bytes(st.reserved_bytes),
        format_bytes(st.allocated_bytes),
        format_bytes(st.cached_bytes)
    );
    if st.limit_bytes > 0 {
        let _ = writeln!(o, "Memory limit: {}", format_bytes(st.limit_bytes));
    }
    for p in e.graph_pools() {
        let _ = writeln!(
            o,
            "Graph pool {}: {} ({} allocated in {} blocks, {} cached; {} references{})",
            p.id,
            format_bytes(p.reserved_bytes),
            format_bytes(p.allocated_bytes),
            p.active_blocks,
            format_bytes(p.reserved_bytes - p.allocated_bytes),
            p.references,
            if p.capturing != 0 { ", capturing" } else { "" }
        );
    }
    if allocations == Allocations::Listed && e.config().debug > 0 {
        let pools: Vec<u64> = e.graph_pools().iter().map(|p| p.id).collect();
        for a in e.outstanding() {
            let pool = match e.block_stream(a.ptr) {
                Ok(s) if pools.contains(&s) => format!(" in graph pool {s}"),
                _ => String::new(),
            };
            let _ =
                writeln!(o, "Outstanding memory allocation of {} bytes at {:#x}{pool}", a.requested, a.ptr);
            for f in &a.frames {
                let _ = writeln!(o, "  {f}");
            }
        }
    }
    o
}

/// The pinned host pool's lines of `memory_status`, after the device's, once the pool
/// is in use (`e` is the pinned pool's engine; `registered` the ranges and bytes
/// registered with `cumem_host_register`):
///
/// ```text
/// Pinned host memory usage: 16.000 MiB (12.000 MiB allocated, 4.000 MiB cached)
/// Pinned host memory limit: 1.000 GiB
/// Registered host memory: 256.000 MiB in 1 range
/// ```
///
/// The limit line appears when `CUMEM_PINNED_LIMIT` is set, the last line when a range
/// is registered.
pub fn pinned_status(e: &Engine, registered: (u64, u64)) -> String {
    let st = e.stats();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Pinned host memory usage: {} ({} allocated, {} cached)",
        format_bytes(st.reserved_bytes),
        format_bytes(st.allocated_bytes),
        format_bytes(st.cached_bytes)
    );
    if st.limit_bytes > 0 {
        let _ = writeln!(o, "Pinned host memory limit: {}", format_bytes(st.limit_bytes));
    }
    let (n, bytes) = registered;
    if n > 0 {
        let _ = writeln!(
            o,
            "Registered host memory: {} in {n} range{}",
            format_bytes(bytes),
            if n == 1 { "" } else { "s" }
        );
    }
    o
}

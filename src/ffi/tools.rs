//! The C ABI of the memory tools (`src/engine/tools.rs`): the allocation history, the
//! snapshot, leak checks and checkpoints, run-time limits and compaction. Conventions as
//! in the rest of `ffi`: thread-safe, panics caught, failures recorded for
//! `cumem_last_error`; array outputs follow the two-call pattern (call with capacity 0
//! to learn the count).

use super::{copy_out, guard, null_err, write_c_string};
use crate::config::parse_amount;
use crate::engine::tools::Retry;
use crate::error::Error;
use crate::history::{self, Event};
use crate::snapshot::{BlockInfo, Compaction, Leak, SegmentInfo};
use std::ffi::{CStr, c_char};

/// `cumem_event_t::kind`: an allocation.
pub const CUMEM_EVENT_ALLOC: u32 = 0;
/// `cumem_event_t::kind`: a free.
pub const CUMEM_EVENT_FREE: u32 = 1;
/// `cumem_event_t::kind`: memory obtained from the device.
pub const CUMEM_EVENT_DEVICE_ALLOC: u32 = 2;
/// `cumem_event_t::kind`: memory returned to the device.
pub const CUMEM_EVENT_DEVICE_FREE: u32 = 3;
/// `cumem_event_t::kind`: an allocation that failed with out of memory.
pub const CUMEM_EVENT_OOM: u32 = 4;

/// `cumem_block_t::state`: a live allocation.
pub const CUMEM_BLOCK_ACTIVE: u32 = 0;
/// `cumem_block_t::state`: free memory that can go back to the device.
pub const CUMEM_BLOCK_CACHED: u32 = 1;
/// `cumem_block_t::state`: free memory in a segment (granule) that also holds live memory.
pub const CUMEM_BLOCK_INACTIVE_SPLIT: u32 = 2;

/// Origin ids with this bit set were given by the caller (`cumem_set_next_origin`).
pub const CUMEM_ORIGIN_CALLER: u64 = 0x8000000000000000;
const _: () = assert!(CUMEM_ORIGIN_CALLER == history::CALLER_ORIGIN);

/// Starts (`enabled` ≠ 0) or stops recording the allocation history (PyTorch's
/// `torch.cuda.memory._record_memory_history`; off at start). While on, every
/// allocation, free, device allocation/free and out of memory (counted in `num_ooms`) is
/// recorded as a `cumem_event_t` in a ring buffer of `max_entries` events per engine
/// shard (the latest kept); `cumem_memory_events` reads them. Starting drops earlier
/// events; stopping keeps them (`max_entries` is then ignored). Each recorded event costs
/// the call a few tens of ns (docs/performance.md); off, the calls pay one predictable
/// branch. Returns `CUMEM_ERROR_INVALID_VALUE` when enabling with `max_entries` 0 or
/// above 2^24.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_record_memory_history(enabled: i32, max_entries: u64) -> i32 {
    guard(|e| e.record_memory_history(enabled != 0, max_entries))
}

/// Copies up to `capacity` recorded events into `out` in time order (the latest
/// `max_entries` over all shards; times in ns since the engine started) and returns how
/// many there are in all (call with `capacity` 0 to size `out`; the count may grow
/// between calls while recording is on). 0 on error.
///
/// # Safety
/// `out` must be null or writable for `capacity` `cumem_event_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_memory_events(out: *mut Event, capacity: u64) -> u64 {
    let mut n = 0;
    guard(|e| {
        let ev = e.memory_events();
        n = ev.len() as u64;
        // SAFETY: the caller's guarantee, passed on.
        unsafe { copy_out(&ev, out, capacity) };
        Ok(())
    });
    n
}

/// Writes the native stack of origin `origin` (from an event, snapshot block or leak;
/// recorded at `CUMEM_DEBUG=2`), innermost frame first, one `name at file:line` per line,
/// into `buf` with `snprintf` semantics; returns the text's full length (0 for 0, an
/// unknown id or a caller's id, bit 63 set).
///
/// # Safety
/// `buf` must be null or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_origin_text(origin: u64, buf: *mut c_char, len: usize) -> usize {
    let mut n = 0;
    if !buf.is_null() && len > 0 {
        // SAFETY: `buf` is writable for `len` ≥ 1 bytes.
        unsafe { *buf = 0 };
    }
    guard(|e| {
        let s = e.origin_text(origin).unwrap_or_default();
        // SAFETY: the caller's guarantee on `buf`.
        n = unsafe { write_c_string(&s, buf, len) };
        Ok(())
    });
    n
}

/// Sets the origin id that the calling thread's next allocation carries in the history
/// (its alloc event and, later, its free event), as `id | CUMEM_ORIGIN_CALLER`; 0 clears
/// it. Used by callers that track allocation sites themselves (the Julia package under
/// `-g2` passes the id of its Julia stack). Only read while recording. Does not
/// initialise the engine; never fails.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_set_next_origin(id: u64) {
    let _ = std::panic::catch_unwind(|| history::set_next_origin(id));
}

/// A snapshot of every segment the engine holds and every block in them (PyTorch's
/// `torch.cuda.memory_snapshot()`). Writes the counts to `*num_segments` and
/// `*num_blocks`; copies the segments (by address) and the blocks (each segment's
/// together, in address order: `first_block`, `num_blocks`) only when both fit
/// (`segment_capacity` ≥ segments and `block_capacity` ≥ blocks), else copies nothing:
/// call again with larger arrays. Block sums equal `cumem_get_stats` at quiescence:
/// segment sizes `reserved_bytes`, active blocks `allocated_bytes` (their `requested`
/// `requested_bytes`), inactive splits `inactive_split_bytes`, cached plus inactive
/// splits `cached_bytes`. Returns `CUMEM_ERROR_INVALID_VALUE` if a count pointer is null.
///
/// # Safety
/// `segments` and `blocks` must be null or writable for their capacities; the count
/// pointers writable for one `uint64_t` each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_memory_snapshot(
    segments: *mut SegmentInfo,
    segment_capacity: u64,
    blocks: *mut BlockInfo,
    block_capacity: u64,
    num_segments: *mut u64,
    num_blocks: *mut u64,
) -> i32 {
    guard(|e| {
        if num_segments.is_null() || num_blocks.is_null() {
            return Err(null_err(if num_segments.is_null() { "num_segments" } else { "num_blocks" }));
        }
        let snap = e.snapshot();
        let (ns, nb) = (snap.segments.len() as u64, snap.blocks.len() as u64);
        if ns <= segment_capacity
            && nb <= block_capacity
            && (ns == 0 || !segments.is_null())
            && (nb == 0 || !blocks.is_null())
        {
            // SAFETY: the caller's guarantee; both fit.
            unsafe {
                copy_out(&snap.segments, segments, segment_capacity);
                copy_out(&snap.blocks, blocks, block_capacity);
            }
        }
        // SAFETY: checked non-null; the caller guarantees they are writable.
        unsafe {
            *num_segments = ns;
            *num_blocks = nb;
        }
        Ok(())
    })
}

/// A leak mark for `cumem_leaks_since`: the allocations made after this call that are
/// still live. 0 is the engine's start (also returned on error).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_leak_mark() -> u64 {
    let mut m = 0;
    guard(|e| {
        m = e.leak_mark();
        Ok(())
    });
    m
}

/// The live allocations made after leak mark `mark` (all threads), by address: copies
/// up to `capacity` into `out` and writes how many there are to `*count`. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for an unknown mark or a null `count`.
///
/// # Safety
/// `out` must be null or writable for `capacity` `cumem_leak_t`; `count` writable for one
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_leaks_since(mark: u64, out: *mut Leak, capacity: u64, count: *mut u64) -> i32 {
    guard(|e| {
        if count.is_null() {
            return Err(null_err("count"));
        }
        let leaks = e.leaks_since(mark)?;
        // SAFETY: the caller's guarantees.
        unsafe {
            copy_out(&leaks, out, capacity);
            *count = leaks.len() as u64;
        }
        Ok(())
    })
}

/// As `cumem_leaks_since`, for the allocations made since the last
/// `cumem_memory_checkpoint` (or the start).
///
/// # Safety
/// As `cumem_leaks_since`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_check_memory_leaks(out: *mut Leak, capacity: u64, count: *mut u64) -> i32 {
    guard(|e| {
        if count.is_null() {
            return Err(null_err("count"));
        }
        let leaks = e.check_memory_leaks();
        // SAFETY: the caller's guarantees.
        unsafe {
            copy_out(&leaks, out, capacity);
            *count = leaks.len() as u64;
        }
        Ok(())
    })
}

/// Sets a checkpoint (`cumem_check_memory_leaks` then lists allocations made after it)
/// and writes the change of allocated and reserved bytes since the previous checkpoint
/// (or the start). Null pointers are skipped.
///
/// # Safety
/// `allocated_delta` and `reserved_delta` must be null or writable for one `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_memory_checkpoint(allocated_delta: *mut i64, reserved_delta: *mut i64) -> i32 {
    guard(|e| {
        let d = e.checkpoint();
        // SAFETY: the caller's guarantees; null is skipped.
        unsafe {
            if !allocated_delta.is_null() {
                *allocated_delta = d.allocated;
            }
            if !reserved_delta.is_null() {
                *reserved_delta = d.reserved;
            }
        }
        Ok(())
    })
}

/// Changes the cap on reserved bytes at run time (`JULIA_CUDA_MEMORY_LIMIT` at start);
/// 0 removes it. Lowering it below what is reserved first returns cached memory to the
/// device; memory in partly used segments stays until freed (no more is obtained
/// meanwhile). Returns `CUMEM_ERROR_INVALID_VALUE`, changing nothing, when live memory
/// (`allocated_bytes`) exceeds the new cap.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_set_memory_limit(bytes: u64) -> i32 {
    guard(|e| e.set_memory_limit((bytes != 0).then_some(bytes)))
}

/// As `cumem_set_memory_limit`, with the limit written as `JULIA_CUDA_MEMORY_LIMIT` takes
/// it (`"4GiB"`, `"512MiB"`, `"80%"` of the device's memory, a plain number of bytes) or
/// `"none"`. Returns `CUMEM_ERROR_CONFIG` for text it cannot parse (nothing changes),
/// `CUMEM_ERROR_INVALID_VALUE` for a null pointer and as `cumem_set_memory_limit`.
///
/// # Safety
/// `amount` must be null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_set_memory_limit_str(amount: *const c_char) -> i32 {
    guard(|e| {
        if amount.is_null() {
            return Err(null_err("amount"));
        }
        // SAFETY: the caller guarantees a NUL-terminated string.
        let s = unsafe { CStr::from_ptr(amount) }.to_string_lossy();
        if s.trim().eq_ignore_ascii_case("none") {
            return e.set_memory_limit(None);
        }
        e.set_memory_limit_amount(parse_amount("memory limit", &s)?)
    })
}

/// Caps reserved bytes at `fraction` (in (0, 1]) of the device's total memory (PyTorch's
/// `set_per_process_memory_fraction`), as `cumem_set_memory_limit`. Returns
/// `CUMEM_ERROR_INVALID_VALUE` for a fraction outside (0, 1] (nothing changes).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_set_memory_fraction(fraction: f64) -> i32 {
    guard(|e| e.set_memory_fraction(fraction))
}

/// Caps cached bytes (`UINT64_MAX`: no cap, the default): a free that leaves more cached
/// returns whole free segments to the device until the cap holds (cache in partly used
/// segments cannot go). Applies at once.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_set_cache_limit(bytes: u64) -> i32 {
    guard(|e| {
        e.set_cache_limit((bytes != u64::MAX).then_some(bytes));
        Ok(())
    })
}

/// The cap on cached bytes; `UINT64_MAX` when there is none (or on error).
#[unsafe(no_mangle)]
pub extern "C" fn cumem_get_cache_limit() -> u64 {
    let mut c = u64::MAX;
    guard(|e| {
        c = e.cache_limit().unwrap_or(u64::MAX);
        Ok(())
    });
    c
}

/// Reserved bytes ÷ the memory limit, or ÷ the device's total memory without one; -1 on
/// error.
#[unsafe(no_mangle)]
pub extern "C" fn cumem_memory_pressure() -> f64 {
    let mut p = -1.0;
    guard(|e| {
        p = e.memory_pressure();
        Ok(())
    });
    p
}

/// Merges the pools' deferred frees, returns every whole free segment (idle granules of
/// the expandable pool) to the device and writes the bytes released and
/// `fragmentation_ratio` before and after to `*out`. Returns `CUMEM_ERROR_INVALID_VALUE`
/// when `out` is null (nothing is done).
///
/// # Safety
/// `out` must be null or writable for one `cumem_compact_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_compact(out: *mut Compaction) -> i32 {
    guard(|e| {
        if out.is_null() {
            return Err(null_err("out"));
        }
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { out.write(e.compact()) };
        Ok(())
    })
}

/// Counts `flags`' retry bits of `cumem_alloc_ex` in the statistics.
pub(super) fn note_retries(e: &crate::engine::Engine, flags: u32) -> Result<(), Error> {
    if flags & super::CUMEM_ALLOC_GC_RETRY != 0 {
        e.note_retry(Retry::Gc);
    }
    if flags & super::CUMEM_ALLOC_RECLAIM_RETRY != 0 {
        e.note_retry(Retry::Reclaim);
    }
    Ok(())
}

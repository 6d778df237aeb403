//! The C function of the memory timeline (`src/timeline/` renders it).

use super::{guard, null_err};
use crate::error::Error;
use crate::history::Event;
use crate::timeline::{self, Format, Options};
use std::ffi::{CStr, c_char};

/// Writes a memory timeline of `n` history events (`cumem_event_t`, in time order, as
/// `cumem_memory_events` returns them, or any slice of them such as a profile's window)
/// to the file at `path` (UTF-8, NUL-terminated), in `format`:
/// `CUMEM_TIMELINE_SVG` (live bytes stacked by allocation with the allocated and
/// reserved totals as lines, after PyTorch memory_viz's "active memory timeline"),
/// `CUMEM_TIMELINE_HTML` (that picture in a page that shows an allocation's size,
/// lifetime and origin under the pointer), `CUMEM_TIMELINE_JSON` (the totals after each
/// event and every allocation with its lifetime) or `CUMEM_TIMELINE_CHROME` (Chrome
/// trace-event JSON for Perfetto or `chrome://tracing`: counters for the totals, an async
/// slice per allocation). `labels` is null or holds `n` pointers, each null or a UTF-8
/// string naming the origin of that event's allocation (e.g. a Julia stack trace); the
/// pictures use the label of a block's allocation event. Blocks made in a CUDA graph's
/// private pool (an event whose `stream` is a graph pool's id, alive or released: such ids
/// have bit 62 set) are drawn apart: hatched bands named by their pool, `graph_pool`
/// in the JSON's allocations, the `graph_pool` category in Chrome's format.
///
/// The picture draws the 10 000 largest blocks as bands of their own and sums the rest;
/// with more events than pixel columns each column shows the moment of its highest
/// allocated total (src/timeline/mod.rs says why). The title names this engine's pool and
/// device. Returns `CUMEM_SUCCESS`, or `CUMEM_ERROR_INVALID_VALUE` (nothing written):
/// `events` null with `n` > 0, `path` null or not
/// UTF-8, an unknown format, an event of unknown kind, a label that is not UTF-8, a file
/// that cannot be written.
///
/// # Safety
/// `events` must be readable for `n` events; `labels`, when not null, for `n` pointers,
/// each null or a NUL-terminated string; `path` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cumem_save_memory_timeline(
    events: *const Event,
    n: u64,
    labels: *const *const c_char,
    path: *const c_char,
    format: u32,
) -> i32 {
    guard(|e| {
        let format = Format::from_code(format)?;
        if path.is_null() {
            return Err(null_err("path"));
        }
        // SAFETY: checked non-null; the caller guarantees a NUL-terminated string.
        let path = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| Error::InvalidValue("path is not UTF-8".into()))?;
        let n = usize::try_from(n).map_err(|_| Error::InvalidValue(format!("{n} events is too many")))?;
        if events.is_null() && n > 0 {
            return Err(null_err("events"));
        }
        let events: &[Event] = if n == 0 {
            &[]
        } else {
            // SAFETY: checked non-null; the caller guarantees `n` readable events.
            unsafe { std::slice::from_raw_parts(events, n) }
        };
        let labels: Option<Vec<Option<&str>>> = if labels.is_null() {
            None
        } else {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                // SAFETY: the caller guarantees `n` readable pointers.
                let p = unsafe { *labels.add(i) };
                v.push(if p.is_null() {
                    None
                } else {
                    // SAFETY: non-null; the caller guarantees a NUL-terminated string.
                    Some(
                        unsafe { CStr::from_ptr(p) }
                            .to_str()
                            .map_err(|_| Error::InvalidValue(format!("label {i} is not UTF-8")))?,
                    )
                });
            }
            Some(v)
        };
        let opts = Options {
            title: format!("CuMem memory timeline: {} pool on {}", e.pool_kind().name(), e.device().name()),
            ..Options::default()
        };
        timeline::save(path, events, labels.as_deref(), format, &opts)
    })
}

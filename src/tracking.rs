//! Tracking of outstanding allocations (`CUMEM_DEBUG`): at level 1 each live allocation
//! records when and on which thread it was made; at level 2 also a native backtrace,
//! captured unresolved (cheap) and resolved only when reported. At level 0 nothing is
//! recorded and the hot path pays only a null check.

use backtrace::Backtrace;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

thread_local! {
    static THREAD_INDEX: Cell<u32> = const { Cell::new(u32::MAX) };
}

/// A small per-process number of the calling thread (0, 1, 2, … in order of first use).
#[inline]
pub fn thread_index() -> u32 {
    THREAD_INDEX.with(|c| {
        let i = c.get();
        if i != u32::MAX {
            return i;
        }
        let i = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff;
        c.set(i);
        i
    })
}

/// What tracking recorded of one allocation.
#[derive(Debug)]
pub struct Origin {
    /// Nanoseconds since the engine started.
    pub at_ns: u64,
    /// [`thread_index`] of the allocating thread.
    pub thread: u32,
    /// The thread's name, if it has one.
    pub thread_name: Option<String>,
    /// The native stack at allocation (level 2 only), unresolved.
    pub backtrace: Option<Backtrace>,
}

impl Origin {
    /// Records the calling thread's allocation site; `with_backtrace` at level 2.
    pub fn capture(at_ns: u64, with_backtrace: bool) -> Box<Origin> {
        Box::new(Origin {
            at_ns,
            thread: thread_index(),
            thread_name: std::thread::current().name().map(str::to_owned),
            backtrace: with_backtrace.then(Backtrace::new_unresolved),
        })
    }
}

/// An outstanding (live) allocation, as reported by [`crate::Engine::outstanding`].
#[derive(Debug, Clone)]
pub struct Outstanding {
    /// Device address.
    pub ptr: u64,
    /// Bytes asked for.
    pub requested: u64,
    /// Block size handed out (bytes).
    pub size: u64,
    /// Nanoseconds since engine start at allocation (None below `CUMEM_DEBUG=1`).
    pub at_ns: Option<u64>,
    /// Allocating thread's index and name (None below `CUMEM_DEBUG=1`).
    pub thread: Option<(u32, Option<String>)>,
    /// Resolved frames, innermost first, CuMem's own frames removed, each as
    /// `"name at file:line"` (empty below `CUMEM_DEBUG=2`).
    pub frames: Vec<String>,
}

/// Resolves backtraces to frame descriptions, symbolizing each distinct instruction
/// pointer once: the live allocations of a program come from a few call sites, so a
/// report of thousands of them shares almost all frames (resolving every backtrace on
/// its own cost a millisecond or more per allocation).
#[derive(Default)]
pub struct Symbolizer {
    /// `(name, " at file:line")` of each symbol at an instruction pointer (several when
    /// calls were inlined there), innermost first.
    by_ip: HashMap<usize, Vec<(String, String)>>,
}

impl Symbolizer {
    /// `bt`'s frames, innermost first, each as `"name at file:line"`, without the frames
    /// of the capture itself and of the engine (everything up to the last `cumem::`
    /// frame at the top of the stack).
    pub fn frames(&mut self, bt: &Backtrace) -> Vec<String> {
        for f in bt.frames() {
            let ip = f.ip();
            self.by_ip.entry(ip as usize).or_insert_with(|| {
                let mut v = Vec::new();
                backtrace::resolve(ip, |s| {
                    let name = s.name().map(|n| format!("{n:#}")).unwrap_or_else(|| format!("{ip:?}"));
                    let loc = match (s.filename(), s.lineno()) {
                        (Some(file), Some(line)) => format!(" at {}:{line}", file.display()),
                        _ => String::new(),
                    };
                    v.push((name, loc));
                });
                v
            });
        }
        let mut frames: Vec<&(String, String)> = Vec::new();
        for f in bt.frames() {
            if let Some(syms) = self.by_ip.get(&(f.ip() as usize)) {
                frames.extend(syms.iter());
            }
        }
        let lead = leading_internal(frames.iter().map(|(n, _)| n.as_str()));
        frames.into_iter().skip(lead).map(|(n, l)| format!("{n}{l}")).collect()
    }
}

/// Resolves `bt` alone (see [`Symbolizer::frames`]; for many backtraces use one
/// [`Symbolizer`]).
pub fn resolve(bt: &Backtrace) -> Vec<String> {
    Symbolizer::default().frames(bt)
}

/// How many of the innermost `names` belong to the capture and the engine. They are the
/// capture, the engine, the C entry point and the panic guard around it, interleaved
/// with library glue (`bool::then`, `catch_unwind`, ...) that is not inlined in debug
/// builds, and with the unwinder's and instrumentation's C functions (`_Unwind_Backtrace`,
/// AddressSanitizer's `__asan_*`, unresolved addresses): everything up to the last
/// CuMem frame of that leading run.
fn leading_internal<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    let internal = |n: &str| ["cumem::", "cumem_"].iter().any(|p| n.starts_with(p));
    // Library glue: the standard library's and the capture's paths, and methods of
    // primitive types, which nightly names `<bool>::then` (stable: `core::bool::<impl
    // bool>::then`).
    let glue = |n: &str| {
        let head = n.split(['>', ':', '<']).next().unwrap_or("");
        ["backtrace::", "core::", "std::", "alloc::", "__rust"].iter().any(|p| n.starts_with(p))
            || !n.contains("::")
            || matches!(
                head,
                "bool"
                    | "char"
                    | "str"
                    | "u8"
                    | "u16"
                    | "u32"
                    | "u64"
                    | "u128"
                    | "usize"
                    | "i8"
                    | "i16"
                    | "i32"
                    | "i64"
                    | "i128"
                    | "isize"
                    | "f32"
                    | "f64"
            )
            || n.starts_with(['[', '*', '&', '('])
    };
    let mut lead = 0;
    for (i, n) in names.enumerate() {
        // `<T as Trait>::f` and `<<T>::f as Trait>::g` (a closure, as nightly names it)
        // are classified by the path they start with.
        let n = n.trim_start_matches('<');
        if internal(n) {
            lead = i + 1;
        } else if !glue(n) {
            break;
        }
    }
    lead
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_at_one_site(n: usize) -> Vec<Backtrace> {
        (0..n).map(|_| Backtrace::new_unresolved()).collect()
    }

    #[test]
    fn symbolizer_resolves_each_frame_once() {
        let bts = capture_at_one_site(20);
        let mut sym = Symbolizer::default();
        let first = sym.frames(&bts[0]);
        let distinct = sym.by_ip.len();
        assert!(distinct > 0 && !first.is_empty());
        for bt in &bts[1..] {
            assert_eq!(sym.frames(bt), first, "one site, one report");
        }
        assert_eq!(sym.by_ip.len(), distinct, "a frame already seen was symbolized again");
        assert_eq!(resolve(&bts[0]), first);
    }

    #[test]
    fn leading_frames_of_capture_engine_and_unwinder_are_dropped() {
        // The innermost frames as an instrumented build (AddressSanitizer) names them.
        let names = [
            "backtrace::backtrace::libunwind::trace",
            "_Unwind_Backtrace",
            "<backtrace::capture::Backtrace>::create",
            "__asan_memcpy",
            "0x55d0dcff9000",
            "<backtrace::capture::Backtrace>::new_unresolved",
            "core::ops::function::FnOnce::call_once",
            "cumem::tracking::Origin::capture",
            "core::bool::<impl bool>::then",
            "cumem::engine::Engine::alloc",
            "cumem_alloc",
            "main",
            "__libc_start_main",
        ];
        assert_eq!(leading_internal(names.iter().copied()), 11, "the caller's frames start at main");
        // Nightly with AddressSanitizer names a closure's frame with two angle brackets.
        // (as the nightly of `make sanitize` names them in a debug build)
        let names = [
            "<<backtrace::capture::Backtrace>::new_unresolved as core::ops::function::FnOnce<()>>::call_once",
            "<bool>::then::<backtrace::capture::Backtrace, <backtrace::capture::Backtrace>::new_unresolved>",
            "<cumem::tracking::Origin>::capture",
            "<cumem::engine::Engine>::alloc_in::<()>::{closure#0}",
            "<bool>::then::<alloc::boxed::Box<cumem::tracking::Origin>, <cumem::engine::Engine>::alloc_in<()>::{closure#0}>",
            "<cumem::engine::Engine>::alloc",
            "pools::tracked_allocation_site",
            "pools::tracking_with_backtraces",
        ];
        assert_eq!(leading_internal(names.iter().copied()), 6, "the caller's frames start at the site");
        // A Rust caller's frames are kept, whatever follows them.
        let names = ["cumem::engine::Engine::alloc", "my_app::train", "my_app::main", "std::rt::lang_start"];
        assert_eq!(leading_internal(names.iter().copied()), 1);
    }
}

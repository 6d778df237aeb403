//! Allocation traces (format: `data/README.md`): `# {json}` comment lines, then
//! `a <id> <bytes>` and `f <id>` events. A trace is parsed once, before anything is timed,
//! into a compact vector of [`Op`]s whose ids are dense indices into a pointer table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One event. `bytes` is the size of an allocation; frees carry [`Op::FREE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// Dense index of the block (0 .. [`Trace::slots`]).
    pub slot: u32,
    /// Bytes to allocate, or [`Op::FREE`] for a free.
    pub bytes: u64,
}

impl Op {
    /// Marks a free.
    pub const FREE: u64 = u64::MAX;

    #[inline]
    pub fn is_free(&self) -> bool {
        self.bytes == Op::FREE
    }
}

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The file's stem, e.g. `gpt2_train`.
    pub name: String,
    pub path: PathBuf,
    pub ops: Vec<Op>,
    /// Number of distinct blocks (size of the pointer table a replay needs).
    pub slots: usize,
    /// Highest sum of live requested bytes over the trace.
    pub peak_live: u64,
    /// Blocks still alive after the last event.
    pub live_at_end: usize,
}

impl Trace {
    /// Reads and parses the trace at `path`.
    pub fn load(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let mut t = Trace::parse(&name, &text).map_err(|e| format!("{}: {e}", path.display()))?;
        t.path = path.to_path_buf();
        Ok(t)
    }

    /// Parses trace text. Errors name the line: malformed lines, an id allocated twice
    /// while alive, a free of an id that is not alive.
    pub fn parse(name: &str, text: &str) -> Result<Trace, String> {
        let mut ops = Vec::with_capacity(text.len() / 10);
        // id -> (slot, bytes, alive)
        let mut ids: HashMap<u64, (u32, u64, bool)> = HashMap::new();
        let (mut live, mut peak_live, mut alive) = (0u64, 0u64, 0usize);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
            let mut f = line.split_ascii_whitespace();
            let kind = f.next().unwrap_or("");
            let id: u64 = f.next().and_then(|s| s.parse().ok()).ok_or_else(|| bad("expected an id"))?;
            match kind {
                "a" => {
                    let bytes: u64 = f
                        .next()
                        .and_then(|s| s.parse().ok())
                        .filter(|&b| b != Op::FREE)
                        .ok_or_else(|| bad("expected a size in bytes"))?;
                    let next = ids.len() as u32;
                    let e = ids.entry(id).or_insert((next, bytes, false));
                    if e.2 {
                        return Err(bad("id allocated again while alive"));
                    }
                    *e = (e.0, bytes, true);
                    ops.push(Op { slot: e.0, bytes });
                    live += bytes;
                    alive += 1;
                    peak_live = peak_live.max(live);
                }
                "f" => {
                    let e = ids
                        .get_mut(&id)
                        .filter(|e| e.2)
                        .ok_or_else(|| bad("free of an id that is not alive"))?;
                    e.2 = false;
                    ops.push(Op { slot: e.0, bytes: Op::FREE });
                    live -= e.1;
                    alive -= 1;
                }
                _ => return Err(bad("expected `a <id> <bytes>` or `f <id>`")),
            }
            if f.next().is_some() {
                return Err(bad("trailing fields"));
            }
        }
        Ok(Trace {
            name: name.to_string(),
            path: PathBuf::new(),
            ops,
            slots: ids.len(),
            peak_live,
            live_at_end: alive,
        })
    }

    /// The first `max` events only (blocks they leave alive are freed after the pass,
    /// like any block alive at the end); peak live is recomputed.
    pub fn truncated(&self, max: usize) -> Trace {
        if self.ops.len() <= max {
            return self.clone();
        }
        let ops = self.ops[..max].to_vec();
        let mut sizes = vec![0u64; self.slots];
        let (mut live, mut peak_live, mut alive) = (0u64, 0u64, 0usize);
        for op in &ops {
            let s = op.slot as usize;
            if op.is_free() {
                live -= sizes[s];
                alive -= 1;
            } else {
                sizes[s] = op.bytes;
                live += op.bytes;
                alive += 1;
                peak_live = peak_live.max(live);
            }
        }
        Trace {
            name: self.name.clone(),
            path: self.path.clone(),
            ops,
            slots: self.slots,
            peak_live,
            live_at_end: alive,
        }
    }
}

/// The traces `replay` uses when none are named: `data/*.trace` under the current
/// directory, else under the repository's root; sorted by name.
pub fn default_traces() -> Result<Vec<PathBuf>, String> {
    for dir in [PathBuf::from("data"), Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut v: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "trace"))
                .collect();
            if !v.is_empty() {
                v.sort();
                return Ok(v);
            }
        }
    }
    Err("no TRACE given and no data/*.trace found".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks() {
        let t = Trace::parse("x", "# {\"a\": 1}\na 0 100\na 1 50\nf 0\na 2 200\n\na 7 1\nf 2\n").unwrap();
        assert_eq!(t.ops.len(), 6);
        assert_eq!(t.slots, 4);
        assert_eq!(t.peak_live, 251);
        assert_eq!(t.live_at_end, 2);
        assert!(t.ops[2].is_free() && t.ops[2].slot == 0);
        assert_eq!(t.truncated(2).peak_live, 150);
        for bad in ["f 0", "a 0", "a 0 1\na 0 2", "x 1 2", "a 1 2 3", "a z 1"] {
            assert!(Trace::parse("x", bad).is_err(), "{bad}");
        }
    }
}

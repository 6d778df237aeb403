//! Output: aligned text tables (default) and JSON lines (`--json`).

use serde::Serialize;
use std::io::Write;

/// Prints `row` as one JSON line on stdout and flushes, so a long run can be followed.
pub fn json_line<T: Serialize>(row: &T) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(row).expect("results serialise"));
    let _ = out.flush();
}

/// A text table: the first `left` columns are left-aligned (names), the rest right-aligned
/// (numbers).
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    left: usize,
}

impl Table {
    pub fn new(headers: &[&str], left: usize) -> Table {
        Table { headers: headers.iter().map(|s| s.to_string()).collect(), rows: Vec::new(), left }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut w = vec![0; n];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut s = String::new();
        let line = |s: &mut String, r: &[String]| {
            let cells: Vec<String> = (0..n)
                .map(|i| {
                    let c = r.get(i).map_or("", String::as_str);
                    if i < self.left {
                        format!("{c:<width$}", width = w[i])
                    } else {
                        format!("{c:>width$}", width = w[i])
                    }
                })
                .collect();
            s.push_str(cells.join("  ").trim_end());
            s.push('\n');
        };
        line(&mut s, &self.headers);
        let rule: Vec<String> = w.iter().map(|&k| "-".repeat(k)).collect();
        s.push_str(&rule.join("  "));
        s.push('\n');
        for r in &self.rows {
            line(&mut s, r);
        }
        s
    }

    pub fn print(&self) {
        print!("{}", self.render());
    }
}

/// Nanoseconds, to 3 significant digits or an integer (`12.3`, `441`, `23 101`).
pub fn ns(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        group(v.round() as u64)
    }
}

/// An integer with thin groups of three digits (`1 234 567`).
pub fn group(v: u64) -> String {
    let s = v.to_string();
    let mut o = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(' ');
        }
        o.push(ch);
    }
    o
}

/// Bytes in binary units (`8.674 GiB`), as the engine's own messages.
pub fn bytes(v: u64) -> String {
    cumem::format::format_bytes(v)
}

/// A size in the largest binary unit that divides it (`512 B`, `4 KiB`, `16 MiB`).
pub fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(group(1234567), "1 234 567");
        assert_eq!(group(12), "12");
        assert_eq!(ns(441.2), "441");
        assert_eq!(ns(12.34), "12.3");
        let mut t = Table::new(&["name", "n"], 1);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["bbb".into(), "1".into()]);
        assert_eq!(t.render(), "name   n\n----  --\na     10\nbbb    1\n");
    }
}

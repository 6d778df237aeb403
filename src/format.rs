//! Human-readable byte counts, formatted exactly as Julia's `Base.format_bytes`
//! (so the engine's and the Julia package's `memory_status` lines agree).

const UNITS: [&str; 6] = ["byte", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// Formats `bytes` as Julia's `Base.format_bytes` does: `0 bytes`, `1 byte`, `1024 bytes`,
/// `1.001 KiB`, `8.000 KiB`, `1.656 GiB` (three decimals, binary units).
pub fn format_bytes(bytes: u64) -> String {
    // Base.prettyprint_getunits: unit = ceil(log(v)/log(1024)), clamped to the unit table.
    if bytes <= 1 {
        return format!("{bytes} {}", if bytes == 1 { "byte" } else { "bytes" });
    }
    let v = bytes as f64;
    let unit = ((v.ln() / 1024f64.ln()).ceil() as usize).clamp(1, UNITS.len());
    if unit == 1 {
        format!("{bytes} bytes")
    } else {
        format!("{:.3} {}", v / 1024f64.powi(unit as i32 - 1), UNITS[unit - 1])
    }
}

/// `bytes` for a message: [`format_bytes`], followed by the exact count in parentheses
/// when that rounds (`1.500 KiB (1536 bytes)`), alone when it is exact already
/// (`1024 bytes`, not `1024 bytes (1024 bytes)`).
pub fn format_bytes_exact(bytes: u64) -> String {
    let s = format_bytes(bytes);
    if bytes <= 1024 { s } else { format!("{s} ({bytes} bytes)") }
}

#[cfg(test)]
mod tests {
    use super::{format_bytes, format_bytes_exact};

    #[test]
    fn exact_sizes_once() {
        assert_eq!(format_bytes_exact(1024), "1024 bytes");
        assert_eq!(format_bytes_exact(1), "1 byte");
        assert_eq!(format_bytes_exact(1536), "1.500 KiB (1536 bytes)");
    }

    #[test]
    fn matches_julia_format_bytes() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1), "1 byte");
        assert_eq!(format_bytes(1024), "1024 bytes");
        assert_eq!(format_bytes(1025), "1.001 KiB");
        assert_eq!(format_bytes(8192), "8.000 KiB");
        assert_eq!(format_bytes(3 << 30), "3.000 GiB");
    }
}

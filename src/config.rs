//! Configuration, read once from the environment when the engine initialises
//! (the configuration table of docs/contract.md).

use crate::error::{Error, Result};
use std::ffi::CStr;

/// Which caching pool serves allocations (`JULIA_CUDA_MEMORY_POOL`; the names are
/// CUDA.jl 2.x's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// Every request goes to the device, every free back to it (`NoPool`).
    None,
    /// Whole freed blocks are cached and reused when not wastefully large (`SimplePool`).
    Simple,
    /// Power-of-two size classes with one free list each (`BinnedPool`, the default).
    Binned,
    /// Blocks carved out of larger segments, best fit, split and merged (`SplitPool`).
    Split,
    /// Blocks carved out of reserved address ranges backed by physical memory only
    /// where blocks lie, mapped and unmapped in granules (`ExpandablePool`, after
    /// PyTorch's `expandable_segments`).
    Expandable,
}

/// The names of one pool: what `JULIA_CUDA_MEMORY_POOL` accepts and CUDA.jl 2.x's type
/// name, which `memory_status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolNames {
    /// The pool.
    pub kind: PoolKind,
    /// Lower-case name, e.g. `binned`.
    pub name: &'static CStr,
    /// CUDA.jl's type name, e.g. `BinnedPool`.
    pub type_name: &'static CStr,
}

/// Every pool with its names, in the order the documentation lists them: the one table
/// of pool names. The C ABI returns these very strings (`cumem_pool_name`,
/// `cumem_pool_type_name`), and the Julia package reads them from there.
pub const POOLS: [PoolNames; 5] = [
    PoolNames { kind: PoolKind::Binned, name: c"binned", type_name: c"BinnedPool" },
    PoolNames { kind: PoolKind::Split, name: c"split", type_name: c"SplitPool" },
    PoolNames { kind: PoolKind::Expandable, name: c"expandable", type_name: c"ExpandablePool" },
    PoolNames { kind: PoolKind::Simple, name: c"simple", type_name: c"SimplePool" },
    PoolNames { kind: PoolKind::None, name: c"none", type_name: c"NoPool" },
];

/// Largest block (bytes) a thread cache holds for the `expandable` pool
/// ([`PoolKind::thread_cache_max_size`]).
pub const EXPANDABLE_THREAD_CACHE_MAX: u64 = 64 << 10;

/// Largest block size a thread cache holds (bytes; `crate::thread_cache` re-exports it): the
/// sizes of the pair benchmarks and of split's small segments; larger blocks go to the
/// shard's pool at once.
pub const MAX_CACHED_SIZE: u64 = 1 << 20;

impl PoolKind {
    /// All pools, in the order the documentation lists them.
    pub const ALL: [PoolKind; POOLS.len()] = {
        let mut all = [PoolKind::None; POOLS.len()];
        let mut i = 0;
        while i < POOLS.len() {
            all[i] = POOLS[i].kind;
            i += 1;
        }
        all
    };

    /// This pool's entry of [`POOLS`].
    pub fn names(self) -> &'static PoolNames {
        POOLS.iter().find(|p| p.kind == self).expect("every pool is in POOLS")
    }

    /// The lower-case name accepted by `JULIA_CUDA_MEMORY_POOL` (`"binned"`, ...).
    pub fn name(self) -> &'static str {
        self.names().name.to_str().expect("ASCII")
    }

    /// Largest block (bytes) the engine's per-thread caches hold for this pool
    /// (`crate::thread_cache`; 0: no thread caches). `binned`, `split` and `simple`:
    /// [`MAX_CACHED_SIZE`] (1 MiB). `none`: 0 (it caches nothing).
    /// `expandable`: [`EXPANDABLE_THREAD_CACHE_MAX`] (64 KiB), the sizes of the pair
    /// benchmarks up to 64 KiB: a block waiting in a thread cache is not merged with its
    /// free neighbours, so this pool takes the thread's cached blocks back before every
    /// request that reaches it (`Pool::serves_at_once`), and the limit keeps what it takes
    /// back small (bench/results/host-2026-11-28-exp13b: every replayed trace's peak is
    /// the one without thread caches). `CUMEM_THREAD_CACHE=0` and `CUMEM_DEBUG` ≥ 1 turn
    /// the caches off for every pool.
    pub fn thread_cache_max_size(self) -> u64 {
        match self {
            PoolKind::None => 0,
            PoolKind::Expandable => EXPANDABLE_THREAD_CACHE_MAX,
            PoolKind::Binned | PoolKind::Split | PoolKind::Simple => MAX_CACHED_SIZE,
        }
    }

    /// The CUDA.jl type name used by `memory_status` (`"BinnedPool"`, ...).
    pub fn type_name(self) -> &'static str {
        self.names().type_name.to_str().expect("ASCII")
    }

    /// Parses a pool name (case-insensitive). Error: [`Error::Config`] naming the
    /// accepted values.
    pub fn parse(s: &str) -> Result<PoolKind> {
        let want = s.trim().to_ascii_lowercase();
        POOLS.iter().find(|p| p.name.to_bytes() == want.as_bytes()).map(|p| p.kind).ok_or_else(|| {
            let names: Vec<&str> = PoolKind::ALL.iter().map(|k| k.name()).collect();
            Error::Config(format!(
                "JULIA_CUDA_MEMORY_POOL={s:?} is not a pool; accepted: {}",
                names.join(", ")
            ))
        })
    }
}

/// Which device backs the engine (`CUMEM_DEVICE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// CUDA when the driver loads and a GPU exists, else the host device (with a warning).
    Auto,
    /// The CUDA devices (device 0 first); an error if there is none.
    Cuda,
    /// Host memory standing in for GPUs: `host` is one stand-in device, `host:N` is N of
    /// them ([`Config::host_devices`]), so that every multi-device path runs without a GPU.
    Host,
}

/// The most stand-in devices `CUMEM_DEVICE=host:N` accepts (and the most devices the
/// engine drives).
pub const MAX_DEVICES: u32 = 64;

/// A byte amount given either absolutely or as a share of the device's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// An absolute number of bytes (> 0).
    Bytes(u64),
    /// A fraction in (0, 1] of the device's total memory (`80%` is `Fraction(0.8)`).
    Fraction(f64),
}

impl Amount {
    /// Resolves to bytes against a device of `total` bytes (at least 1 byte).
    pub fn resolve(self, total: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::Fraction(f) => ((total as f64 * f) as u64).max(1),
        }
    }
}

/// The engine's configuration. [`Config::from_env`] reads it; tests build it directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `JULIA_CUDA_MEMORY_POOL` (default `binned`).
    pub pool: PoolKind,
    /// `JULIA_CUDA_MEMORY_LIMIT`: cap on reserved bytes (default: none).
    pub limit: Option<Amount>,
    /// `CUMEM_DEVICE` (default `auto`).
    pub device: DeviceChoice,
    /// `CUMEM_HOST_CAPACITY`: the host device's capacity (default: physical memory);
    /// with `host:N`, the capacity of each stand-in device.
    pub host_capacity: Option<Amount>,
    /// `CUMEM_DEVICE=host:N`: the number of host stand-in devices, 1 to [`MAX_DEVICES`]
    /// (default 1; also used by `auto` when it falls back to the host).
    pub host_devices: u32,
    /// `CUMEM_DEBUG`: 0 off; 1 records time and thread of each live allocation;
    /// 2 also records a native backtrace.
    pub debug: u8,
    /// `CUMEM_LOG`: an `env_logger` filter (default `warn`).
    pub log: Option<String>,
    /// `CUMEM_FAULT`: failures to inject into device calls, for testing (default none).
    pub fault: Option<FaultSpec>,
    /// `CUMEM_PINNED_LIMIT`: cap on the page-locked host memory the pinned host pool
    /// reserves (bytes, or a percentage of the machine's memory; default: none).
    pub pinned_limit: Option<Amount>,
    /// `CUMEM_THREAD_CACHE`: `1` (default) puts a per-thread cache of small freed blocks
    /// in front of the shard lock (every caching pool, with `CUMEM_DEBUG=0`, for blocks up
    /// to [`PoolKind::thread_cache_max_size`]: 1 MiB, `expandable` 64 KiB; see
    /// `thread_cache`); `0` turns it off, for comparisons.
    pub thread_cache: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool: PoolKind::Binned,
            limit: None,
            device: DeviceChoice::Auto,
            host_capacity: None,
            host_devices: 1,
            debug: 0,
            log: None,
            fault: None,
            pinned_limit: None,
            thread_cache: true,
        }
    }
}

/// `CUMEM_FAULT`: probabilities of injected device failures, per call (see
/// [`crate::device::FaultyDevice`]), and the seed of their random sequence:
/// the value of `CUMEM_FAULT`, e.g. `alloc:0.01,free:0.001,copy:0.001,seed=7`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultSpec {
    /// Probability in [0, 1] that a device allocation (or a virtual-memory mapping, for
    /// the expandable pool) fails with out of memory.
    pub alloc: f64,
    /// Probability that a device free (or unmapping) reports an error (the memory is
    /// released anyway).
    pub free: f64,
    /// Probability that a copy or memset, synchronous or asynchronous, fails with a
    /// device error, writing nothing.
    pub copy: f64,
    /// Probability that a stream or event call (create, record, query, synchronize,
    /// wait, sleep; not destroy) fails with a device error, doing nothing.
    pub stream: f64,
    /// Seed of the sequence of draws (default 0).
    pub seed: u64,
}

impl FaultSpec {
    /// Parses `alloc:P,free:P,copy:P,stream:P,seed=N` (any subset, any order; `:` or `=` after
    /// each key; P a probability in [0, 1], N an unsigned integer). Error:
    /// [`Error::Config`] naming `CUMEM_FAULT`, the value and the accepted form.
    pub fn parse(value: &str) -> Result<FaultSpec> {
        let bad = |why: String| {
            Error::Config(format!(
                "CUMEM_FAULT={value:?} {why}; accepted: comma-separated `alloc:P`, `free:P`, \
                 `copy:P`, `stream:P` (P a probability from 0 to 1) and `seed=N`, e.g. \
                 alloc:0.01,free:0.001,copy:0.001,seed=7"
            ))
        };
        let mut spec = FaultSpec { alloc: 0.0, free: 0.0, copy: 0.0, stream: 0.0, seed: 0 };
        let mut seen = Vec::new();
        for item in value.split(',') {
            let item = item.trim();
            let Some((key, v)) = item.split_once([':', '=']) else {
                return Err(bad(format!("has {item:?} without a value")));
            };
            let (key, v) = (key.trim(), v.trim());
            if seen.contains(&key) {
                return Err(bad(format!("sets {key} twice")));
            }
            seen.push(key);
            if key == "seed" {
                spec.seed = v.parse().map_err(|_| bad(format!("has seed {v:?}, not an unsigned integer")))?;
                continue;
            }
            let p: f64 = v.parse().map_err(|_| bad(format!("has {key} {v:?}, not a number")))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(bad(format!("has {key} {v}, not a probability from 0 to 1")));
            }
            match key {
                "alloc" => spec.alloc = p,
                "free" => spec.free = p,
                "copy" => spec.copy = p,
                "stream" => spec.stream = p,
                _ => return Err(bad(format!("has the unknown key {key:?}"))),
            }
        }
        Ok(spec)
    }
}

/// Every environment variable the engine reads, in the order they are checked.
pub const ENGINE_VARS: [&str; 9] = [
    "JULIA_CUDA_MEMORY_POOL",
    "JULIA_CUDA_MEMORY_LIMIT",
    "CUMEM_DEVICE",
    "CUMEM_HOST_CAPACITY",
    "CUMEM_DEBUG",
    "CUMEM_LOG",
    "CUMEM_FAULT",
    "CUMEM_PINNED_LIMIT",
    "CUMEM_THREAD_CACHE",
];

impl Config {
    /// Reads every variable of [`ENGINE_VARS`] (the configuration table of
    /// docs/contract.md) from the process environment. An empty value counts as unset.
    /// Errors: [`Error::Config`] for the first value that is not UTF-8 text or cannot be
    /// parsed, naming the variable, the value and what is accepted.
    pub fn from_env() -> Result<Config> {
        check_utf8(|k| std::env::var_os(k))?;
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`Config::from_env`], with `lookup` standing in for the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let mut cfg = Config::default();
        if let Some(v) = get("JULIA_CUDA_MEMORY_POOL") {
            cfg.pool = PoolKind::parse(&v)?;
        }
        if let Some(v) = get("JULIA_CUDA_MEMORY_LIMIT") {
            cfg.limit = parse_limit("JULIA_CUDA_MEMORY_LIMIT", &v)?;
        }
        if let Some(v) = get("CUMEM_DEVICE") {
            (cfg.device, cfg.host_devices) = parse_device(&v)?;
        }
        if let Some(v) = get("CUMEM_HOST_CAPACITY") {
            cfg.host_capacity = Some(parse_amount("CUMEM_HOST_CAPACITY", &v)?);
        }
        if let Some(v) = get("CUMEM_DEBUG") {
            cfg.debug = match v.trim() {
                "0" => 0,
                "1" => 1,
                "2" => 2,
                _ => {
                    return Err(Error::Config(format!(
                        "CUMEM_DEBUG={v:?} is not a debug level; accepted: 0, 1, 2"
                    )));
                }
            };
        }
        if let Some(v) = get("CUMEM_LOG") {
            check_log_filter(&v)?;
            cfg.log = Some(v);
        }
        if let Some(v) = get("CUMEM_FAULT") {
            cfg.fault = Some(FaultSpec::parse(&v)?);
        }
        if let Some(v) = get("CUMEM_PINNED_LIMIT") {
            // A percentage is of the machine's memory (the pinned pool's "device").
            cfg.pinned_limit = parse_limit("CUMEM_PINNED_LIMIT", &v)?;
        }
        if let Some(v) = get("CUMEM_THREAD_CACHE") {
            cfg.thread_cache = match v.trim() {
                "0" => false,
                "1" => true,
                _ => {
                    return Err(Error::Config(format!(
                        "CUMEM_THREAD_CACHE={v:?} is not a switch; accepted: 0 (off), 1 (on)"
                    )));
                }
            };
        }
        Ok(cfg)
    }
}

/// Parses `CUMEM_DEVICE`: `auto`, `cuda`, `host` or `host:N` (N stand-in devices, 1 to
/// [`MAX_DEVICES`]), case-insensitive. Error: [`Error::Config`] naming the value.
fn parse_device(v: &str) -> Result<(DeviceChoice, u32)> {
    let bad = |why: &str| {
        Error::Config(format!(
            "CUMEM_DEVICE={v:?} {why}; accepted: auto, cuda, host, or host:N for N host devices \
             standing in for N GPUs (N from 1 to {MAX_DEVICES})"
        ))
    };
    let s = v.trim().to_ascii_lowercase();
    match s.as_str() {
        "auto" => return Ok((DeviceChoice::Auto, 1)),
        "cuda" => return Ok((DeviceChoice::Cuda, 1)),
        "host" => return Ok((DeviceChoice::Host, 1)),
        _ => {}
    }
    let Some(n) = s.strip_prefix("host:") else {
        return Err(bad("is not a device"));
    };
    match n.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_DEVICES).contains(&n) => Ok((DeviceChoice::Host, n)),
        _ => Err(bad("does not give a number of devices from 1 to 64")),
    }
}

/// Refuses any of [`ENGINE_VARS`] whose value `lookup` gives as bytes that are not UTF-8
/// text: `std::env::var` reports such a value as absent, which would silently drop the
/// setting. Error: [`Error::Config`] naming the variable and the value (invalid bytes
/// as `\xNN`).
pub fn check_utf8(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<()> {
    for k in ENGINE_VARS {
        if let Some(v) = lookup(k)
            && v.to_str().is_none()
        {
            return Err(Error::Config(format!(
                "{k}={v:?} is not UTF-8 text; accepted: the values documented for {k}, in UTF-8"
            )));
        }
    }
    Ok(())
}

/// Checks a `CUMEM_LOG` value with env_logger's own parser (`env_filter`), which on its
/// own only warns and ignores what it cannot parse; and refuses directives that name a
/// module other than CuMem's (`cumem`, `cumem::pool`, ...), or are empty, since those
/// would silently log nothing. Error: [`Error::Config`] naming the value.
fn check_log_filter(v: &str) -> Result<()> {
    let bad = |why: String| {
        Error::Config(format!(
            "CUMEM_LOG={v:?} {why}; accepted: an env_logger filter such as `debug`, `warn` or \
             `cumem=debug,cumem::upstream=trace`, with levels off, error, warn, info, debug, trace \
             and module paths starting with `cumem`"
        ))
    };
    if let Err(e) = env_filter::Builder::new().try_parse(v) {
        return Err(bad(format!("is not a log filter ({e})")));
    }
    let levels = ["off", "error", "warn", "info", "debug", "trace"];
    for d in v.split('/').next().unwrap_or("").split(',') {
        let d = d.trim();
        if d.is_empty() {
            return Err(bad("has an empty directive".into()));
        }
        let module = match d.split_once('=') {
            Some((m, _)) => m.trim(),
            None if levels.contains(&d.to_ascii_lowercase().as_str()) => continue,
            None => d,
        };
        if module != "cumem" && !module.starts_with("cumem::") {
            return Err(bad(format!(
                "names module {module:?}, which is not CuMem's, so it would log nothing"
            )));
        }
    }
    Ok(())
}

/// Parses a byte amount: a plain integer of bytes (`4294967296`, or in exponent notation
/// `4e9`), a number with a unit (`512MiB`, `4GiB`, `1.5GiB`, `2GB`, `100kB`, `64B`;
/// binary units KiB..TiB, decimal units kB..TB, case-insensitive, optional space), or a
/// percentage of device memory (`80%`, in (0, 100]). Errors: [`Error::Config`] naming
/// `var`, the value and the accepted forms, also for zero, for a fraction of a byte
/// (`1.5`; below one byte with a suggestion of the percentage meant: `0.5` → `50%`) and
/// for values that overflow 64 bits (`1e400`). The limit variables also take `none`
/// (see `Config::from_lookup`).
pub fn parse_amount(var: &str, value: &str) -> Result<Amount> {
    let bad = |why: &str| {
        Error::Config(format!(
            "{var}={value:?} {why}; accepted: a positive number of bytes (4294967296, 4e9), a \
             number with a unit (512MiB, 4GiB, 2GB, 1.5GiB; units B, KiB, MiB, GiB, TiB, kB, MB, \
             GB, TB) or a percentage of device memory (80%){}",
            if var.ends_with("_LIMIT") || var == "memory limit" { ", or none for no limit" } else { "" }
        ))
    };
    let s = value.trim();
    if let Some(p) = s.strip_suffix('%') {
        let f: f64 = p.trim().parse().map_err(|_| bad("is not a percentage"))?;
        if !(f > 0.0 && f <= 100.0) {
            return Err(bad("is not a percentage in (0, 100]"));
        }
        return Ok(Amount::Fraction(f / 100.0));
    }
    let split = number_prefix(s);
    let (num, unit) = (&s[..split], s[split..].trim());
    if num.is_empty() {
        return Err(bad("has no number"));
    }
    let fractional = num.contains(['.', 'e', 'E']);
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad("has an unknown unit")),
    };
    let bytes = if fractional {
        let f: f64 = num.parse().map_err(|_| bad("is not a number"))?;
        let b = f * mult as f64;
        if !b.is_finite() || b >= u64::MAX as f64 {
            return Err(bad("is too large"));
        }
        if mult == 1 && b.fract() != 0.0 && b >= 1.0 {
            return Err(bad("is not a whole number of bytes"));
        }
        b as u64
    } else {
        let n: u64 = num.parse().map_err(|_| bad("is too large"))?;
        n.checked_mul(mult).ok_or_else(|| bad("is too large"))?
    };
    if bytes == 0 {
        if unit.is_empty() && fractional && num.parse::<f64>().is_ok_and(|f| f > 0.0 && f < 1.0) {
            // `0.5` is most likely meant as a share of device memory.
            let pct = (num.parse::<f64>().unwrap_or(0.0) * 10_000.0).round() / 100.0;
            return Err(bad(&format!("is less than one byte (for a share of device memory write {pct}%)")));
        }
        return Err(bad("is zero"));
    }
    Ok(Amount::Bytes(bytes))
}

/// The length of the number at the start of `s`: digits and points, then an exponent
/// (`e`, an optional sign, digits) if one follows (`1e9`, `2.5E3`); a unit starting with
/// `e` is not mistaken for one (`5EB` is not an exponent: no digit follows).
fn number_prefix(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = b.iter().position(|&c| !(c.is_ascii_digit() || c == b'.')).unwrap_or(b.len());
    if i > 0 && i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            i = j + digits;
        }
    }
    i
}

/// A limit variable (`JULIA_CUDA_MEMORY_LIMIT`, `CUMEM_PINNED_LIMIT`): `none` (any case)
/// for no limit, as `cumem_set_memory_limit_str` takes it, else [`parse_amount`].
fn parse_limit(var: &str, value: &str) -> Result<Option<Amount>> {
    if value.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    parse_amount(var, value).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts() {
        let p = |s| parse_amount("X", s);
        assert_eq!(p("4294967296"), Ok(Amount::Bytes(4294967296)));
        assert_eq!(p("512MiB"), Ok(Amount::Bytes(512 << 20)));
        assert_eq!(p("4 GiB"), Ok(Amount::Bytes(4 << 30)));
        assert_eq!(p("2GB"), Ok(Amount::Bytes(2_000_000_000)));
        assert_eq!(p("1.5gib"), Ok(Amount::Bytes(3 << 29)));
        assert_eq!(p("80%"), Ok(Amount::Fraction(0.8)));
        for bad in [
            "",
            "abc",
            "0",
            "-1",
            "12XB",
            "101%",
            "0%",
            "99999999999999999999",
            "20000000TiB",
            "1..5GiB",
            "%",
        ] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("X=") && e.contains("accepted"), "{bad}: {e}");
        }
    }

    #[test]
    fn env_errors_name_variable_and_value() {
        let cfg =
            |k: &'static str, v: &'static str| Config::from_lookup(move |q| (q == k).then(|| v.to_string()));
        for (k, v) in [
            ("JULIA_CUDA_MEMORY_POOL", "bogus"),
            ("JULIA_CUDA_MEMORY_LIMIT", "lots"),
            ("CUMEM_DEVICE", "tpu"),
            ("CUMEM_HOST_CAPACITY", "1QB"),
            ("CUMEM_DEBUG", "3"),
            ("CUMEM_LOG", "loud=="),
            ("CUMEM_FAULT", "alloc:2"),
            ("CUMEM_PINNED_LIMIT", "lots"),
        ] {
            let e = cfg(k, v).unwrap_err();
            assert!(matches!(e, Error::Config(_)));
            let m = e.to_string();
            assert!(m.contains(k) && m.contains(v) && m.contains("accepted"), "{m}");
        }
        assert_eq!(cfg("JULIA_CUDA_MEMORY_POOL", "Split").unwrap().pool, PoolKind::Split);
        assert_eq!(cfg("CUMEM_LOG", "cumem=debug").unwrap().log.as_deref(), Some("cumem=debug"));
        assert_eq!(cfg("JULIA_CUDA_MEMORY_POOL", " ").unwrap(), Config::default());
        assert_eq!(cfg("CUMEM_PINNED_LIMIT", "1GiB").unwrap().pinned_limit, Some(Amount::Bytes(1 << 30)));
        assert_eq!(cfg("CUMEM_PINNED_LIMIT", "25%").unwrap().pinned_limit, Some(Amount::Fraction(0.25)));
    }

    #[test]
    fn host_stand_ins_are_counted() {
        let dev =
            |v: &'static str| Config::from_lookup(move |q| (q == "CUMEM_DEVICE").then(|| v.to_string()));
        let c = dev("host:2").unwrap();
        assert_eq!((c.device, c.host_devices), (DeviceChoice::Host, 2));
        let c = dev(" HOST:64 ").unwrap();
        assert_eq!((c.device, c.host_devices), (DeviceChoice::Host, 64));
        assert_eq!(dev("host").unwrap().host_devices, 1);
        for bad in ["host:0", "host:65", "host:", "host:x", "cuda:1", "host2"] {
            let m = dev(bad).unwrap_err().to_string();
            assert!(m.contains(&format!("CUMEM_DEVICE={bad:?}")) && m.contains("host:N"), "{bad}: {m}");
        }
    }

    #[test]
    fn non_utf8_values_are_refused_naming_the_variable() {
        use std::os::unix::ffi::OsStringExt;
        for k in ENGINE_VARS {
            let e = check_utf8(|q| (q == k).then(|| std::ffi::OsString::from_vec(b"\xff128MiB".to_vec())))
                .unwrap_err();
            assert!(matches!(e, Error::Config(_)));
            let m = e.to_string();
            assert!(m.contains(&format!("{k}=\"\\xFF128MiB\"")) && m.contains("UTF-8"), "{m}");
        }
        assert_eq!(check_utf8(|q| (q == "CUMEM_DEBUG").then(|| "1".into())), Ok(()));
        // Variables the engine does not read are not its business.
        assert_eq!(check_utf8(|q| (q == "HOME").then(|| std::ffi::OsString::from_vec(vec![0xff]))), Ok(()));
    }

    #[test]
    fn largest_limit_is_a_limit() {
        let c =
            Config::from_lookup(|q| (q == "JULIA_CUDA_MEMORY_LIMIT").then(|| u64::MAX.to_string())).unwrap();
        assert_eq!(c.limit, Some(Amount::Bytes(u64::MAX)));
    }

    #[test]
    fn a_fraction_below_one_suggests_a_percentage() {
        for (v, hint) in [("0.5", "50%"), ("0.25", "25%"), (".1", "10%")] {
            let m = parse_amount("JULIA_CUDA_MEMORY_LIMIT", v).unwrap_err().to_string();
            assert!(m.contains(&format!("write {hint}")) && m.contains("accepted"), "{v}: {m}");
        }
        // With a unit, or at zero, there is nothing to suggest.
        for v in ["0.5B", "0", "0.0"] {
            let m = parse_amount("X", v).unwrap_err().to_string();
            assert!(!m.contains("write"), "{v}: {m}");
        }
    }

    #[test]
    fn log_filters_follow_env_logger_and_name_cumem() {
        let log = |v: &str| check_log_filter(v).map_err(|e| e.to_string());
        for ok in ["debug", "WARN", "cumem=debug", "cumem::upstream=trace,warn", "cumem", "info/alloc", "off"]
        {
            assert_eq!(log(ok), Ok(()), "{ok}");
        }
        for bad in
            ["debgu", "loud==", "cumem=verbose", "a b", "=", "debug,,warn", "a/b/c", "cudarc=debug", "cumemx"]
        {
            let m = log(bad).unwrap_err();
            assert!(m.contains(&format!("CUMEM_LOG={bad:?}")) && m.contains("accepted"), "{bad}: {m}");
        }
    }

    #[test]
    fn parses_the_documented_form() {
        let s = FaultSpec::parse("alloc:0.01,free:0.001,copy:0.001,seed=7").unwrap();
        assert_eq!(s, FaultSpec { alloc: 0.01, free: 0.001, copy: 0.001, stream: 0.0, seed: 7 });
        let s = FaultSpec::parse(" copy=1 , alloc:0").unwrap();
        assert_eq!(s, FaultSpec { alloc: 0.0, free: 0.0, copy: 1.0, stream: 0.0, seed: 0 });
        for bad in [
            "alloc",
            "alloc:",
            "alloc:2",
            "alloc:-0.1",
            "alloc:x",
            "oom:0.1",
            "seed=-1",
            "alloc:0.1,alloc:0.2",
            ",",
        ] {
            let m = FaultSpec::parse(bad).unwrap_err().to_string();
            assert!(m.contains(&format!("CUMEM_FAULT={bad:?}")) && m.contains("accepted"), "{bad}: {m}");
        }
    }
}

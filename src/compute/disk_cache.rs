//! Kernels compiled by NVRTC, kept on disk across processes, as CuPy's kernel cache
//! (`cupy/cuda/compiler.py`, `~/.cupy/kernel_cache`) keeps them: a fresh process that
//! runs a kernel an earlier one compiled loads the PTX/CUBIN from a file instead of
//! spending NVRTC's ~100 ms to ~1 s on it again.
//!
//! - **Key**: the generated CUDA C source, the target architecture (`sm_90`,
//!   `compute_75`, ...), NVRTC's version, the compiler options and this file format's
//!   version. The file name is the SHA-256 of the key; the file holds the whole key too,
//!   and a hit requires it to match byte for byte, so a hash collision or a truncated file
//!   is a miss, never a wrong kernel.
//! - **Where**: `CUMEM_CACHE_DIR` when set; else the directory the Julia package names at
//!   load time (`<first depot>/compiled/cumem_kernels`, [`configure`]); else
//!   `$XDG_CACHE_HOME/cumem/kernels` or `~/.cache/cumem/kernels`.
//! - **Concurrent processes**: a file is written under a temporary name in the same
//!   directory and renamed into place (atomic on POSIX file systems), so a reader sees a
//!   complete file or none; two processes compiling the same kernel both write it, and the
//!   last rename wins with identical contents.
//! - **Bounded**: after each write, when the files exceed `CUMEM_CACHE_MAXSIZE` bytes
//!   (default 256 MiB, as CUDA's own JIT cache `CUDA_CACHE_MAXSIZE`), the least recently
//!   used are deleted (a hit refreshes a file's modification time) down to 3/4 of it;
//!   temporary files older than an hour, left by killed processes, go too.
//! - **Switch**: `CUMEM_KERNEL_CACHE=0` (or `off`, `false`, `no`) turns the disk cache
//!   off; [`configure`] can too. A cache that cannot be read or written (read-only,
//!   full disk) only costs the compile: failures are logged, never returned.

use crate::error::Result;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

/// This file format's version, part of every key: a change of format misses old files.
const FORMAT: &str = "cumem-kernel-cache 1";
/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"CUMEMKC1";
/// Default bound on the cache's files, bytes.
const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// Extension of complete cache files.
const EXT: &str = "kernel";

/// Where and whether the cache works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// The directory, or `None` when the cache is off.
    pub dir: Option<PathBuf>,
    /// Bound on the total size of the cache's files, bytes.
    pub max_bytes: u64,
}

static CONFIG: RwLock<Option<CacheConfig>> = RwLock::new(None);

/// What the cache did in this process (for tests and `CuMem.versioninfo`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Compiles answered from a file.
    pub hits: u64,
    /// Compiles that found no usable file (NVRTC then ran).
    pub misses: u64,
    /// Files written.
    pub writes: u64,
    /// Files deleted to keep the cache under its bound.
    pub evictions: u64,
}

static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// The counters since the process started.
pub fn counters() -> CacheCounters {
    CacheCounters {
        hits: HITS.load(Relaxed),
        misses: MISSES.load(Relaxed),
        writes: WRITES.load(Relaxed),
        evictions: EVICTIONS.load(Relaxed),
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn env_disabled() -> bool {
    env("CUMEM_KERNEL_CACHE")
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no"))
}

fn env_max_bytes() -> u64 {
    env("CUMEM_CACHE_MAXSIZE").and_then(|v| v.parse::<u64>().ok()).unwrap_or(DEFAULT_MAX_BYTES)
}

/// The configuration from the environment alone (see the module's documentation).
fn from_env() -> CacheConfig {
    let dir = if env_disabled() {
        None
    } else if let Some(d) = env("CUMEM_CACHE_DIR") {
        Some(PathBuf::from(d))
    } else if let Some(x) = env("XDG_CACHE_HOME") {
        Some(Path::new(&x).join("cumem").join("kernels"))
    } else {
        env("HOME").map(|h| Path::new(&h).join(".cache").join("cumem").join("kernels"))
    };
    CacheConfig { dir, max_bytes: env_max_bytes() }
}

/// The cache's configuration now: what [`configure`] set, else the environment's.
pub fn config() -> CacheConfig {
    if let Some(c) = CONFIG.read().as_ref() {
        return c.clone();
    }
    CONFIG.write().get_or_insert_with(from_env).clone()
}

/// Sets where the cache lives (`dir`; `None`: the environment's choice) and whether it is
/// on, with `max_bytes` as its bound (0: `CUMEM_CACHE_MAXSIZE` or the default). The
/// environment still wins: `CUMEM_KERNEL_CACHE=0` keeps the cache off and
/// `CUMEM_CACHE_DIR` names the directory, so a user can override what a package chose.
pub fn configure(dir: Option<PathBuf>, max_bytes: u64, enabled: bool) {
    let base = from_env();
    let dir = if !enabled || env_disabled() {
        None
    } else if env("CUMEM_CACHE_DIR").is_some() {
        base.dir
    } else {
        dir.or(base.dir)
    };
    let max_bytes = if max_bytes == 0 { base.max_bytes } else { max_bytes };
    *CONFIG.write() = Some(CacheConfig { dir, max_bytes });
}

/// The key text of a compile: format, NVRTC version, architecture, options, source.
pub fn key(source: &str, arch: &str, nvrtc: (i32, i32), options: &[&str]) -> String {
    let mut k = String::with_capacity(source.len() + 128);
    k += FORMAT;
    k += &format!("\nnvrtc {}.{}\narch {arch}\noptions {}\n\n", nvrtc.0, nvrtc.1, options.join(" "));
    k += source;
    k
}

/// The file name of `key`: its SHA-256 in hex plus the extension.
fn file_name(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let mut s = String::with_capacity(70);
    for b in digest {
        s += &format!("{b:02x}");
    }
    s + "." + EXT
}

/// NVRTC's output for one source (what [`super::nvrtc`] compiles and this cache keeps;
/// defined here, below the compiler, so that the cache needs nothing of it).
pub struct Compiled {
    /// The PTX assembly text.
    pub ptx: String,
    /// The CUBIN image when compiled for a real architecture (`sm_XY`).
    pub cubin: Option<Vec<u8>>,
}

/// The compile for `key`, from the cache when a file holds it, else from `compile`
/// (whose result is then written to the cache). Errors: `compile`'s; the cache's own
/// failures are logged and cost only the compile.
pub fn cached(key: &str, compile: impl FnOnce() -> Result<Compiled>) -> Result<Compiled> {
    let cfg = config();
    let Some(dir) = cfg.dir else { return compile() };
    let path = dir.join(file_name(key));
    if let Some(c) = read(&path, key) {
        HITS.fetch_add(1, Relaxed);
        // Least recently used: a hit makes the file young again (best effort).
        if let Ok(f) = std::fs::File::options().append(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        return Ok(c);
    }
    MISSES.fetch_add(1, Relaxed);
    let c = compile()?;
    match write(&dir, &path, key, &c) {
        Ok(()) => {
            WRITES.fetch_add(1, Relaxed);
            evict(&dir, cfg.max_bytes);
        }
        Err(e) => log::warn!("kernel cache: cannot write {}: {e}", path.display()),
    }
    Ok(c)
}

/// Little-endian u64 at `*at`, advancing it; `None` past the end.
fn take_u64(b: &[u8], at: &mut usize) -> Option<u64> {
    let v = u64::from_le_bytes(b.get(*at..*at + 8)?.try_into().ok()?);
    *at += 8;
    Some(v)
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: u64) -> Option<&'a [u8]> {
    let n = usize::try_from(n).ok()?;
    let s = b.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(s)
}

/// The compile stored in `path` if its key is `key` and the file is whole.
fn read(path: &Path, key: &str) -> Option<Compiled> {
    let b = std::fs::read(path).ok()?;
    let body_end = b.len().checked_sub(32)?;
    let (body, sum) = b.split_at(body_end);
    if Sha256::digest(body).as_slice() != sum || !body.starts_with(MAGIC) {
        log::warn!("kernel cache: {} is damaged; compiling again", path.display());
        return None;
    }
    let mut at = MAGIC.len();
    let k = take_u64(body, &mut at).and_then(|n| take(body, &mut at, n))?;
    if k != key.as_bytes() {
        return None; // another key with the same hash: a miss, never a wrong kernel
    }
    let ptx = take_u64(body, &mut at).and_then(|n| take(body, &mut at, n))?;
    let cubin = match take_u64(body, &mut at)? {
        u64::MAX => None,
        n => Some(take(body, &mut at, n)?.to_vec()),
    };
    Some(Compiled { ptx: String::from_utf8(ptx.to_vec()).ok()?, cubin })
}

/// Writes `c` for `key` to `path` through a temporary file in `dir` and a rename.
fn write(dir: &Path, path: &Path, key: &str, c: &Compiled) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut body = Vec::with_capacity(key.len() + c.ptx.len() + c.cubin.as_ref().map_or(0, Vec::len) + 64);
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&(key.len() as u64).to_le_bytes());
    body.extend_from_slice(key.as_bytes());
    body.extend_from_slice(&(c.ptx.len() as u64).to_le_bytes());
    body.extend_from_slice(c.ptx.as_bytes());
    match &c.cubin {
        Some(b) => {
            body.extend_from_slice(&(b.len() as u64).to_le_bytes());
            body.extend_from_slice(b);
        }
        None => body.extend_from_slice(&u64::MAX.to_le_bytes()),
    }
    let sum = Sha256::digest(&body);
    body.extend_from_slice(&sum);
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = dir.join(format!(
        ".{}.{}.{nanos}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("kernel"),
        std::process::id(),
        SEQ.fetch_add(1, Relaxed)
    ));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Deletes the least recently used files while the cache holds more than `max_bytes`,
/// down to 3/4 of it, and temporary files older than an hour.
fn evict(dir: &Path, max_bytes: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    let mut files = Vec::new();
    let mut total = 0u64;
    for e in entries.flatten() {
        let Ok(meta) = e.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let name = e.file_name();
        let name = name.to_string_lossy();
        let mtime = meta.modified().unwrap_or(now);
        if name.ends_with(".tmp") {
            if now.duration_since(mtime).unwrap_or_default() > Duration::from_secs(3600) {
                let _ = std::fs::remove_file(e.path());
            }
            continue;
        }
        if name.ends_with(EXT) {
            total += meta.len();
            files.push((mtime, meta.len(), e.path()));
        }
    }
    if total <= max_bytes {
        return;
    }
    files.sort();
    let target = max_bytes / 4 * 3;
    for (_, len, path) in files {
        if total <= target {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            EVICTIONS.fetch_add(1, Relaxed);
        }
        total = total.saturating_sub(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(ptx: &str, cubin: Option<&[u8]>) -> Compiled {
        Compiled { ptx: ptx.to_owned(), cubin: cubin.map(<[u8]>::to_vec) }
    }

    #[test]
    fn round_trip_and_key_mismatch() {
        let dir = std::env::temp_dir().join(format!("cumem-kc-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let k = key("extern \"C\" __global__ void f() {}", "sm_90", (13, 0), &["-std=c++17"]);
        let path = dir.join(file_name(&k));
        write(&dir, &path, &k, &compiled("ptx text", Some(&[1, 2, 3]))).unwrap();
        let c = read(&path, &k).unwrap();
        assert_eq!((c.ptx.as_str(), c.cubin.as_deref()), ("ptx text", Some(&[1u8, 2, 3][..])));
        // The same file read for another key (a collision): a miss.
        let other = key("extern \"C\" __global__ void g() {}", "sm_90", (13, 0), &["-std=c++17"]);
        assert!(read(&path, &other).is_none());
        // No CUBIN round-trips as none.
        write(&dir, &path, &k, &compiled("only ptx", None)).unwrap();
        assert!(read(&path, &k).unwrap().cubin.is_none());
        // A damaged file (one byte changed, or cut short) is a miss.
        let mut b = std::fs::read(&path).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 1;
        std::fs::write(&path, &b).unwrap();
        assert!(read(&path, &k).is_none());
        std::fs::write(&path, &b[..b.len() - 5]).unwrap();
        assert!(read(&path, &k).is_none());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_differ_by_every_part() {
        let base = key("src", "sm_90", (13, 0), &["-a"]);
        for k in [
            key("src2", "sm_90", (13, 0), &["-a"]),
            key("src", "sm_80", (13, 0), &["-a"]),
            key("src", "sm_90", (12, 9), &["-a"]),
            key("src", "sm_90", (13, 0), &["-b"]),
        ] {
            assert_ne!(file_name(&k), file_name(&base));
        }
        assert_eq!(file_name(&base).len(), 64 + 1 + EXT.len());
    }

    #[test]
    fn eviction_keeps_the_newest_under_the_bound() {
        let dir = std::env::temp_dir().join(format!("cumem-kc-evict-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = SystemTime::now() - Duration::from_secs(1000);
        for i in 0..8u64 {
            let p = dir.join(format!("{i:064x}.{EXT}"));
            std::fs::write(&p, vec![0u8; 1000]).unwrap();
            let f = std::fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(t0 + Duration::from_secs(i * 10)).unwrap();
        }
        let stale = dir.join(".x.1.2.3.tmp");
        std::fs::write(&stale, b"partial").unwrap();
        std::fs::File::options()
            .append(true)
            .open(&stale)
            .unwrap()
            .set_modified(t0 - Duration::from_secs(7200))
            .unwrap();
        evict(&dir, 4000); // 8000 bytes > 4000: down to 3000, the three newest
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, (5..8u64).map(|i| format!("{i:064x}.{EXT}")).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

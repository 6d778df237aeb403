//! NVRTC: CUDA C++ source to PTX or CUBIN, without a GPU (only libnvrtc is needed).
//!
//! Options are fixed: `-arch=<arch>`, `-std=c++17`, and nothing that relaxes IEEE
//! arithmetic (no `--use_fast_math`; NVRTC's defaults keep denormals, precise division
//! and square root, and fused multiply-add contraction as nvcc does), so results match
//! what CUDA C compiled by nvcc gives. A source error becomes [`Error::Compile`] with
//! NVRTC's log and the source with line numbers.

pub use super::disk_cache::Compiled;
use super::dylib::{self, Opened};
use crate::error::{Error, Result};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

type Prog = *mut c_void;
type Res = c_int;
const NVRTC_SUCCESS: Res = 0;
const NVRTC_ERROR_COMPILATION: Res = 6;

/// The functions of libnvrtc the engine calls (all present since CUDA 11.2).
struct Api {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
    num_archs: unsafe extern "C" fn(*mut c_int) -> Res,
    archs: unsafe extern "C" fn(*mut c_int) -> Res,
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Res,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    ptx_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    ptx: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
}

/// libnvrtc, opened once per process.
pub struct Nvrtc {
    api: Api,
    /// (major, minor) of NVRTC, e.g. (13, 0).
    version: (i32, i32),
    /// The real architectures NVRTC can compile for, as `10 * major + minor` (75, 80, ...).
    archs: Vec<i32>,
    /// Where the library was found (a path or the name the linker resolved).
    from: String,
    /// Serialises compiles: older NVRTC releases are not documented as thread-safe.
    lock: parking_lot::Mutex<()>,
    _lib: Opened,
}

/// NVRTC's options besides `-arch`: C++17, and no contraction of `a * b + c` into a fused
/// multiply-add (Julia does not fuse either, so results match Base).
pub const OPTIONS: &[&str] = &["-std=c++17", "--fmad=false"];

/// File names tried for libnvrtc, newest CUDA first; `CUMEM_NVRTC_LIBRARY` overrides.
pub const NVRTC_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// The process's NVRTC, opened on first use (see [`super::dylib`] for the search).
/// Errors: [`Error::NotSupported`] when libnvrtc cannot be found or lacks a function;
/// the same error is returned on every later call (the search runs once).
pub fn nvrtc() -> Result<&'static Nvrtc> {
    static NVRTC: OnceLock<Result<Nvrtc>> = OnceLock::new();
    NVRTC.get_or_init(Nvrtc::open).as_ref().map_err(Clone::clone)
}

fn check(api_err: unsafe extern "C" fn(Res) -> *const c_char, what: &str, r: Res) -> Result<()> {
    if r == NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: nvrtcGetErrorString returns a static string for any code.
    let msg = unsafe { CStr::from_ptr(api_err(r)) }.to_string_lossy();
    Err(Error::Device(format!("{what} failed: {msg} (nvrtcResult {r})")))
}

impl Nvrtc {
    fn open() -> Result<Nvrtc> {
        let lib = dylib::open(
            "libnvrtc (NVRTC)",
            "CUMEM_NVRTC_LIBRARY",
            NVRTC_NAMES,
            &[],
            "the CUDA toolkit, or pip's nvidia-cuda-nvrtc",
        )?;
        // SAFETY: the signatures are those of nvrtc.h (CUDA 11.2 and later).
        let api = unsafe {
            Api {
                version: dylib::symbol(&lib, "nvrtcVersion")?,
                error_string: dylib::symbol(&lib, "nvrtcGetErrorString")?,
                num_archs: dylib::symbol(&lib, "nvrtcGetNumSupportedArchs")?,
                archs: dylib::symbol(&lib, "nvrtcGetSupportedArchs")?,
                create: dylib::symbol(&lib, "nvrtcCreateProgram")?,
                destroy: dylib::symbol(&lib, "nvrtcDestroyProgram")?,
                compile: dylib::symbol(&lib, "nvrtcCompileProgram")?,
                log_size: dylib::symbol(&lib, "nvrtcGetProgramLogSize")?,
                log: dylib::symbol(&lib, "nvrtcGetProgramLog")?,
                ptx_size: dylib::symbol(&lib, "nvrtcGetPTXSize")?,
                ptx: dylib::symbol(&lib, "nvrtcGetPTX")?,
                cubin_size: dylib::symbol(&lib, "nvrtcGetCUBINSize")?,
                cubin: dylib::symbol(&lib, "nvrtcGetCUBIN")?,
            }
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out-pointers.
        check(api.error_string, "nvrtcVersion", unsafe { (api.version)(&mut major, &mut minor) })?;
        let mut n = 0;
        // SAFETY: valid out-pointer, then a buffer of the count it gave.
        check(api.error_string, "nvrtcGetNumSupportedArchs", unsafe { (api.num_archs)(&mut n) })?;
        let mut archs = vec![0; n.max(0) as usize];
        check(api.error_string, "nvrtcGetSupportedArchs", unsafe { (api.archs)(archs.as_mut_ptr()) })?;
        let from = lib.from.clone();
        log::info!("NVRTC {major}.{minor} from {from}; architectures {archs:?}");
        Ok(Nvrtc { api, version: (major, minor), archs, from, lock: parking_lot::Mutex::new(()), _lib: lib })
    }

    /// NVRTC's version, e.g. `(13, 0)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Where libnvrtc was found: a path, or the file name the dynamic linker resolved.
    pub fn location(&self) -> &str {
        &self.from
    }

    /// The real architectures (`10 * major + minor`) this NVRTC compiles for, ascending.
    pub fn archs(&self) -> &[i32] {
        &self.archs
    }

    /// The target for a GPU of compute capability `cc` (`10 * major + minor`):
    /// `Real(cc)` (a CUBIN for exactly that GPU) when NVRTC supports it, else
    /// `Virtual(a)` with `a` the newest architecture ≤ `cc` that NVRTC knows (PTX, which
    /// the driver compiles when the module is loaded). Errors: [`Error::NotSupported`]
    /// when the GPU is older than everything NVRTC supports.
    pub fn target_for(&self, cc: i32) -> Result<Target> {
        if self.archs.contains(&cc) {
            return Ok(Target::Real(cc));
        }
        match self.archs.iter().copied().filter(|&a| a <= cc).max() {
            Some(a) => Ok(Target::Virtual(a)),
            None => Err(Error::NotSupported(format!(
                "NVRTC {}.{} cannot compile for compute capability {}.{} (it supports {:?})",
                self.version.0,
                self.version.1,
                cc / 10,
                cc % 10,
                self.archs
            ))),
        }
    }

    /// Compiles `source` for `arch` (`"compute_75"` gives PTX; `"sm_90"` gives PTX and a
    /// CUBIN). Returns the PTX text (without NUL) and, for a real architecture, the CUBIN
    /// image. Errors: [`Error::InvalidValue`] when `source` or `arch` holds a NUL byte,
    /// [`Error::Compile`] with NVRTC's log and the numbered source when NVRTC rejects it
    /// (an unknown `arch` included), [`Error::Device`] when NVRTC fails otherwise.
    pub fn compile(&self, source: &str, arch: &str) -> Result<Compiled> {
        let src = CString::new(source)
            .map_err(|_| Error::InvalidValue("the kernel source contains a NUL byte".into()))?;
        if arch.is_empty() || !arch.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(Error::InvalidValue(format!(
                "architecture {arch:?} is not of the form compute_XY or sm_XY"
            )));
        }
        let mut opts = vec![CString::new(format!("-arch={arch}")).unwrap()];
        opts.extend(OPTIONS.iter().map(|o| CString::new(*o).unwrap()));
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let api = &self.api;
        let _serial = self.lock.lock();
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: valid source and name strings; no headers.
        check(api.error_string, "nvrtcCreateProgram", unsafe {
            (api.create)(
                &mut prog,
                src.as_ptr(),
                c"cumem_kernel.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        })?;
        let prog = ProgGuard { prog, destroy: api.destroy };
        // SAFETY: `prog` is a live program; the options outlive the call.
        let r = unsafe { (api.compile)(prog.prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        if r == NVRTC_ERROR_COMPILATION || (r != NVRTC_SUCCESS && arch_error(r)) {
            let log = self.read(prog.prog, api.log_size, api.log, "log")?;
            let log = String::from_utf8_lossy(&log);
            return Err(Error::Compile(format!(
                "NVRTC {}.{} could not compile the kernel source for {arch}:\n{}\n{}",
                self.version.0,
                self.version.1,
                log.trim_end_matches('\0').trim_end(),
                numbered(source)
            )));
        }
        check(api.error_string, "nvrtcCompileProgram", r)?;
        let mut ptx = self.read(prog.prog, api.ptx_size, api.ptx, "PTX")?;
        while ptx.last() == Some(&0) {
            ptx.pop();
        }
        let ptx = String::from_utf8(ptx)
            .map_err(|_| Error::Internal("NVRTC returned PTX that is not UTF-8".into()))?;
        let cubin = if arch.starts_with("sm_") {
            Some(self.read(prog.prog, api.cubin_size, api.cubin, "CUBIN")?)
        } else {
            None
        };
        Ok(Compiled { ptx, cubin })
    }

    /// As [`Nvrtc::compile`], answered from the disk cache when an earlier compile of
    /// the same source for the same architecture by the same NVRTC is there, and written
    /// to it otherwise ([`super::disk_cache`]; `CUMEM_KERNEL_CACHE=0` turns it off).
    /// Errors as [`Nvrtc::compile`]; the cache's own failures only cost the compile.
    pub fn compile_cached(&self, source: &str, arch: &str) -> Result<Compiled> {
        let key = super::disk_cache::key(source, arch, self.version, OPTIONS);
        super::disk_cache::cached(&key, || self.compile(source, arch))
    }

    /// Reads one of the program's outputs (log, PTX, CUBIN) through its size and copy
    /// functions.
    fn read(
        &self,
        prog: Prog,
        size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
        get: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
        what: &str,
    ) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: a live program and a valid out-pointer.
        check(self.api.error_string, &format!("reading NVRTC's {what} size"), unsafe { size(prog, &mut n) })?;
        let mut buf = vec![0u8; n];
        if n > 0 {
            // SAFETY: `buf` holds the `n` bytes NVRTC said it writes.
            check(self.api.error_string, &format!("reading NVRTC's {what}"), unsafe {
                get(prog, buf.as_mut_ptr() as *mut c_char)
            })?;
        }
        Ok(buf)
    }
}

/// NVRTC_ERROR_INVALID_OPTION (5): NVRTC's answer to an unknown `-arch`, whose log says
/// why; reported as a compile error too.
fn arch_error(r: Res) -> bool {
    r == 5
}

/// Destroys the program when compiling ends, however it ends.
struct ProgGuard {
    prog: Prog,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
}

impl Drop for ProgGuard {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        unsafe { (self.destroy)(&mut self.prog) };
    }
}

/// Where to compile for: a real GPU architecture (CUBIN) or a virtual one (PTX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `sm_XY`: machine code for exactly this GPU generation.
    Real(i32),
    /// `compute_XY`: PTX, compiled by the driver when loaded.
    Virtual(i32),
}

impl Target {
    /// The `-arch=` value, e.g. `"sm_90"` or `"compute_90"`.
    pub fn arch(&self) -> String {
        match self {
            Target::Real(a) => format!("sm_{a}"),
            Target::Virtual(a) => format!("compute_{a}"),
        }
    }
}

/// `source` with right-aligned line numbers, as compile errors show it:
/// `   1 | extern "C" __global__ ...`.
pub fn numbered(source: &str) -> String {
    let n = source.lines().count().max(1);
    let w = n.to_string().len().max(3);
    let mut out = String::with_capacity(source.len() + n * (w + 4));
    for (i, line) in source.lines().enumerate() {
        out += &format!("{:>w$} | {line}\n", i + 1);
    }
    out
}

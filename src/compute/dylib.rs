//! Finding and opening CUDA's optional libraries (NVRTC, cuBLAS) at run time.
//!
//! cudarc 0.19's own loaders cannot serve here: they try only the names of the CUDA
//! major version the crate was built for (12 with the `cuda-12000` feature: `libnvrtc.so`,
//! `.so.12`, `.so.11`, ...; never `.so.13`), take no path, and panic when nothing loads.
//! So the engine opens these libraries itself with `libloading` (which cudarc uses too)
//! and resolves the few functions it calls. Search order for each library:
//!
//! 1. the environment variable naming it (`CUMEM_NVRTC_LIBRARY`, `CUMEM_CUBLAS_LIBRARY`):
//!    the path of the library file, or a folder holding it;
//! 2. each versioned name (CUDA 13, then 12), then the unversioned name, through the
//!    dynamic linker (its cache, `LD_LIBRARY_PATH`);
//! 3. the same names in `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64` and `/usr/local/cuda/lib64`
//!    (CUDA's toolkit installs cuBLAS there without registering it with the linker).

use crate::error::{Error, Result};
use libloading::Library;
use std::path::{Path, PathBuf};

/// An opened library and where it came from (the path, or the name the linker resolved).
pub struct Opened {
    /// The library, kept open for the life of the process.
    pub lib: Library,
    /// The file or name it was opened by, for messages.
    pub from: String,
}

/// The folders searched after the dynamic linker's own path (step 3 above).
fn toolkit_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            dirs.push(Path::new(&v).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs
}

/// Opens `path` after opening `companions` that lie in the same folder, so that a
/// library's dependencies outside the linker's path resolve (libcublas needs libcublasLt
/// of its own folder; the linker matches the already loaded one by its soname).
fn open_path(path: &Path, companions: &[&str]) -> std::result::Result<Library, String> {
    let mut deps = Vec::new();
    if let Some(dir) = path.parent() {
        for c in companions {
            let p = dir.join(c);
            if p.exists() {
                // SAFETY: loading a CUDA library runs only its initialisers.
                if let Ok(l) = unsafe { Library::new(&p) } {
                    deps.push(l);
                }
            }
        }
    }
    // SAFETY: as above.
    let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    // The companions stay loaded for the process (the library depends on them).
    deps.into_iter().for_each(std::mem::forget);
    Ok(lib)
}

/// Opens the library `what` (e.g. `"libnvrtc (NVRTC)"`) by the search order of this
/// module: `env_var`, then `names` (most preferred first) through the linker, then in the
/// toolkit folders. `companions` are file names (one per CUDA version) opened first from
/// the same folder when the library is opened by path; `hint` says where to get it
/// (e.g. `"the CUDA toolkit, or pip's nvidia-cuda-nvrtc"`). Errors: [`Error::NotSupported`]
/// saying what was tried and how to point the engine at the library.
pub fn open(what: &str, env_var: &str, names: &[&str], companions: &[&str], hint: &str) -> Result<Opened> {
    if let Some(v) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        let files: Vec<PathBuf> = if p.is_dir() {
            names.iter().map(|n| p.join(n)).filter(|f| f.exists()).collect()
        } else {
            vec![p.clone()]
        };
        let mut why = format!("no {} in that folder", names.join(" or "));
        for f in files {
            match open_path(&f, companions) {
                Ok(lib) => return Ok(Opened { lib, from: f.display().to_string() }),
                Err(e) => why = e,
            }
        }
        return Err(Error::NotSupported(format!(
            "{what} could not be opened from {env_var}={}: {why}",
            p.display()
        )));
    }
    for n in names {
        // SAFETY: as in `open_path`.
        if let Ok(lib) = unsafe { Library::new(*n) } {
            return Ok(Opened { lib, from: (*n).to_owned() });
        }
    }
    let dirs = toolkit_dirs();
    for d in &dirs {
        for n in names {
            let f = d.join(n);
            if f.exists()
                && let Ok(lib) = open_path(&f, companions)
            {
                return Ok(Opened { lib, from: f.display().to_string() });
            }
        }
    }
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(Error::NotSupported(format!(
        "{what} was not found: tried {} through the dynamic linker and in {}; install it \
         ({hint}) and set {env_var} to its path or folder, or add its folder to LD_LIBRARY_PATH",
        names.join(", "),
        dirs.join(", ")
    )))
}

/// Resolves function `name` of `lib` as a `T` (an `unsafe extern "C" fn` type). Errors:
/// [`Error::NotSupported`] naming the function and the library.
///
/// # Safety
/// `T` must be the function's true C signature.
pub unsafe fn symbol<T: Copy>(o: &Opened, name: &str) -> Result<T> {
    // SAFETY: the caller guarantees the signature.
    unsafe { o.lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| Error::NotSupported(format!("{} lacks {name}: {e}", o.from)))
}

/// Declares a table of a dynamically opened library's functions, each signature written
/// once, and its loader: `$name::load(&Opened) -> Result<$name>` resolves every field by
/// [`symbol`] (the first missing one is the error). A field is
/// `name: SYMBOLS => (argument types)`, every function returning the library's `int`
/// status, where SYMBOLS is one C name (`"cublasCreate_v2"`, a function), a list of names
/// (`["cusolverDnSorgqr", "cusolverDnCungqr"]`, an array of functions in that order), or
/// a prefix, the type letters and a suffix (`("cublas", [S D C Z], "trsm_v2")`: one
/// function per letter, `cublasStrsm_v2`, ..., an array indexed like `Dtype`).
///
/// The loader is `unsafe`: the caller vouches that the signatures are the library's.
macro_rules! library_api {
    ($(#[$m:meta])* $vis:vis struct $name:ident {
        $($(#[$fm:meta])* $fvis:vis $field:ident : $sym:tt => ($($arg:ty),* $(,)?)),* $(,)?
    }) => {
        $(#[$m])*
        $vis struct $name {
            $($(#[$fm])* $fvis $field: $crate::compute::dylib::library_api!(@ty $sym, unsafe extern "C" fn($($arg),*) -> std::ffi::c_int),)*
        }
        impl $name {
            /// Resolves every function of the table in `lib`.
            ///
            /// # Safety
            /// The declared signatures must be the library's.
            unsafe fn load(lib: &$crate::compute::dylib::Opened) -> $crate::error::Result<$name> {
                // SAFETY: as the caller guarantees.
                unsafe { Ok($name { $($field: $crate::compute::dylib::library_api!(@load lib, $sym),)* }) }
            }
        }
    };
    (@ty [$($s:literal),+], $f:ty) => { [$f; 0 $(+ $crate::compute::dylib::library_api!(@one $s))+] };
    (@ty ($pre:literal, [$($t:ident)+], $post:literal), $f:ty) => { [$f; 0 $(+ $crate::compute::dylib::library_api!(@one $t))+] };
    (@ty $s:literal, $f:ty) => { $f };
    (@one $x:tt) => { 1 };
    (@load $l:ident, [$($s:literal),+]) => { [$($crate::compute::dylib::symbol($l, $s)?),+] };
    (@load $l:ident, ($pre:literal, [$($t:ident)+], $post:literal)) => {
        [$($crate::compute::dylib::symbol($l, concat!($pre, stringify!($t), $post))?),+]
    };
    (@load $l:ident, $s:literal) => { $crate::compute::dylib::symbol($l, $s)? };
}
pub(crate) use library_api;

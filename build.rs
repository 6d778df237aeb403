//! Gives the C library a SONAME (`libcumem.so`) on Linux.
//!
//! The Julia package calls the engine as `ccall((:cumem_x, "libcumem.so"), ...)`, a
//! constant library name that survives precompilation, and opens the actual file (from
//! `CUMEM_LIBRARY` or its own build) in `__init__` with `RTLD_GLOBAL`. The dynamic loader
//! then resolves the name `libcumem.so` to that already-loaded object through its SONAME
//! (the approach of Julia's JLL packages). Without a SONAME the name would be searched
//! on the library path instead.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcumem.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

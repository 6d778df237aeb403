//! GPU compute for the Julia package: CUDA C compiled at run time with NVRTC, kernels
//! loaded and launched through the driver, and GEMM through cuBLAS.
//!
//! Julia owns the expression (it generates the CUDA C of a broadcast or a reduction);
//! the engine owns compiling, caching and launching:
//! - [`nvrtc`]: libnvrtc, CUDA C → PTX or CUBIN; needs no GPU, so CI checks kernels too;
//! - [`disk_cache`]: NVRTC's output kept on disk across processes, as CuPy's kernel cache;
//! - [`module`]: kernels compiled for the current GPU, cached by (source, name), launched
//!   on a stream (0: the legacy default stream);
//! - [`blas`]: `cublas<t>gemm` with one guarded handle; [`blas_ext`]: triangular,
//!   symmetric and batched products on that handle;
//! - [`solver`]: cuSOLVER factorizations (LU, QR, Cholesky, SVD, eigen);
//! - [`gpu`]: the context, the device's facts, synchronisation;
//! - the C functions (`cumem_compile_ptx`, `cumem_kernel_load`, ...) are in the C ABI,
//!   `src/ffi/compute.rs`; those of `blas_ext` and `solver` in `src/ffi/linalg.rs`.
//!
//! libnvrtc and libcublas are opened at run time ([`dylib`]), so `libcumem.so` loads on
//! a machine without them; what needs one then fails with `CUMEM_ERROR_NOT_SUPPORTED`.
//!
//! Ordering: kernels and cuBLAS run on the stream they are given, CUDA's legacy default
//! stream unless another is named; the engine's synchronous copies, memsets and
//! `cuMemFree` are ordered with that stream, so memory freed to the pool and handed out
//! again is never written while a queued kernel still reads it. Memory used on other
//! streams is protected by the engine's stream-ordered pools and `record_stream`
//! (docs/design.md, "Streams").

pub mod blas;
pub mod blas_ext;
pub mod disk_cache;
pub mod dylib;
pub mod gpu;
pub mod module;
pub mod nvrtc;
pub mod solver;

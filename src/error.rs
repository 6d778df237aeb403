//! Errors of the engine and their C status codes (`CUMEM_*` in `include/cumem.h`).
//!
//! The codes live here, next to [`Error`], rather than in the C ABI: every layer reports
//! errors, and only the top one ([`crate::ffi`]) speaks C.

/// Success.
pub const CUMEM_SUCCESS: i32 = 0;
/// The device is full or `JULIA_CUDA_MEMORY_LIMIT` is reached, after releasing the cache.
pub const CUMEM_ERROR_OUT_OF_MEMORY: i32 = 1;
/// Bad input: unknown or double free, range outside a live allocation, null out-pointer.
pub const CUMEM_ERROR_INVALID_VALUE: i32 = 2;
/// An environment variable cannot be parsed; the message names it.
pub const CUMEM_ERROR_CONFIG: i32 = 3;
/// The CUDA driver (or host allocator) failed.
pub const CUMEM_ERROR_DEVICE: i32 = 4;
/// A bug in CuMem (e.g. a caught panic).
pub const CUMEM_ERROR_INTERNAL: i32 = 5;
/// The operation needs something absent (a CUDA GPU for kernels or BLAS, libnvrtc,
/// libcublas); the message says what.
pub const CUMEM_ERROR_NOT_SUPPORTED: i32 = 6;
/// NVRTC rejected the source; `cumem_last_error` holds NVRTC's log followed by the
/// source with line numbers.
pub const CUMEM_ERROR_COMPILE: i32 = 7;

/// Every failure the engine reports. Each variant carries a complete, human-readable
/// message; [`Error::code`] maps it to the C ABI's status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The device has no memory left for the request, or the request would cross
    /// `JULIA_CUDA_MEMORY_LIMIT`, even after cached memory was released
    /// (`CUMEM_ERROR_OUT_OF_MEMORY`).
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// Bad input from the caller: an unknown or double free, a range outside a live
    /// allocation, a null out-pointer, a size above 2^63 − 1 (`CUMEM_ERROR_INVALID_VALUE`).
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// An environment variable that cannot be parsed (`CUMEM_ERROR_CONFIG`). The message
    /// names the variable, the value and what is accepted.
    #[error("configuration error: {0}")]
    Config(String),
    /// The device (CUDA driver or host allocator) failed for a reason other than
    /// memory exhaustion (`CUMEM_ERROR_DEVICE`).
    #[error("device error: {0}")]
    Device(String),
    /// A bug in CuMem, e.g. a caught panic (`CUMEM_ERROR_INTERNAL`).
    #[error("internal error: {0}")]
    Internal(String),
    /// The operation needs something this machine lacks: a CUDA GPU (kernels, cuBLAS),
    /// libnvrtc or libcublas; the message says what (`CUMEM_ERROR_NOT_SUPPORTED`).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// NVRTC rejected CUDA C source: the message holds NVRTC's log followed by the
    /// source with line numbers (`CUMEM_ERROR_COMPILE`).
    #[error("compile error: {0}")]
    Compile(String),
}

/// Result type of the engine.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The C ABI status code of this error (`CUMEM_ERROR_*`, never `CUMEM_SUCCESS`).
    pub fn code(&self) -> i32 {
        match self {
            Error::OutOfMemory(_) => CUMEM_ERROR_OUT_OF_MEMORY,
            Error::InvalidValue(_) => CUMEM_ERROR_INVALID_VALUE,
            Error::Config(_) => CUMEM_ERROR_CONFIG,
            Error::Device(_) => CUMEM_ERROR_DEVICE,
            Error::Internal(_) => CUMEM_ERROR_INTERNAL,
            Error::NotSupported(_) => CUMEM_ERROR_NOT_SUPPORTED,
            Error::Compile(_) => CUMEM_ERROR_COMPILE,
        }
    }

    /// Whether this is an out-of-memory error (the pool may release its cache and retry).
    pub fn is_oom(&self) -> bool {
        matches!(self, Error::OutOfMemory(_))
    }
}

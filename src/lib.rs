//! CuMem's engine: a GPU memory manager with caching pools, statistics, a memory limit
//! and tracking of outstanding allocations, for Julia (through the C ABI in [`ffi`]) and
//! Rust.
//!
//! Layers, bottom up (after RAPIDS RMM's resources and adaptors; each uses only those
//! below it, as `tests/layers.rs` checks and `docs/design.md` draws):
//! - [`device`]: where memory comes from, the CUDA driver or host memory;
//! - [`upstream`]: the memory limit and device-call counters over the device;
//! - [`pool`]: the caching pools (`binned`, `split`, `expandable`, `simple`, `none`);
//! - [`thread_cache`]: per-thread caches of small freed blocks in front of the shards;
//! - [`engine`]: live allocations, tracking, the out-of-memory retry and checked copies,
//!   shared by all pools;
//! - [`report`]: the `memory_status` text; [`pinned`]: the pinned host pool (a second
//!   engine over page-locked host memory) and registered host ranges;
//! - [`timeline`]: memory timeline pictures of
//!   an allocation history (SVG, HTML, JSON, Chrome trace);
//! - [`compute`]: NVRTC kernels and cuBLAS on the same device;
//! - [`engines`]: the process's engines, one per device, the thread's current device,
//!   the device that owns an address, and the pinned host pool (what the C ABI uses;
//!   RMM's `per_device_resource`);
//! - [`ffi`]: the C ABI (`include/cumem.h`), alone on the top floor; [`logging`]: its
//!   log messages.
//!
//! Leaves that any layer may use: [`error`] (errors and their status codes), [`stats`]
//! (every counter and peak), [`config`], [`format`], [`sync`], [`tracking`], [`live`],
//! [`history`] (the allocation-history rings) and [`snapshot`] (the records of the
//! memory tools: snapshot segments and blocks, leaks, compaction).
//!
//! ```
//! use cumem::{Config, Engine, PoolKind, device::HostDevice};
//! let cfg = Config { pool: PoolKind::Split, ..Config::default() };
//! let engine = Engine::with_device(cfg, Box::new(HostDevice::new(Some(1 << 30))), 1).unwrap();
//! let p = engine.alloc(4096).unwrap();
//! engine.copy_htod(p, &[7u8; 4096]).unwrap();
//! engine.free(p).unwrap();
//! assert_eq!(engine.stats().num_cache_hits, 0);
//! assert_eq!(engine.free(p).unwrap_err().code(), cumem::error::CUMEM_ERROR_INVALID_VALUE);
//! ```

pub mod compute;
pub mod config;
pub mod device;
pub mod engine;
pub mod engines;
pub mod error;
pub mod ffi;
pub mod format;
pub mod history;
pub mod live;
pub mod logging;
pub mod pinned;
pub mod pool;
pub mod report;
pub mod snapshot;
pub mod stats;
pub mod sync;
pub mod thread_cache;
pub mod timeline;
pub mod tracking;
pub mod upstream;

pub use config::{Config, PoolKind};
pub use engine::Engine;
pub use error::{Error, Result};
pub use stats::Stats;

//! Statistics, named as PyTorch's `torch.cuda.memory_stats` and docs/contract.md. The same
//! struct is the C ABI's `cumem_stats_t`.

/// A snapshot of the engine's statistics. Byte counts are in bytes, times in ns.
///
/// Current values are exact whenever no other thread is allocating. Peaks are exact while
/// one thread allocates (one engine shard in use, as in any single-threaded program);
/// with several threads allocating concurrently each thread's shard reports its changes
/// in steps of 1 MiB (so that threads never share a written cache line on the hot path),
/// and `peak_requested_bytes`, `peak_allocated_bytes` and `peak_cached_bytes` may then
/// miss up to 1 MiB per such thread.
///
/// Invariants (checked by the tests after every operation, at quiescence):
/// `requested_bytes ≤ allocated_bytes ≤ reserved_bytes`,
/// `cached_bytes = reserved_bytes − allocated_bytes`, and with nothing live and after a
/// full reclaim, `reserved_bytes = 0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Sum of the sizes callers asked for, live (PyTorch's "requested"/"active").
    pub requested_bytes: u64,
    /// Sum of block sizes handed out (after rounding), live.
    pub allocated_bytes: u64,
    /// Bytes held by the pool, free for reuse (`reserved − allocated`).
    pub cached_bytes: u64,
    /// Bytes currently obtained from the device.
    pub reserved_bytes: u64,
    /// Free bytes inside segments that are partly in use and so cannot be released.
    pub inactive_split_bytes: u64,
    /// High-water mark of `requested_bytes` since start or the last reset.
    pub peak_requested_bytes: u64,
    /// High-water mark of `allocated_bytes`.
    pub peak_allocated_bytes: u64,
    /// High-water mark of `cached_bytes`.
    pub peak_cached_bytes: u64,
    /// High-water mark of `reserved_bytes`.
    pub peak_reserved_bytes: u64,
    /// Successful allocations of at least one byte.
    pub num_allocations: u64,
    /// Successful frees of a non-null pointer.
    pub num_frees: u64,
    /// Allocations served from cached memory, without calling the device.
    pub num_cache_hits: u64,
    /// Allocations that called the device (including failed ones).
    pub num_cache_misses: u64,
    /// Calls to the device's allocation function that succeeded.
    pub num_device_allocations: u64,
    /// Calls to the device's free function.
    pub num_device_frees: u64,
    /// Time spent in device allocation calls, ns.
    pub device_alloc_ns: u64,
    /// Time spent in device free calls, ns.
    pub device_free_ns: u64,
    /// Allocations retried after releasing cached memory on out of memory (PyTorch's
    /// `num_alloc_retries`).
    pub num_alloc_retries: u64,
    /// Allocations that failed with out of memory after the retry (PyTorch's `num_ooms`).
    pub num_ooms: u64,
    /// `JULIA_CUDA_MEMORY_LIMIT` in bytes; 0 when there is none.
    pub limit_bytes: u64,
    /// `num_cache_hits / (num_cache_hits + num_cache_misses)`; 0 before any allocation.
    pub cache_hit_rate: f64,
    /// `(reserved − allocated) / reserved`; 0 when nothing is reserved.
    pub fragmentation_ratio: f64,
}

/// Per-shard counters, kept as plain integers under the shard's lock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub num_allocations: u64,
    pub num_frees: u64,
    pub num_cache_hits: u64,
    pub num_cache_misses: u64,
    pub num_alloc_retries: u64,
    pub num_ooms: u64,
}

impl Counters {
    pub fn add_to(&self, s: &mut Stats) {
        s.num_allocations += self.num_allocations;
        s.num_frees += self.num_frees;
        s.num_cache_hits += self.num_cache_hits;
        s.num_cache_misses += self.num_cache_misses;
        s.num_alloc_retries += self.num_alloc_retries;
        s.num_ooms += self.num_ooms;
    }
}

impl Stats {
    /// Fills the derived fields (`cache_hit_rate`, `fragmentation_ratio`).
    pub(crate) fn derive(&mut self) {
        let lookups = self.num_cache_hits + self.num_cache_misses;
        self.cache_hit_rate = if lookups == 0 { 0.0 } else { self.num_cache_hits as f64 / lookups as f64 };
        self.fragmentation_ratio = if self.reserved_bytes == 0 {
            0.0
        } else {
            self.reserved_bytes.saturating_sub(self.allocated_bytes) as f64 / self.reserved_bytes as f64
        };
    }
}

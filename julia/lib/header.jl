# The C ABI's vocabulary in Julia: every CUMEM_* constant and every C record of
# include/cumem.h (generated from the C ABI in src/ffi/ and the records and codes it uses;
# docs/contract.md is the contract). Plain data, no calls: lib/libcumem.jl holds the calls.
# test/lib/header_tests.jl checks each constant's value and each record's fields against
# the header.

# Status codes (include/cumem.h).
const CUMEM_SUCCESS = Int32(0)
const CUMEM_ERROR_OUT_OF_MEMORY = Int32(1)
const CUMEM_ERROR_INVALID_VALUE = Int32(2)
const CUMEM_ERROR_CONFIG = Int32(3)
const CUMEM_ERROR_DEVICE = Int32(4)
const CUMEM_ERROR_INTERNAL = Int32(5)
const CUMEM_ERROR_NOT_SUPPORTED = Int32(6)
const CUMEM_ERROR_COMPILE = Int32(7)

const CODE_NAMES = Dict(CUMEM_SUCCESS => "CUMEM_SUCCESS",
                        CUMEM_ERROR_OUT_OF_MEMORY => "CUMEM_ERROR_OUT_OF_MEMORY",
                        CUMEM_ERROR_INVALID_VALUE => "CUMEM_ERROR_INVALID_VALUE",
                        CUMEM_ERROR_CONFIG => "CUMEM_ERROR_CONFIG",
                        CUMEM_ERROR_DEVICE => "CUMEM_ERROR_DEVICE",
                        CUMEM_ERROR_INTERNAL => "CUMEM_ERROR_INTERNAL",
                        CUMEM_ERROR_NOT_SUPPORTED => "CUMEM_ERROR_NOT_SUPPORTED",
                        CUMEM_ERROR_COMPILE => "CUMEM_ERROR_COMPILE")

code_name(code::Integer) = get(CODE_NAMES, Int32(code), "unknown status $code")

# Flags of `cumem_alloc_ex` / `cumem_alloc_async`: on out of memory, fail at once keeping
# the cache (the ladder in memory/allocator.jl recovers); the ladder's retries, counted by
# the engine in num_gc_retries / num_reclaim_retries.
const CUMEM_ALLOC_NO_RECLAIM = UInt32(1)
const CUMEM_ALLOC_GC_RETRY = UInt32(2)
const CUMEM_ALLOC_RECLAIM_RETRY = UInt32(4)

# For `cumem_memory_status_ex`: the text without the outstanding allocations
# (memory_status lists them itself, with Julia stack traces).
const CUMEM_STATUS_NO_ALLOCATIONS = UInt32(1)

# `cumem_copy_peer`: the flag forcing the copy through host memory, and the paths it reports.
const CUMEM_COPY_STAGED = UInt32(1)
const CUMEM_COPY_PATH_SAME = Int32(0)
const CUMEM_COPY_PATH_PEER = Int32(1)
const CUMEM_COPY_PATH_HOST = Int32(2)
const COPY_PATHS = (:same, :peer, :host)          # by CUMEM_COPY_PATH_* + 1

# `cumem_stream_create` / `cumem_event_create` flags.
const CUMEM_STREAM_BLOCKING = UInt32(1)
const CUMEM_EVENT_DISABLE_TIMING = UInt32(1)

# `cumem_event_t.kind`, `cumem_block_t.state` and the origin ids of the allocation history.
const CUMEM_EVENT_ALLOC = UInt32(0)
const CUMEM_EVENT_FREE = UInt32(1)
const CUMEM_EVENT_DEVICE_ALLOC = UInt32(2)
const CUMEM_EVENT_DEVICE_FREE = UInt32(3)
const CUMEM_EVENT_OOM = UInt32(4)
const EVENT_KINDS = (:alloc, :free, :device_alloc, :device_free, :oom)   # by kind + 1
const CUMEM_BLOCK_ACTIVE = UInt32(0)
const CUMEM_BLOCK_CACHED = UInt32(1)
const CUMEM_BLOCK_INACTIVE_SPLIT = UInt32(2)
const BLOCK_STATES = (:active, :cached, :inactive_split)                 # by state + 1
const CUMEM_ORIGIN_CALLER = UInt64(1) << 63

# `cumem_save_memory_timeline` formats.
const CUMEM_TIMELINE_SVG = UInt32(0)
const CUMEM_TIMELINE_HTML = UInt32(1)
const CUMEM_TIMELINE_JSON = UInt32(2)
const CUMEM_TIMELINE_CHROME = UInt32(3)
const TIMELINE_FORMATS = (svg = CUMEM_TIMELINE_SVG, html = CUMEM_TIMELINE_HTML, json = CUMEM_TIMELINE_JSON,
                          chrome = CUMEM_TIMELINE_CHROME)

## the C records (isbits mirrors)

# `cumem_stats_t`: 20 uint64, 2 double, 3 uint64 (src/stats.rs, `#[repr(C)]`; fields are
# only ever added at the end).
struct CStats
    requested_bytes::UInt64
    allocated_bytes::UInt64
    cached_bytes::UInt64
    reserved_bytes::UInt64
    inactive_split_bytes::UInt64
    peak_requested_bytes::UInt64
    peak_allocated_bytes::UInt64
    peak_cached_bytes::UInt64
    peak_reserved_bytes::UInt64
    num_allocations::UInt64
    num_frees::UInt64
    num_cache_hits::UInt64
    num_cache_misses::UInt64
    num_device_allocations::UInt64
    num_device_frees::UInt64
    device_alloc_ns::UInt64
    device_free_ns::UInt64
    num_alloc_retries::UInt64
    num_ooms::UInt64
    limit_bytes::UInt64
    cache_hit_rate::Float64
    fragmentation_ratio::Float64
    num_device_free_errors::UInt64
    num_gc_retries::UInt64
    num_reclaim_retries::UInt64
end
@assert sizeof(CStats) == 20 * 8 + 2 * 8 + 3 * 8

# `cumem_event_t` (80 bytes).
struct CEvent
    time_ns::UInt64
    duration_ns::UInt64
    addr::UInt64
    requested_bytes::UInt64
    size_bytes::UInt64
    lifetime_ns::UInt64
    origin::UInt64
    stream::UInt64
    kind::UInt32
    thread::UInt32
    device::UInt32
    hit::UInt32
end
@assert sizeof(CEvent) == 80

# `cumem_segment_t` (48 bytes).
struct CSegment
    addr::UInt64
    size::UInt64
    stream::UInt64
    first_block::UInt64
    num_blocks::UInt64
    device::UInt32
    shard::UInt32
end
@assert sizeof(CSegment) == 48

# `cumem_block_t` (40 bytes).
struct CBlock
    addr::UInt64
    size::UInt64
    requested::UInt64
    origin::UInt64
    state::UInt32
    segment::UInt32
end
@assert sizeof(CBlock) == 40

# `cumem_leak_t` (48 bytes).
struct CLeak
    addr::UInt64
    requested_bytes::UInt64
    size_bytes::UInt64
    seq::UInt64
    origin::UInt64
    thread::UInt32
    shard::UInt32
end
@assert sizeof(CLeak) == 48

# `cumem_compact_t` (24 bytes).
struct CCompact
    released_bytes::UInt64
    fragmentation_before::Float64
    fragmentation_after::Float64
end

# `cumem_graph_pool_t` (48 bytes): one graph pool's figures (src/engine/graphs.rs).
struct CGraphPool
    id::UInt64
    reserved_bytes::UInt64
    allocated_bytes::UInt64
    active_blocks::UInt64
    references::UInt64
    capturing::UInt32
    reserved::UInt32
end
@assert sizeof(CGraphPool) == 48

# `cumem_graph_info_t` (64 bytes): a captured graph's nodes by kind, edges, longest chain
# and programmatic edges (src/device/mod.rs, GraphInfo).
struct CGraphInfo
    nodes::UInt64
    kernels::UInt64
    memcpys::UInt64
    memsets::UInt64
    others::UInt64
    edges::UInt64
    depth::UInt64
    programmatic::UInt64
end
@assert sizeof(CGraphInfo) == 64

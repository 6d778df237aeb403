# The engine library (libcumem.so) and the C ABI of DESIGN.md §3 / include/cumem.h.

# The package root (the directory holding Project.toml and Cargo.toml).
const PACKAGE_ROOT = normpath(joinpath(@__DIR__, ".."))

# `CUMEM_LIBRARY` if set and non-empty, else the library `cargo build --release` makes in
# the package. A `const`, as `ccall((:f, lib), ...)` requires on Julia 1.5; computed each
# time the package loads (the module is not precompiled, see CuMem.jl).
const libcumem = let p = get(ENV, "CUMEM_LIBRARY", "")
    isempty(strip(p)) ? joinpath(PACKAGE_ROOT, "target", "release", "libcumem.so") : p
end

if !isfile(libcumem)
    error("CuMem: the engine library $(repr(libcumem)) does not exist. " *
          "Build it with `import Pkg; Pkg.build(\"CuMem\")` (it runs `cargo build --release` " *
          "in $(PACKAGE_ROOT)), or run `cargo build --release` there yourself, or set " *
          "CUMEM_LIBRARY to the path of a built libcumem.so.")
end

# Status codes (DESIGN.md §3).
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

# `cumem_stats_t`: 20 uint64 then 2 double (src/stats.rs, `#[repr(C)]`).
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
end
@assert sizeof(CStats) == 20 * 8 + 2 * 8

# Thin wrappers, one per C function. They never throw; callers check the codes.
@inline c_alloc(bytes::UInt64, out::Base.RefValue{UInt64}) =
    ccall((:cumem_alloc, libcumem), Int32, (UInt64, Ptr{UInt64}), bytes, out)
# On out of memory, fail at once keeping the cache (the ladder in allocator.jl recovers).
const CUMEM_ALLOC_NO_RECLAIM = UInt32(1)
@inline c_alloc_noreclaim(bytes::UInt64, out::Base.RefValue{UInt64}) =
    ccall((:cumem_alloc_ex, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt32), bytes, out, CUMEM_ALLOC_NO_RECLAIM)
c_device_is_host() = ccall((:cumem_device_is_host, libcumem), Int32, ())
@inline c_free(ptr::UInt64) = ccall((:cumem_free, libcumem), Int32, (UInt64,), ptr)
c_reclaim(bytes::UInt64) = ccall((:cumem_reclaim, libcumem), UInt64, (UInt64,), bytes)
c_get_stats(out::Base.RefValue{CStats}) =
    ccall((:cumem_get_stats, libcumem), Int32, (Ptr{CStats},), out)
c_reset_stats() = ccall((:cumem_reset_stats, libcumem), Cvoid, ())
c_memory_status(buf, len, flags::UInt32) =
    ccall((:cumem_memory_status_ex, libcumem), Csize_t, (Ptr{UInt8}, Csize_t, UInt32), buf, len, flags)
# For c_memory_status: the text without the outstanding allocations (memory_status lists
# them itself, with Julia stack traces).
const CUMEM_STATUS_NO_ALLOCATIONS = UInt32(1)
c_device_memory(free::Base.RefValue{UInt64}, total::Base.RefValue{UInt64}) =
    ccall((:cumem_device_memory, libcumem), Int32, (Ptr{UInt64}, Ptr{UInt64}), free, total)
@inline c_copy_htod(dst::UInt64, src::Ptr{Cvoid}, bytes::UInt64) =
    ccall((:cumem_copy_htod, libcumem), Int32, (UInt64, Ptr{Cvoid}, UInt64), dst, src, bytes)
@inline c_copy_dtoh(dst::Ptr{Cvoid}, src::UInt64, bytes::UInt64) =
    ccall((:cumem_copy_dtoh, libcumem), Int32, (Ptr{Cvoid}, UInt64, UInt64), dst, src, bytes)
@inline c_copy_dtod(dst::UInt64, src::UInt64, bytes::UInt64) =
    ccall((:cumem_copy_dtod, libcumem), Int32, (UInt64, UInt64, UInt64), dst, src, bytes)
@inline c_memset(dst::UInt64, value::UInt8, bytes::UInt64) =
    ccall((:cumem_memset, libcumem), Int32, (UInt64, UInt8, UInt64), dst, value, bytes)

"""
    CuMem.last_error() -> String

The engine's last error message on this thread (`cumem_last_error`), `""` if none.
"""
last_error() = unsafe_string(ccall((:cumem_last_error, libcumem), Cstring, ()))

"""
    CuMem.pool_name() -> String

The pool serving allocations: `"binned"`, `"split"`, `"simple"` or `"none"`, chosen by
`JULIA_CUDA_MEMORY_POOL` when the package was loaded.
"""
pool_name() = unsafe_string(ccall((:cumem_pool_name, libcumem), Cstring, ()))

"""
    CuMem.device_name() -> String

The device, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"` (`CUMEM_DEVICE`).
"""
device_name() = unsafe_string(ccall((:cumem_device_name, libcumem), Cstring, ()))

"""
    CuMem.engine_memory_status() -> String

The engine's own `memory_status` text (`cumem_memory_status`). With `CUMEM_DEBUG=1/2` it
lists outstanding allocations with native (Rust-side) frames; [`memory_status`] prints the
same text without them and shows Julia stack traces instead.
"""
function engine_memory_status(flags::UInt32 = UInt32(0))
    n = c_memory_status(C_NULL, 0, flags)
    while true
        buf = Vector{UInt8}(undef, n + 1)
        m = c_memory_status(buf, length(buf), flags)
        if m <= n
            return String(resize!(buf, m))
        end
        n = m   # the text grew between the two calls
    end
end

function init_library()
    # dlopen first: a library that exists but cannot be loaded gets the loader's message.
    Libdl.dlopen(libcumem)
    code = ccall((:cumem_init, libcumem), Int32, ())
    if code != CUMEM_SUCCESS
        throw(CuMemError(code, "cannot initialise the CuMem engine: " * last_error()))
    end
    return nothing
end

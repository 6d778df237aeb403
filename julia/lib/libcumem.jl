# The engine library (libcumem.so) and its C ABI (include/cumem.h, generated from
# src/ffi.rs; docs/contract.md is the contract).

# The package root (the directory holding Project.toml and Cargo.toml).
const PACKAGE_ROOT = normpath(joinpath(@__DIR__, "..", ".."))

# Every ccall names the library by its SONAME, a constant (Julia 1.5's ccall needs one,
# and a constant survives precompilation). `__init__` opens the actual file, chosen at
# load time, with RTLD_GLOBAL; the dynamic loader then resolves this name to that
# already-loaded object (build.rs gives the cdylib this SONAME). This is how Julia's JLL
# packages work.
const libcumem = "libcumem.so"

# The file opened by `init_library`, and its handle.
const LIBRARY_PATH = Ref("")
const LIBRARY_HANDLE = Ref{Ptr{Cvoid}}(C_NULL)

"""
    CuMem.library_path() -> String

The engine library this process uses: `CUMEM_LIBRARY` when it was set (and non-empty)
at `using CuMem`, else the package's `target/release/libcumem.so` (what
`Pkg.build("CuMem")` or `cargo build --release` in the package makes).
"""
library_path() = LIBRARY_PATH[]

function configured_library_path()
    p = strip(get(ENV, "CUMEM_LIBRARY", ""))
    return isempty(p) ? joinpath(PACKAGE_ROOT, "target", "release", "libcumem.so") : String(p)
end

# Opens `path` so that `ccall((:f, libcumem), ...)` reaches it, and checks that it does:
# a different libcumem.so loaded earlier in the process (another build, another path)
# would take the name, and its functions would be called instead.
function open_library(path::String)
    if !isfile(path)
        error("CuMem: the engine library $(repr(path)) does not exist. " *
              "Build it with `import Pkg; Pkg.build(\"CuMem\")` (it runs `cargo build --release` " *
              "in $(PACKAGE_ROOT)), or run `cargo build --release` there yourself, or set " *
              "CUMEM_LIBRARY to the path of a built libcumem.so.")
    end
    # A library that exists but cannot be loaded gets the loader's message here.
    h = Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL)
    ours = Libdl.dlsym(h, :cumem_init)
    called = cglobal((:cumem_init, libcumem))      # what ccall resolves the name to
    if called != ours
        other = Libdl.dlpath(Libdl.dlopen(libcumem))
        error("CuMem: another engine library, $(repr(other)), is already loaded in this " *
              "process under the name $libcumem, so CuMem cannot use $(repr(path)). " *
              "Start a new Julia process (and set CUMEM_LIBRARY there if needed).")
    end
    LIBRARY_PATH[] = path
    LIBRARY_HANDLE[] = h
    return nothing
end

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

# Thin wrappers, one per C function. They never throw; callers check the codes.
@inline c_alloc(bytes::UInt64, out::Base.RefValue{UInt64}) =
    ccall((:cumem_alloc, libcumem), Int32, (UInt64, Ptr{UInt64}), bytes, out)
# On out of memory, fail at once keeping the cache (the ladder in allocator.jl recovers).
const CUMEM_ALLOC_NO_RECLAIM = UInt32(1)
@inline c_alloc_noreclaim(bytes::UInt64, out::Base.RefValue{UInt64}) =
    ccall((:cumem_alloc_ex, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt32), bytes, out, CUMEM_ALLOC_NO_RECLAIM)
# The ladder's retries, counted by the engine in num_gc_retries / num_reclaim_retries.
const CUMEM_ALLOC_GC_RETRY = UInt32(2)
const CUMEM_ALLOC_RECLAIM_RETRY = UInt32(4)
c_alloc_ex(bytes::UInt64, out::Base.RefValue{UInt64}, flags::UInt32) =
    ccall((:cumem_alloc_ex, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt32), bytes, out, flags)
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
# The synchronous copies and memset run on the legacy default stream; with another
# current stream (stream.jl) they first wait for its work, so they are ordered with it as
# CUDA.jl's copies on the task's stream are (`sync_current`, 0 = success).
@inline function c_copy_htod(dst::UInt64, src::Ptr{Cvoid}, bytes::UInt64)
    code = sync_current()
    code == 0 || return code
    return ccall((:cumem_copy_htod, libcumem), Int32, (UInt64, Ptr{Cvoid}, UInt64), dst, src, bytes)
end
@inline function c_copy_dtoh(dst::Ptr{Cvoid}, src::UInt64, bytes::UInt64)
    code = sync_current()
    code == 0 || return code
    return ccall((:cumem_copy_dtoh, libcumem), Int32, (Ptr{Cvoid}, UInt64, UInt64), dst, src, bytes)
end
@inline function c_copy_dtod(dst::UInt64, src::UInt64, bytes::UInt64)
    code = sync_current()
    code == 0 || return code
    return ccall((:cumem_copy_dtod, libcumem), Int32, (UInt64, UInt64, UInt64), dst, src, bytes)
end
@inline function c_memset(dst::UInt64, value::UInt8, bytes::UInt64)
    code = sync_current()
    code == 0 || return code
    return ccall((:cumem_memset, libcumem), Int32, (UInt64, UInt8, UInt64), dst, value, bytes)
end

"""
    CuMem.last_error() -> String

The engine's last error message on this thread (`cumem_last_error`), `""` if none.
"""
last_error() = unsafe_string(ccall((:cumem_last_error, libcumem), Cstring, ()))

"""
    CuMem.pool_name() -> String

The pool serving allocations: `"binned"`, `"split"`, `"expandable"`, `"simple"` or `"none"`, chosen by
`JULIA_CUDA_MEMORY_POOL` when the package was loaded.
"""
pool_name() = unsafe_string(ccall((:cumem_pool_name, libcumem), Cstring, ()))

"""
    CuMem.device_name() -> String

The current task's device's name, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"`
(`CUMEM_DEVICE`).
"""
device_name() = (activate(); unsafe_string(ccall((:cumem_device_name, libcumem), Cstring, ())))

"""
    CuMem.engine_memory_status() -> String

The engine's own `memory_status` text (`cumem_memory_status`). With `CUMEM_DEBUG=1/2` it
lists outstanding allocations with native (Rust-side) frames; [`memory_status`] prints the
same text without them and shows Julia stack traces instead.
"""
function engine_memory_status(flags::UInt32 = UInt32(0))
    activate()
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

"""
    CuMem.engine_version() -> String

The engine library's version (`cumem_version`), e.g. `"0.1.0"`.
"""
engine_version() = unsafe_string(ccall((:cumem_version, libcumem), Cstring, ()))

# The engine's log messages (filtered by CUMEM_LOG, default `warn`) are captured by the
# engine and re-emitted here through Julia's logging, so that users silence or redirect
# them as any other Julia log message (e.g. `Logging.disable_logging(Logging.Warn)`).
function log_level(code::Integer)
    code <= 1 && return Logging.Error
    code == 2 && return Logging.Warn
    code == 3 && return Logging.Info
    return Logging.Debug
end

"""
    CuMem.flush_engine_log()

Emits the engine's queued log messages through Julia's logging (`@logmsg` at the
message's level, group `:engine`). Called after initialisation and on the slow paths
(out of memory, `reclaim`, `memory_status`); not from finalizers.
"""
function flush_engine_log()
    level = Ref{Int32}(0)
    buf = Vector{UInt8}(undef, 1024)
    while true
        n = GC.@preserve buf ccall((:cumem_log_next, libcumem), Csize_t,
                                   (Ptr{Int32}, Ptr{UInt8}, Csize_t), level, buf, length(buf))
        level[] == 0 && return nothing
        if n >= length(buf)          # did not fit: still queued; take it with room for it
            resize!(buf, n + 1)
            continue
        end
        msg = String(buf[1:n])
        Logging.@logmsg log_level(level[]) string("CuMem engine: ", msg) _group = :engine
    end
end

function init_library()
    open_library(configured_library_path())
    ccall((:cumem_log_capture, libcumem), Int32, (Int32,), 1)
    code = ccall((:cumem_init, libcumem), Int32, ())
    flush_engine_log()
    if code != CUMEM_SUCCESS
        throw(CuMemError(code, "cannot initialise the CuMem engine: " * last_error()))
    end
    return nothing
end

# The engine library (libcumem.so): loading it, and every call of its C ABI
# (include/cumem.h; docs/contract.md is the contract), each as a thin wrapper `c_<name>`
# for `cumem_<name>` that returns what the C function returns and never throws unless
# the device switch below fails. test/lib/header_tests.jl checks every `ccall` here (name,
# return and argument types) against the header's prototypes.
#
# The current device has one owner in Julia: the task (task-local, as in CUDA.jl). The
# engine keeps a current device per OS thread (`cumem_set_device`). Every wrapper of a
# call that acts on "the current device" (allocation, statistics, limits, the memory
# tools, stream/event creation, kernels, GEMM) first makes the thread's device the
# task's (`activate()`), as CUDA.jl's generated wrappers call `prepare_cuda_call`; calls
# that name an address or a stream/event handle find their device themselves and do
# not (frees in finalizers stay free of task-local look-ups). A call site cannot forget
# the switch.

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
    # A file that exists but cannot be loaded gets the loader's own message for that very
    # file (`Libdl.dlopen` would retry with ".so" appended and report that name instead).
    h = ccall(:dlopen, Ptr{Cvoid}, (Cstring, Cint), path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL)
    if h == C_NULL
        why = ccall(:dlerror, Cstring, ())
        error("CuMem: the engine library $(repr(path)) cannot be loaded: " *
              (why == C_NULL ? "the dynamic loader refused it" : unsafe_string(why)) *
              ". CUMEM_LIBRARY must name a libcumem.so built by `cargo build --release`.")
    end
    ours = Libdl.dlsym(h, :cumem_init)
    called = Libdl.dlsym(Libdl.dlopen(libcumem), :cumem_init)   # what ccall resolves the name to (not cglobal: see c_init)
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

"""
    CuMem.last_error() -> String

The engine's last error message on this thread (`cumem_last_error`), `""` if none.
"""
last_error() = unsafe_string(ccall((:cumem_last_error, libcumem), Cstring, ()))

## status codes to exceptions

CuMemError(code::Integer) = CuMemError(Int32(code), last_error())

# Throws the error that a failed engine call's `code` stands for.
@noinline function throw_code(code::Integer)
    throw(CuMemError(code))
end

@inline check(code::Int32) = code == CUMEM_SUCCESS ? nothing : throw_code(code)

## the current device: the task's, made the thread's before a call that acts on it

# Set once a task switches to a device other than 0; never cleared.
const MULTI = Ref(false)
const NDEVICES = Ref(0)
const TLS_KEY = :CuMemDevice

# The ordinal of the current task's device: 0 until some task switched devices.
@inline task_device() = MULTI[] ? task_device_slow() : 0
function task_device_slow()
    d = get(task_local_storage(), TLS_KEY, nothing)
    return d === nothing ? 0 : d::Int
end

# Makes the calling thread's engine device the current task's, before an engine call that
# acts on the current device. Free when no task ever switched devices.
@inline activate() = (MULTI[] && activate_slow(); nothing)
function activate_slow()
    activate_device()
    return nothing
end
function activate_device()
    d = task_device_slow()
    c_get_device() == d || check(c_set_device(d))
    return d
end

# Runs `f()` with `d` as the task's device (the engine opens it on first use), restoring
# the task's device afterwards; no checks (devices/devices.jl's `device!` validates).
function with_task_device(f, d::Int)
    old = task_device()
    set_task_device!(d)
    try
        return f()
    finally
        set_task_device!(old)
    end
end
function set_task_device!(d::Int)
    if d != 0 || MULTI[]
        check(c_set_device(d))
        MULTI[] = true
        task_local_storage(TLS_KEY, d)
    end
    return nothing
end

# The ordinals of the devices opened so far (device 0 always).
open_ordinals() = [i for i in 0:c_device_count()-1 if c_device_is_open(i) == 1]

## the calls, grouped as in include/cumem.h (A: activates the task's device first)

# memory (A, except frees and copies, which find the device from the address)
@inline c_alloc(bytes::UInt64, out::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_alloc, libcumem), Int32, (UInt64, Ptr{UInt64}), bytes, out))
@inline c_alloc_noreclaim(bytes::UInt64, out::Base.RefValue{UInt64}) = c_alloc_ex(bytes, out, CUMEM_ALLOC_NO_RECLAIM)
@inline c_alloc_ex(bytes::UInt64, out::Base.RefValue{UInt64}, flags::UInt32) =
    (activate(); ccall((:cumem_alloc_ex, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt32), bytes, out, flags))
@inline c_alloc_async(bytes::UInt64, s::UInt64, out, flags::UInt32) =
    (activate(); ccall((:cumem_alloc_async, libcumem), Int32, (UInt64, UInt64, Ptr{UInt64}, UInt32), bytes, s, out, flags))
@inline c_free(ptr::UInt64) = ccall((:cumem_free, libcumem), Int32, (UInt64,), ptr)
c_reclaim(bytes::UInt64) = (activate(); ccall((:cumem_reclaim, libcumem), UInt64, (UInt64,), bytes))
c_get_stats(out::Base.RefValue{CStats}) =
    (activate(); ccall((:cumem_get_stats, libcumem), Int32, (Ptr{CStats},), out))
c_reset_stats() = (activate(); ccall((:cumem_reset_stats, libcumem), Cvoid, ()))
c_memory_status(buf, len, flags::UInt32) =
    (activate(); ccall((:cumem_memory_status_ex, libcumem), Csize_t, (Ptr{UInt8}, Csize_t, UInt32), buf, len, flags))
c_pool_name() = (activate(); ccall((:cumem_pool_name, libcumem), Cstring, ()))
c_pool_type_name() = (activate(); ccall((:cumem_pool_type_name, libcumem), Cstring, ()))
c_device_name() = (activate(); ccall((:cumem_device_name, libcumem), Cstring, ()))
c_device_is_host() = (activate(); ccall((:cumem_device_is_host, libcumem), Int32, ()))
c_device_memory(free::Base.RefValue{UInt64}, total::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_device_memory, libcumem), Int32, (Ptr{UInt64}, Ptr{UInt64}), free, total))
# The synchronous copies and memset run on the legacy default stream; state.jl's
# `ordered_*` versions first wait for the task's current stream.
@inline c_copy_htod(dst::UInt64, src::Ptr{Cvoid}, bytes::UInt64) =
    ccall((:cumem_copy_htod, libcumem), Int32, (UInt64, Ptr{Cvoid}, UInt64), dst, src, bytes)
@inline c_copy_dtoh(dst::Ptr{Cvoid}, src::UInt64, bytes::UInt64) =
    ccall((:cumem_copy_dtoh, libcumem), Int32, (Ptr{Cvoid}, UInt64, UInt64), dst, src, bytes)
@inline c_copy_dtod(dst::UInt64, src::UInt64, bytes::UInt64) =
    ccall((:cumem_copy_dtod, libcumem), Int32, (UInt64, UInt64, UInt64), dst, src, bytes)
@inline c_memset(dst::UInt64, value::UInt8, bytes::UInt64) =
    ccall((:cumem_memset, libcumem), Int32, (UInt64, UInt8, UInt64), dst, value, bytes)

# devices
c_device_count() = ccall((:cumem_device_count, libcumem), Int32, ())
c_set_device(i::Integer) = ccall((:cumem_set_device, libcumem), Int32, (Int32,), i)
c_get_device() = ccall((:cumem_get_device, libcumem), Int32, ())
c_device_is_open(i::Integer) = ccall((:cumem_device_is_open, libcumem), Int32, (Int32,), i)
c_can_access_peer(dst::Integer, src::Integer) =
    ccall((:cumem_can_access_peer, libcumem), Int32, (Int32, Int32), dst, src)
c_copy_peer(dst::UInt64, src::UInt64, bytes::UInt64, flags::UInt32, path::Base.RefValue{Int32}) =
    ccall((:cumem_copy_peer, libcumem), Int32, (UInt64, UInt64, UInt64, UInt32, Ptr{Int32}),
          dst, src, bytes, flags, path)

# streams and events (creation A; the rest find the device from the handle)
c_stream_create(flags, out) = (activate(); ccall((:cumem_stream_create, libcumem), Int32, (UInt32, Ptr{UInt64}), flags, out))
c_stream_destroy(s) = ccall((:cumem_stream_destroy, libcumem), Int32, (UInt64,), s)
c_stream_synchronize(s) = ccall((:cumem_stream_synchronize, libcumem), Int32, (UInt64,), s)
c_stream_query(s, out) = ccall((:cumem_stream_query, libcumem), Int32, (UInt64, Ptr{Int32}), s, out)
c_stream_wait_event(s, e) = ccall((:cumem_stream_wait_event, libcumem), Int32, (UInt64, UInt64), s, e)
c_stream_sleep(s, ns) = (activate(); ccall((:cumem_stream_sleep, libcumem), Int32, (UInt64, UInt64), s, ns))
c_event_create(flags, out) = (activate(); ccall((:cumem_event_create, libcumem), Int32, (UInt32, Ptr{UInt64}), flags, out))
c_event_destroy(e) = ccall((:cumem_event_destroy, libcumem), Int32, (UInt64,), e)
c_event_record(e, s) = ccall((:cumem_event_record, libcumem), Int32, (UInt64, UInt64), e, s)
c_event_query(e, out) = ccall((:cumem_event_query, libcumem), Int32, (UInt64, Ptr{Int32}), e, out)
c_event_synchronize(e) = ccall((:cumem_event_synchronize, libcumem), Int32, (UInt64,), e)
c_event_elapsed(a, b, out) = ccall((:cumem_event_elapsed, libcumem), Int32, (UInt64, UInt64, Ptr{Float32}), a, b, out)
c_record_stream(p, s) = (activate(); ccall((:cumem_record_stream, libcumem), Int32, (UInt64, UInt64), p, s))
c_block_stream(p, out) = (activate(); ccall((:cumem_block_stream, libcumem), Int32, (UInt64, Ptr{UInt64}), p, out))
c_copy_htod_async(dst, src, bytes, s) =
    (activate(); ccall((:cumem_copy_htod_async, libcumem), Int32, (UInt64, Ptr{Cvoid}, UInt64, UInt64), dst, src, bytes, s))
c_copy_dtoh_async(dst, src, bytes, s) =
    (activate(); ccall((:cumem_copy_dtoh_async, libcumem), Int32, (Ptr{Cvoid}, UInt64, UInt64, UInt64), dst, src, bytes, s))
# queued on a stream of the current device (A): fill! (a memset of `count` elements of
# `elsize` = 1, 2 or 4 bytes) and copyto! between CuArrays (src/ffi/stream_ops.rs)
@inline c_memset_async(dst::UInt64, pattern::UInt32, elsize::UInt32, count::UInt64, s::UInt64) =
    (activate(); ccall((:cumem_memset_async, libcumem), Int32, (UInt64, UInt32, UInt32, UInt64, UInt64),
                       dst, pattern, elsize, count, s))
@inline c_copy_dtod_async(dst::UInt64, src::UInt64, bytes::UInt64, s::UInt64) =
    (activate(); ccall((:cumem_copy_dtod_async, libcumem), Int32, (UInt64, UInt64, UInt64, UInt64), dst, src, bytes, s))

# pinned host memory (A, except calls naming a host address: frees run in finalizers)
c_host_alloc(bytes::UInt64, out::Base.RefValue{Ptr{Cvoid}}) =
    (activate(); ccall((:cumem_host_alloc, libcumem), Int32, (UInt64, Ptr{Ptr{Cvoid}}), bytes, out))
c_host_free(ptr::Ptr{Cvoid}) = ccall((:cumem_host_free, libcumem), Int32, (Ptr{Cvoid},), ptr)
c_host_register(ptr::Ptr{Cvoid}, bytes::UInt64) =
    (activate(); ccall((:cumem_host_register, libcumem), Int32, (Ptr{Cvoid}, UInt64), ptr, bytes))
c_host_unregister(ptr::Ptr{Cvoid}) = ccall((:cumem_host_unregister, libcumem), Int32, (Ptr{Cvoid},), ptr)
c_is_pinned(ptr::Ptr{Cvoid}) = ccall((:cumem_is_pinned, libcumem), Int32, (Ptr{Cvoid},), ptr)
c_host_get_stats(out::Base.RefValue{CStats}) =
    (activate(); ccall((:cumem_host_get_stats, libcumem), Int32, (Ptr{CStats},), out))
c_host_reset_stats() = (activate(); ccall((:cumem_host_reset_stats, libcumem), Cvoid, ()))
c_host_reclaim(bytes::UInt64) = (activate(); ccall((:cumem_host_reclaim, libcumem), UInt64, (UInt64,), bytes))

# the memory tools (A)
c_record_memory_history(enabled, max_entries) =
    (activate(); ccall((:cumem_record_memory_history, libcumem), Int32, (Int32, UInt64), enabled, max_entries))
c_memory_events(out, n) =
    (activate(); ccall((:cumem_memory_events, libcumem), UInt64, (Ptr{CEvent}, UInt64), out, n))
c_origin_text(id, buf, len) =
    (activate(); ccall((:cumem_origin_text, libcumem), Csize_t, (UInt64, Ptr{UInt8}, Csize_t), id, buf, len))
# (thread-local in the engine, on the allocation path under -g2: no device switch)
c_set_next_origin(id) = ccall((:cumem_set_next_origin, libcumem), Cvoid, (UInt64,), id)
c_memory_snapshot(segs, cs, blocks, cb, ns, nb) =
    (activate(); ccall((:cumem_memory_snapshot, libcumem), Int32,
                       (Ptr{CSegment}, UInt64, Ptr{CBlock}, UInt64, Ptr{UInt64}, Ptr{UInt64}),
                       segs, cs, blocks, cb, ns, nb))
c_leak_mark() = (activate(); ccall((:cumem_leak_mark, libcumem), UInt64, ()))
c_leaks_since(mark, out, cap, n) =
    (activate(); ccall((:cumem_leaks_since, libcumem), Int32, (UInt64, Ptr{CLeak}, UInt64, Ptr{UInt64}), mark, out, cap, n))
c_check_memory_leaks(out, cap, n) =
    (activate(); ccall((:cumem_check_memory_leaks, libcumem), Int32, (Ptr{CLeak}, UInt64, Ptr{UInt64}), out, cap, n))
c_memory_checkpoint(da, dr) =
    (activate(); ccall((:cumem_memory_checkpoint, libcumem), Int32, (Ptr{Int64}, Ptr{Int64}), da, dr))
c_set_memory_limit(bytes) = (activate(); ccall((:cumem_set_memory_limit, libcumem), Int32, (UInt64,), bytes))
c_set_memory_limit_str(amount) =
    (activate(); ccall((:cumem_set_memory_limit_str, libcumem), Int32, (Cstring,), amount))
c_set_memory_fraction(fraction) =
    (activate(); ccall((:cumem_set_memory_fraction, libcumem), Int32, (Float64,), fraction))
c_set_cache_limit(bytes) = (activate(); ccall((:cumem_set_cache_limit, libcumem), Int32, (UInt64,), bytes))
c_get_cache_limit() = (activate(); ccall((:cumem_get_cache_limit, libcumem), UInt64, ()))
c_memory_pressure() = (activate(); ccall((:cumem_memory_pressure, libcumem), Float64, ()))
c_compact(out) = (activate(); ccall((:cumem_compact, libcumem), Int32, (Ptr{CCompact},), out))
c_save_memory_timeline(events, n, labels, path, format) =
    (activate(); ccall((:cumem_save_memory_timeline, libcumem), Int32,
                       (Ptr{CEvent}, UInt64, Ptr{Ptr{UInt8}}, Cstring, UInt32), events, n, labels, path, format))

# compute (A, except the NVRTC version and a kernel's parameter sizes)
c_nvrtc_version(major, minor) =
    ccall((:cumem_nvrtc_version, libcumem), Int32, (Ptr{Int32}, Ptr{Int32}), major, minor)
c_compile_ptx(source::String, arch::Nothing, buf, cap, len) =
    (activate(); ccall((:cumem_compile_ptx, libcumem), Int32, (Cstring, Ptr{UInt8}, Ptr{UInt8}, UInt64, Ptr{UInt64}),
          source, C_NULL, buf, cap, len))
c_compile_ptx(source::String, arch::String, buf, cap, len) =
    (activate(); ccall((:cumem_compile_ptx, libcumem), Int32, (Cstring, Cstring, Ptr{UInt8}, UInt64, Ptr{UInt64}),
          source, arch, buf, cap, len))
c_kernel_load(source, name, out) =
    (activate(); ccall((:cumem_kernel_load, libcumem), Int32, (Cstring, Cstring, Ptr{UInt64}), source, name, out))
@inline c_kernel_launch(k, gx, gy, gz, bx, by, bz, shmem, args) =
    (activate(); ccall((:cumem_kernel_launch, libcumem), Int32,
          (UInt64, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, Ptr{Ptr{Cvoid}}),
          k, gx, gy, gz, bx, by, bz, shmem, args))
@inline c_kernel_launch_async(s, k, gx, gy, gz, bx, by, bz, shmem, args) =
    (activate(); ccall((:cumem_kernel_launch_async, libcumem), Int32,
          (UInt64, UInt64, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, Ptr{Ptr{Cvoid}}),
          s, k, gx, gy, gz, bx, by, bz, shmem, args))
c_kernel_block_size(k, out) = (activate(); ccall((:cumem_kernel_block_size, libcumem), Int32, (UInt64, Ptr{Int32}), k, out))
c_kernel_occupancy(k, shmem, maxt, b, t) = (activate(); ccall((:cumem_kernel_occupancy, libcumem), Int32, (UInt64, UInt64, Int32, Ptr{Int32}, Ptr{Int32}), k, shmem, maxt, b, t))
c_kernel_attribute(k, attr, out) = (activate(); ccall((:cumem_kernel_attribute, libcumem), Int32, (UInt64, Int32, Ptr{Int32}), k, attr, out))
c_kernel_set_attribute(k, attr, v) = (activate(); ccall((:cumem_kernel_set_attribute, libcumem), Int32, (UInt64, Int32, Int32), k, attr, v))
c_kernel_params(k, count, sizes, cap) = ccall((:cumem_kernel_params, libcumem), Int32, (UInt64, Ptr{Int32}, Ptr{UInt64}, Int32), k, count, sizes, cap)
c_device_info(a, b, c, d) =
    (activate(); ccall((:cumem_device_info, libcumem), Int32, (Ptr{Int32}, Ptr{Int32}, Ptr{Int32}, Ptr{Int32}), a, b, c, d))
c_synchronize() = (activate(); ccall((:cumem_synchronize, libcumem), Int32, ()))
# the kernel cache on disk (process-wide: no device)
c_kernel_cache_config(dir::String, max_bytes::UInt64, enabled::Int32) =
    ccall((:cumem_kernel_cache_config, libcumem), Int32, (Cstring, UInt64, Int32), dir, max_bytes, enabled)
c_kernel_cache_config(::Nothing, max_bytes::UInt64, enabled::Int32) =
    ccall((:cumem_kernel_cache_config, libcumem), Int32, (Ptr{UInt8}, UInt64, Int32), C_NULL, max_bytes, enabled)
c_kernel_cache_stats(h, m, w, e) =
    ccall((:cumem_kernel_cache_stats, libcumem), Int32, (Ptr{UInt64}, Ptr{UInt64}, Ptr{UInt64}, Ptr{UInt64}),
          h, m, w, e)
c_gemm_async(s, dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    (activate(); ccall((:cumem_gemm_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int64, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, UInt64, Int64, Ptr{Cvoid}, UInt64, Int64),
          s, dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
c_gemm(dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    (activate(); ccall((:cumem_gemm, libcumem), Int32,
          (Int32, Int32, Int32, Int64, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, UInt64, Int64, Ptr{Cvoid}, UInt64, Int64),
          dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
# linear algebra beyond gemm (src/ffi/linalg.rs): cuBLAS level 2/3, batched gemm, cuSOLVER
c_trsm_async(s, dt, side, uplo, tr, diag, m, n, alpha, A, lda, B, ldb) =
    (activate(); ccall((:cumem_trsm_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int32, Int32, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, UInt64, Int64),
          s, dt, side, uplo, tr, diag, m, n, alpha, A, lda, B, ldb))
c_trmm_async(s, dt, side, uplo, tr, diag, m, n, alpha, A, lda, B, ldb) =
    (activate(); ccall((:cumem_trmm_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int32, Int32, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, UInt64, Int64),
          s, dt, side, uplo, tr, diag, m, n, alpha, A, lda, B, ldb))
c_symm_async(s, dt, herm, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc) =
    (activate(); ccall((:cumem_symm_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int32, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, UInt64, Int64,
           Ptr{Cvoid}, UInt64, Int64), s, dt, herm, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc))
c_gemm_batched_async(s, dt, ta, tb, m, n, k, b, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc) =
    (activate(); ccall((:cumem_gemm_strided_batched_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int64, Int64, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, Int64,
           UInt64, Int64, Int64, Ptr{Cvoid}, UInt64, Int64, Int64),
          s, dt, ta, tb, m, n, k, b, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc))
c_getrf_async(s, dt, m, n, A, lda, ipiv, info) =
    (activate(); ccall((:cumem_getrf_async, libcumem), Int32, (UInt64, Int32, Int64, Int64, UInt64, Int64, UInt64, Ptr{Int32}),
          s, dt, m, n, A, lda, ipiv, info))
c_getrs_async(s, dt, tr, n, nrhs, A, lda, ipiv, B, ldb, info) =
    (activate(); ccall((:cumem_getrs_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int64, Int64, UInt64, Int64, UInt64, UInt64, Int64, Ptr{Int32}),
          s, dt, tr, n, nrhs, A, lda, ipiv, B, ldb, info))
c_geqrf_async(s, dt, m, n, A, lda, tau, info) =
    (activate(); ccall((:cumem_geqrf_async, libcumem), Int32, (UInt64, Int32, Int64, Int64, UInt64, Int64, UInt64, Ptr{Int32}),
          s, dt, m, n, A, lda, tau, info))
c_orgqr_async(s, dt, m, n, k, A, lda, tau, info) =
    (activate(); ccall((:cumem_orgqr_async, libcumem), Int32, (UInt64, Int32, Int64, Int64, Int64, UInt64, Int64, UInt64, Ptr{Int32}),
          s, dt, m, n, k, A, lda, tau, info))
c_ormqr_async(s, dt, side, tr, m, n, k, A, lda, tau, C, ldc, info) =
    (activate(); ccall((:cumem_ormqr_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int64, Int64, Int64, UInt64, Int64, UInt64, UInt64, Int64, Ptr{Int32}),
          s, dt, side, tr, m, n, k, A, lda, tau, C, ldc, info))
c_potrf_async(s, dt, uplo, n, A, lda, info) =
    (activate(); ccall((:cumem_potrf_async, libcumem), Int32, (UInt64, Int32, Int32, Int64, UInt64, Int64, Ptr{Int32}),
          s, dt, uplo, n, A, lda, info))
c_potrs_async(s, dt, uplo, n, nrhs, A, lda, B, ldb, info) =
    (activate(); ccall((:cumem_potrs_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int64, Int64, UInt64, Int64, UInt64, Int64, Ptr{Int32}),
          s, dt, uplo, n, nrhs, A, lda, B, ldb, info))
c_gesvd_async(s, dt, jacobi, vectors, m, n, A, lda, S, U, ldu, V, ldv, info) =
    (activate(); ccall((:cumem_gesvd_async, libcumem), Int32,
          (UInt64, Int32, Int32, Int32, Int64, Int64, UInt64, Int64, UInt64, UInt64, Int64, UInt64, Int64, Ptr{Int32}),
          s, dt, jacobi, vectors, m, n, A, lda, S, U, ldu, V, ldv, info))
c_syevd_async(s, dt, vectors, uplo, n, A, lda, W, info) =
    (activate(); ccall((:cumem_syevd_async, libcumem), Int32, (UInt64, Int32, Int32, Int32, Int64, UInt64, Int64, UInt64, Ptr{Int32}),
          s, dt, vectors, uplo, n, A, lda, W, info))

# the engine (cumem_init through the handle open_library opened, never by name: julia/tools/sysimage.jl, step 2, says why)
c_init() = ccall(Libdl.dlsym(LIBRARY_HANDLE[], :cumem_init), Int32, ())
c_version() = ccall((:cumem_version, libcumem), Cstring, ())
c_log_capture(on::Int32) = ccall((:cumem_log_capture, libcumem), Int32, (Int32,), on)
c_log_next(level::Base.RefValue{Int32}, buf, len) =
    ccall((:cumem_log_next, libcumem), Csize_t, (Ptr{Int32}, Ptr{UInt8}, Csize_t), level, buf, len)

## the engine

const ON_HOST = Ref{Int8}(-1)   # -1: not asked yet

"""
    CuMem.on_host() -> Bool

Whether the engine runs on the host device (`CUMEM_DEVICE=host`, or `auto` without a
usable GPU): device memory is then host memory, and compute runs through Base on
[`host_view`](@ref)s. Fixed for the life of the process.
"""
function on_host()
    if ON_HOST[] < 0
        r = c_device_is_host()
        r < 0 && throw(CuMemError(CUMEM_ERROR_DEVICE, "the engine cannot start: " * last_error()))
        ON_HOST[] = r
    end
    return ON_HOST[] == 1
end

# The device facts of each device, asked once (on_host above is the process's): by
# device ordinal + 1, a fixed-size vector (the engine's MAX_DEVICES) of Refs, each
# published whole by one pointer store, so the hot path (every broadcast asks for the
# SM count) reads it without a lock while another thread fills an entry.
# `max_threads == 0`: not read yet.
const DeviceInfo = NamedTuple{(:cc_major, :cc_minor, :sm_count, :max_threads),NTuple{4,Int}}
const DEVICE_INFO = [Ref(DeviceInfo((0, 0, 0, 0))) for _ in 1:64]

"""
    CuMem.device_info() -> (cc_major, cc_minor, sm_count, max_threads)

Facts about the current task's device as a `NamedTuple` of `Int`s: compute capability (9, 0 for an
H100), streaming multiprocessors and most threads per block. On the host device: 0, 0,
the number of CPUs, 1024.
"""
@inline function device_info()
    dev = task_device()
    if 0 <= dev < length(DEVICE_INFO)
        info = (@inbounds DEVICE_INFO[dev+1])[]
        info.max_threads != 0 && return info
    end
    return read_device_info(dev)
end

@noinline function read_device_info(dev::Int)
    a, b, c, d = Ref{Int32}(0), Ref{Int32}(0), Ref{Int32}(0), Ref{Int32}(0)
    check(c_device_info(a, b, c, d))
    info = DeviceInfo((Int(a[]), Int(b[]), Int(c[]), Int(d[])))
    0 <= dev < length(DEVICE_INFO) && (DEVICE_INFO[dev+1] = Ref(info))
    return info
end

"""
    CuMem.pool_name() -> String

The pool serving allocations: `"binned"`, `"split"`, `"expandable"`, `"simple"` or `"none"`, chosen by
`JULIA_CUDA_MEMORY_POOL` when the package was loaded.
"""
pool_name() = unsafe_string(c_pool_name())

"""
    CuMem.device_name() -> String

The current task's device's name, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"`
(`CUMEM_DEVICE`).
"""
device_name() = unsafe_string(c_device_name())

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

"""
    CuMem.engine_version() -> String

The engine library's version (`cumem_version`), e.g. `"0.1.0"`.
"""
engine_version() = unsafe_string(c_version())

# The pool's CUDA.jl type name ("BinnedPool", ...), from the engine's table of pool names.
pool_type_name() = unsafe_string(c_pool_type_name())

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
        n = GC.@preserve buf c_log_next(level, buf, length(buf))
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
    c_log_capture(Int32(1))
    code = c_init()
    flush_engine_log()
    if code != CUMEM_SUCCESS
        throw(CuMemError(code, "cannot initialise the CuMem engine: " * last_error()))
    end
    return nothing
end

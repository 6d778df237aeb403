# What CUDA.jl users ask first: does it work (`functional`), and what is it running on
# (`versioninfo`).

"""
    CuMem.functional(show_reason::Bool = false) -> Bool

Whether CuMem runs on a CUDA GPU, as `CUDA.functional()`: `true` when the engine
initialised on a CUDA device; `false` on the host device (host memory standing in for a
GPU, chosen by `CUMEM_DEVICE=host` or by `auto` without a usable GPU), where CuArrays
still work but live in host memory. With `show_reason`, says why when it returns
`false` (as an `@info` message). Never throws.
"""
function functional(show_reason::Bool = false)
    ok, why = try
        is_host_device() ? (false, "CuMem runs on the host device ($(device_name()))") : (true, "")
    catch e
        (false, "the CuMem engine is not usable: " * sprint(showerror, e))
    end
    (!ok && show_reason) && @info "CuMem.functional() is false: $why"
    return ok
end

# The CUDA driver's version as "12.4", or `nothing` when no driver is installed. Read
# from libcuda directly (cuDriverGetVersion needs no initialisation).
function cuda_driver_version()
    h = Libdl.dlopen_e(Sys.iswindows() ? "nvcuda" : "libcuda.so.1")
    h == C_NULL && return nothing
    f = Libdl.dlsym_e(h, :cuDriverGetVersion)
    f == C_NULL && return nothing
    v = Ref{Cint}(0)
    ccall(f, Cint, (Ptr{Cint},), v) == 0 || return nothing
    return string(v[] ÷ 1000, ".", (v[] % 1000) ÷ 10)
end

"""
    CuMem.versioninfo(io::IO = stdout)

Prints what CuMem runs with, as `CUDA.versioninfo()`: the package and engine versions
and the engine library's path, the device and its memory, the CUDA driver's version
(or that there is none), the pool, the memory limit, the debug level, Julia's version
and thread count, and the configuration variables that are set.
"""
function versioninfo(io::IO = stdout)
    fb = Base.format_bytes
    println(io, "CuMem engine ", engine_version(), " (", library_path(), ")")
    free, total = device_memory()
    println(io, "Device: ", device_name(), is_host_device() ? " (host device)" : "",
            ", ", fb(total), " total, ", fb(free), " free")
    drv = cuda_driver_version()
    println(io, "CUDA driver: ", drv === nothing ? "none found (libcuda.so.1)" : drv)
    s = memory_stats()
    println(io, "Pool: ", pool_name(), " (", pool_type_name(), ")")
    println(io, "Memory limit: ", s.limit_bytes == 0 ? "none" : fb(s.limit_bytes))
    println(io, "Allocation tracking: ", tracking() ? "on (Julia backtraces)" : "off")
    println(io, "Julia: ", VERSION, ", ", Threads.nthreads(), " thread",
            Threads.nthreads() == 1 ? "" : "s")
    vars = ("JULIA_CUDA_MEMORY_POOL", "JULIA_CUDA_MEMORY_LIMIT", "CUMEM_DEVICE",
            "CUMEM_HOST_CAPACITY", "CUMEM_DEBUG", "CUMEM_LOG", "CUMEM_LIBRARY")
    set = [v for v in vars if haskey(ENV, v)]
    if !isempty(set)
        println(io, "Environment:")
        for v in set
            println(io, "  ", v, "=", ENV[v])
        end
    end
    return nothing
end

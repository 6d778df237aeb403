# The package's exceptions (lib/libcumem.jl's `check` turns the engine's status codes into
# CuMemError; memory/allocator.jl throws OutOfGPUMemoryError).

"""
    CuMemError(code, msg)

An error reported by the engine: `code` is the C ABI's status (`CUMEM_ERROR_INVALID_VALUE`
= 2, `CUMEM_ERROR_CONFIG` = 3, `CUMEM_ERROR_DEVICE` = 4, `CUMEM_ERROR_INTERNAL` = 5,
`CUMEM_ERROR_NOT_SUPPORTED` = 6 when a GPU, libnvrtc or libcublas is needed and absent;
out of memory is reported as [`OutOfGPUMemoryError`] and NVRTC's rejection of a kernel
as `KernelCompileError` instead) and `msg` the engine's message (`cumem_last_error`).
"""
struct CuMemError <: Exception
    code::Int32
    msg::String
end

function Base.showerror(io::IO, err::CuMemError)
    print(io, "CuMemError: ", err.msg, " (", code_name(err.code), ")")
end

"""
    OutOfGPUMemoryError(sz, info[, reason])

Thrown when an allocation of `sz` bytes fails after every step of the allocation ladder
(pool, `GC.gc(false)`, `GC.gc(true)`, `reclaim()`, and retries while other threads are
still freeing memory). `reason` is the engine's explanation (e.g. `"cannot allocate
100.000 MiB (104857600 bytes): memory limit of 64.000 MiB reached; reserved …"`), `info`
the text of [`memory_status`] at the time of the failure. The name and the fields `sz`
and `info` follow CUDA.jl.
"""
struct OutOfGPUMemoryError <: Exception
    sz::Int
    info::String
    reason::String
end
OutOfGPUMemoryError(sz::Integer, info::AbstractString) = OutOfGPUMemoryError(sz, info, "")

function Base.showerror(io::IO, err::OutOfGPUMemoryError)
    print(io, "Out of GPU memory trying to allocate ", Base.format_bytes(err.sz))
    if !isempty(err.reason)
        print(io, "\n", rstrip(err.reason))
    end
    if !isempty(err.info)
        print(io, "\n", rstrip(err.info))
    end
end

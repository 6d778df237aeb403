# CUDA.jl's driver-API names that programs call (CUDA.jl v2.6's lib/cudadrv/): device
# attributes, memory and UUID; the driver's version (stream and event flags, the default
# stream, `query`, priorities and `@elapsed` are devices/streams.jl's). Thin wrappers over
# the engine's C API (devices/, memory/status.jl); device attributes and UUIDs beyond what
# the engine reports are read from libcuda on a GPU, as `cuda_driver_version` does.

## the CUDA driver library, for read-only queries the engine does not carry

# libcuda's handle and the symbol `f`, or C_NULL (no driver installed)
function libcuda_sym(f::Symbol)
    h = Libdl.dlopen_e(Sys.iswindows() ? "nvcuda" : "libcuda.so.1")
    h == C_NULL && return C_NULL
    return Libdl.dlsym_e(h, f)
end

# `cuDeviceGet` of the device's ordinal (the engine initialised the driver on a GPU)
function cu_device_handle(dev::CuDevice)
    f = libcuda_sym(:cuDeviceGet)
    f == C_NULL && throw(CuMemError(CUMEM_ERROR_NOT_SUPPORTED, "the CUDA driver library libcuda.so.1 was not found"))
    h = Ref{Cint}(0)
    r = ccall(f, Cint, (Ptr{Cint}, Cint), h, dev.handle)
    r == 0 || throw(CuMemError(CUMEM_ERROR_DEVICE, "cuDeviceGet($(dev.handle)) failed with CUDA error $r"))
    return h[]
end

## devices

"""
    CuMem.DEVICE_CPU
    CuMem.DEVICE_INVALID

CUDA.jl's placeholder devices (`CuDevice(-1)`, the CPU, and `CuDevice(-2)`), which
are shown as such and name no device of the engine.
"""
const DEVICE_CPU = CuDevice(-1)
const DEVICE_INVALID = CuDevice(-2)

"""
    CuMem.DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ..._WARP_SIZE, ..._MULTIPROCESSOR_COUNT,
    ..._COMPUTE_CAPABILITY_MAJOR, ..._COMPUTE_CAPABILITY_MINOR, ..._MAX_BLOCK_DIM_X,
    ..._MAX_GRID_DIM_X, ..._MAX_SHARED_MEMORY_PER_BLOCK, ..._HOST_REGISTER_SUPPORTED

CUDA's `CUdevice_attribute` codes (the driver API's values, as CUDA.jl's constants) for
[`attribute`](@ref). On a GPU every other code of the driver API works too.
"""
const DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
const DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2
const DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5
const DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
const DEVICE_ATTRIBUTE_WARP_SIZE = 10
const DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
const DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
const DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
const DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99

function check_real_device(what, dev::CuDevice)
    dev.handle >= 0 || throw(ArgumentError("$what($dev): $(dev == DEVICE_CPU ? "DEVICE_CPU" : "DEVICE_INVALID") is no device"))
    return nothing
end

"""
    CuMem.attribute(dev::CuDevice, code::Integer) -> Int

A device attribute by its `CUdevice_attribute` code (`CuMem.DEVICE_ATTRIBUTE_*`), as
CUDA.jl's `attribute`: on a GPU `cuDeviceGetAttribute` (any code); on the host device
the facts the engine reports: most threads per block (1024), warp size (32), the number
of CPUs as multiprocessors, compute capability 0.0, and host registration unsupported
(0). Other codes on the host device, and codes the driver rejects, throw `ArgumentError`.
"""
function attribute(dev::CuDevice, code::Integer)
    check_real_device("attribute", dev)
    info = device!(device_info, dev)
    if device!(is_host_device, dev)
        code == DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK && return info.max_threads
        code == DEVICE_ATTRIBUTE_WARP_SIZE && return 32
        code == DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT && return info.sm_count
        code == DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR && return info.cc_major
        code == DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR && return info.cc_minor
        code == DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED && return 0
        throw(ArgumentError("attribute($dev, $code): the host device reports the attributes " *
                            "MAX_THREADS_PER_BLOCK, WARP_SIZE, MULTIPROCESSOR_COUNT, " *
                            "COMPUTE_CAPABILITY_MAJOR/MINOR and HOST_REGISTER_SUPPORTED only"))
    end
    f = libcuda_sym(:cuDeviceGetAttribute)
    h = cu_device_handle(dev)
    v = Ref{Cint}(0)
    r = ccall(f, Cint, (Ptr{Cint}, Cint, Cint), v, code, h)
    r == 0 || throw(ArgumentError("attribute($dev, $code): cuDeviceGetAttribute failed with CUDA error $r"))
    return Int(v[])
end

"""
    warpsize(dev::CuDevice) -> Int

Threads per warp of `dev` (32 on every CUDA GPU and on the host device), as CUDA.jl's
`warpsize(dev)`.
"""
warpsize(dev::CuDevice) = attribute(dev, DEVICE_ATTRIBUTE_WARP_SIZE)

"""
    CuMem.totalmem(dev::CuDevice = device()) -> Int

Bytes of memory of `dev` (`cuDeviceTotalMem`; on the host device the capacity standing
in for a GPU's memory), as CUDA.jl's `totalmem`.
"""
totalmem(dev::CuDevice = device()) = (check_real_device("totalmem", dev); device!(() -> device_memory()[2], dev))

"""
    CuMem.uuid(dev::CuDevice) -> Base.UUID

The device's UUID (`cuDeviceGetUuid`), as CUDA.jl's `uuid`. The host device has none:
`ArgumentError` there.
"""
function uuid(dev::CuDevice)
    check_real_device("uuid", dev)
    device!(is_host_device, dev) &&
        throw(ArgumentError("uuid($dev): the host device (no GPU) has no UUID"))
    f = libcuda_sym(:cuDeviceGetUuid)
    bytes = Base.zeros(UInt8, 16)      # (a host buffer: CuMem.zeros makes a CuArray)
    r = ccall(f, Cint, (Ptr{UInt8}, Cint), bytes, cu_device_handle(dev))
    r == 0 || throw(CuMemError(CUMEM_ERROR_DEVICE, "cuDeviceGetUuid failed with CUDA error $r"))
    return Base.UUID(foldl((a, b) -> (a << 8) | b, UInt128.(bytes)))
end

## versions

"""
    CuMem.version() -> VersionNumber

The CUDA version the driver supports (`cuDriverGetVersion`, e.g. `v"12.4.0"`), as
CUDA.jl's `version()`. `CuMemError` (`CUMEM_ERROR_NOT_SUPPORTED`) when no CUDA driver is
installed (the host device on a machine without one).
"""
function version()
    f = libcuda_sym(:cuDriverGetVersion)
    f == C_NULL && throw(CuMemError(CUMEM_ERROR_NOT_SUPPORTED,
                                    "CuMem.version(): no CUDA driver (libcuda.so.1) is installed"))
    v = Ref{Cint}(0)
    r = ccall(f, Cint, (Ptr{Cint},), v)
    r == 0 || throw(CuMemError(CUMEM_ERROR_DEVICE, "cuDriverGetVersion failed with CUDA error $r"))
    major, rest = divrem(Int(v[]), 1000)
    minor, patch = divrem(rest, 10)
    return VersionNumber(major, minor, patch)
end

"""
    CuMem.release() -> VersionNumber

The driver's CUDA release, [`CuMem.version`](@ref) without its patch number (`v"12.4"`),
as CUDA.jl's `release()`. Same errors.
"""
release() = (v = version(); VersionNumber(v.major, v.minor))

## an external profiler's capture range

"""
    CuMem.Profile.start()
    CuMem.Profile.stop()

Starts and stops the capture of an external CUDA profiler run with a capture range
(`nsys profile --capture-range=cudaProfilerApi julia ...`, `ncu --profile-from-start
off`): `cuProfilerStart`/`cuProfilerStop` of the CUDA driver, as CUDA.jl's
`CUDA.Profile`. Profiles nothing by itself: `start` warns once that it only informs an
external profiler. Without a CUDA driver (the host device on a machine without one) the
calls only warn. [`CuMem.@profile`](@ref) brackets an expression.
"""
module Profile
using ..CuMem: libcuda_sym
function call(f::Symbol)
    p = libcuda_sym(f)
    p == C_NULL || ccall(p, Cint, ())
    return nothing
end
function start()
    @warn("CuMem.Profile.start() only informs an external profiler to start; run Julia under a " *
          "CUDA profiler (nsys, ncu) with a capture range for it to record anything", maxlog = 1)
    return call(:cuProfilerStart)
end
stop() = call(:cuProfilerStop)
end

"""
    CuMem.@profile ex

Runs `ex` between `CuMem.Profile.start()` and `CuMem.Profile.stop()` (also on error), as
CUDA.jl's `CUDA.@profile`: an external profiler's capture range around `ex`.
"""
macro profile(ex)
    quote
        Profile.start()
        try
            $(esc(ex))
        finally
            Profile.stop()
        end
    end
end

## launch dimensions

"""
    CuMem.CuDim3(x, y = 1, z = 1)
    CuMem.CuDim3(dims::Union{Integer,Tuple})

Threads or blocks of a launch in three dimensions, as CUDA.jl's `CuDim3` (fields `x`,
`y`, `z` of type `Cuint`; missing dimensions are 1). A value outside `Cuint` is an
`InexactError`. [`CuMem.CuDim`](@ref) is what a launch accepts in its place.
"""
struct CuDim3
    x::Cuint
    y::Cuint
    z::Cuint
end
CuDim3(dims::Integer) = CuDim3(dims, Cuint(1), Cuint(1))
CuDim3(dims::Tuple{Integer}) = CuDim3(dims[1], Cuint(1), Cuint(1))
CuDim3(dims::Tuple{Integer,Integer}) = CuDim3(dims[1], dims[2], Cuint(1))
CuDim3(dims::Tuple{Integer,Integer,Integer}) = CuDim3(dims[1], dims[2], dims[3])

"""
    CuMem.CuDim

An integer or a tuple of one to three integers: the forms of launch dimensions that
convert to a [`CuMem.CuDim3`](@ref), as CUDA.jl's `CuDim`.
"""
const CuDim = Union{Integer,Tuple{Integer},Tuple{Integer,Integer},Tuple{Integer,Integer,Integer}}

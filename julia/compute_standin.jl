# TEMPORARY stand-in for the engine's compute wrapper (julia/compute.jl of the compute
# engine work), with the names and signatures that the indexing, linear-algebra and demo
# code call. The host-device parts are real; the GPU parts say that the engine lacks them.
# Delete this file (and its include) once the real julia/compute.jl is merged.

"""
    CuMem.on_host() -> Bool

Whether the engine's device is the host device (host memory standing in for a GPU).
"""
on_host() = ON_HOST[] == 1 ? true : ON_HOST[] == 0 ? false :
    (ON_HOST[] = c_device_is_host() == 1 ? 1 : 0; ON_HOST[] == 1)
const ON_HOST = Ref(-1)

"""
    CuMem.host_view(a::CuArray{T,N}) -> Array{T,N}

An `Array` wrapping `a`'s buffer (no copy); host device only. Keep `a` alive while using
it (`GC.@preserve a`).
"""
function host_view(a::CuArray{T,N}) where {T,N}
    on_host() || throw(ArgumentError("host_view needs the host device"))
    return unsafe_wrap(Array, Ptr{T}(devaddr(a)), size(a); own = false)
end

"""
    CuMem.Kernel

A loaded device function (the engine's handle).
"""
struct Kernel
    handle::UInt64
end

const NOT_SUPPORTED = Int32(6)

load_kernel(source::String, name::String) =
    throw(CuMemError(NOT_SUPPORTED, "kernels are not available in this build of the engine"))
launch(k::Kernel, args...; blocks, threads, shmem = 0) =
    throw(CuMemError(NOT_SUPPORTED, "kernels are not available in this build of the engine"))
suggest_block(k::Kernel) = 256
gemm!(transA::Char, transB::Char, alpha, A, B, beta, C) =
    throw(CuMemError(NOT_SUPPORTED, "cuBLAS is not available in this build of the engine"))

"""
    synchronize()

Waits for the device's queued work (a no-op on the host device).
"""
synchronize() = nothing

# CUDA.jl's names for asking what hardware there is, which scripts and packages call before
# choosing a code path: has_cuda, has_cuda_gpu, capability.

"""
    CuMem.has_cuda(show_reason::Bool = false) -> Bool

Whether the CUDA driver library (`libcuda`) can be loaded, as `CUDA.has_cuda()`: CUDA is
installed, whether or not a GPU is present or used. With `show_reason`, says why not (an
`@info` message). Never throws.
"""
function has_cuda(show_reason::Bool = false)
    ok = cuda_driver_version() !== nothing
    (!ok && show_reason) && @info "CuMem.has_cuda() is false: the CUDA driver library libcuda.so.1 was not found or failed to load"
    return ok
end

"""
    CuMem.has_cuda_gpu(show_reason::Bool = false) -> Bool

Whether CuMem computes on a CUDA GPU, as `CUDA.has_cuda_gpu()`: `false` on the host device
(`CUMEM_DEVICE=host`, or `auto` without a usable GPU), like [`functional`](@ref). Never throws.
"""
has_cuda_gpu(show_reason::Bool = false) = functional(show_reason)

"""
    CuMem.capability(dev::CuDevice = device()) -> VersionNumber

The compute capability of `dev` (e.g. `v"9.0"` for an H100), as `CUDA.capability`. On the
host device `v"0.0"` (it is no GPU).
"""
function capability(dev::CuDevice = device())
    info = device!(() -> device_info(), dev)
    return VersionNumber(info.cc_major, info.cc_minor)
end

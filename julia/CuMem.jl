# CuMem: a GPU memory manager for Julia whose engine is the Rust library libcumem.
#
# The package entry point src/CuMem.jl includes this file. The user-facing API follows
# CUDA.jl 2.x (CuArray, cu, unsafe_free!, memory_status, reclaim, CuIterator, ...);
# docs/julia.md is the guide, docs/contract.md the contract between Julia and the engine.

module CuMem

using Libdl
using Logging
using LinearAlgebra
using Printf
using Serialization
using Random

export CuArray, CuVector, CuMatrix, CuVecOrMat, CuPtr, cu, unsafe_free!,
       allowscalar, @allowscalar,
       memory_status, memory_stats, memory_summary, reset_memory_stats!, reclaim,
       record_memory_history, memory_events, MemoryEvent, memory_snapshot, MemorySegment,
       MemoryBlock, check_memory_leaks, MemoryLeak, MemoryLeakError, memory_checkpoint,
       set_memory_limit!, set_memory_fraction!, set_cache_limit!, memory_pressure, compact!,
       MemoryProfile, profile_memory, @profile_memory, peak_memory, save_memory_timeline,
       CuIterator, OutOfGPUMemoryError, CuMemError,
       synchronize, CuStream, CuEvent, stream, stream!, record, elapsed, record_stream,
       CuDevice, devices, ndevices, device, device!,
       has_cuda, has_cuda_gpu, capability

include("library.jl")     # the engine library, its C ABI and initialisation
include("errors.jl")      # CuMemError, OutOfGPUMemoryError
include("allocator.jl")   # buffers, the allocation ladder, finalizer-safe frees, -g2 traces
include("memory.jl")      # memory_status, memory_stats, memory_summary, reclaim
include("memtools.jl")    # history, snapshot, leak checks, run-time limits, compact!
include("profile.jl")     # @profile_memory, MemoryProfile, save_memory_timeline
include("array.jl")       # CuArray
include("devices.jl")     # several devices: device!, devices, peer copies, operand checks
include("stream.jl")      # CuStream, CuEvent, the current stream, record_stream, async copies
include("compute.jl")     # NVRTC kernels, launch, cuBLAS gemm!, synchronize, host_view
include("scalar.jl")      # scalar indexing policy (allowscalar)
include("adapt.jl")       # adapt (a stand-in for Adapt.jl) and cu
include("pinned.jl")      # pinned host memory: CuMem.pinned, pin, is_pinned
include("iterator.jl")    # CuIterator
include("interop.jl")     # deepcopy, serialize, unsafe_wrap
include("info.jl")        # functional, versioninfo
include("cudanames.jl")   # has_cuda, has_cuda_gpu, capability
include("codegen.jl")     # tracing Julia functions into CUDA C, the kernel cache
include("broadcast.jl")   # fused broadcasting, map, map!
include("mapreduce.jl")   # reductions, findmax/findmin
include("scan.jl")        # accumulate, cumsum, cumprod along any dimension
include("random.jl")      # Philox4x32-10 random numbers
include("strided.jl")     # strided copies: the plan, the CUDA C kernel, the host path
include("indexing.jl")    # non-scalar getindex/setindex!, views, cat, reverse, permutedims
include("searching.jl")   # findall, findfirst/findlast, extrema, gathers, circshift, rot90, mapslices
include("masks.jl")       # Bool masks and index arrays in indexing, views and broadcasts; fill!/copy! on wrappers
include("sorting.jl")     # sort, sortperm, partialsort, issorted, unique (radix and bitonic)
include("statistics.jl")  # mean, var, std, cov, cor, median
include("rng.jl")         # default_rng, Complex and range draws, rand!/randn! on views
include("show.jl")        # show/print of CuArrays, views and wrappers, downloading once
include("linalg.jl")      # *, mul! (cuBLAS gemm), dot, norm, axpy!, axpby!, rmul!, lmul!
include("precompile.jl")  # inference of the broadcast machinery, cached at precompilation

function __init__()
    init_library()
    init_pressure()
    init_tracking()
    init_codegen()
    return nothing
end

end # module

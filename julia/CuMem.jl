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
       CuDevice, devices, ndevices, device, device!

include("lib/libcumem.jl")       # the engine library, its C ABI and initialisation
include("lib/errors.jl")         # CuMemError, OutOfGPUMemoryError
include("memory/allocator.jl")   # buffers, the allocation ladder, finalizer-safe frees, -g2 traces
include("memory/status.jl")      # memory_status, memory_stats, memory_summary, reclaim
include("tools/memtools.jl")     # history, snapshot, leak checks, run-time limits, compact!
include("tools/profile.jl")      # @profile_memory, MemoryProfile, save_memory_timeline
include("array/array.jl")        # CuArray
include("devices/devices.jl")    # several devices: device!, devices, peer copies, operand checks
include("devices/streams.jl")    # CuStream, CuEvent, the current stream, record_stream, async copies
include("compute/kernels.jl")    # NVRTC kernels, launch, cuBLAS gemm!, synchronize, host_view
include("array/scalar.jl")       # scalar indexing policy (allowscalar)
include("array/adapt.jl")        # adapt (a stand-in for Adapt.jl) and cu
include("memory/pinned.jl")      # pinned host memory: CuMem.pinned, pin, is_pinned
include("array/iterator.jl")     # CuIterator
include("array/interop.jl")      # deepcopy, serialize, unsafe_wrap
include("tools/info.jl")         # functional, versioninfo
include("compute/codegen.jl")    # tracing Julia functions into CUDA C, the kernel cache
include("compute/broadcast.jl")  # fused broadcasting, map, map!
include("compute/mapreduce.jl")  # reductions, findmax/findmin, cumsum/cumprod
include("compute/random.jl")     # Philox4x32-10 random numbers
include("compute/strided.jl")    # strided copies: the plan, the CUDA C kernel, the host path
include("compute/indexing.jl")   # non-scalar getindex/setindex!, views, cat, reverse, permutedims
include("compute/show.jl")       # show/print of CuArrays, views and wrappers, downloading once
include("compute/linalg.jl")     # *, mul! (cuBLAS gemm), dot, norm, axpy!, axpby!, rmul!, lmul!
include("compute/linalg/wrappers.jl")       # BLAS/LAPACK-level calls: cuBLAS beyond gemm, cuSOLVER
include("compute/linalg/kernels.jl")        # triu!/tril!, istriu, ishermitian, A + λI, integer matmul
include("compute/linalg/factorizations.jl") # lu, qr, cholesky, svd, eigen, \, inv, det, logdet
include("compute/linalg/structured.jl")     # triangular and symmetric/Hermitian products and solves
include("compute/linalg/generic.jl")        # mixed/integer/Float16 products, UniformScaling, diagm, kron
include("compute/linalg/compat.jl")         # what depends on the Julia version's LinearAlgebra
include("compute/precompile.jl") # inference of the broadcast machinery, cached at precompilation

function __init__()
    init_library()
    init_pressure()
    init_tracking()
    init_codegen()
    return nothing
end

end # module

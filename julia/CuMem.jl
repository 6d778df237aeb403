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
using Statistics

export CuArray, CuVector, CuMatrix, CuVecOrMat, CuPtr, CU_NULL, CuRef, RefOrCuRef, PtrOrCuPtr, cu, unsafe_free!,
       DenseCuArray, DenseCuVector, DenseCuMatrix, StridedCuArray, StridedCuVector, StridedCuMatrix,
       AnyCuArray,
       allowscalar, @allowscalar, @disallowscalar,
       memory_status, memory_stats, memory_summary, reset_memory_stats!, reclaim,
       record_memory_history, memory_events, MemoryEvent, memory_snapshot, MemorySegment,
       MemoryBlock, check_memory_leaks, MemoryLeak, MemoryLeakError, memory_checkpoint,
       set_memory_limit!, set_memory_fraction!, set_cache_limit!, memory_pressure, compact!,
       MemoryProfile, profile_memory, @profile_memory, peak_memory, save_memory_timeline,
       CuIterator, OutOfGPUMemoryError, CuMemError,
       synchronize, CuStream, CuEvent, stream, stream!, record, elapsed, record_stream,
       CuDevice, devices, ndevices, device, device!,
       has_cuda, has_cuda_gpu, capability,
       rand_logn!, rand_poisson!,
       # the kernel language (compute/device/)
       @cuda, cufunction, cudaconvert, launch_configuration, CuFunction, HostKernel, CuDeviceArray,
       CuDeviceVector, CuDeviceMatrix,
       threadIdx, blockIdx, blockDim, gridDim, warpsize, laneid,
       sync_threads, sync_threads_count, sync_threads_and, sync_threads_or, sync_warp,
       threadfence, threadfence_block, threadfence_system,
       CuStaticSharedArray, CuDynamicSharedArray, @cuStaticSharedMem, @cuDynamicSharedMem,
       shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, FULL_MASK,
       vote_all_sync, vote_any_sync, vote_ballot_sync, vote_all, vote_any, vote_ballot,
       @cuprintf, @cuprint, @cuprintln, @cushow, @cuassert, clock, nanosleep

# In dependency order: each file uses only what the files above it define
# (test/layers_tests.jl checks it), so the list reads bottom up.
include("lib/header.jl")           # the C ABI's constants and records (include/cumem.h)
include("lib/errors.jl")           # CuMemError, OutOfGPUMemoryError
include("lib/libcumem.jl")         # loading the engine, every C call, the task's device pushed to it
include("lib/graphs.jl")           # the C calls of stream capture, graphs and graph pools
include("state.jl")                # CuStream and the task's current stream
include("memory/tracking.jl")      # Buffer, -g2 allocation traces, history origins
include("memory/status.jl")        # memory_status, memory_stats, memory_summary, reclaim
include("memory/allocator.jl")     # the allocation ladder, finalizer-safe frees, GC pressure
include("memory/pinned.jl")        # pinned host memory: CuMem.pinned, pin, is_pinned
include("memory/kernel_errors.jl") # the error record compiled kernels fill; check_kernel_errors
include("devices/devices.jl")      # several devices: device!, devices, operand checks
include("devices/streams.jl")      # CuStream/CuEvent API: stream!, record, elapsed, synchronize
include("array/array.jl")          # CuArray: the type, constructors, interface, memset fill
include("array/wrappers.jl")       # DenseCuArray, StridedCuArray, AnyCuArray: the wrapper sets
include("array/copies.jl")         # copyto! in every direction, peer and async copies, record_stream
include("array/scalar.jl")         # scalar indexing policy (allowscalar)
include("array/adapt.jl")          # adapt (a stand-in for Adapt.jl) and cu
include("array/iterator.jl")       # CuIterator
include("array/interop.jl")        # deepcopy, serialize, unsafe_wrap
include("array/refs.jl")           # CuRef, CuRefArray, RefOrCuRef, PtrOrCuPtr: device references for ccall and kernels
include("compute/compiler/irversion.jl")  # the typed IR's spellings in each Julia version (the only such file)
include("compute/compiler/refusals.jl")   # KernelCompileError for what cannot run on a GPU
include("compute/compiler/ctypes.jl")     # C types of isbits Julia types with Julia's layout; literals
include("compute/compiler/cuda_sources.jl") # cuda_source: the fixed CUDA C of julia/cuda/*.cuh as text
include("compute/compiler/prelude.jl")    # C_PRELUDE_V2: the fixed C of compiled kernels
include("compute/compiler/values.jl")     # compile state; IR values, globals and conversions as C
include("compute/compiler/throwsites.jl") # throw sites: the error record's site and values
include("compute/compiler/kernelcalls.jl") # the kernel language's intrinsics as C (a table the device room fills); pointers
include("compute/compiler/intrinsics.jl") # Core.Intrinsics as C
include("compute/compiler/builtins.jl")   # getfield, ===, ifelse, isa, tuple, ... as C
include("compute/compiler/devmem.jl")     # CuDeviceArray's loads and stores as C pointer accesses
include("compute/compiler/unicode.jl")    # utf8proc's Char tables (case, category, width) for kernels
include("compute/compiler/mathlib.jl")    # Base math mapped to CUDA's library, with domain checks
include("compute/compiler/translate.jl")  # typed IR -> C: functions, blocks, phis, statements, calls
include("compute/compiler/device.jl")     # device_function, kernel_source, launch_context (the interface)
# compute/runtime/: kernel loading, caches, launch, read-back
include("compute/runtime/capture_edges.jl") # edges of captured graphs from the data each operation reads and writes
include("compute/runtime/kernels.jl")      # NVRTC kernels, launch, cuBLAS gemm!, synchronize, host_view
include("compute/runtime/graphs.jl")       # CUDA graphs: capture, instantiate, launch, update!, @captured, graph pools
include("compute/runtime/kernel_cache.jl") # the Julia kernel table (by device and types); the engine's cache on disk
include("compute/runtime/kernel_index.jl") # the fast paths' kernels on disk by the types that chose them
include("compute/runtime/eltypes.jl")      # the primitive element types of the fixed kernels
include("compute/runtime/readback.jl")     # scalar results through a pinned buffer
include("compute/runtime/devarray.jl")     # CuDeviceArray: CuArrays indexed inside element functions (Ref(A), tuples)
# compute/device/: the kernel language (CUDA.jl's kernel programming model): intrinsics, @cuda
include("compute/device/state.jl")                    # the host device's thread/block state; C translations
include("compute/device/arrays.jl")                   # cudaconvert; pointer/reshape of CuDeviceArray
include("compute/device/host.jl")                     # the host device's runner: threads as tasks
include("compute/device/execution.jl")                # cufunction, @cuda, HostKernel, launch_configuration
include("compute/device/intrinsics/indexing.jl")      # threadIdx, blockIdx, blockDim, gridDim, warpsize, laneid
include("compute/device/intrinsics/synchronization.jl") # sync_threads (count/and/or), threadfences
include("compute/device/intrinsics/memory_shared.jl") # CuStaticSharedArray, CuDynamicSharedArray
include("compute/device/intrinsics/atomics.jl")       # atomic_add! ... atomic_cas!, @atomic
include("compute/device/intrinsics/warp.jl")          # shfl_*sync, vote_*, sync_warp
include("compute/device/intrinsics/output.jl")        # @cuprintf, @cuprint(ln), @cushow, @cuassert
include("compute/device/intrinsics/misc.jl")         # clock, nanosleep
include("compute/device/intrinsics/math.jl")         # CUDA.jl's extra device math: pow
# compute/broadcast/: the broadcast path, its fast path, layouts and strided copies
include("compute/broadcast/bcfunction.jl") # a broadcast expression as one isbits callable of its elements
include("compute/broadcast/layout.jl")     # strided_operand, layout: the strided description of CuArrays and wrappers
include("compute/broadcast/strided.jl")    # strided copies: the plan, the CUDA C kernel, the host path
include("compute/broadcast/blockcopy.jl")  # copyto! of blocks (CartesianIndices, ranges) between device and host
include("compute/broadcast/broadcast.jl")  # fused broadcasting, map, map!, fill! by kernel
include("compute/broadcast/bcextras.jl")   # similar(bc, T, dims); ranges and CartesianIndices in broadcasts (by value); 0-d arithmetic
include("compute/broadcast/fastpath.jl")   # broadcasts of a type seen before: a typed slot, no look-ups
# compute/reduce/: reductions: whole-array, with dims, in place, findmax
include("compute/reduce/element_fns.jl")    # element functions of the reduction-like families, from the compiler
include("compute/reduce/reduce_full.jl")    # whole-array reductions: one kernel, partials to the pinned buffer
include("compute/reduce/dims_slot.jl")      # reductions over one dimension of a type seen before: a typed slot
include("compute/reduce/mapreduce.jl")      # reductions: mapreduce, sum, prod, any, all, count, ...
include("compute/reduce/findext.jl")        # findmax, findmin, argmax, argmin
include("compute/reduce/reduce_inplace.jl") # mapreducedim!: sum!, prod!, maximum!, minimum!, any!, all!, count!
# compute/algorithms/: scans, indexing, searching, masks, sorts, statistics
include("compute/algorithms/accumulate.jl") # accumulate, cumsum, cumprod along any dimension (three-phase scans)
include("compute/algorithms/indexing.jl")   # non-scalar getindex/setindex!, views, cat, reverse, permutedims
include("compute/algorithms/searching.jl")  # findall, findfirst/findlast, extrema, gathers, circshift, rot90, mapslices
include("compute/algorithms/masks.jl")      # Bool masks and index arrays in indexing, views and broadcasts; fill!/copy! of wrappers
include("compute/algorithms/sorting.jl")    # sort, sortperm, partialsort, issorted, unique (radix and bitonic sorts)
include("compute/algorithms/statistics.jl") # mean, var, std, cov, cor, median
include("compute/algorithms/basefuncs.jl")  # in, hash, filter, replace, searchsorted*, quantile, reverse!, resize!
# compute/random/: random numbers
include("compute/random/random.jl") # Philox4x32-10 random numbers
include("compute/random/rng.jl")    # default_rng, Complex and range draws, rand!/randn! of views
include("compute/random/draws.jl")  # rand/randn through the RNG, randexp, rand_logn!, rand_poisson!, randperm, shuffle
# compute/linalg/: linear algebra
include("compute/linalg/products.jl")       # *, mul! (cuBLAS gemm), dot, norm, axpy!, axpby!, rmul!, lmul!
include("compute/linalg/wrappers.jl")       # BLAS/LAPACK-level calls: cuBLAS beyond gemm, cuSOLVER
include("compute/linalg/kernels.jl")        # triu!/tril!, istriu, ishermitian, A + λI, integer matmul
include("compute/linalg/qr.jl")             # qr: CuQR, CuQRPackedQ, least squares, minimum norm
include("compute/linalg/factorizations.jl") # lu, cholesky, svd, eigen, \, inv, det, logdet
include("compute/linalg/structured.jl")     # triangular and symmetric/Hermitian products and solves
include("compute/linalg/generic.jl")        # mixed/integer/Float16 products, UniformScaling, diagm, kron
include("compute/linalg/extras.jl")         # normalize, opnorm, rank, cross, tridiagonal products, inv of triangles, pinv, exp, clear errors
include("compute/linalg/compat.jl")         # pivot arguments of newer LinearAlgebra versions
include("compute/linalg/blas.jl")           # BLAS.asum/dot/dotc/dotu, rotate!, reflect!, transpose(x) * y of complex vectors
# compute/: printing, and inference cached at precompilation
include("compute/show.jl")# show/print of CuArrays, views and wrappers, downloading once
include("compute/precompile.jl")# inference of the broadcast machinery, cached at precompilation
include("tools/memtools.jl")       # history, snapshot, leak checks, run-time limits, compact!
include("tools/profile.jl")        # @profile_memory, MemoryProfile, save_memory_timeline
include("tools/info.jl")           # functional, versioninfo
include("tools/cudanames.jl")      # has_cuda, has_cuda_gpu, capability
include("tools/driver.jl")         # CUDA.jl's driver API: attribute, warpsize(dev), totalmem, uuid, version, release
include("tools/sysimage.jl")       # create_sysimage: CuMem and the native code of a workload in a system image

# Seconds each step of the last `__init__` took (bench/julia/first_result.jl prints them).
const INIT_TIMES = Pair{Symbol,Float64}[]

function __init__()
    empty!(INIT_TIMES)
    for (name, step) in ((:init_engine_facts, init_engine_facts), (:init_library, init_library), (:init_kernel_cache, init_kernel_cache),
                         (:init_pressure, init_pressure), (:init_tracking, init_tracking),
                         (:init_compiled_tables, init_compiled_tables), (:init_broadcast, init_broadcast),
                         (:init_sysimage, init_sysimage))
        t = time_ns()
        step()
        push!(INIT_TIMES, name => (time_ns() - t) / 1e9)
    end
    return nothing
end
precompile(__init__, ())

end # module


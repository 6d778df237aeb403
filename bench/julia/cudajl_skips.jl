# What bench/julia/cudajl_suite.jl skips in CUDA.jl v2.6.3's test files, and why.
#
# A statement of a test file (at any depth of testsets, loops and blocks) is skipped when
# it names one of REFS (a function, macro, module or constant), or when it is a testset
# whose name matches TESTSETS. Its checks (the @test... calls in it, counted in the source)
# are reported as skipped under the reason. A skipped statement that is not a check taints
# the names it assigns and the local names it was given, and later statements that use a
# tainted name are skipped with it (e.g. `A = CUBLAS.f(...)` skips `@test A ≈ B`).

const R_LLVM = "inspects the LLVM IR, PTX, SASS or Julia IR of kernels (@device_code_*, code_llvm, llvmcall)"
const R_LDG = "ldg: read-only cache loads through LLVM intrinsics"
const R_WMMA = "WMMA: tensor-core intrinsics"
const R_DYN = "dynamic parallelism: kernels launching kernels (libcudadevrt)"
const R_CG = "cooperative groups: grid-wide synchronisation"
const R_LIB = "library wrapper called by name (CUBLAS.*, CUSOLVER.*, ...; the generic entry points run)"
const R_CTX = "CUDA driver contexts and their callbacks: CuMem has no context API (the engine owns them)"
const R_DRV = "CUDA driver modules, linker and raw launches (CuModule, CuLink, cudacall): CuMem loads its own kernels"
const R_QSORT = "CUDA.jl's quicksort internals (CUDA.Quicksort)"
const R_LLVMPTR = "LLVM address-space pointers (Core.LLVMPtr, AS.*): CuMem's device arrays hold plain addresses"
const R_NVML = "NVML (device management library)"
const R_BF16 = "BFloat16s.jl is not installed (the package's only use is cuBLAS's BFloat16 gemmEx)"
const R_CUERR = "CUDA.jl's CuError of driver result codes (CUDA.SUCCESS, name/description of a code): CuMem reports the engine's own status codes (CuMemError)"
const R_TIMINGS = "CUDA.jl's pool timer outputs (enable_timings/disable_timings; CuMem's allocation statistics are memory_stats())"
const R_BITCAST = "Base.bitcast of a CuPtr or Ptr into CuRef/RefOrCuRef: primitive types in CUDA.jl; CuMem's CuPtr, CuRef and RefOrCuRef are structs of the address (the same bits in a ccall)"
const R_UNMANAGED = "ccalls with CuArray{T,N}(CU_NULL, dims), an unmanaged array at address 0: CuMem wraps only memory of its engine (unsafe_wrap)"

const REFS = Dict{Symbol,String}()
for n in (Symbol("@device_code_llvm"), Symbol("@device_code_ptx"), Symbol("@device_code_sass"),
          Symbol("@device_code_typed"), Symbol("@device_code_warntype"),
          Symbol("@device_code_lowered"), Symbol("@device_code"), :code_llvm, :code_ptx,
          :code_sass, :code_typed, :code_warntype, :code_lowered, :llvmcall)
    REFS[n] = R_LLVM
end
REFS[:ldg] = R_LDG
REFS[:WMMA] = R_WMMA
for n in (:dynamic, :dynamic_cufunction, :LIMIT_DEV_RUNTIME_SYNC_DEPTH, :libcudadevrt)
    REFS[n] = R_DYN
end
REFS[:CG] = R_CG
REFS[:cooperative] = R_CG
for n in (:CUBLAS, :CUSOLVER, :CUSPARSE, :CUFFT, :CUDNN, :CURAND, :CUTENSOR, :band, :bandex)
    REFS[n] = R_LIB
end
for n in (:CuContext, :CuCurrentContext, :context, :context!, :attaskswitch, :atdeviceswitch,
          :atdevicereset, :CU_CTX_SCHED_YIELD, :CuPrimaryContext, :unsafe_reset!, :isactive,
          :flags, :setflags!, :CuContextDestroyed, :cache_config, :cache_config!, :shmem_config,
          :shmem_config!)
    REFS[n] = R_CTX
end
for n in (:CuModule, :CuModuleFile, :CuLink, :CuFunction, :cudacall, :CuGlobal, :add_data!,
          :add_file!, :CuLinkImage, :CuLinkError, :CUjit_option)
    REFS[n] = R_DRV
end
REFS[:bitcast] = R_BITCAST
REFS[:SUCCESS] = R_CUERR
REFS[:enable_timings] = R_TIMINGS
REFS[:disable_timings] = R_TIMINGS
REFS[:Quicksort] = R_QSORT
REFS[:LLVMPtr] = R_LLVMPTR
REFS[:AS] = R_LLVMPTR
REFS[:NVML] = R_NVML
REFS[:BFloat16] = R_BF16
REFS[:BFloat16s] = R_BF16

"""Testsets skipped by name (the name's literal text, interpolations left out)."""
const TESTSETS = [
    r"^dynamic parallelism$" => R_DYN,
    r"^libcudadevrt$" => R_DYN,
    r"^cooperative groups$" => R_CG,
    r"^reflection$" => R_LLVM,
    r"^llvm ir barrier" => R_LLVM,
    r"^range metadata$" => R_LLVM,
    # its script (a string, so the names are not seen) builds `CuDeviceArray{Int,1,AS.Global}`
    # from a `Core.LLVMPtr{Int,AS.Global}`
    r"^#329$" => R_LLVMPTR,
    # pointer.jl's testset: its device half is `CuArray{Int,1}(CU_NULL, (1,))`
    r"^GPU or CPU integration$" => R_UNMANAGED,
]

"""The array-side files and the kernel files, in the order they run."""
const ARRAY_FILES = ["initialization", "array", "broadcast", "iterator", "pool", "random",
    "statistics", "cublas", "pointer", "sorting", "cudadrv/context", "cudadrv/devices",
    "cudadrv/errors", "cudadrv/events", "cudadrv/execution", "cudadrv/memory",
    "cudadrv/module", "cudadrv/occupancy", "cudadrv/profile", "cudadrv/stream",
    "cudadrv/version"]
const KERNEL_FILES = ["execution", "device/intrinsics", "device/array", "exceptions",
    "examples/hello_world", "examples/vadd", "examples/pairwise", "examples/peakflops"]

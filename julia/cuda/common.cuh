/* common.cuh: the helpers shared by CuMem's fixed CUDA C (julia/cuda/*.cuh).
 *
 * Each family header starts with `#include "common.cuh"` (or "prelude.cuh", the compiler's
 * prelude, which includes it). CuMem reads the headers as text
 * when the package is precompiled (julia/compute/runtime/cuda_sources.jl, cuda_source) and
 * splices this file in place of that line, once per kernel source: NVRTC is given one
 * source and no headers. The include guard keeps a second splice, or nvcc/clang with
 * -I julia/cuda, from defining anything twice.
 *
 * Plain C++ types only (no <stdint.h>: NVRTC has none, and the compiler's prelude
 * julia/compute/compiler/prelude.jl typedefs int64_t and friends itself). g++ compiles the
 * same text in the emulation tests with __device__/__forceinline__/... defined away and
 * the CUDA built-ins emulated, so nothing here may need more than the built-ins used below
 * (blockIdx, blockDim, gridDim, threadIdx, __shfl_down_sync, __shfl_up_sync).
 */
#ifndef CUMEM_COMMON_CUH
#define CUMEM_COMMON_CUH

/* The declaration of a kernel CuMem launches by name: an unmangled __global__ function. */
#define CUMEM_KERNEL extern "C" __global__

/* The first statement of every kernel CuMem launches (each CUMEM_KERNEL body; the test
   test/compute/runtime/cuh_tests.jl checks the .cuh files and generated kernels): programmatic
   dependent launch (PDL, sm_90 and later, PTX ISA 7.8). The engine launches a kernel whose
   code executes griddepcontrol.wait with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
   (src/compute/module.rs; CUMEM_PDL=0 turns that off), so it may start while the kernel before
   it on the stream (in a graph: the kernel nodes it depends on) is still running:
   - griddepcontrol.wait blocks until those kernels have completed and their memory writes are
     visible: nothing before it may read or write global memory (a no-op when the launch did not
     ask for PDL);
   - griddepcontrol.launch_dependents then lets the next kernel launch (once every block of this
     grid has passed it or exited): safe this early, since the next kernel in turn waits in its
     own griddepcontrol.wait for this whole grid to complete and flush. After the wait, not
     before it, so that at most one kernel waits ahead of the running one.
   Empty below sm_90 (and for g++ in the emulation tests): there the engine never asks for PDL. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CUMEM_PDL_ENTRY()                                    \
  do {                                                       \
    asm volatile("griddepcontrol.wait;" ::: "memory");       \
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); \
  } while (0)
#else
#define CUMEM_PDL_ENTRY() do { } while (0)
#endif

/* The global index of the calling thread in the x dimension, in the index type I
   (blockIdx.x * blockDim.x + threadIdx.x): the start of a grid-stride loop. */
template <typename I> static __device__ __forceinline__ I cumem_thread_index() {
  return (I)blockIdx.x * blockDim.x + threadIdx.x;
}

/* The number of threads of the grid in the x dimension (blockDim.x * gridDim.x), in I:
   the step of a grid-stride loop. */
template <typename I> static __device__ __forceinline__ I cumem_grid_threads() {
  return (I)blockDim.x * gridDim.x;
}

/* __shfl_down_sync over the full warp for a value of any trivially copyable type T
   (Complex, tuples, structs), moved 32 bits at a time: lane l gets lane l + o's v. */
template <typename T> static __device__ __forceinline__ T cumem_shfl_down(T v, int o) {
  union U { T v; unsigned w[(sizeof(T) + 3) / 4]; __device__ U() {} } u, r;
  u.v = v;
  for (int i = 0; i < (int)((sizeof(T) + 3) / 4); i++) r.w[i] = __shfl_down_sync(0xffffffffu, u.w[i], o);
  return r.v;
}

/* __shfl_up_sync over the full warp for a value of any trivially copyable type T, moved 32
   bits at a time: lane l gets lane l - o's v (lanes below o their own). */
template <typename T> static __device__ __forceinline__ T cumem_shfl_up(T v, int o) {
  union U { T v; unsigned w[(sizeof(T) + 3) / 4]; __device__ U() {} } u, r;
  u.v = v;
  for (int i = 0; i < (int)((sizeof(T) + 3) / 4); i++) r.w[i] = __shfl_up_sync(0xffffffffu, u.w[i], o);
  return r.v;
}

#endif /* CUMEM_COMMON_CUH */

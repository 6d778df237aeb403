# The compute layer's own costs on a GPU (not a test; CUMEM_DEVICE=cuda): the first and a
# cached load_kernel, back-to-back launches of a 1-element kernel, and cuBLAS GEMM through
# CuMem.gemm! (compare: bench/anchors/torch_gemm.py in the same session). Single timings, no median.
#
#   CUMEM_DEVICE=cuda julia --project bench/julia/compute_engine_bench.jl
using CuMem, LinearAlgebra
const SRC = """
extern "C" __global__ void saxpy(float a, const float *x, float *y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
x = CuArray(rand(Float32, 1)); y = CuArray(rand(Float32, 1))
t0 = time_ns(); k = CuMem.load_kernel(SRC, "saxpy"); t1 = time_ns()
println("first load_kernel (NVRTC compile + cuModuleLoadData): ", (t1 - t0) / 1e6, " ms")
N = 100_000
t = @elapsed for i in 1:N; CuMem.load_kernel(SRC, "saxpy"); end
println("cached load_kernel: ", round(t / N * 1e9), " ns")
for i in 1:1000; CuMem.launch(k, 2f0, x, y, Int64(1); blocks = 1, threads = 32); end
synchronize()
t = @elapsed (for i in 1:N; CuMem.launch(k, 2f0, x, y, Int64(1); blocks = 1, threads = 32); end; synchronize())
println("launch of a 1-element saxpy (Julia call to return, incl. queueing): ", round(t / N * 1e9), " ns")
for T in (Float32, Float64), n in (4096, 8192)
    A = CuArray(rand(T, n, n)); B = CuArray(rand(T, n, n)); C = CuArray(zeros(T, n, n))
    CuMem.gemm!('N', 'N', one(T), A, B, zero(T), C); synchronize()
    reps = 5
    tg = @elapsed (for i in 1:reps; CuMem.gemm!('N', 'N', one(T), A, B, zero(T), C); end; synchronize())
    println("gemm $T $(n)x$(n): ", round(2.0 * n^3 * reps / tg / 1e12, digits = 1), " TFLOP/s")
    A = B = C = nothing; GC.gc(); reclaim()
end

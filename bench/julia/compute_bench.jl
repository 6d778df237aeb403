# The compute benchmarks (CuMem side): one JSON object per line.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/compute_bench.jl [--quick] [--reps N] [--batch B]
#
#   {"bench":"axpy", ...}               y .= a .* x .+ y on n Float32 (one fused kernel):
#                                        effective bandwidth, 3·4n bytes per call
#   {"bench":"copy", ...}               copyto!(y, x), device to device: 2·4n bytes
#   {"bench":"sum", ...}                sum(x): 4n bytes
#   {"bench":"matmul", ...}             A * B, n×n Float32 (cuBLAS, no TF32): 2n³ flops
#   {"bench":"latency", ...}            y .= a .* x .+ y on a 1-element array (a cached
#                                        kernel): µs per call, without and with synchronize
#   {"bench":"mlp_step", ...}           one SGD step of demo/mlp.jl's model on a fixed
#                                        device batch of the digits (loss read back)
#
# Each figure is the median of `reps` repetitions; a repetition runs a loop calibrated to
# about 50 ms between two synchronize() calls and divides. Sizes: n = 2^28, matmul 8192²;
# --quick: n = 2^12, matmul 64², a few iterations (for CI on the host device).
# bench/anchors/compute_anchor.py measures the same in PyTorch (and CuPy) with the same sizes.

using CuMem, LinearAlgebra, Printf, Random

include(joinpath(@__DIR__, "..", "..", "demo", "mlp.jl"))

const QUICK = "--quick" in ARGS
function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : parse(typeof(default), ARGS[i+1])
end
const REPS = option("--reps", QUICK ? 3 : 10)
const N = QUICK ? 2^12 : 2^28
const NMAT = QUICK ? 64 : 8192
const BATCH = option("--batch", 64)
const TARGET_S = QUICK ? 0.002 : 0.05

# Seconds per call of f: the median over REPS repetitions of a loop of `iters` calls
# between two synchronize() calls, `iters` calibrated once to about TARGET_S.
function per_call(f; iters = nothing)
    f(); CuMem.synchronize()                       # compile, warm the pool and the kernel cache
    if iters === nothing
        t = @elapsed (f(); CuMem.synchronize())
        iters = clamp(round(Int, TARGET_S / max(t, 1e-7)), 1, 100_000)
    end
    times = map(1:REPS) do _
        CuMem.synchronize()
        t0 = time_ns()
        for _ in 1:iters
            f()
        end
        CuMem.synchronize()
        (time_ns() - t0) / 1e9 / iters
    end
    return median_of(times), iters
end

json(pairs...) = println("{", join(("\"$k\":" * (v isa AbstractString ? "\"$v\"" : string(v)) for (k, v) in pairs), ","), "}")

device = CuMem.device_name()
CuMem.allowscalar(false)

# fused axpy
x = CuMem.fill(1f0, N); y = CuMem.fill(2f0, N); a = 0.5f0
t, it = per_call(() -> (y .= a .* x .+ y; nothing))
json("bench" => "axpy", "n" => N, "eltype" => "Float32", "s" => t, "gbps" => 3 * 4 * N / t / 1e9,
     "iters" => it, "device" => device)

# device-to-device copy
t, it = per_call(() -> (copyto!(y, x); nothing))
json("bench" => "copy", "n" => N, "eltype" => "Float32", "s" => t, "gbps" => 2 * 4 * N / t / 1e9,
     "iters" => it, "device" => device)

# sum
t, it = per_call(() -> (sum(x); nothing))
json("bench" => "sum", "n" => N, "eltype" => "Float32", "s" => t, "gbps" => 4 * N / t / 1e9,
     "iters" => it, "device" => device)
unsafe_free!(x); unsafe_free!(y)

# matmul
A = CuArray(rand(MersenneTwister(1), Float32, NMAT, NMAT))
B = CuArray(rand(MersenneTwister(2), Float32, NMAT, NMAT))
C = CuArray{Float32}(undef, NMAT, NMAT)
t, it = per_call(() -> (mul!(C, A, B); nothing))
json("bench" => "matmul", "n" => NMAT, "eltype" => "Float32", "s" => t, "tflops" => 2 * Float64(NMAT)^3 / t / 1e12,
     "iters" => it, "device" => device)
unsafe_free!(A); unsafe_free!(B); unsafe_free!(C)

# launch latency of a cached broadcast on one element
x1 = CuMem.fill(1f0, 1); y1 = CuMem.fill(2f0, 1)
f1() = (y1 .= a .* x1 .+ y1; nothing)
t_async, it = per_call(f1)
t_sync, _ = per_call(() -> (f1(); CuMem.synchronize()))
json("bench" => "latency", "us" => t_async * 1e6, "us_sync" => t_sync * 1e6, "iters" => it, "device" => device)

# MLP training step on a fixed device batch of the digits
X, labels = load_digits()
Xtr, Ytr, _, _ = split_data(X, labels)
nb = min(BATCH, size(Xtr, 2))
xb, yb = CuArray(Xtr[:, 1:nb]), CuArray(Ytr[:, 1:nb])
model = MLP(MersenneTwister(42))
t, it = per_call(() -> (train_step!(model, xb, yb, 0.01f0); nothing))
json("bench" => "mlp_step", "batch" => nb, "model" => "64-128-10", "ms" => t * 1e3, "iters" => it, "device" => device)

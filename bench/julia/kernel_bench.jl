# The kernel language's speed (user kernels written with @cuda): one JSON object per line.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/kernel_bench.jl [--n LOG2] [--reps R] [--calls N]
#
# Rows:
#  "gpu_add3": the grid-stride gpu_add3! of CUDA.jl's introduction tutorial on 2^LOG2
#    Float32 (default 2^28; 2^20 on the host device) against `y .+= x`: GB/s counting x read,
#    y read and written (12 bytes per element), and the ratio (target: within 3%), launched as
#    the tutorial does (one thread per element: cld(n, 256) blocks).
#  "gpu_add3_grid": the same kernel on the broadcast's grid (min(cld(n, 256), 32 blocks per SM)).
#  "reduce": a shared-memory block reduction (256 threads, 8 blocks per SM, a grid-stride
#    loop with four accumulators so that each thread has four loads in flight, a tree in
#    CuStaticSharedArray, one atomic_add! per block) against `sum(x)`: GB/s of x read once
#    (target: within 10%). The `fill!` of the 1-element result is timed with the kernel.
#  "launch": µs per call of `@cuda` of a cached kernel on 1-element arrays (N calls in a
#    row, one synchronize at the end) against the broadcast fast path `y .+= x` on the same
#    arrays (target: within 1 µs).
# Every timing synchronizes before its clock stops; each figure is the median of R
# repetitions (default 7) after a warm-up.

using CuMem

function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : parse(typeof(default), ARGS[i+1])
end
const HOST = CuMem.on_host()
const LOG2 = option("--n", HOST ? 20 : 28)
const REPS = option("--reps", 7)
const CALLS = option("--calls", HOST ? 2_000 : 20_000)
const DEVICE = CuMem.device_name()

median_of(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n+1)÷2] : (s[n÷2] + s[n÷2+1]) / 2)
json(pairs...) = println("{", join(("\"$k\":" * (v isa AbstractString ? repr(v) : string(v)) for (k, v) in pairs), ","), "}")

# seconds of one call of f (synchronized), the median of REPS after a warm-up
function seconds(f)
    f()
    synchronize()
    ts = map(1:REPS) do _
        t0 = time_ns()
        f()
        synchronize()
        (time_ns() - t0) / 1e9
    end
    return median_of(ts)
end

function gpu_add3!(y, x)
    index = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    stride = gridDim().x * blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end

function reduce_grid!(out, x)
    sh = CuStaticSharedArray(Float32, 256)
    t = threadIdx().x
    a1 = a2 = a3 = a4 = 0f0
    i = (blockIdx().x - 1) * blockDim().x + t
    stride = gridDim().x * blockDim().x
    n = length(x)
    # four independent loads in flight per step (one accumulator each), then the tail
    while i + 3stride <= n
        @inbounds begin
            a1 += x[i]
            a2 += x[i+stride]
            a3 += x[i+2stride]
            a4 += x[i+3stride]
        end
        i += 4stride
    end
    while i <= n
        @inbounds a1 += x[i]
        i += stride
    end
    @inbounds sh[t] = (a1 + a2) + (a3 + a4)
    sync_threads()
    s = 128
    while s > 0
        if t <= s
            @inbounds sh[t] += sh[t+s]
        end
        sync_threads()
        s ÷= 2
    end
    t == 1 && CuMem.atomic_add!(pointer(out), @inbounds sh[1])
    return nothing
end

n = 2^LOG2
x = CuArray(fill(1f0, n))
y = CuArray(fill(2f0, n))
k = @cuda launch=false gpu_add3!(y, x)
cfg = launch_configuration(k.fun)
threads = HOST ? 256 : min(cfg.threads, 256)
blocks = HOST ? 64 : cld(n, threads)
t_k = seconds(() -> @cuda threads=threads blocks=blocks gpu_add3!(y, x))
t_b = seconds(() -> (y .+= x; nothing))
gb(t, bytes) = round(bytes / t / 1e9; digits = 2)
json("bench" => "kernels", "row" => "gpu_add3", "n" => n, "kernel_GBs" => gb(t_k, 12n), "broadcast_GBs" => gb(t_b, 12n),
     "ratio" => round(t_k / t_b; digits = 4), "threads" => threads, "blocks" => blocks, "device" => DEVICE)
# the same kernel on the broadcast's grid (at most 32 blocks per SM, launch_shape): a
# grid-stride loop with several elements per thread, what the loop is written for
gblocks = HOST ? 64 : min(cld(n, threads), 32 * CuMem.sm_count())
t_g = seconds(() -> @cuda threads=threads blocks=gblocks gpu_add3!(y, x))
json("bench" => "kernels", "row" => "gpu_add3_grid", "n" => n, "kernel_GBs" => gb(t_g, 12n), "broadcast_GBs" => gb(t_b, 12n),
     "ratio" => round(t_g / t_b; digits = 4), "threads" => threads, "blocks" => gblocks, "device" => DEVICE)

out = CuArray([0f0])
rblocks = HOST ? 16 : 8 * CuMem.sm_count()    # 2048 resident threads per SM (H100, A100): full occupancy
t_r = seconds(() -> (fill!(out, 0f0); @cuda threads=256 blocks=rblocks reduce_grid!(out, x)))
t_s = seconds(() -> (sum(x); nothing))
@cuda threads=256 blocks=rblocks reduce_grid!(fill!(out, 0f0), x)
ok = Array(out)[1] == Float32(n)
json("bench" => "kernels", "row" => "reduce", "n" => n, "kernel_GBs" => gb(t_r, 4n), "sum_GBs" => gb(t_s, 4n),
     "ratio" => round(t_r / t_s; digits = 4), "correct" => ok, "blocks" => rblocks, "device" => DEVICE)

x1, y1 = CuArray([1f0]), CuArray([1f0])
function us_per_call(f)
    for _ in 1:200
        f()
    end
    synchronize()
    GC.gc()
    ts = map(1:REPS) do _
        t0 = time_ns()
        for _ in 1:CALLS
            f()
        end
        synchronize()
        (time_ns() - t0) / 1e3 / CALLS
    end
    return median_of(ts)
end
# (closures over local bindings: the call sites are compiled for the arrays' types)
t_l = us_per_call(let y1 = y1, x1 = x1; () -> @cuda gpu_add3!(y1, x1); end)
t_f = us_per_call(let y1 = y1, x1 = x1; () -> (y1 .+= x1; nothing); end)
json("bench" => "kernels", "row" => "launch", "cuda_us" => round(t_l; digits = 3), "broadcast_us" => round(t_f; digits = 3),
     "diff_us" => round(t_l - t_f; digits = 3), "calls" => CALLS, "device" => DEVICE)

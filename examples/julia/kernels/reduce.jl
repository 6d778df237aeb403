# A block reduction with shared memory, a warp-shuffle reduction and atomics: the
# intrinsics of docs/kernels.md in one place. Runs on a GPU and on the host device.
#
#   CUMEM_DEVICE=host julia --project=. examples/julia/kernels/reduce.jl

using CuMem, Test

# a tree in shared memory, one partial sum per block added atomically
function block_sum!(out, x)
    sh = CuStaticSharedArray(Float32, 256)
    t = threadIdx().x
    i = (blockIdx().x - 1) * blockDim().x + t
    sh[t] = i <= length(x) ? x[i] : 0f0
    sync_threads()
    s = 128
    while s > 0
        t <= s && (sh[t] += sh[t+s])
        sync_threads()
        s ÷= 2
    end
    t == 1 && CuMem.atomic_add!(pointer(out), sh[1])
    return nothing
end

# the same with warp shuffles: each warp sums its 32 values, lane 1 adds them up
function warp_sum!(out, x)
    i = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    v = i <= length(x) ? x[i] : 0f0
    offset = 16
    while offset > 0
        v += shfl_down_sync(FULL_MASK, v, offset)
        offset ÷= 2
    end
    laneid() == 1 && CuMem.@atomic out[1] += v
    return nothing
end

x = CuArray(Float32.(1:1000))
out = CuArray([0f0])
@cuda threads=256 blocks=cld(length(x), 256) block_sum!(out, x)
@test Array(out)[1] == sum(1:1000)
fill!(out, 0)
@cuda threads=256 blocks=cld(length(x), 256) warp_sum!(out, x)
@test Array(out)[1] == sum(1:1000)
println("reductions: ", Array(out)[1], " on ", CuMem.device_name())

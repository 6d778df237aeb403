# CUDA.jl's introduction tutorial ("Introduction": writing your first GPU kernel), ported to
# CuMem: the same kernels, unchanged but for `using CuMem`. Runs on a GPU and on the host
# device (no GPU): docs/kernels.md explains each step.
#
#   CUMEM_DEVICE=host julia --project=. examples/julia/kernels/tutorial.jl

using CuMem, Test

N = 2^20
x_d = CuMem.fill(1.0f0, N)   # a vector stored on the GPU filled with 1.0 (Float32)
y_d = CuMem.fill(2.0f0, N)   # a vector stored on the GPU filled with 2.0

# 1. one thread does everything
function gpu_add1!(y, x)
    for i = 1:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
fill!(y_d, 2)
@cuda gpu_add1!(y_d, x_d)
@test all(Array(y_d) .== 3.0f0)

# 2. one block of threads, each taking every blockDim().x-th element
function gpu_add2!(y, x)
    index = threadIdx().x    # this example only requires linear indexing, so just use `x`
    stride = blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
fill!(y_d, 2)
@cuda threads=256 gpu_add2!(y_d, x_d)
@test all(Array(y_d) .== 3.0f0)

# 3. many blocks: a grid-stride loop
function gpu_add3!(y, x)
    index = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    stride = gridDim().x * blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
numblocks = ceil(Int, N / 256)
fill!(y_d, 2)
@cuda threads=256 blocks=numblocks gpu_add3!(y_d, x_d)
@test all(Array(y_d) .== 3.0f0)

# 4. compile first, ask the occupancy API for the launch shape, then launch
kernel = @cuda launch=false gpu_add3!(y_d, x_d)
config = launch_configuration(kernel.fun)
threads = min(N, config.threads)
blocks = cld(N, threads)
fill!(y_d, 2)
kernel(y_d, x_d; threads, blocks)
@test all(Array(y_d) .== 3.0f0)

# 5. printing from a kernel
function gpu_add2_print!(y, x)
    index = threadIdx().x
    stride = blockDim().x
    @cuprintln("thread $index, block $stride")
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
@cuda threads=16 gpu_add2_print!(y_d, x_d)
synchronize()

# 6. errors: an out-of-bounds access throws a BoundsError at the next synchronization
function gpu_add_oob!(y, x)
    i = threadIdx().x
    y[i+1] += x[i]          # no @inbounds: checked
    return nothing
end
small_x, small_y = CuMem.fill(1f0, 4), CuMem.fill(2f0, 4)
@cuda threads=4 gpu_add_oob!(small_y, small_x)
@test_throws BoundsError synchronize()
println("tutorial: all steps ran on ", CuMem.device_name())

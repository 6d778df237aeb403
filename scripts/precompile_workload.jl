# What users call first, run on the host device to list the CuMem methods it compiles
# (scripts/gen-precompile.sh turns the list into julia/compute/precompile_ops.jl):
#   CUMEM_DEVICE=host julia --project=. --trace-compile=FILE scripts/precompile_workload.jl
# It is also the default workload of CuMem.create_sysimage (julia/tools/sysimage.jl), run
# there on the device present, so the last block repeats bench/julia/first_result.jl's
# ten first operations with its sizes (some operations choose their kernels by size).
using CuMem, LinearAlgebra, Statistics, Random
# Each block on its own: where one operation fails on a device, the rest are still run and
# recorded (the error is printed, in create_sysimage's log when its build fails for another reason).
function run_block(f, what)
    try
        f()
    catch err
        @error "precompile workload: $what failed" exception = (err, catch_backtrace())
    end
end
for T in (Float32, Float64, Int64, Int32); run_block("element type $T") do
    x = CuArray(rand(T, 256)); y = CuArray(rand(T, 256))
    A = CuArray(rand(T, 16, 16))
    x .+ y; x .- y; x .* y; x .+ one(T); one(T) .* x; x .* y .+ x
    y .= x .+ y; y .= one(T) .* x .+ y; A .+ A; A .* one(T)
    T <: AbstractFloat && (x ./ y; sqrt.(abs.(x)); exp.(x); x .^ 2)
    sum(x); maximum(x); minimum(x); prod(x); sum(A; dims = 1); sum(A; dims = 2); maximum(A; dims = 1)
    mapreduce(abs, +, x); mapreduce(abs, max, A; dims = 2); sum(abs2, x)
    any(x .> zero(T)); count(x .> zero(T)); findall(x .> zero(T))
    cumsum(x); cumsum(A; dims = 1); sort(x); sortperm(x); sort(A; dims = 1)
    copy(x); copyto!(similar(x), x); Array(x); fill!(similar(x), one(T)); x[1:4]
    T <: AbstractFloat && (mean(x); mean(A; dims = 2); std(x); v = CuArray(rand(T, 16)); A * A; A' * A; A * v; qr(A); lu(A); A \ v)
    sprint(show, x); sprint(show, MIME"text/plain"(), A)
end; end
run_block("random numbers, cu, CuIterator") do
    CuMem.rand(Float32, 16); CuMem.randn(Float32, 16); CuMem.rand(Float64, 4, 4); CuMem.zeros(Float32, 4); CuMem.ones(Float32, 4, 4)
    cu(rand(4)); cu(rand(Float32, 4, 4))
    for b in CuIterator([(rand(Float32, 4), rand(Float32, 4)) for _ in 1:2]); sum(b[1]); end
end
# bench/julia/first_result.jl's `ten` row, as it runs them
run_block("the ten first operations") do
    x = CuArray(rand(Float32, 1024)); y = CuArray(rand(Float32, 1024)); A = CuArray(rand(Float32, 64, 64))
    b = CuArray(rand(Bool, 1024))
    x .+ y; sum(x); A * A; sort(x); qr(A); maximum(A; dims = 1); cumsum(x); findall(b)
    CuMem.rand(Float32, 1024); mean(A; dims = 2); sortperm(x); x .* 2f0 .+ y; sum(A; dims = 1)
    copy(x); Array(x); CuMem.zeros(Float32, 1024); CuMem.fill(1f0, 1024); CuMem.randn(Float32, 64, 64)
    CuMem.synchronize()
end

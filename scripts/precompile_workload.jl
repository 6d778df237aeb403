# What users call first, run on the host device to list the CuMem methods it compiles
# (scripts/gen-precompile.sh turns the list into julia/compute/precompile_ops.jl):
#   CUMEM_DEVICE=host julia --project=. --trace-compile=FILE scripts/precompile_workload.jl
using CuMem, LinearAlgebra, Statistics, Random
for T in (Float32, Float64, Int64, Int32)
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
end
CuMem.rand(Float32, 16); CuMem.randn(Float32, 16); CuMem.rand(Float64, 4, 4); CuMem.zeros(Float32, 4); CuMem.ones(Float32, 4, 4)
cu(rand(4)); cu(rand(Float32, 4, 4))
for b in CuIterator([(rand(Float32, 4), rand(Float32, 4)) for _ in 1:2]); sum(b[1]); end

# A small workload of every kernel family that uses shared memory, barriers or atomics, for
# compute-sanitizer (bench/gpu/run.sh sanitize): sorts and sortperm, scans, reductions over
# dimensions and whole arrays, findall, a fused broadcast with a throw site, and a user
# kernel with shared memory and barriers. Each result is checked against Base.
using CuMem, Test, Random
CuMem.allowscalar(false)

function sanitize_reduce_block!(out, x)
    sh = CuStaticSharedArray(Float32, 256)
    t = threadIdx().x
    i = (blockIdx().x - 1) * blockDim().x + t
    sh[t] = i <= length(x) ? x[i] : 0f0
    sync_threads()
    s = blockDim().x ÷ 2
    while s > 0
        if t <= s
            sh[t] += sh[t+s]
        end
        sync_threads()
        s ÷= 2
    end
    t == 1 && (out[blockIdx().x] = sh[1])
    return nothing
end

# Each family prints a line when it starts and when it ends (flushed at once): a run that the
# sanitize suite's time limit stops shows in its log which family it was in.
function family(f, name, n)
    println("sanitize_workload: n = $n, $name ..."); flush(stdout)
    t = time()
    f()
    println("sanitize_workload: n = $n, $name done ($(round(time() - t; digits = 1)) s)"); flush(stdout)
    return nothing
end

@testset "kernels under compute-sanitizer" begin
    rng = MersenneTwister(7)
    for n in (1000, 70_000)
        x = rand(rng, Float32, n)
        k = rand(rng, Int32, n)
        cx, ck = CuArray(x), CuArray(k)
        family("sort", n) do
            @test Array(sort(cx)) == sort(x)
            @test Array(sort(ck; rev = true)) == sort(k; rev = true)
        end
        family("sortperm", n) do
            @test Array(sortperm(cx)) == sortperm(x)
        end
        family("scans (cumsum, accumulate)", n) do
            @test Array(cumsum(ck)) == cumsum(k)
            @test Array(accumulate(max, cx)) == accumulate(max, x)
        end
        family("reductions (dims, whole array)", n) do
            X = reshape(x[1:900], 30, 30)
            @test Array(sum(CuArray(X); dims = 1)) ≈ sum(X; dims = 1)
            @test Array(maximum(CuArray(X); dims = 2)) == maximum(X; dims = 2)
            @test sum(ck) == sum(k)
        end
        family("findall", n) do
            @test Array(findall(cx .> 0.5f0)) == findall(x .> 0.5f0)
        end
        family("broadcast", n) do
            @test Array(sqrt.(cx) .* 2f0 .+ cx ./ 3f0) ≈ sqrt.(x) .* 2f0 .+ x ./ 3f0
        end
        # every element throws: the error record's claim (julia/cuda/prelude.cuh)
        family("broadcast whose every element throws", n) do
            @test_throws DomainError Array(sqrt.(cx .- 2f0))
        end
        family("user kernel (shared memory, barriers)", n) do
            out = CuArray(zeros(Float32, cld(n, 256)))
            @cuda threads=256 blocks=cld(n, 256) sanitize_reduce_block!(out, cx)
            @test sum(Array(out)) ≈ sum(x) rtol = 1e-4
        end
    end
end

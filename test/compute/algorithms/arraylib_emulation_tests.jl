# The GPU path of issue 24's kernels (scans, radix and bitonic sorts, compaction, gathers,
# scatters, and the reductions they call) run on the CPU: each CUDA C source is compiled by
# g++ with the CUDA built-ins it uses emulated - every thread of a block is a fiber,
# `__shared__` memory is shared by them, `__syncthreads` is a barrier of the block,
# `__match_any_sync`/`__shfl_down_sync` go through a barrier of the warp - and launched with
# the arguments the GPU path marshals. Blocks run one after another. This checks the
# block-level algorithms (tile scans, ranks of equal radix digits, bitonic steps) against
# Base without a GPU. Run by runtests.jl when g++ (C++20) is found; this process pretends
# not to be on the host device, as test/kernel_emulation_tests.jl does.
using CuMem, Libdl, Test, Random, Statistics
# The typed broadcast fast path (julia/compute/broadcast/fastpath.jl) cannot hold this file's stand-in
# kernels: the emulation runs the general path, which every broadcast takes on its first call.
CuMem.FAST_BROADCAST[] = false
CuMem.allowscalar(false)

include(joinpath(@__DIR__, "..", "emulation_threads.jl"))

same(a, b) = (a = a isa CuArray ? Array(a) : a; isequal(a, b) || (println(a[1:min(end, 20)], "\n !=\n", b[1:min(end, 20)]); false))

Random.seed!(2024)
@testset "issue 24 kernels, emulated" begin
    @testset "scans" begin
        for n in (1, 7, 2048, 2049, 5000)      # one tile, a tile and one element, three tiles
            h = rand(-3:3, n)
            @test same(cumsum(CuArray(h)), cumsum(h))
        end
        M = rand(-5:5, 4100, 3)
        @test same(cumsum(CuArray(M); dims = 1), cumsum(M; dims = 1))       # tiles per line, 3 lines
        @test same(cumsum(CuArray(M); dims = 2), cumsum(M; dims = 2))       # one thread per line
        @test same(accumulate(max, CuArray(M[:, 1]); init = 2), accumulate(max, M[:, 1]; init = 2))
        @test same(cumprod(CuArray(Float32.(M .% 2 .+ 1))[1:30]), cumprod(Float32.(M .% 2 .+ 1)[1:30]))
        @test same(cumsum(view(CuArray(M), 4100:-3:1, 2)), cumsum(M[4100:-3:1, 2]))
        @test same(cumsum(CuArray(Int8[100, 100, 100])), cumsum(Int8[100, 100, 100]))
    end
    @testset "radix sort" begin
        for T in (Float32, Float64, Float16, Int8, Int32, UInt64, Bool), n in (1, 100, 5000)
            h = T <: AbstractFloat ? T.(randn(n)) : rand(T, n)
            T <: AbstractFloat && n >= 4 && (h[1:4] .= T[NaN, -0.0, 0.0, -Inf])
            @test same(sort(CuArray(h)), sort(h))
            @test same(sort(CuArray(h); rev = true), sort(h; rev = true))
            @test same(sortperm(CuArray(h)), sortperm(h))
        end
        h = rand(-50:50, 3000)
        @test same(sort(CuArray(h); by = abs), sort(h; by = abs, alg = MergeSort))
        A = rand(Float32, 70, 9)
        @test same(sort(CuArray(A); dims = 1), sort(A; dims = 1))
        @test same(sort(CuArray(A); dims = 2), sort(A; dims = 2))
        @test same(unique(CuArray(h)), unique(h))
        @test same(median(CuArray(A); dims = 1), median(A; dims = 1))
    end
    @testset "bitonic sort" begin
        for n in (1, 2, 5, 64, 300)
            h = rand(-20:20, n)
            lt = (a, b) -> a % 5 < b % 5
            @test same(sort(CuArray(h); lt = lt), sort(h; lt = lt, alg = MergeSort))
            @test same(sortperm(CuArray(h); lt = lt, rev = true), sortperm(h; lt = lt, rev = true))
        end
    end
    @testset "compaction, find, gather, scatter" begin
        for n in (1, 33, 3000)
            h = rand(n) .> 0.6
            @test same(findall(CuArray(h)), findall(h))
            @test findfirst(CuArray(h)) == findfirst(h) && findlast(CuArray(h)) == findlast(h)
        end
        M = rand(20, 7) .> 0.5
        @test same(findall(CuArray(M)), findall(M))
        x = rand(Float32, 50)
        d = CuArray(x)
        @test same(d[d .> 0.5f0], x[x .> 0.5f0])
        @test same(d[CuArray([3, 1, 50, 3])], x[[3, 1, 50, 3]])
        d[d .> 0.5f0] .= 0f0; x[x .> 0.5f0] .= 0f0
        @test same(d, x)
        d[CuArray([1, 2])] = CuArray(Float32[7, 8]); x[[1, 2]] = [7, 8]
        @test same(d, x)
        @test_throws BoundsError d[CuArray([51])]
    end
    @test LAUNCHES[] > 100      # the GPU path ran
end

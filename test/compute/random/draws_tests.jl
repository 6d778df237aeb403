# The random API beyond rand/randn (julia/compute/random/draws.jl): every form through
# CuMem.default_rng(), Random.seed! reaching CuMem's generator, randexp, rand_logn!,
# rand_poisson!, randperm, shuffle/shuffle!, and the errors CUDA.jl gives.
using CuMem, Test, Random
CuMem.allowscalar(false)

@testset "random draws" begin
    rng = CuMem.default_rng()

    @testset "rand/randn through the RNG give CuArrays" begin
        @test rand(rng, Float32, 4) isa CuVector{Float32}
        @test randn(rng, Float32, 4) isa CuVector{Float32}
        @test rand(rng, Float64, 2, 3) isa CuMatrix{Float64}
        @test randn(rng, Float16, (2, 2)) isa CuMatrix{Float16}
        @test rand(rng, 4) isa CuVector{Float64}             # Base: rand(rng, dims) is Float64
        @test randn(rng, 2, 2) isa CuMatrix{Float64}
        @test rand(rng, ComplexF32, 3) isa CuVector{ComplexF32}
        @test rand(rng, Float32) isa Float32 && 0 <= rand(rng, Float32) < 1
        @test rand(rng) isa Float64
        @test randn(rng, Float64) isa Float64
        r = rand(rng, 1:6, 1000)
        @test r isa CuVector{Int} && all(v -> 1 <= v <= 6, Array(r))
    end

    @testset "Random.seed! and CuMem.seed!()" begin
        # Random.seed! reaches a generator without a seed of its own (CuMem.seed!'s docstring);
        # files run before this one in the same process may have given it one
        lock(() -> (CuMem.RNG_STATE.seeded = false), CuMem.RNG_LOCK)
        Random.seed!(1); a = Array(CuMem.rand(100)); b = Array(rand(rng, Float32, 100))
        Random.seed!(1)
        @test Array(CuMem.rand(100)) == a
        @test Array(rand(rng, Float32, 100)) == b
        @test a != b
        CuMem.seed!()                       # from entropy: a sequence of its own
        x = Array(CuMem.rand(100))
        CuMem.seed!(7); y = Array(CuMem.rand(100)); CuMem.seed!(7)
        @test Array(CuMem.rand(100)) == y && x != y
        Random.seed!(rng, 7)
        @test Array(CuMem.rand(100)) == y
    end

    @testset "randexp" begin
        e = Array(CuMem.randexp(Float64, 20_000))
        @test all(>=(0), e)
        @test abs(sum(e) / length(e) - 1) < 0.05
        x = CuArray{Float32}(undef, 3, 3)
        @test randexp!(x) === x && all(>=(0), Array(x))
        @test Random.randexp!(rng, x) === x
        @test randexp(rng, Float32, 5) isa CuVector{Float32}
        @test_throws ErrorException randexp!(CuArray{Int}(undef, 2))
    end

    @testset "rand_logn!, rand_poisson!" begin
        l = CuArray{Float64}(undef, 20_000)
        @test rand_logn!(l; mean = 1, stddev = 0.5) === l
        m = log.(Array(l))
        @test abs(sum(m) / length(m) - 1) < 0.02
        @test abs(sqrt(sum(abs2, m .- 1) / length(m)) - 0.5) < 0.02
        @test CuMem.rand_logn(2, 3) isa CuMatrix{Float32}
        for λ in (0.5, 4.0, 200.0)
            p = CuArray{UInt32}(undef, 20_000)
            @test rand_poisson!(p; lambda = λ) === p
            h = Float64.(Array(p))
            μ = sum(h) / length(h)
            @test abs(μ - λ) < 0.05 * λ + 0.02
            @test abs(sum(abs2, h .- μ) / length(h) - λ) < 0.1 * λ + 0.05   # variance λ
        end
        @test CuMem.rand_poisson(3) isa CuVector{UInt32}
        @test CuMem.rand_poisson(Int, 2, 2; lambda = 3) isa CuMatrix{Int}
        @test_throws ErrorException randn!(CuArray{UInt32}(undef, 10))
        @test_throws ErrorException rand_logn!(CuArray{UInt32}(undef, 10))
        @test_throws ErrorException rand_poisson!(CuArray{Float64}(undef, 10))
        @test_throws ArgumentError rand_poisson!(CuArray{Int}(undef, 10); lambda = -1)
    end

    @testset "randperm, shuffle, shuffle!" begin
        p = randperm(rng, 10)
        @test p isa CuVector{Int} && sort(Array(p)) == 1:10
        @test length(randperm(rng, 0)) == 0
        x = CuArray(1:10)
        s = shuffle(rng, x)
        @test s isa CuVector{Int} && sort(Array(s)) == 1:10 && Array(x) == 1:10
        @test sort(Array(shuffle(x))) == 1:10
        y = CuArray(collect(1.0:100.0))
        @test shuffle!(rng, y) === y && sort(Array(y)) == 1:100 && Array(y) != 1:100
        @test sort(vec(Array(shuffle(CuArray(reshape(1:12, 3, 4)))))) == 1:12
        @test shuffle!(y) === y
    end
end

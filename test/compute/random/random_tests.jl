# GPU random numbers: Philox4x32-10 against the published known answers, reproducibility
# under seed!, ranges and rough distributions, under allowscalar(false).
using CuMem, Test, Random
CuMem.allowscalar(false)

@testset "random" begin
    @testset "Philox4x32-10 known answers (Random123 kat_vectors)" begin
        z = UInt32(0)
        @test CuMem.philox4x32_10(z, z, z, z, z, z) == (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)
        f = typemax(UInt32)
        @test CuMem.philox4x32_10(f, f, f, f, f, f) == (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)
        @test CuMem.philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0) ==
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)
    end

    @testset "CuMem.rand is the GPU generator" begin
        @test CuMem.rand(3) isa CuVector{Float32}        # not Base.rand
        @test CuMem.rand(Float64, 2, 3) isa CuMatrix{Float64}
        @test CuMem.randn(4) isa CuVector{Float32}
        @test CuMem.randn(Float16, (2, 2)) isa CuMatrix{Float16}
        @test CuMem.rand !== Base.rand
    end

    @testset "seed! reproduces, calls differ" begin
        CuMem.seed!(42)
        a, b = Array(CuMem.rand(1000)), Array(CuMem.randn(Float64, 1001))
        CuMem.seed!(42)
        @test Array(CuMem.rand(1000)) == a
        @test Array(CuMem.randn(Float64, 1001)) == b
        @test Array(CuMem.rand(1000)) != a           # the next call draws new numbers
        CuMem.seed!(43)
        @test Array(CuMem.rand(1000)) != a
        # the first element of a seeded draw, computed here from Philox (same bits on every device)
        CuMem.seed!(5)
        w = CuMem.philox4x32_10(UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(5), UInt32(0))
        @test Array(CuMem.rand(UInt32, 4)) == collect(w)
    end

    @testset "ranges and moments, $T" for T in (Float16, Float32, Float64)
        u = Array(CuMem.rand(T, 20_000))
        @test all(v -> 0 <= v < 1, u)
        @test abs(sum(Float64, u) / length(u) - 0.5) < 0.02
        n = Array(CuMem.randn(T, 20_001))
        m = sum(Float64, n) / length(n)
        @test abs(m) < 0.05
        @test abs(sum(v -> (Float64(v) - m)^2, n) / length(n) - 1) < 0.05
    end

    @testset "integers, Bool, rand!, randn!" begin
        i = Array(CuMem.rand(Int8, 10_000))
        @test minimum(i) < -100 && maximum(i) > 100
        b = Array(CuMem.rand(Bool, 10_000))
        @test 4500 < count(b) < 5500
        x = CuArray{Float32}(undef, 5, 7)
        @test rand!(x) === x && all(v -> 0 <= v < 1, Array(x))
        @test randn!(x) === x
        @test_throws ErrorException randn!(CuArray{Int}(undef, 3))
        @test size(CuMem.rand(0)) == (0,)
    end
end

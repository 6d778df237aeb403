# The GPU path of the reduction-like kernel families - mapreduce with and without dims (warp
# shuffles, shared memory, the two-pass reduction of long outputs, 16-byte vector loads),
# count/any/all, findmax/findmin, the three-phase scans of accumulate, the bitonic sort of
# compiled `lt`/`by` - with their element functions and operators compiled from Julia's typed
# IR, run on g++ threads (test/compute/emulation_threads.jl) and compared with Base. The same
# cases run on the host device's path in test/compute/reduce/mapreduce_tests.jl
# (test/compute/reduce/reduce_cases.jl). Run by runtests.jl when g++ (C++20) is found.
using CuMem, Test, Random
CuMem.allowscalar(false)

include(joinpath(@__DIR__, "..", "emulation_threads.jl"))
include(joinpath(@__DIR__, "reduce_cases.jl"))

@testset "reductions, scans, findmax, sorts: emulated" begin
    reduce_cases()
    dims_slot_cases()
    reduce_redefinition_case(@__MODULE__)
    @testset "known operators over every layout" begin
        for T in (Int8, Int32, UInt64, Float16, Float32, Float64, Bool)
            x = T === Bool ? Base.rand(Bool, 70) : T <: AbstractFloat ? T.(Base.rand(Float32, 70) .- 0.5f0) : Base.rand(T(0):T(9), 70)
            a = CuArray(x)
            @test red_close(sum(a), sum(x))
            @test red_close(maximum(a), maximum(x)) && red_close(minimum(a), minimum(x))
            T === Bool || @test red_close(prod(a[1:9]), prod(x[1:9]))
            X = reshape(x, 7, 10)
            for dims in (1, 2, (1, 2))
                @test red_close(sum(CuArray(X); dims = dims), sum(X; dims = dims))
            end
            @test red_close(sum(view(CuArray(X), 2:6, 1:3:10); dims = 2), sum(view(X, 2:6, 1:3:10); dims = 2))
        end
        # long vectors: several blocks per output (two passes), vector loads from aligned
        # starts, single loads from a view one element in
        v = Base.rand(Float32, 40_003) .- 0.5f0
        dv = CuArray(v)
        @test red_close(sum(dv), sum(v))
        @test red_close(sum(view(dv, 2:40_003)), sum(view(v, 2:40_003)))
        @test red_close(maximum(abs, dv), maximum(abs, v))
        @test red_close(sum(CuArray(reshape(v[1:40_000], 10_000, 4)); dims = 1), sum(reshape(v[1:40_000], 10_000, 4); dims = 1))
        @test red_close(reduce(+, CuArray(Int16[1, 2, 3]); init = Int16(5)), reduce(+, Int16[1, 2, 3]; init = Int16(5)))
        @test red_close(sum(CuArray(Int8[100, 100, 100])), sum(Int8[100, 100, 100]))      # widened as Base
    end
    @testset "whole arrays in one kernel (reduce_full.jl): one and two arrays" begin
        n0 = LAUNCHES[]
        for T in (Float32, Float64, Int32, Float16)
            x, y = T.(Base.rand(-4:4, 9001)), T.(Base.rand(-4:4, 9001))
            a, b = CuArray(x), CuArray(y)
            @test red_close(sum(a), sum(x)) && red_close(maximum(a), maximum(x))
            T === Float16 && continue
            @test red_close(mapreduce(*, +, a, b), mapreduce(*, +, x, y))
            @test red_close(mapreduce(-, max, a, b), mapreduce(-, max, x, y))
            @test red_close(mapreduce((p, q) -> p * q + one(p), +, a, b), mapreduce((p, q) -> p * q + one(p), +, x, y))
            @test red_close(mapreduce(*, +, view(a, 2:9001), view(b, 1:9000)), mapreduce(*, +, x[2:9001], y[1:9000]))
        end
        x, y = Base.rand(Float32, 5003), Base.rand(Float32, 5003)
        @test red_close(CuMem.LinearAlgebra.dot(CuArray(x), CuArray(y)), CuMem.LinearAlgebra.dot(x, y))
        @test LAUNCHES[] > n0 + 20
        # a throw in f: Base's exception after the one wait, and the next reduction is clean
        @test_throws DomainError sum(v -> sqrt(v - 2f0), CuArray(Float32[1, 2, 3]))
        @test_throws InexactError mapreduce((p, q) -> Int32(p * q), +, CuArray(Float32[1, 2]), CuArray(Float32[0.5, 1]))
        @test sum(CuArray(Float32[1, 2, 3])) === 6f0
    end
    @test LAUNCHES[] > 50       # the GPU path ran
end

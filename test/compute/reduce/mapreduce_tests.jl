# Reductions against Base on Array, under allowscalar(false).
using CuMem, Test, Random
CuMem.allowscalar(false)
Base.include(@__MODULE__, joinpath(@__DIR__, "reduce_cases.jl"))        # shared with reduce_emulation_tests.jl (the generated C on g++ threads)
Random.seed!(11)

function same(r, e)
    r = r isa CuArray ? Array(r) : r
    typeof(r) === typeof(e) || return false
    r isa AbstractArray && size(r) != size(e) && return false
    eltype(e) <: AbstractFloat || return isequal(r, e)
    return all(isapprox.(r, e; rtol = eltype(e) === Float16 ? 1e-2 : sqrt(eps(eltype(e))), nans = true))
end

@testset "mapreduce" begin
    @testset "full reductions, $T" for T in (Bool, Int8, Int32, Int64, UInt8, UInt64, Float16, Float32, Float64)
        x = T <: AbstractFloat ? T.(Base.rand(Float32, 37) .- 0.5f0) : Base.rand(T, 37)
        a = CuArray(x)
        @test same(sum(a), sum(x))
        @test same(maximum(a), maximum(x))
        @test same(minimum(a), minimum(x))
        T <: AbstractFloat && @test same(prod(a .+ T(1)), prod(x .+ T(1)))
        @test same(sum(abs2, a), sum(abs2, x))
    end

    # Long contiguous reductions take 16-byte loads when the start is 16-byte aligned and
    # single loads otherwise: views starting 0-3 elements in, lengths leaving every tail.
    @testset "long contiguous sums, $T" for T in (Int32, UInt64, Float32, Float64)
        x = T <: AbstractFloat ? T.(Base.rand(Float32, 300_007) .- 0.5f0) : Base.rand(T(0):T(1000), 300_007)
        a = CuArray(x)
        for s in 1:4, n in (299_990, 299_991, 299_992, 299_993, 300_007 - s + 1)
            r = s:min(n + s - 1, 300_007)
            @test same(sum(view(a, r)), sum(view(x, r)))
        end
        @test same(sum(a), sum(x))
        @test same(sum(abs2, a), sum(abs2, x))
        @test same(maximum(a), maximum(x))
    end

    @testset "dims, views, init" begin
        for sz in ((5, 7), (4, 1, 6), (3, 4, 5), (1, 9), (6,))
            x = Base.rand(Float32, sz...)
            a = CuArray(x)
            for dims in (1, 2, 3, (1, 2), (1, 3), (2, 3), 5, :)
                @test same(sum(a; dims = dims), sum(x; dims = dims))
                @test same(maximum(a; dims = dims), maximum(x; dims = dims))
            end
        end
        x = Base.rand(Int16, 6, 8)
        a = CuArray(x)
        @test same(sum(a; dims = 2), sum(x; dims = 2))           # widened to Int as Base
        @test same(minimum(view(a, 2:5, 1:2:7); dims = 1), minimum(view(x, 2:5, 1:2:7); dims = 1))
        @test same(sum(a'; dims = 1), sum(x'; dims = 1))
        @test same(reduce(+, a; init = Int16(3)), reduce(+, x; init = Int16(3)))
        @test same(reduce(max, a; dims = 1, init = typemin(Int16)), reduce(max, x; dims = 1, init = typemin(Int16)))
        @test same(mapreduce(v -> v % 7, +, a; dims = 2), mapreduce(v -> v % 7, +, x; dims = 2))
        f = Base.rand(Float32, 300, 2)
        @test same(sum(CuArray(f); dims = 1), sum(f; dims = 1))
        # a user operator needs init (a neutral element)
        myop(p, q) = p + 2q
        @test same(mapreduce(identity, (p, q) -> p + q, CuArray(f); init = 0f0), mapreduce(identity, +, f; init = 0f0))
        @test_throws ArgumentError mapreduce(identity, myop, CuArray(f))
        # NaN propagates through maximum as in Base
        n = Float32[1, NaN, 3]
        @test same(maximum(CuArray(n)), maximum(n))
    end

    @testset "large (several blocks per output)" begin
        x = Base.rand(Float32, 300_000)
        a = CuArray(x)
        @test sum(a) ≈ sum(x)
        @test maximum(a) == maximum(x)
        X = reshape(x, 100_000, 3)
        @test same(sum(CuArray(X); dims = 1), sum(X; dims = 1))
    end

    @testset "any, all, count" begin
        m = Base.rand(Bool, 6, 5)
        d = CuArray(m)
        @test any(d) == any(m) && all(d) == all(m)
        @test all(CuArray(trues(4))) && !any(CuArray(falses(4)))
        @test count(d) == count(m)
        @test same(any(d; dims = 1), any(m; dims = 1))
        @test same(all(d; dims = 2), all(m; dims = 2))
        x = Base.rand(Float32, 50)
        @test count(v -> v > 0.5f0, CuArray(x)) == count(v -> v > 0.5f0, x)
        @test any(v -> v > 0.99f0, CuArray(x)) == any(v -> v > 0.99f0, x)
        @test same(count(d; dims = 1), count(m; dims = 1))
    end

    @testset "empty arrays" begin
        e = CuArray(Float32[])
        @test sum(e) === 0f0
        @test prod(e) === 1f0
        @test_throws ArgumentError maximum(e)
        @test reduce(max, e; init = -1f0) === -1f0
        @test same(sum(CuMem.zeros(Float32, 0, 3); dims = 1), sum(zeros(Float32, 0, 3); dims = 1))
        @test same(sum(CuMem.zeros(Float32, 3, 0); dims = 1), sum(zeros(Float32, 3, 0); dims = 1))
        @test !any(CuArray(Bool[])) && all(CuArray(Bool[]))
    end


    @testset "findmax, findmin, argmax, argmin" begin
        x = Float32[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 9]
        a = CuArray(x)
        @test findmax(a) == findmax(x) && findmin(a) == findmin(x)
        @test argmax(a) == argmax(x) && argmin(a) == argmin(x)
        n = Float32[1, NaN, 3, NaN]
        @test isequal(findmax(CuArray(n)), findmax(n))
        M = Base.rand(Int16, 5, 6)
        d = CuArray(M)
        @test findmax(d) == findmax(M)
        for dims in (1, 2, (1, 2))
            v, i = findmax(d; dims = dims)
            ev, ei = findmax(M; dims = dims)
            @test Array(v) == ev && Array(i) == ei
            v, i = findmin(d; dims = dims)
            ev, ei = findmin(M; dims = dims)
            @test Array(v) == ev && Array(i) == ei
        end
        @test Array(argmax(d; dims = 2)) == argmax(M; dims = 2)
        @test_throws ArgumentError findmax(CuArray(Float32[]))
    end

    @testset "cumsum, cumprod" begin
        for T in (Int8, Int64, Float32, Float64)
            x = T <: Integer ? T.(Base.rand(-3:3, 2000)) : Base.rand(T, 2000)
            @test same(cumsum(CuArray(x)), cumsum(x))
        end
        y = Base.rand(Float64, 30) .+ 0.5
        @test same(cumprod(CuArray(y)), cumprod(y))
        @test same(cumsum(view(CuArray(y), 30:-2:1)), cumsum(view(y, 30:-2:1)))
        @test same(cumsum(CuArray(Float32[])), cumsum(Float32[]))
    end

    @testset "two arrays (one kernel on a GPU)" begin
        for T in (Float32, Float64, Int32)
            x, y = T.(Base.rand(-4:4, 9, 5)), T.(Base.rand(-4:4, 9, 5))
            a, b = CuArray(x), CuArray(y)
            @test same(mapreduce(*, +, a, b), mapreduce(*, +, x, y))
            @test same(mapreduce(-, max, a, b), mapreduce(-, max, x, y))
            @test same(mapreduce((p, q) -> p * q + one(p), +, a, b), mapreduce((p, q) -> p * q + one(p), +, x, y))
            @test same(mapreduce(*, +, a, b; dims = 1), mapreduce(*, +, x, y; dims = 1))
            @test same(mapreduce(*, +, view(a, 2:9, :), view(b, 1:8, :)), mapreduce(*, +, x[2:9, :], y[1:8, :]))
        end
        # arrays of different lengths: as Base (map stops at the shortest)
        @test mapreduce(*, +, CuArray(Float32[1, 2]), CuArray(Float32[1, 2, 3])) == mapreduce(*, +, Float32[1, 2], Float32[1, 2, 3])
    end

    @testset "whole arrays: one kernel and a typed slot (reduce_full.jl)" begin
        a = CuArray(Float32.(1:1000))
        @test sum(a) === 500500f0
        @test maximum(a) === 1000f0 && minimum(a) === 1f0
        b = CuArray(ones(Float32, 3 * 10^6 + 5))            # every block of the grid, a tail
        @test sum(b) === Float32(3 * 10^6 + 5)
        @test sum(view(b, 2:length(b))) === Float32(3 * 10^6 + 4)   # not 16-byte aligned
        @test count(CuArray(Base.rand(Bool, 10^5)) .| true) == 10^5
        if !CuMem.on_host()                                  # the host device runs Base
            @test CuMem.full_slot_get(Tuple{typeof(identity),typeof(Base.add_sum),Float32}) !== nothing
            s = CuMem.kernel_cache_stats()
            @test sum(CuArray(Float32[1, 2, 3])) === 6f0
            @test CuMem.kernel_cache_stats() == s           # the slot: nothing looked up
        end
    end

    dims_slot_cases()

    @testset "wrappers: one strided description with the copies (compute/broadcast/layout.jl)" begin
        x = Base.rand(Float32, 6, 8)
        a = CuArray(x)
        g(v) = 2v - 1
        # reshapes of contiguous and non-contiguous views, permuted and transposed views
        for (d, h) in ((reshape(view(a, :, 2:5), 12, 2), reshape(view(x, :, 2:5), 12, 2)),
                       (reshape(view(a, :, 3), 2, 3), reshape(view(x, :, 3), 2, 3)),
                       (reshape(view(a, 2:3, 2:5), 4, 2), reshape(view(x, 2:3, 2:5), 4, 2)),
                       (PermutedDimsArray(view(a, 2:5, 1:2:7), (2, 1)), PermutedDimsArray(view(x, 2:5, 1:2:7), (2, 1))),
                       (transpose(view(a, 2:4, :)), transpose(view(x, 2:4, :))),
                       (view(transpose(a), 2:5, 1:3), view(transpose(x), 2:5, 1:3)))
            for dims in (1, 2, (1, 2))
                @test same(sum(g, d; dims = dims), sum(g, h; dims = dims))
                @test same(maximum(d; dims = dims), maximum(h; dims = dims))
            end
            @test same(sum(g, d), sum(g, h))
        end
        # one layout for kernels and copies: a reshaped contiguous view is read in place (the
        # view is itself a CuArray sharing a's memory, as in CUDA.jl: its data starts 6
        # elements into a's)
        b, off, sz, st = CuMem.layout(reshape(view(a, :, 2:3), :))
        @test pointer(b) + off * sizeof(Float32) == pointer(a) + 6 * sizeof(Float32) && sz == [12] && st == [1]
        b, off, sz, st = CuMem.layout(transpose(view(a, 2:3, 1:2:5)))
        @test b === a && off == 1 && sz == [3, 2] && st == [12, 1]
        # what kernels cannot index in place: an ArgumentError from the layout
        @test_throws ArgumentError CuMem.layout(view(a, [1, 3], :))
        @test_throws ArgumentError CuMem.layout(reshape(view(a, 1:2, :), :))
        # a reduction over an index-vector view is refused (broadcasts gather it first)
        @test_throws ArgumentError sum(view(a, [1, 3, 6], :); dims = 2)
        @test same(sum(view(a, [1, 3, 6], :) .+ 0f0; dims = 2), sum(view(x, [1, 3, 6], :); dims = 2))
    end

    @testset "errors and cache" begin
        a = CuArray(Float32[1, 2, 3])
        @test sum(v -> v > 1 ? v : 0f0, a) === 5f0        # branches compile (issue 23)
        sum(a)
        s = CuMem.kernel_cache_stats()
        sum(CuArray(Float32[4, 5]))
        @test CuMem.kernel_cache_stats().misses == s.misses
    end

    reduce_cases()
    reduce_redefinition_case(@__MODULE__)
end

# Base and Statistics functions with device versions (julia/compute/algorithms/basefuncs.jl)
# against Base on host copies, under allowscalar(false); the scalar-indexing error's text.
using CuMem, Test, Random, Statistics
CuMem.allowscalar(false)

# a caller's own loop: its frames are not a library's, so the message is the generic one
LinearAlgebra_like_sum(a) = (s = zero(eltype(a)); for i in eachindex(a); s += a[i]; end; s)

@testset "Base functions without scalar indexing" begin
    h = Float32[3, 1, 4, 1, 5, 9, 2, 6]
    x = CuArray(h)

    @testset "in, hash" begin
        @test (4f0 in x) && !(7f0 in x)
        @test 4 in x                                    # == across types, as Base
        @test (1f0 in view(x, 3:8)) && !(3f0 in view(x, 2:8))
        @test hash(x) == hash(h) && hash(x, UInt(7)) == hash(h, UInt(7))
        @test hash(x) != hash(CuArray(h .+ 1))
        @test isequal(x, copy(x)) && hash(x) == hash(copy(x))
    end

    @testset "filter" begin
        @test Array(filter(v -> v > 2, x)) == filter(v -> v > 2, h)
        m = reshape(Int32.(1:12), 3, 4)
        @test Array(filter(isodd, CuArray(m))) == filter(isodd, m)
        @test length(filter(v -> v > 100, x)) == 0
    end

    @testset "replace, replace!" begin
        @test Array(replace(x, 1f0 => 0f0, 9f0 => -1f0)) == replace(h, 1f0 => 0f0, 9f0 => -1f0)
        r = replace(CuArray([1, 2, 3]), 2 => 2.5)                 # promotes as Base
        @test r isa CuVector{Float64} && Array(r) == replace([1, 2, 3], 2 => 2.5)
        @test Array(replace(v -> 2v, x)) == replace(v -> 2v, h)
        y = copy(x)
        @test replace!(y, 1f0 => 7f0) === y && Array(y) == replace(h, 1f0 => 7f0)
        @test Array(replace(CuArray([NaN, 1.0]), NaN => 0.0)) == [0.0, 1.0]   # isequal, as Base
        @test_throws ArgumentError replace(x, 1f0 => 0f0; count = 1)
    end

    @testset "searchsortedfirst/last, searchsorted" begin
        s = sort(h)
        cs = CuArray(s)
        for v in (0f0, 1f0, 2f0, 5.5f0, 9f0, 10f0)
            @test searchsortedfirst(cs, v) == searchsortedfirst(s, v)
            @test searchsortedlast(cs, v) == searchsortedlast(s, v)
            @test searchsorted(cs, v) == searchsorted(s, v)
        end
        rs = sort(h; rev = true)
        @test searchsortedfirst(CuArray(rs), 4f0; rev = true) == searchsortedfirst(rs, 4f0; rev = true)
        @test searchsortedlast(CuArray(rs), 1f0; rev = true) == searchsortedlast(rs, 1f0; rev = true)
        @test searchsortedfirst(cs, -3f0; by = abs) == searchsortedfirst(s, -3f0; by = abs)
    end

    @testset "quantile" begin
        for p in (0, 0.1, 0.25, 0.5, 0.9, 1)
            @test quantile(x, p) ≈ quantile(h, p)
        end
        @test quantile(x, [0.2, 0.8]) ≈ quantile(h, [0.2, 0.8])
        @test quantile(CuArray(sort(h)), 0.3; sorted = true) ≈ quantile(sort(h), 0.3; sorted = true)
        @test quantile(CuArray([5]), 0.5) == quantile([5], 0.5)
        @test_throws ArgumentError quantile(CuArray([1.0, NaN]), 0.5)
        @test_throws ArgumentError quantile(x, 1.5)
        @test_throws ArgumentError quantile(CuArray(Float32[]), 0.5)
    end

    @testset "reverse!(A; dims), resize!" begin
        A = rand(Float32, 3, 4)
        for d in (1, 2, :)
            B = CuArray(A)
            want = d isa Colon ? reshape(reverse(vec(A)), size(A)) : reverse(A; dims = d)  # (Julia 1.5 has no dims = :)
            @test reverse!(B; dims = d) === B && Array(B) == want
        end
        v = CuArray([1, 2, 3])
        # the two new elements are undefined (Base): read back only the kept three
        @test resize!(v, 5) === v && length(v) == 5 && copyto!(zeros(Int, 3), 1, v, 1, 3) == [1, 2, 3]
        @test Array(resize!(v, 2)) == [1, 2]
        @test length(resize!(v, 0)) == 0
        @test_throws ArgumentError resize!(v, -1)
        w = CuArray([1, 2, 3]); r = reshape(w, 3, 1)
        @test_throws ArgumentError resize!(w, 4)
        @test Array(w) == [1, 2, 3]
    end

    @testset "push!, append!" begin
        v = CuArray([1, 2, 3])
        @test push!(v, 4) === v && Array(v) == [1, 2, 3, 4]
        @test Array(push!(v, 5, 6.0)) == 1:6
        @test Array(append!(v, [7, 8])) == 1:8
        @test Array(append!(v, CuArray([9]))) == 1:9
        @test Array(append!(v, CuArray(Int32[10]))) == 1:10                 # converted
        @test Array(append!(v, view(CuArray(11:14), 1:2))) == 1:12
        @test Array(append!(v, (13, 14))) == 1:14
        w = CuArray([1, 2]); @test Array(append!(w, w)) == [1, 2, 1, 2]
        @test_throws InexactError push!(v, 1.5)
        @test length(v) == 14                                               # unchanged
        @test Array(append!(CuArray(Float32[]), 1:3)) == Float32[1, 2, 3]
        s = CuArray([1, 2]); r = reshape(s, 2, 1)
        @test_throws ArgumentError push!(s, 3)                              # shared memory: resize!'s rule
    end

    @testset "the scalar error names the function and the ways out" begin
        msg(f) = try f(); "" catch e; sprint(showerror, e) end
        m = msg(() -> x[1])
        @test startswith(m, "scalar getindex is disallowed") && occursin("@allowscalar", m) &&
              occursin("Array(x)", m)
        # a library function without a device version: named, with the way out
        m = msg(() -> LinearAlgebra_like_sum(x))
        @test startswith(m, "scalar getindex is disallowed")
        m = msg(() -> allunique(x))
        @test occursin("allunique (Base)", m) && occursin("Array(x)", m)
    end
end

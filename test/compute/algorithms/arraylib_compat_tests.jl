# The array library's remaining Base API on CuArrays (issue 24, found by GPUArrays.jl's test
# suite, bench/julia/gpuarrays_suite.jl), under allowscalar(false): in-place reductions
# (sum!, prod!, maximum!, minimum!, any!, all!, count!, mapreducedim!), reinterpret, block
# copies (copyto! with CartesianIndices and ranges), similar of a broadcast with dims, the
# empty-vector constructor, ranges in broadcasts, and GPUArrays 6's scalar-indexing API
# (allowscalar(allow, warn), allowscalar(f), @disallowscalar). Included by arraylib_tests.jl.

@testset "in-place reductions" begin
    h = rand(Float32, 4, 5, 3)
    d = CuArray(h)
    hb = h .> 0.5f0
    db = CuArray(hb)
    for rs in ((1, 1, 1), (4, 1, 1), (1, 5, 1), (1, 1, 3), (4, 5, 1), (4, 5, 3), (4,), (1, 5), (4, 5))
        for (f!, T, init) in ((sum!, Float32, 0), (prod!, Float32, 1), (maximum!, Float32, 0), (minimum!, Float32, 0))
            hr = fill(T(init), rs)
            dr = CuArray(hr)
            @test close_(f!(dr, d), f!(hr, h))
        end
        @test same(any!(CuArray(fill(false, rs)), db), any!(fill(false, rs), hb))
        @test same(all!(CuArray(fill(true, rs)), db), all!(fill(true, rs), hb))
        @test same(count!(CuArray(zeros(Int, rs)), db), count!(zeros(Int, rs), hb))
    end
    # init = false accumulates into R, as Base
    hr = fill(2f0, 1, 5, 3)
    @test close_(sum!(CuArray(hr), d; init = false), sum!(copy(hr), h; init = false))
    @test close_(Base.mapreducedim!(abs2, +, CuArray(hr), d), Base.mapreducedim!(abs2, +, copy(hr), h))
    @test close_(Base.reducedim!(*, CuArray(fill(1f0, 4)), d), Base.reducedim!(*, fill(1f0, 4), h))
    # integer inputs into a wider result
    hi = rand(Int32(1):Int32(9), 3, 4)
    @test same(sum!(CuArray(zeros(Int64, 3)), CuArray(hi)), sum!(zeros(Int64, 3), hi))
    # Base's errors
    r = CuArray(fill(7f0, 3, 1))
    @test_throws DimensionMismatch sum!(r, d)
    @test_throws DimensionMismatch sum!(CuArray(zeros(Float32, 1, 1, 1, 2)), d)
    # an empty input leaves R as initialised
    @test same(sum!(CuArray(fill(3f0, 1, 2)), CuArray(zeros(Float32, 0, 2))), zeros(Float32, 1, 2))
end

@testset "reinterpret" begin
    hc = rand(ComplexF32, 6, 2)
    dc = CuArray(hc)
    r = reinterpret(Float32, dc)
    @test r isa CuArray{Float32,2} && same(r, reinterpret(Float32, hc))
    @test same(reinterpret(ComplexF32, r), hc)
    u = reinterpret(UInt32, CuArray(Float32[1, -2]))
    @test same(u, reinterpret(UInt32, Float32[1, -2]))
    r .= 0f0                                   # shares the memory
    @test same(dc, zeros(ComplexF32, 6, 2))
    @test_throws ArgumentError reinterpret(Float64, CuArray(Float32[1, 2, 3]))
    @test_throws ArgumentError reinterpret(Vector{Int}, CuArray(Float32[1, 2]))
end

@testset "block copies" begin
    x = zeros(Float32, 10, 10); y = rand(Float32, 20, 10)
    a = CuArray(x); b = CuArray(y)
    r1 = CartesianIndices((1:7, 3:8)); r2 = CartesianIndices((4:10, 3:8))
    copyto!(x, r1, y, r2); copyto!(a, r1, b, r2)
    @test same(a, x)
    x2 = zeros(Float32, 10, 10)
    @test copyto!(x2, r1, b, r2) === x2 && x2 == x          # download
    fill!(a, 0f0)
    @test same(copyto!(a, r1, y, r2), x)                      # upload
    @test_throws ArgumentError copyto!(a, r1, b, CartesianIndices((4:11, 3:8)))
    @test_throws BoundsError copyto!(a, r1, b, CartesianIndices((15:21, 3:8)))
    @test same(a, x)
    xv = zeros(Float32, 10); yv = rand(Float32, 20)
    av = CuArray(xv)
    copyto!(xv, 1:7, yv, 4:10); copyto!(av, 1:7, CuArray(yv), 4:10)
    @test same(av, xv)
    @test_throws DimensionMismatch copyto!(av, 1:7, CuArray(yv), 4:11)
    @test_throws ArgumentError copyto!(av, 5:12, CuArray(yv), 4:11)
    # overlapping blocks of one array: as if the source were copied first
    hs = collect(Float32, 1:10); ds = CuArray(hs)
    copyto!(hs, CartesianIndices((3:10,)), copy(hs), CartesianIndices((1:8,)))
    copyto!(ds, CartesianIndices((3:10,)), ds, CartesianIndices((1:8,)))
    @test same(ds, hs)
end

@testset "constructors, similar of a broadcast" begin
    v = CuArray{Int,1}()
    @test v isa CuVector{Int} && length(v) == 0
    x = CuArray(rand(Float32, 7))
    s = similar(Broadcast.Broadcasted(*, (x, x)), Int32, (11, 15))
    @test s isa CuArray{Int32,2} && size(s) == (11, 15)
end

@testset "ranges in broadcasts" begin
    h = rand(Float32, 6); d = CuArray(h)
    @test same(d .* (1:6), h .* (1:6))
    @test same(d .* eachindex(d), h .* eachindex(h))
    @test same(d .+ range(0f0, 1f0; length = 6), h .+ range(0f0, 1f0; length = 6))
    @test same(d .+ LinRange(-1.0, 2.0, 6), h .+ LinRange(-1.0, 2.0, 6))
    @test same(d .* (6:-1:1), h .* (6:-1:1))
    labels = [2, 1, 4]
    @test same((1:4) .== CuArray(labels)', (1:4) .== labels')
    out = CuArray(zeros(Float32, 6))
    out .= (1:6) .* 2f0 .+ d
    @test same(out, (1:6) .* 2f0 .+ h)
    @test_throws DimensionMismatch d .* (1:5)
end

@testset "scalar indexing API (GPUArrays 6)" begin
    x = CuArray([0])
    @allowscalar begin
        CuMem.allowscalar(true, false)
        x[1] = 1
        @test x[1] == 1
        @disallowscalar begin
            @test_throws ErrorException x[1]
            @test_throws ErrorException x[1] = 1
        end
        x[1] = 2
        CuMem.allowscalar(false)                  # inside a scope: this task's setting
        @test_throws ErrorException x[1]
        @allowscalar(x[1] = 3)
        @test CuMem.allowscalar(() -> x[1]) == 3
        CuMem.allowscalar(true, true)
        @test_logs (:warn, r"Performing scalar operations") x[1]
        @test_logs x[1]
    end
    @test_throws ErrorException x[1]              # the process-wide policy, unchanged
    @test_throws ErrorException CuMem.allowscalar(() -> x[1], false)
    v = @allowscalar x[1]                          # assignments stay visible
    @test v == 3
end

@testset "clamp!, map over different shapes" begin
    h = rand(Float32, 5, 4) .* 4 .- 2; d = CuArray(h)
    @test clamp!(d, -1f0, 1f0) === d && same(d, clamp!(copy(h), -1f0, 1f0))
    hi = rand(Int32(-5):Int32(5), 7); di = CuArray(hi)
    @test same(clamp!(di, Int32(-2), Int32(2)), clamp!(copy(hi), Int32(-2), Int32(2)))
    x, y = rand(2, 2), rand(2)
    @test same(map!(+, CuArray(x), CuArray(y)), map!(+, copy(x), y))
    @test same(map!(+, CuArray(y), CuArray(x)), map!(+, copy(y), x))
    @test same(map!(+, CuArray(x), CuArray([1.0, 2]), CuArray([3.0, 4, 5])), map!(+, copy(x), [1.0, 2], [3.0, 4, 5]))
    @test same(map(+, CuArray(y), CuArray(x)), map(+, y, x))
    @test same(map(+, CuArray(rand(3)) .* 0 .+ 1, CuArray(x)), map(+, ones(3), x))
end

@testset "linear algebra odds" begin
    h = rand(Float32, 9, 9)
    for uplo in ('U', 'L')
        @test same(LinearAlgebra.copytri!(CuArray(h), uplo), LinearAlgebra.copytri!(copy(h), uplo))
    end
    @test_throws DimensionMismatch LinearAlgebra.copytri!(CuArray(rand(Float32, 2, 3)), 'U')
    @test same(CuArray(3f0 * I, 2, 4), Matrix(3f0 * I, 2, 4))
    @test eltype(CuArray(3f0 * I, (2, 4))) == Float32
    a, x = rand(Float32, 3, 1), rand(Float32, 4)
    C = CuArray(zeros(Float32, 3, 4))
    @test close_(mul!(C, CuArray(a), transpose(CuArray(x))), a * transpose(x))
    @test close_(mul!(C, CuArray(a), CuArray(x)', 2f0, 1f0), 2 .* (a * x') .+ a * transpose(x))
    A, dv = rand(Float32, 5, 5), rand(Float32, 5)
    D, dD = Diagonal(dv), Diagonal(CuArray(dv))
    @test close_(CuArray(A) + dD, A + D) && close_(dD + CuArray(A), D + A)
    @test close_(CuArray(A) - dD, A - D) && close_(dD - CuArray(A), D - A)
    Ai = rand(1:9, 5, 5)
    @test close_(CuArray(Ai) + dD, Ai + D) && eltype(CuArray(Ai) + dD) == eltype(Ai + D)   # Int + Float32
    @test_throws DimensionMismatch CuArray(rand(Float32, 4, 4)) + dD
end

@testset "copyto! into a larger array" begin
    x = rand(2, 2, 2)
    y = CuArray(zeros(3, 3))
    @test same(copyto!(y, selectdim(CuArray(x), 2, 1)), copyto!(zeros(3, 3), selectdim(x, 2, 1)))
    @test_throws BoundsError copyto!(CuArray(zeros(3)), view(CuArray(x), :, :, 1))
end

@testset "triangular and diagonal copies" begin
    h = rand(Float32, 6, 6)
    for TR in (UpperTriangular, LowerTriangular, UnitUpperTriangular, UnitLowerTriangular)
        c = Array{Float32}(undef, 6, 6)
        @test copyto!(c, TR(CuArray(h))) == TR(h)
        g = CuArray(zeros(Float32, 6, 6))
        @test same(copyto!(g, TR(CuArray(h))), Matrix(TR(h)))
        hb = rand(Float32, 6, 6)
        A, B = TR(CuArray(copy(hb))), TR(CuArray(h))
        r = copyto!(A, B)
        @test r isa TR && same(parent(A), parent(copyto!(TR(copy(hb)), TR(h))))
    end
    @test_throws BoundsError copyto!(UpperTriangular(CuArray(rand(Float32, 3, 3))), UpperTriangular(CuArray(h)))
    d = rand(Float32, 4)
    @test collect(Diagonal(CuArray(d))) == Matrix(Diagonal(d)) && Array(Diagonal(CuArray(d))) == Diagonal(d)
end

@testset "copytri! of Complex (host path)" begin
    hc = rand(ComplexF32, 4, 4)
    @test same(LinearAlgebra.copytri!(CuArray(hc), 'L', true), LinearAlgebra.copytri!(copy(hc), 'L', true))
end

@testset "in-place reductions into a wider type accumulate in it" begin
    # Base adds each f(a) to R's element: in Float64, where 1 + 2^-30 is not 1
    for (T, W) in ((Float32, Float64), (ComplexF32, ComplexF64))
        h = fill(T(2f0^-30), 4, 2)
        h[1, :] .= one(T)
        @test same(sum!(CuArray(zeros(W, 1, 2)), CuArray(h)), sum!(zeros(W, 1, 2), h))
        @test same(sum!(CuArray(zeros(W, 1)), CuArray(h[:, 1])), sum!(zeros(W, 1), h[:, 1]))
        hp = fill(T(1 + 2f0^-20), 3, 2)
        @test same(prod!(CuArray(ones(W, 1, 2)), CuArray(hp)), prod!(ones(W, 1, 2), hp))
    end
end

@testset "0-dimensional arithmetic, non-concrete broadcasts" begin
    h = fill(3.0)
    x = CuArray(h)
    for f in (y -> y / 2, y -> 2 * y, y -> y * 2, y -> y + y, y -> y - y, y -> -y, y -> 2 \ y)
        r = f(x)
        @test r isa CuArray{Float64,0} && same(r, f(h))
    end
    x /= 2
    @test x isa CuArray{Float64,0} && Array(x)[] == 1.5
    # GPUArrays.jl's error for a function whose result type is a Union
    g(b) = b ? 1.0 : 0
    err = try g.(CuArray([true, false])); nothing catch e; e end
    @test err isa ErrorException && occursin("non-concrete element type Union{Float64, Int64}", err.msg)
end

@testset "adjoints and transposes of complex arrays as destinations" begin
    h = rand(ComplexF32, 4)
    a = CuArray(h)
    a' .= ComplexF32(2, 1)
    @test same(a, fill(ComplexF32(2, -1), 4))
    @test fill!(a', ComplexF32(0, 3)) isa Adjoint && same(a, fill(ComplexF32(0, -3), 4))
    transpose(a) .= ComplexF32(1, 1)
    @test same(a, fill(ComplexF32(1, 1), 4))
    b = rand(ComplexF32, 1, 4)
    a' .= CuArray(b) .* 2
    hc = copy(h); hc' .= b .* 2
    @test same(a, hc)
    M = rand(ComplexF64, 3, 2)
    dM = CuArray(M)
    dM' .= ComplexF64(0, 1)
    @test same(dM, fill(ComplexF64(0, -1), 3, 2))
end

@testset "permutedims of views" begin
    x = rand(Float32, 6, 5, 4)
    d = CuArray(x)
    inds = [1, 4, 2]
    @test same(permutedims(view(d, inds, :, 2:3), (3, 2, 1)), permutedims(view(x, inds, :, 2:3), (3, 2, 1)))
    @test same(permutedims(view(d, 2:5, :, 1), (2, 1)), permutedims(view(x, 2:5, :, 1), (2, 1)))
    @test same(permutedims(view(d, :, 1, :)', (2, 1)), permutedims(view(x, :, 1, :)', (2, 1)))
    @test_throws ArgumentError permutedims(view(d, inds, :, :), (1, 1, 2))
end

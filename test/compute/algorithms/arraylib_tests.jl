# The array library a CUDA.jl user reaches for (issue 24), against Base and Statistics, under
# allowscalar(false): statistics, sorting, scans, searching, masks and index arrays,
# random numbers, CUDA.jl's names. On the host device every call also generates its
# kernels (compiled to PTX when NVRTC is installed); on a GPU (CUMEM_DEVICE=cuda) the
# same checks run the kernels, with sizes that take the multi-block paths (SIZES below).
using CuMem, Test, Random, Statistics, LinearAlgebra
CuMem.allowscalar(false)

const ON_GPU = CuMem.functional()
# long enough for several scan tiles (2048) and radix tiles (4096) on a GPU
const NBIG = ON_GPU ? 100_003 : 5_003

same(a, b) = (a = a isa CuArray ? Array(a) : a; isequal(a, b) || (println(a[1:min(end, 20)], "\n !=\n", b[1:min(end, 20)]); false))
close_(a, b) = (a = a isa CuArray ? Array(a) : a; (size(a) == size(b) && isapprox(a, b; rtol = 1e-4, nans = true)) ||
                (println(a[1:min(end, 20)], "\n !≈\n", b[1:min(end, 20)]); false))

Random.seed!(24)

@testset "arraylib" begin

@testset "statistics" begin
    for T in (Float32, Float64, Int32)
        h = T <: Integer ? rand(T(-50):T(50), 7, 5, 3) : rand(T, 7, 5, 3)
        d = CuArray(h)
        @test mean(d) ≈ mean(h)
        @test mean(d) isa typeof(mean(h))
        @test close_(mean(d; dims = 2), mean(h; dims = 2))
        @test close_(mean(d; dims = (1, 3)), mean(h; dims = (1, 3)))
        @test mean(abs2, d) ≈ mean(abs2, h)
        @test close_(mean(abs2, d; dims = 1), mean(abs2, h; dims = 1))
        @test var(d) ≈ var(h)
        @test var(d; corrected = false) ≈ var(h; corrected = false)
        @test close_(var(d; dims = 1), var(h; dims = 1))
        @test close_(var(d; dims = [2, 3]), var(h; dims = [2, 3]))
        @test std(d) ≈ std(h)
        @test close_(std(d; dims = 3, corrected = false), std(h; dims = 3, corrected = false))
        @test median(d) == median(h)
        @test close_(median(d; dims = 2), median(h; dims = 2))
    end
    @test isnan(median(CuArray([1.0, NaN, 3.0])))
    @test same(median(CuArray([1.0 NaN; 2.0 3.0]); dims = 1), median([1.0 NaN; 2.0 3.0]; dims = 1))
    @test_throws ArgumentError median(CuArray(Float32[]))
    x, y = rand(100), rand(100)
    @test cov(CuArray(x)) ≈ cov(x)
    @test cov(CuArray(x), CuArray(y)) ≈ cov(x, y)
    @test cor(CuArray(x), CuArray(y)) ≈ cor(x, y)
    @test cor(CuArray(x)) === cor(x)
    X = rand(50, 4)
    @test close_(cov(CuArray(X)), cov(X))
    @test close_(cov(CuArray(X); dims = 2), cov(X; dims = 2))
    @test close_(cov(CuArray(X); corrected = false), cov(X; corrected = false))
    @test close_(cor(CuArray(X)), cor(X))
    @test close_(cor(CuArray(X); dims = 2), cor(X; dims = 2))
    @test cov(CuArray(rand(1:100, 100))) isa Float64
    r = CuArray{Float32}(undef, 1, 4)
    @test close_(mean!(r, CuArray(Float32.(X[1:7, :]))), mean(Float32.(X[1:7, :]); dims = 1))
    @test isnan(mean(CuArray(Float32[])))
end

@testset "sorting" begin
    for T in (Float32, Float64, Float16, Int8, Int32, Int64, UInt16, UInt64, Bool)
        h = T <: AbstractFloat ? T.(randn(NBIG)) : rand(T, NBIG)
        T <: AbstractFloat && (h[1:3] .= T[NaN, -0.0, 0.0]; h[end] = -T(NaN))
        d = CuArray(h)
        @test same(sort(d), sort(h))
        @test same(sort(d; rev = true), sort(h; rev = true))
        @test same(sortperm(d), sortperm(h))                 # stable, as Base's sortperm
        @test same(sortperm(d; rev = true), sortperm(h; rev = true))
        sort!(d)
        @test issorted(d) && same(d, sort(h))
    end
    h = rand(-100:100, NBIG)
    d = CuArray(h)
    @test same(sort(d; by = abs), sort(h; by = abs, alg = MergeSort))   # radix on the keys by(x); stable
    @test same(sortperm(d; by = abs), sortperm(h; by = abs))
    @test same(sort(d; order = Base.Order.Reverse), sort(h; rev = true))
    small = rand(-100:100, 1000)
    @test same(sort(CuArray(small); lt = (a, b) -> a % 7 < b % 7), sort(small; lt = (a, b) -> a % 7 < b % 7, alg = MergeSort))
    @test same(sortperm(CuArray(small); lt = (a, b) -> a > b), sortperm(small; lt = (a, b) -> a > b))
    A = rand(Float32, 37, 41)
    @test same(sort(CuArray(A); dims = 1), sort(A; dims = 1))
    @test same(sort(CuArray(A); dims = 2, rev = true), sort(A; dims = 2, rev = true))
    B = CuArray(A); sort!(B; dims = 2)
    @test same(B, sort(A; dims = 2))
    @test same(sort(view(CuArray(A), 3, :)), sort(A[3, :]))
    @test partialsort(CuArray(small), 10) == partialsort(small, 10)
    @test same(partialsort(CuArray(small), 5:9; rev = true), partialsort(small, 5:9; rev = true))
    @test issorted(CuArray([1, 2, 2, 3])) && !issorted(CuArray([1, 3, 2]))
    @test issorted(CuArray([3, 2, 1]); rev = true)
    @test issorted(CuArray(Int[])) && issorted(CuArray([-3, 1, -2, 4]); by = abs) == false
    @test same(unique(CuArray([3, 1, 3, 2, 1, 2])), [3, 1, 2])
    @test same(unique(CuArray([0.0, -0.0, NaN, 1.0, NaN])), unique([0.0, -0.0, NaN, 1.0, NaN]))
    u = rand(1:50, NBIG)
    @test same(unique(CuArray(u)), unique(u))
    @test_throws ArgumentError sort(CuArray([1, 2]); order = Base.Order.By(abs))
    @test_throws CuMem.KernelCompileError sort(CuArray([1, 2]); lt = (a, b) -> string(a) < string(b))   # allocates: refused
end

@testset "scans" begin
    for T in (Float32, Int8, Int64)
        h = T <: Integer ? rand(T(-3):T(3), NBIG) : rand(T, NBIG)
        d = CuArray(h)
        @test close_(cumsum(d), cumsum(h))
        @test eltype(cumsum(d)) === eltype(cumsum(h))          # Int8 widens as Base
    end
    M = rand(-5:5, 300, 40)
    for dims in (1, 2, 3)
        @test same(cumsum(CuArray(M); dims = dims), cumsum(M; dims = dims))
        @test same(cumprod(CuArray(M .% 2); dims = dims), cumprod(M .% 2; dims = dims))
    end
    @test same(accumulate(max, CuArray(M); dims = 2), accumulate(max, M; dims = 2))
    @test same(accumulate(+, CuArray(M[:, 1]); init = 100), accumulate(+, M[:, 1]; init = 100))
    @test same(accumulate((a, b) -> a + 2b, CuArray([1, 2, 3])), accumulate((a, b) -> a + 2b, [1, 2, 3]))
    @test same(cumsum(view(CuArray(M), 2:2:300, 3)), cumsum(M[2:2:300, 3]))
    @test same(cumsum(transpose(CuArray(M)); dims = 1), cumsum(transpose(M); dims = 1))
    @test same(accumulate(+, CuArray(M)), collect(Iterators.accumulate(+, M)))
    B = CuArray{Int}(undef, 300, 40)
    cumsum!(B, CuArray(M); dims = 2)
    @test same(B, cumsum(M; dims = 2))
    @test same(cumsum(CuArray(Int[])), Int[])
    @test_throws DimensionMismatch accumulate!(+, CuArray{Int}(undef, 3), CuArray([1, 2]))
end

@testset "searching" begin
    h = rand(NBIG) .> 0.7
    d = CuArray(h)
    @test same(findall(d), findall(h))
    M = rand(31, 17)
    @test same(findall(CuArray(M) .> 0.5), findall(M .> 0.5))      # CartesianIndex
    @test same(findall(x -> x > 0.5, CuArray(M)), findall(x -> x > 0.5, M))
    @test same(findall(CuArray(falses(10))), Int[])
    @test same(findall(in([2, 3]), CuArray([1, 2, 3, 2])), [2, 3, 4])
    v = CuArray(Float32[5, 1, 7, 1, 9])
    @test findfirst(x -> x > 6f0, v) == 3 && findlast(x -> x < 2f0, v) == 4
    @test findfirst(x -> x > 10f0, v) === nothing && findlast(x -> x > 10f0, v) === nothing
    @test findnext(x -> x == 1f0, v, 3) == 4 && findprev(x -> x == 1f0, v, 3) == 2
    @test findnext(x -> x == 1f0, v, 5) === nothing && findprev(x -> x == 1f0, v, 1) === nothing
    @test findfirst(CuArray([false, true, true])) == 2 && findlast(CuArray([true, true, false])) == 2
    @test findfirst(x -> x > 0.5, CuArray(M)) == findfirst(x -> x > 0.5, M)
    @test extrema(v) == (1f0, 9f0)
    @test extrema(abs, CuArray([-3, 2])) == (2, 3)
    @test same(extrema(CuArray(M); dims = 1), extrema(M; dims = 1))
    I = reshape(1:12, 3, 4)
    for s in ((0, 1), (1, -1), (5, 7), 2)
        @test same(circshift(CuArray(I), s), circshift(I, s))
    end
    @test same(circshift(CuArray(collect(1:10)), 3), circshift(1:10, 3))
    for f in (rotl90, rotr90, rot180)
        @test same(f(CuArray(I)), f(I))
    end
    for k in -1:4
        @test same(rotl90(CuArray(I), k), rotl90(I, k)) && same(rotr90(CuArray(I), k), rotr90(I, k))
    end
    @test same(reverse(CuArray(I); dims = 2), reverse(I; dims = 2))
    @test same(mapslices(sum, CuArray(I); dims = 1), mapslices(sum, I; dims = 1))
    @test same(mapslices(x -> sort(x; rev = true), CuArray(I); dims = 2), mapslices(x -> sort(x; rev = true), I; dims = 2))
    @test same(argmax(CuArray(M); dims = 1), argmax(M; dims = 1))
    @test_throws ArgumentError foldl(+, v)
    @test_throws ArgumentError foldr(+, v)
    @test_throws ArgumentError mapfoldl(abs, +, v)
end

@testset "masks and index arrays" begin
    h = rand(Float32, 6, 5)
    A = CuArray(h)
    m = h .< 0.5f0
    @test same(A[CuArray(m)], h[m])
    @test same(A[CuArray(vec(m))], h[vec(m)])
    B = copy(A); hb = copy(h)
    B[B .< 0.5f0] .= 0f0; hb[hb .< 0.5f0] .= 0f0
    @test same(B, hb)
    B = copy(A); hb = copy(h)
    B[CuArray(m)] = CuArray(fill(2f0, count(m))); hb[m] = fill(2f0, count(m))
    @test same(B, hb)
    x = CuArray(Float32[1, 2, 3])
    @test_throws BoundsError x[CuArray([true, false])]               # short mask (Base: BoundsError)
    e = try x[CuArray(trues(70_000))]; nothing catch err; err end
    @test e isa BoundsError
    msg = sprint(showerror, e)
    @test length(msg) < 300 && occursin("70000", msg)               # summarised, not every index
    @test_throws BoundsError view(x, CuArray([true, false]))
    y = CuArray(Float32[1, 2, 3, 4, 5])
    y[[1, 3]] .= 0f0
    @test same(y, Float32[0, 2, 0, 4, 5])
    y[CuArray([2, 4])] .= 9f0
    @test same(y, Float32[0, 9, 0, 9, 5])
    @test same(view(y, [1, 3, 5]) .* 2f0, Float32[0, 0, 10])
    @test same(view(y, CuArray([5, 4])) .+ 1f0, Float32[6, 10])
    @test same(y[CuArray([5, 1, 5])], Float32[5, 0, 5])
    @test same(y[[]], Float32[])                                      # an empty index of type Any
    @test same(y[CuArray([1 2; 3 4])], Float32[0 9; 0 9])            # the index's shape
    @test_throws BoundsError y[CuArray([0, 1])]
    @test_throws BoundsError y[CuArray([6])]
    @test_throws BoundsError view(y, CuArray([1, 6]))
    y[CuArray([1, 2])] = CuArray(Float32[7, 8])
    @test same(y, Float32[7, 8, 0, 9, 5])
    I = argmax(A; dims = 1)
    @test same(A[I], h[argmax(h; dims = 1)])                         # CartesianIndex arrays
    @test same(A[Array(I)], h[argmax(h; dims = 1)])
    C = copy(A); C[Array(I)] = CuArray(zeros(Float32, 1, 5)); hc = copy(h); hc[argmax(h; dims = 1)] .= 0
    @test same(C, hc)
    # fill!, copyto!, copy! on wrappers
    F = CuArray(zeros(Float32, 3, 4))
    fill!(view(F, :, 2), 1f0)
    fill!(F', 1f0)
    @test same(F, ones(Float32, 3, 4))
    G = CuArray(zeros(Float32, 3, 4))
    fill!(view(G, [1, 3], 2:3), 5f0)
    hg = zeros(Float32, 3, 4); hg[[1, 3], 2:3] .= 5
    @test same(G, hg)
    fill!(transpose(G), 2f0); fill!(PermutedDimsArray(G, (2, 1)), 3f0)
    @test same(G, fill(3f0, 3, 4))
    src, dst = CuArray(Float32[1, 2, 3]), CuArray(zeros(Float32, 3))
    copy!(dst, src)
    @test same(dst, Float32[1, 2, 3])
    @test_throws ArgumentError copy!(CuArray(zeros(Float32, 2)), src)
    @test_throws ArgumentError copy!(CuArray(zeros(Float32, 2, 2)), CuArray(zeros(Float32, 4)))
    copy!(view(G, 1, :), CuArray(Float32[1, 2, 3, 4]))
    @test same(view(G, 1, :) |> copy, Float32[1, 2, 3, 4])
    hv = zeros(Float32, 2); copy!(hv, src)
    @test hv == Float32[1, 2, 3]
    @test same(vcat(src, 4f0), Float32[1, 2, 3, 4])
    @test same(vcat(0f0, src), Float32[0, 1, 2, 3])
    @test same(vcat(src, src, 5f0), Float32[1, 2, 3, 1, 2, 3, 5])
    @test same(hcat(CuArray(Float32[1 2]), 3f0), Float32[1 2 3])
    # reshaped views and vec of adjoints read by kernels
    H = rand(Float32, 3, 6)
    D = CuArray(H)
    @test same(reshape(view(D, :, 1:4), 6, 2) .* 2f0, reshape(view(H, :, 1:4), 6, 2) .* 2f0)
    @test same(vec(D') .+ 1f0, vec(H') .+ 1f0)
    @test sum(vec(D')) ≈ sum(H) && same(Array(vec(D')), vec(H'))
    @test same(maximum(reshape(view(D, 2:3, :), 4, 3); dims = 1), maximum(reshape(view(H, 2:3, :), 4, 3); dims = 1))
end

@testset "random" begin
    for T in (Float16, Float32, Float64, Int8, Int32, UInt64, Bool, ComplexF32, ComplexF64, Complex{Int32})
        a = CuMem.rand(T, 1000)
        @test a isa CuArray{T} && length(unique(Array(a))) > (T === Bool ? 1 : T in (Int8, Float16) ? 100 : 900)
    end
    @test all(x -> 0 <= real(x) < 1 && 0 <= imag(x) < 1, Array(CuMem.rand(ComplexF32, 100)))
    z = Array(CuMem.randn(ComplexF64, 100_000))
    @test abs(mean(abs2, z) - 1) < 0.03 && abs(mean(real.(z) .^ 2) - 0.5) < 0.02   # variance 1, as Base
    r = Array(CuMem.rand(1:6, 10_000))
    @test Set(r) == Set(1:6) && abs(mean(r) - 3.5) < 0.1
    r = Array(CuMem.rand(-3:2:5, 2, 1000))
    @test size(r) == (2, 1000) && Set(r) == Set(-3:2:5)
    @test eltype(CuMem.rand(0.0:0.5:2.0, 10)) === Float64
    @test Set(Array(CuMem.rand(0.0:0.5:2.0, 1000))) == Set(0.0:0.5:2.0)
    rng = CuMem.default_rng()
    @test rng isa Random.AbstractRNG
    A, B = CuArray{Float32}(undef, 100), CuArray{Float32}(undef, 100)
    Random.seed!(rng, 7); rand!(rng, A)
    Random.seed!(rng, 7); rand!(rng, B)
    @test same(A, Array(B))
    Random.seed!(rng, 8); rand!(rng, B)
    @test Array(A) != Array(B)
    Random.seed!(rng, 7); randn!(rng, A)
    Random.seed!(rng, 7); randn!(rng, B)
    @test same(A, Array(B))
    M = CuArray(zeros(Float32, 4, 6))
    rand!(view(M, :, 2:3))
    hm = Array(M)
    @test all(hm[:, [1, 4, 5, 6]] .== 0) && all(0 .< hm[:, 2:3] .< 1)
    randn!(transpose(M))
    @test all(Array(M) .!= 0)
    Random.seed!(rng, 3); c1 = CuMem.rand(ComplexF32, 10)
    Random.seed!(rng, 3); c2 = CuMem.rand(ComplexF32, 10)
    @test same(c1, Array(c2))
end

@testset "CUDA.jl names" begin
    @test has_cuda_gpu() == CuMem.functional()
    @test has_cuda() isa Bool
    @test !has_cuda_gpu() || has_cuda()
    c = capability()
    @test c isa VersionNumber && (ON_GPU ? c >= v"3.5" : c == v"0.0")
    @test capability(CuDevice(0)) == c
    x = CuArray(Float32[1, 2, 3])
    p = pointer(x)
    @test p + 4 == pointer(x, 2) && (p + 8) - p == 8 && p + 4 - 4 == p && p < p + 1
end

include(joinpath(@__DIR__, "arraylib_compat_tests.jl"))

end # arraylib

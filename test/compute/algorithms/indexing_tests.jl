# Non-scalar indexing, copies of views and wrappers, cat, reverse, permutedims: compared
# with Base on Array, for every real element type (and complex, and structs of odd
# sizes), random shapes including empty ones, all under allowscalar(false).
#
#   CUMEM_DEVICE=host julia --project test/compute/algorithms/indexing_tests.jl

using CuMem, Test, LinearAlgebra, Random

Random.seed!(11)
CuMem.allowscalar(false)

# Elements of 3 and 12 bytes: copies move them as several words.
struct Rgb
    r::UInt8
    g::UInt8
    b::UInt8
end
struct Pt12
    x::Float32
    y::Float32
    z::Float32
end
Base.rand(rng::AbstractRNG, ::Random.SamplerType{Rgb}) = Rgb(rand(rng, UInt8), rand(rng, UInt8), rand(rng, UInt8))
Base.rand(rng::AbstractRNG, ::Random.SamplerType{Pt12}) = Pt12(rand(rng, Float32), rand(rng, Float32), rand(rng, Float32))

const ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
                 Float16, Float32, Float64, ComplexF32, ComplexF64, Rgb, Pt12)
# Random index combinations for these (element sizes 1, 3, 4, 8, 12, 16; the copy plan
# depends only on the size); the others get a fixed set (each new combination of index
# types costs Julia compile time).
const RANDOM_ELTYPES = (Int8, Rgb, Float32, Int64, Pt12, ComplexF64)

# A random index into a dimension of length n: an integer, a range (unit, stepped,
# reversed, empty), a colon, an integer vector (with repeats) or a Bool mask.
function random_index(n::Int; scalar_ok = true)
    kinds = n == 0 ? (:colon, :empty, :vector, :mask) :
            scalar_ok ? (:int, :range, :step, :rev, :colon, :empty, :vector, :mask) :
                        (:range, :step, :rev, :colon, :empty, :vector, :mask)
    k = rand(kinds)
    if k == :int
        return rand(1:n)
    elseif k == :range
        a = rand(1:n); return a:rand(a:n)
    elseif k == :step
        a = rand(1:n); return a:rand(1:3):n
    elseif k == :rev
        a = rand(1:n); return n:-rand(1:2):a
    elseif k == :colon
        return Colon()
    elseif k == :empty
        return 1:0
    elseif k == :vector
        return n == 0 ? Int[] : rand(1:n, rand(0:4))
    else
        return rand(Bool, n)
    end
end

randshape() = rand(((0,), (1,), (7,), (3, 4), (5, 1), (0, 3), (2, 3, 4), (4, 0, 2), (3, 2, 2, 2)))

@testset "indexing and copies" begin

@testset "getindex, $T" for T in ELTYPES
    for _ in 1:(T in RANDOM_ELTYPES ? 16 : 0)
        dims = randshape()
        A = rand(T, dims...)
        d = CuArray(A)
        I = map(n -> random_index(n), dims)
        all(i -> i isa Integer, I) && continue          # scalar: the scalar path
        r = d[I...]
        @test r isa CuArray{T}
        @test size(r) == size(A[I...])
        @test Array(r) == A[I...]
        # views: copy, Array, CuArray, collect, copyto!
        v = view(d, I...)
        @test Array(copy(v)) == copy(view(A, I...))
        @test Array(v) == A[I...]
        @test collect(v) == A[I...]
        @test CuArray(v) isa CuArray{T} && Array(CuArray(v)) == A[I...]
        dest = CuArray{T}(undef, size(A[I...]))
        @test Array(copyto!(dest, v)) == A[I...]
        host = Array{T}(undef, size(A[I...]))
        @test copyto!(host, v) == A[I...]
    end
    # linear indexing of a matrix, A[:], trailing singleton indices
    A = rand(T, 4, 5); d = CuArray(A)
    @test Array(d[3:17]) == A[3:17]
    @test Array(d[17:-3:2]) == A[17:-3:2]
    @test Array(d[[20, 1, 7]]) == A[[20, 1, 7]]
    @test Array(d[:]) == A[:]
    @test Array(d[:, 2, 1]) == A[:, 2, 1]
    @test Array(d[A .== A]) == A[:]
    @test Array(d[CuArray([2, 4]), :]) == A[[2, 4], :]
    @test Array(d[CuArray([true, false, true, false]), 2:3]) == A[[1, 3], 2:3]
    @test Array(d[[1 2; 3 4]]) == A[[1 2; 3 4]]              # an index matrix shapes the result
    @test_throws BoundsError d[5, :]
    @test_throws BoundsError d[:, 0:2]
    @test_throws BoundsError d[[1, 21]]
end

@testset "setindex! of blocks, $T" for T in ELTYPES
    for _ in 1:(T in RANDOM_ELTYPES ? 10 : 0)
        dims = randshape()
        A = rand(T, dims...)
        d = CuArray(A)
        I = map(n -> random_index(n; scalar_ok = false), dims)
        # repeated indices write in an unspecified order: keep destinations distinct
        I = map(i -> i isa Vector{Int} ? unique(i) : i, I)
        X = rand(T, size(A[I...])...)
        B = copy(A); B[I...] = X
        d1 = copy(d); d1[I...] = X                     # from a host array
        @test Array(d1) == B
        d2 = copy(d); d2[I...] = CuArray(X)            # from a device array
        @test Array(d2) == B
        d3 = copy(d); copyto!(view(d3, I...), CuArray(X))
        @test Array(d3) == B
        d4 = copy(d); copyto!(view(d4, I...), X)
        @test Array(d4) == B
    end
    A = rand(T, 4, 5); d = CuArray(A)
    x = rand(T, 4)
    d[:, 2] = x; A[:, 2] = x
    @test Array(d) == A
    d[3, :] = CuArray(rand(T, 5)) |> (v -> (A[3, :] = Array(v); v))
    @test Array(d) == A
    d[2:3, 4:5] = CuArray(rand(T, 2, 2)) |> (v -> (A[2:3, 4:5] = Array(v); v))
    @test Array(d) == A
    d[:, 1] = view(d, :, 5); A[:, 1] = A[:, 5]           # device view as the source
    @test Array(d) == A
    # overlapping source and destination in one array: as if the source were read first
    v = CuArray(collect(1:10)); w = collect(1:10)
    v[2:10] = view(v, 1:9); w[2:10] = w[1:9]
    @test Array(v) == w
    @test_throws DimensionMismatch (d[:, 1] = rand(T, 3))
    @test_throws BoundsError (d[5, :] = rand(T, 5))
end

@testset "strided views into strided views" begin
    A = rand(Float64, 6, 7); B = rand(Float64, 3, 7)
    dA, dB = CuArray(A), CuArray(B)
    copyto!(view(dA, 1:2:6, :), view(dB, :, 7:-1:1)); A[1:2:6, :] = B[:, 7:-1:1]
    @test Array(dA) == A
    # different shapes of equal length, in linear order (Base's copyto!)
    v = CuArray(zeros(21))
    copyto!(v, view(dA, 1:3, :)); @test Array(v) == vec(A[1:3, :])
    w = CuArray(zeros(25)); copyto!(w, view(dA, 1:3, :))
    @test Array(w)[1:21] == vec(A[1:3, :]) && Array(w)[22:25] == zeros(4)
    @test_throws BoundsError copyto!(CuArray(zeros(3)), view(dA, :, 1))
    # views of views, reshaped contiguous views
    vv = view(view(dA, 2:5, :), 2, 3:6)
    @test Array(vv) == A[3, 3:6]
    r = reshape(view(dA, :, 2:3), 3, 4)
    @test Array(r) == reshape(A[:, 2:3], 3, 4)
    @test Array(reshape(view(dA, 1:2, :), 7, 2)) == reshape(A[1:2, :], 7, 2)
end

@testset "transpose, adjoint, permutedims, $T" for T in (Int8, Int32, Float32, Float64, ComplexF32, ComplexF64, Rgb)
    for dims in ((0, 3), (1, 5), (4, 3), (7, 9))
        A = rand(T, dims...); d = CuArray(A)
        @test Array(permutedims(d)) == permutedims(A)
        @test Array(permutedims(d, (2, 1))) == permutedims(A, (2, 1))
        if T <: Number      # (Base transposes the elements too: only numbers)
            @test Array(copy(transpose(d))) == copy(transpose(A))
            @test Array(CuArray(transpose(d))) == permutedims(A)
            @test Matrix(transpose(d)) == permutedims(A)
            @test Array(copy(d')) == copy(A')
            @test Array(d') == A'
            @test Matrix(d') == Matrix(A')
            @test collect(d') == collect(A')
            B = CuArray{T}(undef, reverse(dims)...)
            @test Array(adjoint!(B, d)) == copy(A')
            @test Array(transpose!(B, d)) == copy(transpose(A))
        end
        v = rand(T, dims[2]); dv = CuArray(v)
        T <: Number && @test Array(copy(transpose(dv))) == copy(transpose(v))
        @test Array(permutedims(dv)) == permutedims(v)
    end
    A = rand(T, 2, 3, 4); d = CuArray(A)
    for p in ((1, 2, 3), (3, 1, 2), (2, 3, 1), (3, 2, 1), (1, 3, 2), (2, 1, 3))
        @test Array(permutedims(d, p)) == permutedims(A, p)
        @test Array(copy(PermutedDimsArray(d, p))) == permutedims(A, p)
        @test Array(PermutedDimsArray(d, p)) == permutedims(A, p)
        dest = CuArray{T}(undef, size(permutedims(A, p)))
        @test Array(permutedims!(dest, d, p)) == permutedims(A, p)
    end
    @test_throws ArgumentError permutedims(d, (1, 1, 2))
    @test Array(PermutedDimsArray(view(d, :, 2, :), (2, 1))) == permutedims(A[:, 2, :])
    T <: Number && @test Array(transpose(view(d, :, 2, :))) == permutedims(A[:, 2, :])
end

@testset "reverse, $T" for T in (Bool, Int16, UInt64, Float32, ComplexF64, Rgb, Pt12)
    for n in (0, 1, 2, 7, 100)
        v = rand(T, n); dv = CuArray(v)
        @test Array(reverse(dv)) == reverse(v)
        if n >= 2
            s, e = 2, n
            @test Array(reverse(dv, s, e)) == reverse(v, s, e)
            @test Array(reverse(dv, 1, 1)) == v
            w = copy(dv); reverse!(w); @test Array(w) == reverse(v)
            w = copy(dv); reverse!(w, s, e); @test Array(w) == reverse(v, s, e)
        end
    end
    A = rand(T, 3, 0 + rand(0:4), 2); d = CuArray(A)
    for dims in (1, 2, 3)
        @test Array(reverse(d; dims = dims)) == reverse(A; dims = dims)
    end
    if VERSION >= v"1.6"
        @test Array(reverse(d)) == reverse(A)
        @test Array(reverse(d; dims = (1, 3))) == reverse(A; dims = (1, 3))
    else     # Base 1.5 reverses only one dimension at a time
        @test Array(reverse(d; dims = (1, 3))) == reverse(reverse(A; dims = 1); dims = 3)
    end
    @test Array(reverse(view(d, :, :, 2); dims = 2)) == reverse(A[:, :, 2]; dims = 2)
end

@testset "vcat, hcat, cat, $T" for T in (Bool, Int8, Int64, Float16, Float32, ComplexF32, Rgb)
    a, b, c = rand(T, 3), rand(T, 0), rand(T, 5)
    @test Array(vcat(CuArray(a), CuArray(b), CuArray(c))) == vcat(a, b, c)
    @test Array(hcat(CuArray(a), CuArray(a))) == hcat(a, a)
    A, B = rand(T, 2, 3), rand(T, 4, 3)
    @test Array(vcat(CuArray(A), CuArray(B))) == vcat(A, B)
    @test Array(hcat(CuArray(A), CuArray(rand(T, 2, 0)), CuArray(A))) == hcat(A, A)
    @test Array(cat(CuArray(A), CuArray(A); dims = 3)) == cat(A, A; dims = 3)
    @test Array(cat(CuArray(A), CuArray(A); dims = Val(2))) == cat(A, A; dims = 2)
    if T <: Number
        @test Array(cat(CuArray(A), CuArray(B); dims = (1, 2))) == cat(A, B; dims = (1, 2))
    end
    @test Array(vcat(view(CuArray(B), 2:3, :), CuArray(A))) == vcat(B[2:3, :], A)
    T <: Number && @test Array(hcat(CuArray(A)', CuArray(A)')) == hcat(A', A')
    @test_throws DimensionMismatch vcat(CuArray(A), CuArray(rand(T, 2, 2)))
    @test_throws DimensionMismatch hcat(CuArray(A), CuArray(B))
end

@testset "element type conversions" begin
    A = rand(Int16, 3, 4); d = CuArray(A)
    @test CuArray{Float64}(view(d, :, 2)) == Float64.(A[:, 2])
    @test Array{Float32}(view(d, 2, :)) == Float32.(A[2, :])
    @test Array(vcat(CuArray([1, 2]), CuArray([1.5]))) == [1.0, 2.0, 1.5]
    d2 = CuArray(zeros(Float64, 3, 4)); d2[:, 1] = Int16[1, 2, 3]
    @test Array(d2)[:, 1] == [1.0, 2.0, 3.0]
    d2[:, 2] = CuArray(Int16[4, 5, 6])
    @test Array(d2)[:, 2] == [4.0, 5.0, 6.0]
end

@testset "freed arrays" begin
    h = rand(4, 4); d = CuArray(h); v = view(d, :, 1); unsafe_free!(d)
    @test_throws AssertionError d[:, 1]
    # a contiguous view is a CuArray sharing d's memory (CUDA.jl's rule): its hold keeps the
    # memory, as a reshape's does
    @test Array(copy(v)) == h[:, 1]
    @test_throws AssertionError (d[:, 1] = rand(4))
end

# The GPU kernels compile: with libnvrtc present, the strided-copy source goes through
# NVRTC to PTX and every entry point is there.
@testset "strided-copy kernel source" begin
    if isdefined(CuMem, :nvrtc_available) && CuMem.nvrtc_available()
        ptx = CuMem.compile_ptx(CuMem.STRIDED_COPY_SOURCE)
        for w in (1, 2, 4, 8, 16), bits in (32, 64)
            @test occursin(".entry cumem_copy_w$(w)_i$(bits)(", ptx)
        end
        for w in (8, 16), bits in (32, 64)
            @test occursin(".entry cumem_copy_conj$(w)_i$(bits)(", ptx)
        end
    else
        @info "libnvrtc not found: the strided-copy kernel source was not compiled"
        @test occursin("cumem_copy_w16_i64", CuMem.STRIDED_COPY_SOURCE)
    end
end

end

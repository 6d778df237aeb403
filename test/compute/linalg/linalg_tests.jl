# Matrix products (cuBLAS gemm with op flags, CuMem's kernel for small real ones; Julia's
# BLAS on the host device), dot, norm, axpy!, axpby!, rmul!, lmul!, compared with
# LinearAlgebra on Array, under allowscalar(false).
#
#   CUMEM_DEVICE=host julia --project test/compute/linalg/linalg_tests.jl

using CuMem, Test, LinearAlgebra, Random

Random.seed!(12)
CuMem.allowscalar(false)

const BLAS_TYPES = (Float32, Float64, ComplexF32, ComplexF64)
tol(T) = real(T) == Float32 ? 1f-4 : 1e-10

# op(A) for an operand flag: stored, transpose, adjoint
wrap(op, A) = op == :N ? A : op == :T ? transpose(A) : adjoint(A)
# the stored shape that gives op(A) the shape (m, k)
stored_shape(op, m, k) = op == :N ? (m, k) : (k, m)

@testset "linear algebra" begin

@testset "mul! and *, $T" for T in BLAS_TYPES
    for _ in 1:6
        m, k, n = rand(0:6), rand(0:6), rand(0:6)
        for opA in (:N, :T, :C), opB in (:N, :T, :C)
            A = rand(T, stored_shape(opA, m, k)...); B = rand(T, stored_shape(opB, k, n)...)
            dA, dB = CuArray(A), CuArray(B)
            ref = wrap(opA, A) * wrap(opB, B)
            r = wrap(opA, dA) * wrap(opB, dB)
            @test r isa CuMatrix{T}
            @test size(r) == (m, n)
            @test isapprox(Array(r), ref; rtol = tol(T))
            # five arguments: C = A*B*α + C*β
            C = rand(T, m, n); dC = CuArray(C)
            α, β = T(1.5), T(-0.5)
            mul!(dC, wrap(opA, dA), wrap(opB, dB), α, β)
            @test isapprox(Array(dC), ref * α + C * β; rtol = tol(T))
        end
        # matrix × vector, through every op of the matrix
        for opA in (:N, :T, :C)
            A = rand(T, stored_shape(opA, m, k)...); x = rand(T, k)
            r = wrap(opA, CuArray(A)) * CuArray(x)
            @test r isa CuVector{T} && length(r) == m
            @test isapprox(Array(r), wrap(opA, A) * x; rtol = tol(T))
            y = rand(T, m); dy = CuArray(y)
            mul!(dy, wrap(opA, CuArray(A)), CuArray(x), T(2), T(3))
            @test isapprox(Array(dy), wrap(opA, A) * x * 2 + y * 3; rtol = tol(T))
        end
        # a row vector times a matrix: (A' x)'
        x = rand(T, m); A = rand(T, m, k)
        r = CuArray(x)' * CuArray(A)
        @test isapprox(Array(r), x' * A; rtol = tol(T))
    end
    # mul! with β = 0 ignores what C held (NaN stays out)
    A, B = rand(T, 3, 4), rand(T, 4, 2)
    dC = CuArray(fill(T(NaN), 3, 2))
    mul!(dC, CuArray(A), CuArray(B))
    @test isapprox(Array(dC), A * B; rtol = tol(T))
    # errors: Base's DimensionMismatch, aliasing
    @test_throws DimensionMismatch CuArray(A) * CuArray(A)
    @test_throws DimensionMismatch CuArray(A) * CuArray(rand(T, 3))
    @test_throws DimensionMismatch mul!(CuArray{T}(undef, 2, 2), CuArray(A), CuArray(B))
    S = CuArray(rand(T, 3, 3))
    @test_throws ArgumentError mul!(S, S, CuArray(rand(T, 3, 3)))
    @test_throws ArgumentError mul!(S, CuArray(rand(T, 3, 3)), S')
end

@testset "other element types promote as Base (issue 25); no GPU product: one clear error" begin
    for (TA, TB) in ((Int, Int), (Float16, Float16), (Float32, Float64))
        a, b = rand(TA, 2, 2), rand(TB, 2, 2)
        A, B = CuArray(a), CuArray(b)
        @test A * B isa CuMatrix{eltype(a * b)} && isapprox(Array(A * B), a * b; rtol = 1e-2)
        @test isapprox(Array(A' * B), a' * b; rtol = 1e-2)
    end
    A = CuArray(rand(Int32, 2, 2))
    err = try mul!(CuArray{Bool}(undef, 2, 2), A, A); nothing; catch e; e; end
    @test err isa ArgumentError
    @test occursin("cuBLAS", sprint(showerror, err)) && occursin("Float32.(A)", sprint(showerror, err))
end

@testset "dot, norm, $T" for T in (BLAS_TYPES..., Int64, Float16)
    for n in (0, 1, 5, 33)
        x, y = rand(T, n), rand(T, n)
        dx, dy = CuArray(x), CuArray(y)
        @test isapprox(dot(dx, dy), dot(x, y); rtol = T == Float16 ? 1e-2 : 1e-5)
        @test dx' * dy ≈ x' * y rtol = (T == Float16 ? 1e-2 : 1e-5)
        for p in (2, 1, Inf, -Inf, 0, 3)
            @test norm(dx, p) ≈ norm(x, p) rtol = (T == Float16 ? 1e-2 : 1e-5)
            @test typeof(norm(dx, p)) == typeof(norm(x, p))
        end
    end
    # matrices: over all elements, as Base
    X, Y = rand(T, 3, 4), rand(T, 3, 4)
    @test dot(CuArray(X), CuArray(Y)) ≈ dot(X, Y) rtol = (T == Float16 ? 1e-2 : 1e-5)
    @test norm(CuArray(X)) ≈ norm(X) rtol = (T == Float16 ? 1e-2 : 1e-5)
    @test_throws DimensionMismatch dot(CuArray(rand(T, 3)), CuArray(rand(T, 4)))
end

@testset "norm against over- and underflow" begin
    x = Float32[3f30, 4f30]
    @test norm(CuArray(x)) ≈ 5f30
    x = Float32[3f-30, 4f-30]
    @test norm(CuArray(x)) ≈ 5f-30
end

# Small real products run as CuMem's kernel (julia/cuda/gemm.cuh) on a GPU: against cuBLAS
# (CuMem.small_gemm!(false)) and Base, at the demo's shapes, partial tiles, one k chunk and
# more, and just past the bounds (cuBLAS either way). On the host device both are BLAS.
@testset "small products against cuBLAS, $T" for T in (Float32, Float64)
    prev = CuMem.small_gemm()
    try
        for (m, n, k) in ((128, 64, 64), (10, 64, 128), (128, 64, 10), (10, 128, 64), (1, 1, 512), (129, 33, 65),
                          (16, 16, 1), (1, 300, 7), (64, 64, 513), (256, 256, 64))
            CuMem.small_gemm!(true)          # (the products below leave it off)
            fits = CuMem.small_gemm_fits(T, m, n, k)
            @test fits == (!CuMem.on_host() && k <= 512 && m * n * k <= 2^21)
            # on the host device both paths are the same BLAS call (the products with
            # wrappers, α and β are the testsets above), and this job runs interpreted
            # there, where these shapes' products and Float64 references cost 76 s of CI's
            # CPU: the kernel against cuBLAS is a GPU check
            CuMem.on_host() && continue
            for opA in (:N, :T, :C), opB in (:N, :T, :C)
                A = rand(T, stored_shape(opA, m, k)...) .- T(0.5); B = rand(T, stored_shape(opB, k, n)...) .- T(0.5)
                C = rand(T, m, n)
                ref = Float64.(wrap(opA, A)) * Float64.(wrap(opB, B)) * -0.25 + Float64.(C) * 0.5
                outs = map((true, false)) do on
                    CuMem.small_gemm!(on)
                    dC = CuArray(C)
                    mul!(dC, wrap(opA, CuArray(A)), wrap(opB, CuArray(B)), T(-0.25), T(0.5))
                    Array(dC)
                end
                bound = (T === Float32 ? 1e-5 : 1e-13) * (sqrt(k) + 1)
                @test maximum(abs.(outs[1] .- ref)) <= bound
                @test maximum(abs.(outs[1] .- outs[2])) <= 2 * bound
            end
        end
        CuMem.small_gemm!(false)
        @test !CuMem.small_gemm() && !CuMem.small_gemm_fits(T, 4, 4, 4)
    finally
        CuMem.small_gemm!(prev)
    end
end

@testset "axpy!, axpby!, rmul!, lmul!, $T" for T in (BLAS_TYPES..., Int64)
    x, y = rand(T, 7), rand(T, 7)
    α, β = T(2), T(3)
    dx, dy = CuArray(x), CuArray(y)
    @test axpy!(α, dx, dy) === dy
    @test Array(dy) ≈ α * x + y
    dy = CuArray(y)
    @test axpby!(α, dx, β, dy) === dy
    @test Array(dy) ≈ α * x + β * y
    dx = CuArray(x)
    @test rmul!(dx, β) === dx && Array(dx) ≈ x * β
    dx = CuArray(x)
    @test lmul!(β, dx) === dx && Array(dx) ≈ β * x
    # equal lengths of different shapes, as Base
    M = rand(T, 2, 3); v = rand(T, 6)
    dv = CuArray(v); axpy!(α, CuArray(M), dv)
    @test Array(dv) ≈ α * vec(M) + v
    @test_throws DimensionMismatch axpy!(α, CuArray(rand(T, 3)), CuArray(rand(T, 4)))
    @test_throws DimensionMismatch axpby!(α, CuArray(rand(T, 3)), β, CuArray(rand(T, 4)))
end

end

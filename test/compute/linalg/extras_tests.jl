# LinearAlgebra functions with device versions (julia/compute/linalg/extras.jl) against
# LinearAlgebra on host copies, under allowscalar(false), and the clear errors.
using CuMem, Test, LinearAlgebra, Random
CuMem.allowscalar(false)
Random.seed!(3)

@testset "LinearAlgebra without scalar indexing" begin
    A = rand(Float64, 5, 5) + 5I
    dA = CuArray(A)
    x = rand(Float64, 5)
    dx = CuArray(x)

    @testset "normalize, opnorm, rank" begin
        @test Array(normalize(dx)) ≈ normalize(x)
        @test Array(normalize(dx, 1)) ≈ normalize(x, 1)
        for p in (1, 2, Inf)
            @test opnorm(dA, p) ≈ opnorm(A, p)
        end
        @test opnorm(CuArray(Float32.(A))) isa Float32
        @test_throws ArgumentError opnorm(dA, 3)
        @test opnorm(CuArray(zeros(0, 3))) == 0
        @test rank(dA) == rank(A) == 5
        R = rand(5, 2) * rand(2, 6)
        @test rank(CuArray(R)) == rank(R) == 2
        @test rank(CuArray(R); atol = 1e30) == 0
    end

    @testset "cross, tridiagonal products" begin
        a, b = rand(3), rand(3)
        @test Array(cross(CuArray(a), CuArray(b))) ≈ cross(a, b)
        @test_throws DimensionMismatch cross(CuArray(rand(4)), CuArray(rand(4)))
        dl, d, du = rand(4), rand(5), rand(4)
        B = rand(5, 3)
        T = Tridiagonal(CuArray(dl), CuArray(d), CuArray(du))
        @test Array(T * dx) ≈ Tridiagonal(dl, d, du) * x
        @test Array(T * CuArray(B)) ≈ Tridiagonal(dl, d, du) * B
        S = SymTridiagonal(CuArray(d), CuArray(dl))
        @test Array(S * dx) ≈ SymTridiagonal(d, dl) * x
        for uplo in (:U, :L)
            Bd = Bidiagonal(CuArray(d), CuArray(dl), uplo)
            @test Array(Bd * dx) ≈ Bidiagonal(d, dl, uplo) * x
        end
        y = CuArray(zeros(5))
        @test mul!(y, T, dx) === y && Array(y) ≈ Tridiagonal(dl, d, du) * x
        @test_throws DimensionMismatch T * CuArray(rand(4))
    end

    @testset "inv of triangular matrices, pinv, exp" begin
        for W in (UpperTriangular, LowerTriangular, UnitUpperTriangular, UnitLowerTriangular)
            X = inv(W(dA))
            @test X isa W && Array(parent(X)) ≈ Array(inv(W(A)))
        end
        @test Array(inv(UpperTriangular(CuArray([2 1; 0 4])))) ≈ inv(UpperTriangular([2 1; 0 4]))
        M = rand(6, 4)
        @test Array(pinv(CuArray(M))) ≈ pinv(M)
        Rk = rand(4, 2) * rand(2, 4)                  # rank 2: small singular values dropped
        @test Array(pinv(CuArray(Rk))) ≈ pinv(Rk) atol = 1e-8
        Sm = [2.0 1 0; 1 3 1; 0 1 4] ./ 4
        @test Array(exp(CuArray(Sm))) ≈ exp(Sm)
        G = randn(4, 4) .* 3                          # scaling and squaring
        @test Array(exp(CuArray(G))) ≈ exp(G) rtol = 1e-10
        @test Array(exp(CuArray(Float32.(Sm)))) ≈ exp(Float32.(Sm)) rtol = 1e-5
        @test Array(exp(CuArray(zeros(3, 3)))) == Matrix(I, 3, 3)
    end

    @testset "eigvals, QR's Q, and the clear errors" begin
        H = A + A'
        @test Array(eigvals(CuArray(H))) ≈ eigvals(Symmetric(H))   # Hermitian: the GPU solver
        @test_throws ArgumentError eigvals(CuArray(rand(4, 4) + [0 1 0 0; 0 0 0 0; 0 0 0 0; 0 0 0 0]))
        err = try eigvals(CuArray([1.0 2; 3 4])); catch e; sprint(showerror, e) end
        @test occursin("Symmetric(A)", err) && occursin("eigvals(Array(A))", err)
        @test_throws ArgumentError qr(dA, Val(true))
        F = qr(CuArray(rand(6, 4)))
        Q = collect(F.Q)
        @test Q isa CuMatrix && size(Q) == (6, 6) && Array(Q' * Q) ≈ Matrix(I, 6, 6)
        @test Array(F.Q[:, 1:2]) ≈ Array(Q)[:, 1:2]
        err = try dA * x; catch e; sprint(showerror, e) end
        @test occursin("its data is on the host", err) && occursin("*", err)
        @test_throws ArgumentError dot(dx, x)
        @test_throws ArgumentError dot(x, dx)
        @test_throws ArgumentError A * dA
    end

    @testset "BLAS level 1, transpose(x) * y, rotate!, reflect!" begin
        for T in (Float32, Float64, ComplexF32, ComplexF64)
            x, y = rand(T, 20), rand(T, 20)
            dx, dy = CuArray(x), CuArray(y)
            @test BLAS.asum(dx) ≈ BLAS.asum(x)
            @test transpose(dx) * dy ≈ transpose(x) * y
            if T <: Complex
                @test BLAS.dotu(dx, dy) ≈ BLAS.dotu(x, y)
                @test BLAS.dotc(dx, dy) ≈ BLAS.dotc(x, y)
                @test BLAS.dot(dx, dy) ≈ BLAS.dotc(x, y)
            else
                @test BLAS.dot(dx, dy) ≈ BLAS.dot(x, y)
            end
            @test_throws DimensionMismatch BLAS.dot(dx, CuArray(rand(T, 3)))
            c, s = rand(real(T)), rand(T)
            rotate!(dx, dy, c, s); rotate!(x, y, c, s)
            @test Array(dx) ≈ x && Array(dy) ≈ y
            reflect!(dx, dy, c, s); reflect!(x, y, c, s)
            @test Array(dx) ≈ x && Array(dy) ≈ y
            @test_throws DimensionMismatch rotate!(dx, CuArray(rand(T, 3)), c, s)
        end
    end

    @testset "products with views as operands, B * triangular" begin
        p, b = rand(16), rand(4)
        W = @view p[reshape(1:16, 4, 4)]
        dW = @view CuArray(p)[reshape(1:16, 4, 4)]
        @test Array(dW * CuArray(b)) ≈ W * b
        M, N = rand(Float32, 6, 5), rand(Float32, 5, 2)
        @test Array(view(CuArray(M), 2:4, :) * CuArray(N)) ≈ view(M, 2:4, :) * N
        @test_throws DimensionMismatch view(CuArray(M), 2:4, :) * CuArray(M)
        for t in (identity, transpose, adjoint), TR in (UpperTriangular, UnitLowerTriangular)
            A, B = TR(rand(ComplexF64, 5, 5)), rand(ComplexF64, 4, 5)
            dC = CuArray(zeros(ComplexF64, 4, 5))
            mul!(dC, CuArray(B), t(TR(CuArray(parent(A)))))
            @test Array(dC) ≈ B * t(A)
        end
    end
end

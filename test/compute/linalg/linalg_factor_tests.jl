# Linear algebra beyond gemm (issue 25), compared with LinearAlgebra on Array under
# allowscalar(false): factorizations (lu, qr, cholesky, svd, eigen), \ and ldiv! dispatch,
# inv/det/logdet, info codes as exceptions, triangular and symmetric products and solves,
# integer/Bool/Float16/mixed products, batched gemm, triu/tril, istriu/ishermitian,
# UniformScaling, diagm, kron, error messages with the user's shapes. On the host device
# the engine's cuBLAS/cuSOLVER calls are Julia's BLAS/LAPACK; under CUMEM_DEVICE=cuda the
# same tests run cuSOLVER, cuBLAS and the kernels.
#
#   CUMEM_DEVICE=host julia --project test/compute/linalg/linalg_factor_tests.jl

using CuMem, Test, LinearAlgebra, Random

Random.seed!(25)
CuMem.allowscalar(false)

const TYPES = (Float32, Float64, ComplexF32, ComplexF64)
tol(T) = real(T) == Float32 ? 2f-3 : 1e-9
approx(a, b, T) = isapprox(Array(a), Array(b); rtol = tol(T), atol = tol(T))
wellcond(T, n) = rand(T, n, n) + n * I
posdef(T, n) = (A = rand(T, n, n); Matrix(Hermitian(A' * A + n * I)))
thrown(f) = try f(); nothing; catch e; e; end

# CUMEM_TEST_PROGRESS=1 (bench/gpu/run.sh's sanitize suite sets it): a line, flushed, as each
# test set starts, so that a run stopped by a time limit shows in its log where it stood.
const PROGRESS = get(ENV, "CUMEM_TEST_PROGRESS", "0") == "1"
progress(what) = PROGRESS && (println("linalg_factor_tests: ", what, " ..."); flush(stdout))

@testset "linear algebra beyond gemm" begin

@testset "lu, $T" for T in TYPES
    progress("lu, $T")
    for (m, n) in ((5, 5), (6, 4), (3, 5))
        A = m == n ? wellcond(T, n) : rand(T, m, n)
        F = lu(CuArray(A))
        @test F isa LU{T,<:CuMatrix{T}}
        @test F.L isa CuMatrix{T} && F.U isa CuMatrix{T}
        @test approx(Array(F.L) * Array(F.U), A[F.p, :], T)
        @test F.p == lu(A).p
        @test approx(Array(F.P) * A, Array(F.L) * Array(F.U), T)
        @test issuccess(F)
    end
    A = wellcond(T, 6); b = rand(T, 6); B = rand(T, 6, 3)
    dA = CuArray(A)
    F = lu(dA)
    @test approx(F \ CuArray(b), A \ b, T)
    @test approx(F \ CuArray(B), A \ B, T)
    @test approx(transpose(F) \ CuArray(b), transpose(A) \ b, T)
    @test approx(F' \ CuArray(B), A' \ B, T)
    x = CuArray(b); @test ldiv!(F, x) === x && approx(x, A \ b, T)
    @test isapprox(det(F), det(A); rtol = tol(T)) && isapprox(det(dA), det(A); rtol = tol(T))
    @test isapprox(logabsdet(dA)[1], logabsdet(A)[1]; rtol = tol(T)) &&
          isapprox(logabsdet(dA)[2], logabsdet(A)[2]; rtol = tol(T))
    @test approx(inv(dA), inv(A), T) && inv(dA) isa CuMatrix{T}
    @test Array(dA) == A                       # lu copies
    C = copy(dA); G = lu!(C); @test G.factors === C
    # singular: SingularException at the zero pivot, or info with check = false
    S = T[1 2; 2 4]
    @test thrown(() -> lu(CuArray(S))) isa SingularException
    @test lu(CuArray(S); check = false).info == lu(S; check = false).info > 0
    @test !issuccess(lu(CuArray(S); check = false))
    @test det(CuArray(S)) == 0
    @test thrown(() -> inv(CuArray(S))) isa SingularException
    @test thrown(() -> CuArray(S) \ CuArray(T[1, 2])) isa SingularException
end

@testset "lu of other element types, logdet" begin
    progress("lu of other element types, logdet")
    Ai = [4 1 0; 1 5 2; 0 2 6]
    F = lu(CuArray(Ai))
    @test F isa LU{Float64}
    @test isapprox(det(CuArray(Ai)), det(Ai))
    @test isapprox(logdet(CuArray(Ai)), logdet(Ai))
    @test thrown(() -> logdet(CuArray([0.0 1; 1 0]))) isa DomainError     # det = -1
    @test isapprox(logdet(CuArray(ComplexF64[0 1; 1 0])), logdet(ComplexF64[0 1; 1 0]))
    # A \ b of mixed element types: factored in A's type, solved in the promoted one (as Base)
    A32 = rand(Float32, 5, 5) + 5I; b64 = rand(5)
    x = CuArray(A32) \ CuArray(b64)
    @test x isa CuVector{Float64} && isapprox(Array(x), A32 \ b64; rtol = 1e-6)
    @test isapprox(Array(CuArray(Ai) \ CuArray([1, 2, 3])), Ai \ [1, 2, 3])
    @test thrown(() -> det(CuArray(rand(3, 4)))) isa DimensionMismatch
    @test thrown(() -> inv(CuArray(rand(3, 4)))) isa DimensionMismatch
end

@testset "qr, $T" for T in TYPES
    progress("qr, $T")
    for (m, n) in ((6, 4), (5, 5), (3, 5))
        A = rand(T, m, n)
        F = qr(CuArray(A))
        @test F isa CuMem.CuQR{T}
        k = min(m, n)
        @test size(F) == (m, n) && size(F.Q) == (m, m)
        @test F.R isa CuMatrix{T} && size(F.R) == (k, n)
        Q = Matrix(F.Q)
        @test Q isa Matrix{T} && size(Q) == (m, k)
        @test approx(Q * Array(F.R), A, T)
        @test approx(Q' * Q, Matrix{T}(I, k, k), T)
        @test approx(abs.(Array(F.R)), abs.(qr(A).R), T)
        @test CuMatrix(F.Q) isa CuMatrix{T}
        # Q and Q' applied through ormqr
        x = rand(T, m); X = rand(T, m, 2); Y = rand(T, 3, m)
        Qfull = Array(F.Q * CuMatrix{T}(I, m, m))
        @test approx(Qfull[:, 1:k], Q, T)
        @test approx(F.Q * CuArray(x), Qfull * x, T)
        @test approx(F.Q' * CuArray(X), Qfull' * X, T)
        @test approx(CuArray(Y) * F.Q, Y * Qfull, T)
        @test approx(CuArray(Y) * F.Q', Y * Qfull', T)
        # the thin Q times k rows pads with zeros, as LinearAlgebra
        z = rand(T, k); @test approx(F.Q * CuArray(z), Q * z, T)
    end
    # least squares (tall) and minimum norm (wide)
    A = rand(T, 8, 3); b = rand(T, 8)
    @test approx(qr(CuArray(A)) \ CuArray(b), A \ b, T)
    @test approx(CuArray(A) \ CuArray(b), A \ b, T)
    W = rand(T, 3, 7); c = rand(T, 3); C = rand(T, 3, 2)
    @test approx(CuArray(W) \ CuArray(c), W \ c, T)
    @test approx(CuArray(W) \ CuArray(C), W \ C, T)
    # rank deficient, tall and wide: LinearAlgebra's minimum-norm least-squares solution
    # (its pivoted QR finds the rank; here the SVD does), never an exception
    for (R, c) in ((T[1 1; 1 1; 1 1], T[1, 2, 3]), (T[1 2 3; 2 4 6], T[1, 3]),
                   (T[1 0 1; 0 1 1; 1 1 2; 2 0 2], T[1 2 3 4; 0 1 0 1]'), (zeros(T, 4, 2), T[1, 2, 3, 4]))
        x = CuArray(R) \ CuArray(c)
        @test x isa CuArray{T} && size(x) == size(R \ c) && approx(x, R \ c, T)
    end
    # LinearAlgebra's unpivoted qr(A) \ b: SingularException only for an exact zero in R
    @test thrown(() -> qr(CuArray(T[1 0; 0 0; 0 0])) \ CuArray(T[1, 2, 3])) isa SingularException
end

@testset "cholesky, $T" for T in TYPES
    progress("cholesky, $T")
    P = posdef(T, 6); b = rand(T, 6); B = rand(T, 6, 2)
    for (wrap, up) in ((Hermitian, :U), (Hermitian, :L), (Symmetric, :U))
        (wrap === Symmetric && T <: Complex) && continue
        H = wrap(CuArray(P), up)
        C = cholesky(H)
        @test C isa Cholesky{T,<:CuMatrix{T}}
        @test C.uplo == (up === :U ? 'U' : 'L')
        @test C.U isa UpperTriangular && C.L isa LowerTriangular
        @test approx(Array(C.U)' * Array(C.U), P, T)
        @test approx(Array(C.L) * Array(C.L)', P, T)
        @test approx(C \ CuArray(b), P \ b, T)
        @test approx(C \ CuArray(B), P \ B, T)
        @test isapprox(det(C), real(det(P)); rtol = tol(T))
        @test isapprox(logdet(C), real(logdet(P)); rtol = tol(T))
        @test approx(inv(C), inv(P), T)
    end
    @test approx(cholesky(CuArray(P)).U, cholesky(P).U, T)
    # the factor in the named triangle, the other triangle as it was (LAPACK's potrf; the
    # upper factor is computed as the lower one of A', then transposed back)
    for up in (:U, :L)
        X = CuArray(P); Xc = copy(X)
        C = cholesky!(Hermitian(X, up)); ref = cholesky(Hermitian(P, up))
        @test C.factors === X && C.uplo == ref.uplo
        tri = up === :U ? triu : tril
        @test approx(tri(Array(X)), tri(ref.factors), T)
        @test (up === :U ? tril(Array(X), -1) == tril(P, -1) : triu(Array(X), 1) == triu(P, 1))
        F = cholesky(Hermitian(Xc, up)); @test Array(Xc) == P                # the input untouched
        @test (up === :U ? tril(Array(F.factors), -1) == tril(P, -1) : triu(Array(F.factors), 1) == triu(P, 1))
    end
    @test thrown(() -> cholesky(CuArray(rand(T, 3, 4)))) isa DimensionMismatch
    # not positive definite: PosDefException at the minor, or info with check = false
    N = Matrix{T}(I, 4, 4); N[3, 3] = -1
    @test thrown(() -> cholesky(Hermitian(CuArray(N)))) isa PosDefException
    @test thrown(() -> cholesky(Hermitian(CuArray(N)))).info == 3
    @test cholesky(Hermitian(CuArray(N)); check = false).info == 3
    @test !issuccess(cholesky(Hermitian(CuArray(N)); check = false))
    # not Hermitian: PosDefException(-1), as LinearAlgebra
    NH = rand(T, 4, 4) + 4I; NH[1, 2] += 1
    @test thrown(() -> cholesky(CuArray(NH))).info == -1
    @test cholesky(CuArray(NH); check = false).info == -1
end

@testset "svd, $T" for T in TYPES
    progress("svd, $T")
    for (m, n) in ((7, 4), (4, 4), (3, 6))
        A = rand(T, m, n)
        k = min(m, n)
        ref = svdvals(A)
        for alg in (LinearAlgebra.DivideAndConquer(), LinearAlgebra.QRIteration())
            F = svd(CuArray(A); alg = alg)
            @test F isa SVD
            @test F.U isa CuMatrix{T} && F.Vt isa CuMatrix{T}
            @test size(F.U) == (m, k) && size(F.Vt) == (k, n) && length(F.S) == k
            @test isapprox(Array(F.S), ref; rtol = tol(T))
            @test approx(Array(F.U) * Diagonal(Array(F.S)) * Array(F.Vt), A, T)
            @test approx(Array(F.U)' * Array(F.U), Matrix{T}(I, k, k), T)
            @test approx(Array(F.V)' * Array(F.V), Matrix{T}(I, k, k), T)
        end
        G = svd(CuArray(A); full = true)
        @test size(G.U) == (m, m) && size(G.Vt) == (n, n)
        @test approx(Array(G.U)' * Array(G.U), Matrix{T}(I, m, m), T)
        @test approx(Array(G.U)[:, 1:k] * Diagonal(Array(G.S)) * Array(G.Vt)[1:k, :], A, T)
        s = svdvals(CuArray(A))
        @test s isa CuVector{real(T)} && isapprox(Array(s), ref; rtol = tol(T))
    end
    @test length(svdvals(CuArray(zeros(T, 0, 3)))) == 0
    @test isapprox(Array(svdvals(CuArray([3 0; 0 4]))), [4.0, 3.0])
end

@testset "eigen of Symmetric/Hermitian, $T" for T in TYPES
    progress("eigen of Symmetric/Hermitian, $T")
    n = 7
    A = rand(T, n, n); H = Matrix(Hermitian(A + A'))
    for up in (:U, :L)
        W = T <: Real ? Symmetric : Hermitian
        dH = W(CuArray(up === :U ? triu(H) : tril(H)), up)   # only the named triangle is read
        E = eigen(dH)
        @test E isa Eigen
        @test E.values isa CuVector{real(T)} && E.vectors isa CuMatrix{T}
        ref = eigvals(Hermitian(H))
        @test isapprox(Array(E.values), ref; rtol = tol(T), atol = tol(T))
        V = Array(E.vectors)
        @test approx(H * V, V * Diagonal(Array(E.values)), T)
        @test approx(V' * V, Matrix{T}(I, n, n), T)
        @test isapprox(Array(eigvals(dH)), ref; rtol = tol(T), atol = tol(T))
        @test isapprox(Array(eigen(dH; sortby = x -> -x).values), reverse(ref); rtol = tol(T), atol = tol(T))
    end
end

@testset "triangular products and solves, $T" for T in TYPES
    progress("triangular products and solves, $T")
    n = 5
    A = rand(T, n, n) + n * I; B = rand(T, n, 3); b = rand(T, n); R = rand(T, 2, n)
    dA, dB, db, dR = CuArray(A), CuArray(B), CuArray(b), CuArray(R)
    for W in (UpperTriangular, LowerTriangular, UnitUpperTriangular, UnitLowerTriangular),
        op in (identity, transpose, adjoint), inner in (identity, transpose, adjoint)
        h = op(W(inner(A))); d = op(W(inner(dA)))
        @test approx(d * db, h * b, T)
        @test approx(d * dB, h * B, T)
        @test approx(dR * d, R * h, T)
        @test approx(d \ db, h \ b, T)
        @test approx(d \ dB, h \ B, T)
        @test approx(dR / d, R / h, T)
        x = copy(dB); @test lmul!(d, x) === x && approx(x, h * B, T)
        x = copy(dB); @test ldiv!(d, x) === x && approx(x, h \ B, T)
        x = copy(dR); @test rmul!(x, d) === x && approx(x, R * h, T)
        x = copy(dR); @test rdiv!(x, d) === x && approx(x, R / h, T)
        @test Array(d) == Matrix(h) && CuArray(d) isa CuMatrix{T}
    end
    y = CuArray(zeros(T, n)); @test mul!(y, UpperTriangular(dA), db) === y && approx(y, UpperTriangular(A) * b, T)
    # a singular triangle: SingularException as LAPACK's trtrs
    S = triu(A); S[3, 3] = 0
    @test thrown(() -> UpperTriangular(CuArray(S)) \ db) isa SingularException
    @test approx(UnitUpperTriangular(CuArray(S)) \ db, UnitUpperTriangular(S) \ b, T)
    @test thrown(() -> UpperTriangular(dA) * CuArray(rand(T, n + 1))) isa DimensionMismatch
    # a square triangular matrix is solved as triangular by \ (as LinearAlgebra)
    @test approx(CuArray(triu(A)) \ db, triu(A) \ b, T)
    @test approx(CuArray(tril(A)) \ db, tril(A) \ b, T)
end

@testset "triangular of other element types" begin
    progress("triangular of other element types")
    Ai = rand(-3:3, 4, 4); x = rand(-3:3, 4)
    @test Array(UpperTriangular(CuArray(Ai)) * CuArray(x)) == UpperTriangular(Ai) * x
    @test isapprox(Array(UpperTriangular(CuArray(Ai + 9I)) \ CuArray(x)), UpperTriangular(Ai + 9I) \ x)
    @test Array(UpperTriangular(CuArray(Float32.(Ai))) * CuArray(x)) ≈ UpperTriangular(Float32.(Ai)) * x
end

@testset "symmetric/Hermitian products, $T" for T in TYPES
    progress("symmetric/Hermitian products, $T")
    n = 5
    A = rand(T, n, n); B = rand(T, n, 3); b = rand(T, n); R = rand(T, 2, n)
    for W in (Symmetric, Hermitian), up in (:U, :L)
        h = W(A, up); d = W(CuArray(A), up)
        @test approx(d * CuArray(b), h * b, T)
        @test approx(d * CuArray(B), h * B, T)
        @test approx(CuArray(R) * d, R * h, T)
        C = rand(T, n, 3); dC = CuArray(C)
        @test mul!(dC, d, CuArray(B), T(2), T(-1)) === dC && approx(dC, 2 * (h * B) - C, T)
        @test Array(d) == Matrix(h)
        @test approx(d \ CuArray(b), Matrix(h) \ b, T)
    end
    @test issymmetric(CuArray(A + transpose(A))) && !issymmetric(CuArray(A))
    @test ishermitian(CuArray(A + A')) == true
    @test ishermitian(CuArray(A)) == ishermitian(A)
    @test !issymmetric(CuArray(rand(T, 2, 3)))
end

@testset "istriu, istril, triu!, tril!" begin
    progress("istriu, istril, triu!, tril!")
    for T in (Float32, Float64, ComplexF32, Int8, Int64, Bool, Float16)
        A = T <: Bool ? rand(Bool, 5, 6) : rand(T, 5, 6)
        for k in (-2, 0, 1, 3)
            @test Array(triu(CuArray(A), k)) == triu(A, k)
            @test Array(tril(CuArray(A), k)) == tril(A, k)
            @test istriu(CuArray(triu(A, k)), k) && istril(CuArray(tril(A, k)), k)
            @test istriu(CuArray(A), k) == istriu(A, k)
        end
        D = CuArray(copy(A)); @test triu!(D) === D && Array(D) == triu(A)
    end
    Z = triu(rand(Float32, 3, 3)); Z[3, 1] = -0.0f0
    @test istriu(CuArray(Z))                     # -0.0 is zero
    @test istriu(CuArray(zeros(Float32, 0, 3)))
end

@testset "products of other and mixed element types" begin
    progress("products of other and mixed element types")
    for (TA, TB) in ((Int32, Int32), (Int64, Int64), (Int8, Int8), (UInt16, UInt16), (Bool, Bool),
                     (Int32, Int64), (Bool, Int32), (Int64, Float32), (Float32, Float64),
                     (Float32, ComplexF32), (Float16, Float16), (Float16, Float32), (Int8, ComplexF64))
        A = TA <: Bool ? rand(Bool, 4, 3) : TA <: Integer ? rand(TA(0):TA(5), 4, 3) : rand(TA, 4, 3)
        B = TB <: Bool ? rand(Bool, 3, 2) : TB <: Integer ? rand(TB(0):TB(5), 3, 2) : rand(TB, 3, 2)
        r = CuArray(A) * CuArray(B)
        ref = A * B
        @test r isa CuMatrix{eltype(ref)}
        if eltype(ref) <: Integer
            @test Array(r) == ref
        else
            @test isapprox(Array(r), ref; rtol = eltype(ref) == Float16 ? 1e-2 : 1e-5)
        end
        v = TB <: Bool ? rand(Bool, 3) : TB <: Integer ? rand(TB(0):TB(5), 3) : rand(TB, 3)
        @test isapprox(Array(CuArray(A) * CuArray(v)), A * v; rtol = 1e-2)
        @test isapprox(Array(transpose(CuArray(B)) * transpose(CuArray(A))), transpose(B) * transpose(A); rtol = 1e-2)
    end
    # integers wrap as Base
    A = fill(Int8(100), 2, 2)
    @test Array(CuArray(A) * CuArray(A)) == A * A
    # five-argument mul! on integers
    A = rand(Int32(0):Int32(4), 3, 3); C = rand(Int32(0):Int32(4), 3, 3); dC = CuArray(C)
    @test Array(mul!(dC, CuArray(A), CuArray(A), 2, 3)) == 2 * A * A + 3 * C
    # errors give the user's shapes
    x = CuArray(rand(Float32, 32)); M = CuArray(rand(Float32, 48, 32))
    e = thrown(() -> x' * M)
    @test e isa DimensionMismatch && occursin("(1,32)", e.msg) && occursin("(48, 32)", e.msg)
    e = thrown(() -> CuArray(rand(Int32, 2, 3)) * CuArray(rand(Int32, 2, 3)))
    @test e isa DimensionMismatch && occursin("(2,3)", e.msg)
end

@testset "batched gemm" begin
    progress("batched gemm")
    for T in (Float32, Float64, ComplexF32, Float16)
        A = rand(T, 3, 4, 5); B = rand(T, 4, 2, 5)
        C = CuMem.gemm_strided_batched('N', 'N', CuArray(A), CuArray(B))
        @test C isa CuArray{T,3} && size(C) == (3, 2, 5)
        for k in 1:5
            @test isapprox(Array(C)[:, :, k], A[:, :, k] * B[:, :, k]; rtol = T == Float16 ? 1e-2 : 1e-5)
        end
        # one shared matrix, transposed operands, α and β
        B1 = rand(T, 2, 4, 1); C0 = rand(T, 3, 2, 5); dC = CuArray(C0)
        CuMem.gemm_strided_batched!('N', 'T', T(2), CuArray(A), CuArray(B1), T(1), dC)
        for k in 1:5
            @test isapprox(Array(dC)[:, :, k], 2 * A[:, :, k] * transpose(B1[:, :, 1]) + C0[:, :, k];
                           rtol = T == Float16 ? 1e-2 : 1e-5)
        end
        @test thrown(() -> CuMem.gemm_strided_batched('N', 'N', CuArray(A), CuArray(rand(T, 3, 2, 5)))) isa DimensionMismatch
    end
end

@testset "UniformScaling, diagm, kron" begin
    progress("UniformScaling, diagm, kron")
    for T in (Float32, Float64, ComplexF32, Int32)
        A = T <: Integer ? rand(T(-5):T(5), 4, 4) : rand(T, 4, 4)
        dA = CuArray(A)
        @test Array(dA + I) == A + I && Array(I + dA) == I + A
        @test Array(dA - 2 * I) == A - 2I && Array(I - dA) == I - A
        @test eltype(dA + 0.5 * I) == eltype(A + 0.5 * I) && Array(dA + 0.5I) == A + 0.5I
        @test Array(CuMatrix{T}(I, 3, 5)) == Matrix{T}(I, 3, 5)
        @test Array(CuArray{T}(2I, (2, 3))) == Matrix{T}(2I, 2, 3)
        B = CuArray(ones(T, 3, 2)); @test copyto!(B, I) === B && Array(B) == Matrix{T}(I, 3, 2)
        @test thrown(() -> CuArray(rand(T, 2, 3)) + I) isa DimensionMismatch
        v = CuArray(T[1, 2, 3])
        @test Array(diagm(v)) == diagm(T[1, 2, 3])
        @test Array(diagm(-1 => v, 2 => v[1:2])) == diagm(-1 => T[1, 2, 3], 2 => T[1, 2])
        @test Array(diagm(4, 5, 1 => v)) == diagm(4, 5, 1 => T[1, 2, 3])
        @test thrown(() -> diagm(2, 2, 0 => v)) isa DimensionMismatch
        X = T <: Integer ? rand(T(-3):T(3), 2, 3) : rand(T, 2, 3); Y = T <: Integer ? rand(T(-3):T(3), 3, 2) : rand(T, 3, 2)
        @test Array(kron(CuArray(X), CuArray(Y))) == kron(X, Y)
        @test Array(kron(v, CuArray(T[4, 5]))) == kron(T[1, 2, 3], T[4, 5])
    end
end

@testset "cuSOLVER workspaces come from the pool (GPU only)" begin
    progress("cuSOLVER workspaces come from the pool (GPU only)")
    if CuMem.on_host()
        @test true      # LAPACK's own workspaces on the host device
    else
        n = 512
        A = CuArray(posdef(Float64, n))
        GC.gc(); reset_memory_stats!()
        before = memory_stats().requested_bytes
        E = eigen(Symmetric(A))          # syevd with vectors: a workspace of about 2n² elements
        peak = memory_stats().peak_requested_bytes
        # the copy of A (n² values), W (n) and the workspace (> n²) were live together
        @test peak - before >= 2 * n^2 * sizeof(Float64)
        # and the workspace was given back
        @test memory_stats().requested_bytes - before <= n^2 * sizeof(Float64) + n * sizeof(Float64) + 4096
    end
end

end # testset

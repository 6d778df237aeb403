# QR factorization of CuMatrix through cuSOLVER (geqrf, orgqr, ormqr): `CuQR` and
# `CuQRPackedQ` (CUDA.jl's names: LinearAlgebra's `QR` keeps τ in a host `Vector` on
# Julia 1.5), least squares and minimum-norm solves.

"""
    CuMem.CuQR{T} <: Factorization{T}

The QR factorization of a `CuMatrix` (cuSOLVER's geqrf), LAPACK's compact form: `factors`
(`R` on and above the diagonal, Householder vectors below) and `τ` (a `CuVector`), as
`CUDA.CUSOLVER.CuQR`. `F.Q` is a [`CuMem.CuQRPackedQ`](@ref), `F.R` an upper triangular
`CuMatrix` (`min(m,n) × n`); `F \\ b` solves least squares for a square or tall `A`
(`A \\ b` also solves wide and rank-deficient systems).
"""
struct CuQR{T,S<:CuMatrix{T}} <: Factorization{T}
    factors::S
    τ::CuVector{T}
end

"""
    CuMem.CuQRPackedQ{T}

The `Q` of a [`CuMem.CuQR`](@ref), kept as reflectors: `Q * x`, `Q' * x`, `x * Q`,
`lmul!`/`rmul!` apply it with ormqr; `CuMatrix(Q)` / `CuArray(Q)` form its first
`min(m,n)` columns (orgqr), `Matrix(Q)` downloads them, as LinearAlgebra's thin `Matrix(F.Q)`.
`size(Q) == (m, m)`.
"""
struct CuQRPackedQ{T,S<:CuMatrix{T}}
    factors::S
    τ::CuVector{T}
end

Base.size(F::CuQR) = size(F.factors)
Base.size(F::CuQR, i::Integer) = size(F.factors, i)
Base.size(Q::CuQRPackedQ) = (size(Q.factors, 1), size(Q.factors, 1))
Base.size(Q::CuQRPackedQ, i::Integer) = i <= 2 ? size(Q.factors, 1) : 1
Base.eltype(::Type{<:CuQRPackedQ{T}}) where {T} = T
Base.eltype(::CuQRPackedQ{T}) where {T} = T
Base.adjoint(Q::CuQRPackedQ) = Adjoint{eltype(Q),typeof(Q)}(Q)
Base.propertynames(::CuQR, private::Bool = false) = (:R, :Q, (private ? (:factors, :τ) : ())...)

function cu_qr!(A::CuMatrix{T}) where {T<:BlasFloat}
    τ = CuVector{T}(undef, min(size(A)...))
    geqrf!(A, τ)
    return CuQR(A, τ)
end

"""
    qr!(A::CuMatrix) -> CuMem.CuQR
    qr(A::CuMatrix) -> CuMem.CuQR

QR factorization without pivoting (cuSOLVER's geqrf; LAPACK on the host device; cuSOLVER
has no column pivoting, so `qr(A, Val(true))` is not offered). `F.Q`, `F.R`, `F \\ b`,
`ldiv!`, `Matrix(F.Q)`, `size(F)` as LinearAlgebra's `QR`.
"""
LinearAlgebra.qr!(A::CuMatrix{<:BlasFloat}) = cu_qr!(A)
LinearAlgebra.qr!(A::CuMatrix{<:BlasFloat}, ::Val{false}) = cu_qr!(A)
LinearAlgebra.qr(A::CuMatrix{T}) where {T} = cu_qr!(float_copy(A, factor_type(T, "qr")))
LinearAlgebra.qr(A::CuMatrix, ::Val{false}) = qr(A)

function Base.getproperty(F::CuQR, d::Symbol)
    if d === :R
        A = getfield(F, :factors)
        return triu!(A[1:min(size(A)...), :])
    elseif d === :Q
        return CuQRPackedQ(getfield(F, :factors), getfield(F, :τ))
    else
        return getfield(F, d)
    end
end

function Base.show(io::IO, mime::MIME"text/plain", F::CuQR)
    summary(io, F); println(io)
    println(io, "Q factor: ", summary(F.Q))
    println(io, "R factor:")
    show(io, mime, F.R)
end
Base.show(io::IO, Q::CuQRPackedQ) = print(io, summary(Q))
Base.summary(io::IO, Q::CuQRPackedQ) = print(io, size(Q, 1), "×", size(Q, 2), " ", typeof(Q))

# thin Q: the first min(m,n) columns
function CuArray{T,2}(Q::CuQRPackedQ{S}) where {T,S}
    m, n = size(Q.factors)
    k = min(m, n)
    A = Q.factors[:, 1:k]
    orgqr!(A, Q.τ, k)
    return T === S ? A : convert_eltype(T, A)
end
(::Type{CuMatrix})(Q::CuQRPackedQ{T}) where {T} = CuArray{T,2}(Q)
CuArray(Q::CuQRPackedQ) = CuMatrix(Q)
CuArray{T}(Q::CuQRPackedQ) where {T} = CuMatrix{T}(Q)
Base.Matrix(Q::CuQRPackedQ) = Array(CuMatrix(Q))
Base.Array(Q::CuQRPackedQ) = Matrix(Q)

const CuQRQ{T} = Union{CuQRPackedQ{T},Adjoint{T,<:CuQRPackedQ{T}}}
q_parts(Q::CuQRPackedQ) = (Q, 'N')
q_parts(Q::Adjoint{<:Any,<:CuQRPackedQ}) = (parent(Q), 'C')

function LinearAlgebra.lmul!(Q::CuQRQ{T}, B::CuVecOrMat{T}) where {T}
    P, t = q_parts(Q)
    size(B, 1) == size(P, 1) ||
        throw(DimensionMismatch("Q has dimensions $(size(Q)) but B has dimensions $(size(B))"))
    return ormqr!('L', t, P.factors, P.τ, B)
end
function LinearAlgebra.rmul!(B::CuMatrix{T}, Q::CuQRQ{T}) where {T}
    P, t = q_parts(Q)
    size(B, 2) == size(P, 1) ||
        throw(DimensionMismatch("B has dimensions $(size(B)) but Q has dimensions $(size(Q))"))
    return ormqr!('R', t, P.factors, P.τ, B)
end
function Base.:*(Q::CuQRQ, B::CuVecOrMat)
    T = promote_type(eltype(Q), eltype(B))
    P, t = q_parts(Q)
    m = size(P, 1)
    if size(B, 1) == m
        return lmul!(qr_as(T, Q), copy_as(T, B))
    elseif t == 'N' && size(B, 1) == size(P.factors, 2) && size(P.factors, 2) < m
        # the thin Q times a min(m,n)-row B, as LinearAlgebra pads B with zero rows
        X = CuMem.zeros(T, m, size(B, 2))
        X[1:size(B, 1), :] = B
        lmul!(qr_as(T, Q), X)
        return B isa CuVector ? reshape(X, m) : X
    end
    throw(DimensionMismatch("Q has dimensions $(size(Q)) but B has dimensions $(size(B))"))
end
function Base.:*(B::CuMatrix, Q::CuQRQ)
    T = promote_type(eltype(Q), eltype(B))
    return rmul!(copy_as(T, B), qr_as(T, Q))
end
qr_as(::Type{T}, Q::CuQRPackedQ{T}) where {T} = Q
qr_as(::Type{T}, Q::CuQRPackedQ) where {T} = CuQRPackedQ(convert_eltype(T, Q.factors), convert_eltype(T, Q.τ))
qr_as(::Type{T}, Q::Adjoint{<:Any,<:CuQRPackedQ}) where {T} = adjoint(qr_as(T, parent(Q)))

# R's upper triangle as a triangular wrapper of a view-free copy (k × n)
function LinearAlgebra.ldiv!(F::CuQR{T}, B::CuVecOrMat{T}) where {T}
    m, n = size(F)
    m >= n || throw(DimensionMismatch("ldiv!(::CuQR, B) needs a square or tall matrix (minimum-norm solutions of a wide A: A \\ B)"))
    size(B, 1) == m || throw(DimensionMismatch("B has $(size(B, 1)) rows, but the factorization has $m"))
    ormqr!('L', 'C', F.factors, F.τ, B)
    R = F.factors[1:n, 1:n]
    Bn = B isa CuVector ? B[1:n] : B[1:n, :]
    any_zero_diag(R) && throw(SingularException(first_zero_diag(R)))
    trsm!('L', 'U', 'N', 'N', one(T), R, Bn)
    unsafe_free!(R)
    return Bn
end

any_zero_diag(R::CuMatrix) = any(iszero, host_diag(R))
first_zero_diag(R::CuMatrix) = something(findfirst(iszero, host_diag(R)), 0)

"""
    F::CuQR \\ B

Least-squares solution of `A X = B` for a square or tall `A` (`R \\ (Q'B)[1:n]`), as
LinearAlgebra's unpivoted `qr(A) \\ B`: `SingularException` for an exactly zero diagonal
entry of `R` (LAPACK's trtrs), and a rank-deficient `A` whose `R` has a tiny, not zero,
entry gives the same huge solution as LinearAlgebra's. A wide `F` throws
`DimensionMismatch` (LinearAlgebra's wide unpivoted solve needs LAPACK's tzrzf, which
cuSOLVER lacks): `A \\ B` gives the minimum-norm solution of any shape and rank.
"""
function Base.:\(F::CuQR, B::CuVecOrMat)
    T = promote_type(eltype(F), eltype(B))
    m, n = size(F)
    size(B, 1) == m || throw(DimensionMismatch("B has $(size(B, 1)) rows, but the matrix has $m"))
    G = eltype(F) === T ? F : CuQR(convert_eltype(T, F.factors), convert_eltype(T, F.τ))
    return ldiv!(G, copy_as(T, B))
end

## A \ B for a non-square A

# LinearAlgebra solves a non-square `A \ B` with the column-pivoted QR of `A` (as LAPACK's
# xgelsy): the rank `r` is the largest for which the leading r×r block of R has a condition
# estimate within `rcond = min(m,n) * eps(real(T))`, and the answer is the minimum-norm
# least-squares solution of that rank; it never throws. cuSOLVER has no pivoted QR, so:
# 1. the unpivoted QR of `A` (tall) or `A'` (wide); when the diagonal of R is clearly away
#    from zero (min |R_ii| > sqrt(eps) * max |R_ii|), A has full rank and the QR gives the
#    least-squares (tall) or minimum-norm (wide) solution, which is then unique: the answer;
# 2. otherwise (a tiny R_ii means σ_min ≤ |R_ii| is tiny: rank deficient or nearly so)
#    the SVD: r = count(σ_i ≥ rcond * σ_1), X = V_r Σ_r⁻¹ U_rᴴ B, the minimum-norm
#    least-squares solution of rank r (LAPACK's xgelsd), as LinearAlgebra's for the same r.
# What can differ from LinearAlgebra: its rank comes from an incremental condition estimate
# of the pivoted R, ours from the singular values, so a matrix whose σ_r/σ_1 lies within a
# small factor of rcond may get another rank; a nearly rank-deficient matrix whose
# unpivoted R has no small diagonal entry (Kahan's matrix) is solved at full rank.
function lsq_solve(A::CuMatrix, B::CuVecOrMat)
    T = promote_type(factor_type(eltype(A), "\\"), eltype(B))
    m, n = size(A)
    size(B, 1) == m || throw(DimensionMismatch("B has $(size(B, 1)) rows, but the matrix has $m"))
    nrhs = size(B, 2)
    if min(m, n) == 0
        X = CuMem.zeros(T, n, nrhs)
        return B isa CuVector ? reshape(X, n) : X
    end
    F = cu_qr!(m > n ? float_copy(A, T) : as_eltype(T, copy(adjoint(A))))
    d = abs.(host_diag(F.factors))
    if minimum(d) > sqrt(eps(real(T))) * maximum(d)
        m > n && return ldiv!(F, copy_as(T, B))
        return wide_qr_solve(F, B, T)
    end
    unsafe_free!(F.factors); unsafe_free!(F.τ)
    return svd_lsq(A, B, T)
end
# a temporary `X` as element type T (the temporary freed when converted)
as_eltype(::Type{T}, X::CuArray{T}) where {T} = X
as_eltype(::Type{T}, X::CuArray) where {T} = (Y = convert_eltype(T, X); unsafe_free!(X); Y)

# the minimum-norm solution of a wide full-rank A X = B from F = qr(A') (A' = Q R, R m×m):
# X = Q [R' \ B; 0]
function wide_qr_solve(F::CuQR, B::CuVecOrMat, ::Type{T}) where {T}
    n, m = size(F)
    R = F.factors[1:m, 1:m]
    any_zero_diag(R) && throw(SingularException(first_zero_diag(R)))
    Y = copy_as(T, B)
    trsm!('L', 'U', 'C', 'N', one(T), R, Y)             # R' Y = B
    unsafe_free!(R)
    X = CuMem.zeros(T, n, size(B, 2))
    X[1:m, :] = reshape(Y, m, size(B, 2))
    ormqr!('L', 'N', F.factors, F.τ, X)                 # X = Q [Y; 0]
    return B isa CuVector ? reshape(X, n) : X
end

# the minimum-norm least-squares solution through the thin SVD, rank by rcond = min(m,n) eps
function svd_lsq(A::CuMatrix, B::CuVecOrMat, ::Type{T}) where {T}
    m, n = size(A)
    nrhs = size(B, 2)
    F = svd(float_copy(A, T))
    s = Array(F.S)
    rcond = min(m, n) * eps(real(T))
    r = s[1] > 0 ? count(x -> x >= rcond * s[1], s) : 0
    X = if r == 0
        CuMem.zeros(T, n, nrhs)
    else
        Dinv = CuArray(Matrix{T}(Diagonal(T.(inv.(s[1:r])))))
        Y = Dinv * (F.U[:, 1:r]' * reshape(copy_as(T, B), m, nrhs))   # Σ_r⁻¹ U_rᴴ B
        F.Vt[1:r, :]' * Y
    end
    return B isa CuVector ? reshape(X, n) : X
end

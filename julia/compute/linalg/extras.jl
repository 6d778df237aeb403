# LinearAlgebra functions whose generic methods read a CuMatrix element by element (a
# scalar-indexing error under `allowscalar(false)`), as device operations: `normalize`,
# `opnorm`, `rank`, `cross`, tridiagonal and bidiagonal products, `inv` of triangular
# matrices, `pinv`, `exp` of a matrix, the Q of a QR as an array; and clear errors where
# CuMem has no GPU version (`eigvals` of a general matrix, pivoted QR) or where a CuArray
# meets a host array in a product.

"""
    normalize(x::AnyCuArray, p = 2) -> CuArray

`x ./ norm(x, p)` on the device, as LinearAlgebra's `normalize`.
"""
LinearAlgebra.normalize(x::AnyCuArray, p::Real = 2) = x ./ norm(x, p)

"""
    opnorm(A::CuMatrix, p = 2) -> real number

The operator norm, as LinearAlgebra's: `p = 1` the largest column sum of `abs`, `p = Inf`
the largest row sum (reductions on the device), `p = 2` the largest singular value
(`svdvals`, cuSOLVER). Other `p` are LinearAlgebra's `ArgumentError`.
"""
function LinearAlgebra.opnorm(A::AnyCuArray{T,2}, p::Real = 2) where {T}
    R = float(real(T))
    isempty(A) && return zero(R)
    if p == 1 || p == Inf
        s = sum(abs, A; dims = p == 1 ? 1 : 2)
        r = maximum(s)
        unsafe_free!(s)
        return convert(R, r)
    elseif p == 2
        return convert(R, maximum(svdvals(A isa CuArray ? A : copy(A))))
    end
    throw(ArgumentError("invalid p-norm p=$p. Valid: 1, 2, Inf"))
end

"""
    rank(A::CuMatrix; atol = 0, rtol = min(size(A)...) * eps) -> Int

The number of singular values above `max(atol, rtol * σ₁)`, as LinearAlgebra's `rank`
(singular values by cuSOLVER, the count on the device).
"""
function LinearAlgebra.rank(A::AnyCuArray{T,2}; atol::Real = 0.0,
                            rtol::Real = (min(size(A)...) * eps(real(float(one(T))))) * iszero(atol)) where {T}
    isempty(A) && return 0
    s = svdvals(A isa CuArray ? A : copy(A))
    tol = max(atol, rtol * maximum(s))
    return count(>(tol), s)
end

# the i-th component of a × b (1-based, length 3)
@inline function cross_elem(i, a, b)
    j = i % 3 + 1
    k = (i + 1) % 3 + 1
    return a[j] * b[k] - a[k] * b[j]
end

"""
    cross(a::AnyCuVector, b::AnyCuVector) -> CuVector

The cross product of two 3-vectors, as LinearAlgebra's `cross` (one broadcast on the
device); other lengths are its `DimensionMismatch`.
"""
function LinearAlgebra.cross(a::AnyCuArray{<:Any,1}, b::AnyCuArray{<:Any,1})
    (length(a) == 3 && length(b) == 3) ||
        throw(DimensionMismatch("cross product is only defined for vectors of length 3"))
    ca = a isa CuArray ? a : copy(a)
    cb = b isa CuArray ? b : copy(b)
    return cross_elem.(1:3, Ref(ca), Ref(cb))
end

# Tridiagonal-like matrices with their bands in CuVectors, times a CuVector or CuMatrix:
# row i is dl[i-1] B[i-1, j] + d[i] B[i, j] + du[i] B[i+1, j].
const CuTridiagLike{T} = Union{Tridiagonal{T,<:CuVector{T}},SymTridiagonal{T,<:CuVector{T}},
                               Bidiagonal{T,<:CuVector{T}}}
tri_bands(A::Tridiagonal) = (A.dl, A.d, A.du)
tri_bands(A::SymTridiagonal) = (A.ev, A.dv, A.ev)
tri_bands(A::Bidiagonal) = A.uplo == 'U' ? (nothing, A.dv, A.ev) : (A.ev, A.dv, nothing)
@inline function tridiag_elem(I, n, dl, d, du, B)
    i, j = I[1], I[2]
    s = d[i] * B[i, j]
    if dl !== nothing && i > 1
        s += dl[i-1] * B[i-1, j]
    end
    if du !== nothing && i < n
        s += du[i] * B[i+1, j]
    end
    return s
end

"""
    A * B, mul!(C, A, B) for A a `Tridiagonal`, `SymTridiagonal` or `Bidiagonal` with
    CuVector bands and B a CuVector or CuMatrix

The product on the device (one broadcast over the output), as LinearAlgebra's.
"""
function LinearAlgebra.mul!(C::CuVecOrMat, A::CuTridiagLike, B::CuVecOrMat)
    n = size(A, 1)
    size(B, 1) == n || throw(DimensionMismatch("A has dimensions $(size(A)) but B has dimensions $(size(B))"))
    size(C) == size(B) || throw(DimensionMismatch("C has dimensions $(size(C)), should have $(size(B))"))
    C === B && throw(ArgumentError("output matrix must not be aliased with input matrix"))
    n == 0 && return C
    dl, d, du = tri_bands(A)
    Bm = reshape(B, size(B, 1), size(B, 2))
    Cm = reshape(C, size(C, 1), size(C, 2))
    Cm .= tridiag_elem.(CartesianIndices(size(Cm)), n, Ref(dl), Ref(d), Ref(du), Ref(Bm))
    return C
end
function Base.:*(A::CuTridiagLike{T}, B::CuVecOrMat{S}) where {T,S}
    R = promote_type(T, S)
    return mul!(similar(B, R, size(B)), A, B)
end

"""
    inv(A) for `UpperTriangular`, `LowerTriangular`, `UnitUpperTriangular` or
    `UnitLowerTriangular` of a CuMatrix -> the same kind of triangular CuMatrix

The inverse through cuBLAS's triangular solve against the identity, as LinearAlgebra's
(`SingularException` for a zero on the diagonal; integer matrices give floats).
"""
function Base.inv(A::Union{UpperTriangular{T,<:CuMatrix{T}},LowerTriangular{T,<:CuMatrix{T}},
                           UnitUpperTriangular{T,<:CuMatrix{T}},UnitLowerTriangular{T,<:CuMatrix{T}}}) where {T}
    n = LinearAlgebra.checksquare(A)
    S = factor_type(T, "inv")
    X = A \ CuArray{S,2}(I, n, n)
    W = A isa UpperTriangular ? UpperTriangular : A isa LowerTriangular ? LowerTriangular :
        A isa UnitUpperTriangular ? UnitUpperTriangular : UnitLowerTriangular
    return W(X)
end

"""
    pinv(A::CuMatrix; atol = 0, rtol = ...) -> CuMatrix

The Moore-Penrose pseudo-inverse through the SVD (cuSOLVER), as LinearAlgebra's `pinv`:
singular values at or below `max(atol, rtol * σ₁)` count as zero.
"""
function LinearAlgebra.pinv(A::CuMatrix{T}; atol::Real = 0.0,
                            rtol::Real = (eps(real(float(one(T)))) * min(size(A)...)) * iszero(atol)) where {T}
    m, n = size(A)
    S = factor_type(T, "pinv")
    (m == 0 || n == 0) && return CuArray{S}(undef, n, m)
    U, s, Vt = svd_of_copy(A, S, :thin, true)
    tol = max(atol, rtol * maximum(s))
    sinv = map(x -> x > tol ? inv(x) : zero(x), s)
    X = Vt' * (sinv .* U')
    foreach(unsafe_free!, (U, s, Vt, sinv))
    return X
end

"""
    exp(A::CuMatrix) -> CuMatrix

The matrix exponential, as LinearAlgebra's `exp`: Higham's scaling and squaring with a
degree-13 Padé approximant (2005; the algorithm of LinearAlgebra's `exp!` without its
balancing), products and one LU solve on the device.
"""
function Base.exp(A::CuMatrix{T}) where {T}
    n = LinearAlgebra.checksquare(A)
    S = factor_type(T, "exp")
    X = copy_as(S, A)
    n == 0 && return X
    nrm = opnorm(X, 1)
    s = nrm > 5.4 ? max(0, ceil(Int, log2(nrm / 5.4))) : 0
    s > 0 && (X ./= convert(real(S), 2)^s)
    b = map(c -> convert(real(S), c),
            (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
             129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
             40840800.0, 960960.0, 16380.0, 182.0, 1.0))
    Id = CuArray{S,2}(I, n, n)
    A2 = X * X; A4 = A2 * A2; A6 = A2 * A4
    U = X * (A6 * (b[14] .* A6 .+ b[12] .* A4 .+ b[10] .* A2) .+ b[8] .* A6 .+ b[6] .* A4 .+ b[4] .* A2 .+ b[2] .* Id)
    V = A6 * (b[13] .* A6 .+ b[11] .* A4 .+ b[9] .* A2) .+ b[7] .* A6 .+ b[5] .* A4 .+ b[3] .* A2 .+ b[1] .* Id
    E = (V .- U) \ (V .+ U)
    for _ in 1:s
        E = E * E
    end
    return E
end

# A Hermitian CuMatrix goes to the Hermitian solver (as LinearAlgebra checks); a general
# one has no GPU version: a clear error naming the call and the way out.
LinearAlgebra.eigvals(A::CuMatrix; kw...) =
    ishermitian(A) ? eigvals(Hermitian(A); kw...) : eig_general_error("eigvals")
LinearAlgebra.eigen(A::CuMatrix; kw...) =
    ishermitian(A) ? eigen(Hermitian(A); kw...) : eig_general_error("eigen")
eig_general_error(f) = throw(ArgumentError("$f of a general (non-symmetric) CuMatrix: CuMem has no GPU " *
    "eigensolver for general matrices (cuSOLVER's is for symmetric/Hermitian ones). Wrap a symmetric " *
    "matrix as Symmetric(A) or Hermitian(A) for the GPU version, or call $f(Array(A)) on the host"))
LinearAlgebra.qr(A::CuMatrix, ::Val{true}) = throw(ArgumentError("qr(A, Val(true)) of a CuMatrix: " *
    "CuMem has no column-pivoted QR on the GPU (cuSOLVER has no geqp3). Use qr(A) (unpivoted), or " *
    "qr(Array(A), Val(true)) on the host"))

# The Q of a QR as an array: the full m×m Q (LinearAlgebra's `collect(F.Q)`), its columns.
function full_q(Q::CuQRPackedQ{T}) where {T}
    m = size(Q.factors, 1)
    return Q * CuArray{T,2}(I, m, m)
end
Base.collect(Q::CuQRPackedQ) = full_q(Q)
Base.getindex(Q::CuQRPackedQ, ::Colon, j) = full_q(Q)[:, j]
Base.getindex(Q::CuQRPackedQ, i, j) = full_q(Q)[i, j]

# A CuArray with a host array in a product: the broadcast's message.
host_operand_error(f, x) = throw(ArgumentError("cannot use a $(typeof(x)) together with CuArrays in $f: " *
    "its data is on the host. Upload it first (`CuArray(x)` or `cu(x)`), or download the CuArrays (`Array(y)`)"))
Base.:*(A::AnyCuMatOperand, B::Union{Vector{<:Number},Matrix{<:Number}}) = host_operand_error("*", B)
Base.:*(A::Matrix{<:Number}, B::Union{CuVecOrMat,AnyCuMatOperand}) = host_operand_error("*", A)
LinearAlgebra.dot(x::AnyCuArray, y::Array) = host_operand_error("dot", y)
LinearAlgebra.dot(x::Array, y::AnyCuArray) = host_operand_error("dot", x)

# Factorizations of CuMatrix through cuSOLVER (julia/compute/linalg/wrappers.jl), as
# LinearAlgebra's objects: `LU` (with the pivots as a host `Vector{BlasInt}`, as LAPACK
# returns them), `Cholesky`, `SVD`, `Eigen`, and `CuQR`/`CuQRPackedQ` (CUDA.jl's names:
# LinearAlgebra's `QR` keeps τ in a host `Vector` on Julia 1.5). Solves with `\`/`ldiv!`
# dispatch as LinearAlgebra: square → LU, otherwise QR (least squares or minimum norm),
# triangular and Hermitian wrappers → their own solves. Info codes become
# `SingularException`, `PosDefException` and `LAPACKException` as in LinearAlgebra.

## LU

const CuLU{T} = LU{T,<:CuMatrix{T}}

function cu_lu!(A::CuMatrix{T}, check::Bool) where {T<:BlasFloat}
    F, ipiv, info = getrf!(A)
    check && info > 0 && throw(SingularException(info))
    return LU{T,typeof(A)}(F, ipiv, BlasInt(info))
end

"""
    lu!(A::CuMatrix; check = true) -> LU
    lu(A::CuMatrix; check = true) -> LU

LU factorization with partial pivoting (cuSOLVER's getrf; LAPACK on the host device), as
LinearAlgebra: `F.L`, `F.U` (`CuMatrix`), `F.p`, `F.P`, `F \\ b`, `ldiv!(F, b)`, `det(F)`,
`logdet(F)`, `inv(F)`, `issuccess(F)`; the pivots `F.ipiv` are a host `Vector{BlasInt}`.
`SingularException(i)` when `U[i,i]` is exactly zero, unless `check = false`. Integer
and Float16 matrices are factored as LinearAlgebra promotes them (Float64, Float32).
"""
LinearAlgebra.lu!(A::CuMatrix{<:BlasFloat}; check::Bool = true) = cu_lu!(A, check)
LinearAlgebra.lu!(A::CuMatrix{<:BlasFloat}, ::Val{true}; check::Bool = true) = cu_lu!(A, check)
LinearAlgebra.lu(A::CuMatrix{T}; check::Bool = true) where {T} = cu_lu!(float_copy(A, factor_type(T, "lu")), check)
LinearAlgebra.lu(A::CuMatrix{T}, ::Val{true}; check::Bool = true) where {T} = lu(A; check = check)

function Base.getproperty(F::LU{T,<:CuMatrix}, d::Symbol) where {T}
    m, n = size(F)
    k = min(m, n)
    if d === :L
        L = tril!(getfield(F, :factors)[1:m, 1:k], -1)
        L[diagind(L)] = CuMem.ones(T, k)
        return L
    elseif d === :U
        return triu!(getfield(F, :factors)[1:k, 1:n])
    elseif d === :p
        return LinearAlgebra.ipiv2perm(getfield(F, :ipiv), m)
    elseif d === :P
        P = CuMatrix{T}(I, m, m)
        return P[:, invperm(F.p)]
    else
        return getfield(F, d)
    end
end

function LinearAlgebra.ldiv!(F::CuLU{T}, B::CuVecOrMat{T}) where {T}
    LinearAlgebra.checksquare(F)
    issuccess(F) || throw(SingularException(F.info))
    return getrs!('N', F.factors, F.ipiv, B)
end
for (W, t) in ((:Transpose, 'T'), (:Adjoint, 'C'))
    @eval function LinearAlgebra.ldiv!(F::$W{T,<:CuLU{T}}, B::CuVecOrMat{T}) where {T}
        P = parent(F)
        issuccess(P) || throw(SingularException(P.info))
        return getrs!($t == 'C' && T <: Real ? 'T' : $t, P.factors, P.ipiv, B)
    end
end
const CuLUOp = Union{CuLU,Transpose{<:Any,<:CuLU},Adjoint{<:Any,<:CuLU}}
function Base.:\(F::CuLUOp, B::CuVecOrMat)
    T = promote_type(eltype(F), eltype(B))
    size(F, 1) == size(B, 1) ||
        throw(DimensionMismatch("matrix has $(size(F, 1)) rows, but the right-hand side has $(size(B, 1))"))
    X = copy_as(T, B)
    return ldiv!(factor_as(T, F), X)
end
factor_as(::Type{T}, F::LU{T}) where {T} = F
factor_as(::Type{T}, F::LU) where {T} = LU(convert_eltype(T, F.factors), F.ipiv, F.info)
factor_as(::Type{T}, F::Transpose) where {T} = transpose(factor_as(T, parent(F)))
factor_as(::Type{T}, F::Adjoint) where {T} = adjoint(factor_as(T, parent(F)))


function LinearAlgebra.det(F::CuLU{T}) where {T}
    n = LinearAlgebra.checksquare(F)
    issuccess(F) || return zero(T)
    d = host_diag(F.factors)
    c = count(i -> F.ipiv[i] != i, 1:n)
    return prod(d) * (isodd(c) ? -one(T) : one(T))
end

function LinearAlgebra.logabsdet(F::CuLU{T}) where {T}
    n = LinearAlgebra.checksquare(F)
    issuccess(F) || return log(zero(real(T))), log(one(T))
    d = host_diag(F.factors)
    c = count(i -> F.ipiv[i] != i, 1:n)
    P = mapreduce(sign, *, d; init = one(T))
    return mapreduce(x -> log(abs(x)), +, d; init = zero(real(T))), (isodd(c) ? -P : P)
end

function Base.inv(F::CuLU{T}) where {T}
    n = LinearAlgebra.checksquare(F)
    issuccess(F) || throw(SingularException(F.info))
    return ldiv!(F, CuMatrix{T}(I, n, n))
end

"""
    inv(A::CuMatrix) -> CuMatrix
    det(A::CuMatrix), logdet(A::CuMatrix), logabsdet(A::CuMatrix)

Through `lu(A)` as LinearAlgebra: `inv` solves against the identity (getrs) and throws
`SingularException` for a singular `A`; `det` is 0 for one; `logdet` throws `DomainError`
for a negative determinant of a real matrix. `DimensionMismatch` for a non-square `A`.
"""
Base.inv(A::CuMatrix) = inv(lu(A))
LinearAlgebra.det(A::CuMatrix) = (LinearAlgebra.checksquare(A); det(lu(A; check = false)))
LinearAlgebra.logabsdet(A::CuMatrix) = (LinearAlgebra.checksquare(A); logabsdet(lu(A; check = false)))
LinearAlgebra.logdet(A::CuMatrix) = (LinearAlgebra.checksquare(A); logdet(lu(A; check = false)))

## Cholesky

const CuHermOrSym{T} = Union{Hermitian{T,<:CuMatrix{T}},Symmetric{T,<:CuMatrix{T}}}
const CuCholesky{T} = Cholesky{T,<:CuMatrix{T}}

# cuSOLVER's potrf runs its lower-triangle algorithm much faster than its upper one (H100,
# Float32, n = 4096: 5.0 ms for 'U' beside PyTorch's 2.0 ms for 'L'), so an upper
# factorization is the lower one of Aᴴ: Aᴴ's lower triangle is A's upper one conjugated
# and transposed, potrf('L') turns it into L = Uᴴ, and Lᴴ copied back puts U in A's upper
# triangle and A's other triangle back unchanged (Aᴴ's upper is A's lower, untouched by
# potrf), as LAPACK's potrf('U') leaves it. Two transposes (one when the input is copied
# anyway, `upper_factor`) cost far less than the upper algorithm.
function cu_cholesky!(A::CuMatrix{T}, uplo::Char, check::Bool) where {T<:BlasFloat}
    if uplo == 'U'
        L = copy(adjoint(A))
        _, info = potrf!('L', L)
        copyto!(A, adjoint(L))
        unsafe_free!(L)
    else
        _, info = potrf!(uplo, A)
    end
    check && LinearAlgebra.checkpositivedefinite(info)
    return Cholesky(A, uplo, BlasInt(info))
end
# cholesky of the Hermitian matrix whose `uplo` triangle `A` holds, into a new matrix of
# element type S (A is left as it is): for 'U' the transposed copy is the copy
function cu_cholesky(A::CuMatrix, ::Type{S}, uplo::Char, check::Bool) where {S}
    uplo == 'U' || return cu_cholesky!(float_copy(A, S), uplo, check)
    L = as_eltype(S, copy(adjoint(A)))
    _, info = potrf!('L', L)
    F = copy(adjoint(L))
    unsafe_free!(L)
    check && LinearAlgebra.checkpositivedefinite(info)
    return Cholesky(F, uplo, BlasInt(info))
end

"""
    cholesky!(A::Union{Hermitian,Symmetric}{T,<:CuMatrix}; check = true) -> Cholesky
    cholesky(A::Union{CuMatrix,Hermitian,Symmetric}; check = true) -> Cholesky

Cholesky factorization (cuSOLVER's potrf; LAPACK on the host device) of the triangle
the wrapper names (`'U'` for a plain `CuMatrix`, which must be Hermitian: checked with
one kernel, `PosDefException(-1)` otherwise, as LinearAlgebra). `F.U`, `F.L`, `F.UL`,
`F \\ b`, `ldiv!`,
`det`, `logdet`, `inv`. `PosDefException(i)` when the leading minor of order `i` is not
positive definite, unless `check = false`. Complex `Symmetric` matrices are not Hermitian
and are refused as by LinearAlgebra.
"""
function LinearAlgebra.cholesky!(A::CuHermOrSym{<:BlasFloat}, ::Val{false} = Val(false); check::Bool = true)
    A isa Symmetric && eltype(A) <: Complex && throw(ArgumentError("cholesky of a complex Symmetric matrix; use Hermitian"))
    return cu_cholesky!(parent(A), A.uplo, check)
end
function LinearAlgebra.cholesky!(A::CuMatrix{<:BlasFloat}, ::Val{false} = Val(false); check::Bool = true)
    LinearAlgebra.checksquare(A)
    ishermitian(A) || (check ? LinearAlgebra.checkpositivedefinite(-1) :
                       return Cholesky(A, 'U', BlasInt(-1)))
    return cu_cholesky!(A, 'U', check)
end
function LinearAlgebra.cholesky(A::CuHermOrSym{T}, ::Val{false} = Val(false); check::Bool = true) where {T}
    A isa Symmetric && T <: Complex && throw(ArgumentError("cholesky of a complex Symmetric matrix; use Hermitian"))
    return cu_cholesky(parent(A), factor_type(T, "cholesky"), A.uplo, check)
end
function LinearAlgebra.cholesky(A::CuMatrix{T}, ::Val{false} = Val(false); check::Bool = true) where {T}
    LinearAlgebra.checksquare(A)
    S = factor_type(T, "cholesky")
    ishermitian(A) || (check ? LinearAlgebra.checkpositivedefinite(-1) :
                       return Cholesky(float_copy(A, S), 'U', BlasInt(-1)))
    return cu_cholesky(A, S, 'U', check)
end

function Base.getproperty(C::Cholesky{T,<:CuMatrix}, d::Symbol) where {T}
    F = getfield(C, :factors)
    u = getfield(C, :uplo)
    if d === :U
        return UpperTriangular(u == 'U' ? triu(F) : triu!(copy(adjoint(F))))
    elseif d === :L
        return LowerTriangular(u == 'L' ? tril(F) : tril!(copy(adjoint(F))))
    elseif d === :UL
        return u == 'U' ? UpperTriangular(triu(F)) : LowerTriangular(tril(F))
    else
        return getfield(C, d)
    end
end

function LinearAlgebra.ldiv!(C::CuCholesky{T}, B::CuVecOrMat{T}) where {T}
    issuccess(C) || throw(PosDefException(C.info))
    return potrs!(C.uplo, C.factors, B)
end
function Base.:\(C::CuCholesky, B::CuVecOrMat)
    T = promote_type(eltype(C), eltype(B))
    size(C, 1) == size(B, 1) ||
        throw(DimensionMismatch("matrix has $(size(C, 1)) rows, but the right-hand side has $(size(B, 1))"))
    G = eltype(C) === T ? C : Cholesky(convert_eltype(T, C.factors), C.uplo, C.info)
    return ldiv!(G, copy_as(T, B))
end
function LinearAlgebra.det(C::CuCholesky)
    issuccess(C) || throw(PosDefException(C.info))
    return mapreduce(abs2, *, host_diag(C.factors); init = one(real(eltype(C))))
end
function LinearAlgebra.logdet(C::CuCholesky)
    issuccess(C) || throw(PosDefException(C.info))
    return 2 * mapreduce(x -> log(abs(x)), +, host_diag(C.factors); init = zero(real(eltype(C))))
end
LinearAlgebra.logabsdet(C::CuCholesky) = (logdet(C), one(eltype(C)))
function Base.inv(C::CuCholesky{T}) where {T}
    n = LinearAlgebra.checksquare(C)
    return ldiv!(C, CuMatrix{T}(I, n, n))
end

## SVD

"""
    svd(A::CuMatrix; full = false, alg = LinearAlgebra.DivideAndConquer()) -> SVD
    svd!(A::CuMatrix; ...) -> SVD
    svdvals(A::CuMatrix) -> CuVector

The singular value decomposition as LinearAlgebra's `SVD` (`F.U`, `F.S`, `F.V`, `F.Vt`;
thin unless `full`): `alg = DivideAndConquer()` (the default) runs cuSOLVER's gesvdj
(Jacobi: cuSOLVER has no divide and conquer; PyTorch's default driver), `QRIteration()`
gesvd. `F.S` is a `CuVector` where the `SVD` type allows it (Julia 1.8 and later), a host
`Vector` before. On the host device: LAPACK's gesdd / gesvd. When gesvdj does not converge,
`svd` and `svdvals` compute again with gesvd from their copy of `A`, as PyTorch does;
`LAPACKException` when that does not converge either, or at once for `svd!`/`svdvals!`
(their `A` is spent). `svdvals` returns the values as a `CuVector`.
"""
function LinearAlgebra.svd!(A::CuMatrix{T}; full::Bool = false,
                            alg::LinearAlgebra.Algorithm = LinearAlgebra.DivideAndConquer()) where {T<:BlasFloat}
    U, S, Vt, info = gesvd!(A; vectors = full ? :full : :thin, jacobi = !(alg isa LinearAlgebra.QRIteration))
    info == 0 || throw(LAPACKException(info))
    return make_svd(U, S, Vt)
end
function LinearAlgebra.svd(A::CuMatrix{T}; full::Bool = false,
                           alg::LinearAlgebra.Algorithm = LinearAlgebra.DivideAndConquer()) where {T}
    U, S, Vt = svd_of_copy(A, factor_type(T, "svd"), full ? :full : :thin, !(alg isa LinearAlgebra.QRIteration))
    return make_svd(U, S, Vt)
end
function LinearAlgebra.svdvals!(A::CuMatrix{<:BlasFloat})
    _, S, _, info = gesvd!(A; vectors = :none)
    info == 0 || throw(LAPACKException(info))
    return S
end
LinearAlgebra.svdvals(A::CuMatrix{T}) where {T} = svd_of_copy(A, factor_type(T, "svdvals"), :none, true)[2]
# gesvd! on a copy of A (freed after), and again with gesvd when gesvdj did not converge
function svd_of_copy(A::CuMatrix, ::Type{S}, vectors::Symbol, jacobi::Bool) where {S}
    C = float_copy(A, S)
    U, s, Vt, info = gesvd!(C; vectors = vectors, jacobi = jacobi)
    unsafe_free!(C)
    if info > 0 && jacobi
        foreach(x -> x === nothing || unsafe_free!(x), (U, s, Vt))
        C = float_copy(A, S)
        U, s, Vt, info = gesvd!(C; vectors = vectors, jacobi = false)
        unsafe_free!(C)
    end
    info == 0 || throw(LAPACKException(info))
    return U, s, Vt
end

## symmetric/Hermitian eigenproblem

"""
    eigen(A::Union{Symmetric,Hermitian}{T,<:CuMatrix}) -> Eigen
    eigvals(A::Union{Symmetric,Hermitian}{T,<:CuMatrix}) -> CuVector

Eigenvalues (ascending, a `CuVector` of the real type) and orthonormal eigenvectors
(`F.vectors`, a `CuMatrix`) of a real symmetric or complex Hermitian matrix, as
LinearAlgebra's `Eigen`: cuSOLVER's syevd/heevd (PyTorch's eigh); LAPACK's syevr on the
host device. `eigen!`/`eigvals!` overwrite the parent; `sortby` reorders as LinearAlgebra.
`LAPACKException` when the iteration does not converge. (Integer matrices compute in Float64.)
"""
# real symmetric or complex Hermitian (LinearAlgebra's RealHermSymComplexHerm)
const CuRealHermSymComplexHerm{T<:Real} = Union{Hermitian{T,<:CuMatrix{T}},Symmetric{T,<:CuMatrix{T}},
                                                Hermitian{Complex{T},<:CuMatrix{Complex{T}}}}

function LinearAlgebra.eigen!(A::CuRealHermSymComplexHerm{<:BlasReal}; sortby::Union{Function,Nothing} = nothing)
    W, V = syevd!('V', A.uplo, parent(A))
    if sortby !== nothing
        p = sortperm(Array(W); by = sortby)
        W, V = W[p], V[:, p]
    end
    return Eigen(W, V)
end
function LinearAlgebra.eigvals!(A::CuRealHermSymComplexHerm{<:BlasReal}; sortby::Union{Function,Nothing} = nothing)
    W, _ = syevd!('N', A.uplo, parent(A))
    sortby === nothing && return W
    return W[sortperm(Array(W); by = sortby)]
end
herm_copy(A::CuHermOrSym{T}, what) where {T} =
    (S = factor_type(T, what); A isa Hermitian ? Hermitian(float_copy(parent(A), S), Symbol(A.uplo)) :
                               Symmetric(float_copy(parent(A), S), Symbol(A.uplo)))
LinearAlgebra.eigen(A::CuRealHermSymComplexHerm; sortby::Union{Function,Nothing} = nothing) =
    eigen!(herm_copy(A, "eigen"); sortby = sortby)
LinearAlgebra.eigvals(A::CuRealHermSymComplexHerm; sortby::Union{Function,Nothing} = nothing) =
    eigvals!(herm_copy(A, "eigvals"); sortby = sortby)

## \ and ldiv! on plain matrices, as LinearAlgebra dispatches them

"""
    A::CuMatrix \\ B::CuVecOrMat

As LinearAlgebra: a square `A` that is triangular (checked with one kernel) is solved with
trsm, any other square `A` through `lu(A)` (`SingularException` when a pivot is exactly
zero); a non-square `A` gives the minimum-norm least-squares solution, with the rank
determined as LinearAlgebra's pivoted QR does (`rcond = min(m,n) * eps`), never an
exception: through the QR of `A` (tall) or `A'` (wide) when its R shows full rank, through
the SVD otherwise (cuSOLVER has no pivoted QR; see `lsq_solve` in qr.jl for where the rank
decision can differ). Element types promote as LinearAlgebra's; shapes are checked with
the user's dimensions.
"""
function Base.:\(A::CuMatrix, B::CuVecOrMat)
    m, n = size(A)
    size(B, 1) == m ||
        throw(DimensionMismatch("left hand side has $m rows, but right hand side has $(size(B, 1)) rows"))
    if m == n
        lower, upper = triangularity(A)
        if lower
            return upper ? (Diagonal(A[diagind(A)]) \ B) : LowerTriangular(A) \ B
        end
        upper && return UpperTriangular(A) \ B
        return lu_solve(A, B)
    else
        return lsq_solve(A, B)
    end
end

# lu(A) \ B without the LU object: the pivots stay on the device between getrf and getrs
function lu_solve(A::CuMatrix, B::CuVecOrMat)
    T = promote_type(factor_type(eltype(A), "\\"), eltype(B))
    F = float_copy(A, T)
    ipiv, info = getrf_pivots!(F)
    if info > 0
        unsafe_free!(F); ipiv isa CuVector && unsafe_free!(ipiv)
        throw(SingularException(info))
    end
    X = getrs!('N', F, ipiv, copy_as(T, B))
    unsafe_free!(F); ipiv isa CuVector && unsafe_free!(ipiv)
    return X
end

function LinearAlgebra.ldiv!(A::CuMatrix, B::CuVecOrMat)
    LinearAlgebra.checksquare(A)
    return ldiv!(lu(A), B)
end

# Diagonal(::CuVector) \ B: a broadcast (real types), the host for others
function Base.:\(D::Diagonal{<:Any,<:CuVector}, B::CuVecOrMat)
    d = D.diag
    size(B, 1) == length(d) ||
        throw(DimensionMismatch("diagonal matrix is $(length(d)) by $(length(d)) but right hand side has $(size(B, 1)) rows"))
    any(iszero, Array(d)) && throw(SingularException(findfirst(iszero, Array(d))))
    if is_kernel_eltype(eltype(d)) && is_kernel_eltype(eltype(B)) && !on_host()
        return B ./ d
    end
    return CuArray(Array(d) .\ Array(B))
end

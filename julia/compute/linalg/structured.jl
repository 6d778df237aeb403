# Triangular and symmetric/Hermitian wrappers of CuMatrix: products and solves through
# cuBLAS's trmm/trmv, trsm/trsv and symm/symv/hemm/hemv (julia/compute/linalg/wrappers.jl), with
# the wrappers' transposes and adjoints passed as op flags. Element types other than
# cuBLAS's four are materialised (`CuMatrix(A)`) and multiplied by the generic products.

# The wrappers' types share no element-type variable below the outer one (`CuTriangular{T}`)
# and none at all in `CuTriAny`, the signature of the methods that need no `T`: Julia 1.5
# inserts every method on a Base or LinearAlgebra function into that function's table at
# each `using CuMem`, and intersecting a signature whose nested wrappers share a variable
# with the table's signatures took most of that (bench/julia/load_time.jl: `*` of two
# triangles alone up to half a second). Wrappers of CuMatrix always share the element type anyway
# (`UpperTriangular{T,S}` requires `S <: AbstractMatrix{T}`; `adjoint` of numbers keeps it).
const CuTriData = Union{CuMatrix,Adjoint{<:Any,<:CuMatrix},Transpose{<:Any,<:CuMatrix}}
const CuTriPlain = Union{UpperTriangular{<:Any,<:CuTriData},LowerTriangular{<:Any,<:CuTriData},
                         UnitUpperTriangular{<:Any,<:CuTriData},UnitLowerTriangular{<:Any,<:CuTriData}}
"""
    CuMem.CuTriangular{T}

`UpperTriangular`, `LowerTriangular`, `UnitUpperTriangular`, `UnitLowerTriangular` of a
`CuMatrix` (or of its transpose/adjoint), and the transposes/adjoints of those: what `*`,
`\\`, `/`, `lmul!`, `rmul!`, `ldiv!`, `rdiv!` run on cuBLAS's triangular routines.
"""
const CuTriangular{T} = Union{UpperTriangular{T,<:CuTriData},LowerTriangular{T,<:CuTriData},
                              UnitUpperTriangular{T,<:CuTriData},UnitLowerTriangular{T,<:CuTriData},
                              Adjoint{T,<:CuTriPlain},Transpose{T,<:CuTriPlain}}
const CuTriAny = Union{CuTriPlain,Adjoint{<:Any,<:CuTriPlain},Transpose{<:Any,<:CuTriPlain}}

tri_uplo(::Union{UpperTriangular,UnitUpperTriangular}) = 'U'
tri_uplo(::Union{LowerTriangular,UnitLowerTriangular}) = 'L'
tri_diag(::Union{UnitUpperTriangular,UnitLowerTriangular}) = 'U'
tri_diag(::Union{UpperTriangular,LowerTriangular}) = 'N'
flip(u::Char) = u == 'U' ? 'L' : 'U'

# (stored::CuMatrix, uplo of the stored triangle, op, diag) with op(stored) == A
function tri_parts(A::CuTriPlain)
    T = eltype(A)
    d, u, g = parent(A), tri_uplo(A), tri_diag(A)
    d isa CuMatrix && return (d, u, 'N', g)
    return (parent(d), flip(u), d isa Transpose || T <: Real ? 'T' : 'C', g)
end
function tri_parts(A::Union{Adjoint,Transpose})
    S, u, t, g = tri_parts(parent(A))
    T = eltype(S)
    o = A isa Transpose || T <: Real ? 'T' : 'C'
    t == 'N' && return (S, u, o, g)
    (t == o || T <: Real) && return (S, u, 'N', g)
    # the conjugate of S, which BLAS has no flag for: store S' and transpose it
    return (copy(adjoint(S)), flip(u), 'T', g)
end

"""
    CuMatrix(A::CuMem.CuTriangular) -> CuMatrix

The dense matrix of a triangular wrapper (zeros outside the triangle, ones on a unit
diagonal), on the device. `Array(A)` downloads it.
"""
function CuArray{T,2}(A::CuTriAny) where {T}
    S = eltype(A)
    P, u, t, g = tri_parts(A)
    M = t == 'N' ? copy(P) : t == 'T' ? copy(transpose(P)) : copy(adjoint(P))
    uu = t == 'N' ? u : flip(u)
    uu == 'U' ? triu!(M) : tril!(M)
    g == 'U' && (M[diagind(M)] = CuMem.ones(S, minimum(size(M))))
    return T === S ? M : convert_eltype(T, M)
end
CuArray(A::CuTriAny) = CuArray{eltype(A),2}(A)
CuArray{T}(A::CuTriAny) where {T} = CuArray{T,2}(A)
Base.Array(A::CuTriAny) = Array(CuArray(A))
Base.Matrix(A::CuTriAny) = Array(CuArray(A))

tri_check_left(A, B) = size(A, 2) == size(B, 1) ||
    throw(DimensionMismatch("A has dimensions $(size(A)) but B has dimensions $(size(B))"))
tri_check_right(A, B) = size(A, 2) == size(B, 1) ||
    throw(DimensionMismatch("A has dimensions $(size(A)) but B has dimensions $(size(B))"))

# a solve checks for an exactly zero diagonal first, as LAPACK's trtrs (SingularException)
function check_tri_singular(P::CuMatrix, g::Char)
    g == 'U' && return nothing
    d = host_diag(P)
    i = findfirst(iszero, d)
    i === nothing || throw(SingularException(i))
    return nothing
end

"""
    lmul!(A::CuMem.CuTriangular{T}, B::CuVecOrMat{T}) -> B
    rmul!(B::CuMatrix{T}, A::CuMem.CuTriangular{T}) -> B
    mul!(C, A::CuMem.CuTriangular{T}, B) -> C, mul!(C, B, A::CuMem.CuTriangular{T}) -> C
    ldiv!(A::CuMem.CuTriangular{T}, B::CuVecOrMat{T}) -> B
    rdiv!(B::CuMatrix{T}, A::CuMem.CuTriangular{T}) -> B

`B = A*B`, `B*A`, `A\\B`, `B/A` in place through cuBLAS's trmm/trmv and trsm/trsv (Julia's
BLAS on the host device), for `T` among Float32, Float64, ComplexF32, ComplexF64. The
solves throw `SingularException(i)` for a zero `A[i,i]` (non-unit diagonal), as
LinearAlgebra. `*`, `\\` and `/` allocate and promote element types as LinearAlgebra.
"""
function LinearAlgebra.lmul!(A::CuTriangular{T}, B::CuVecOrMat{T}) where {T<:BlasFloat}
    tri_check_left(A, B)
    P, u, t, g = tri_parts(A)
    return trmm!('L', u, t, g, one(T), P, B)
end
function LinearAlgebra.rmul!(B::CuMatrix{T}, A::CuTriangular{T}) where {T<:BlasFloat}
    tri_check_right(B, A)
    P, u, t, g = tri_parts(A)
    return trmm!('R', u, t, g, one(T), P, B)
end
function LinearAlgebra.ldiv!(A::CuTriangular{T}, B::CuVecOrMat{T}) where {T<:BlasFloat}
    tri_check_left(A, B)
    P, u, t, g = tri_parts(A)
    check_tri_singular(P, g)
    return trsm!('L', u, t, g, one(T), P, B)
end
function LinearAlgebra.rdiv!(B::CuMatrix{T}, A::CuTriangular{T}) where {T<:BlasFloat}
    tri_check_right(B, A)
    P, u, t, g = tri_parts(A)
    check_tri_singular(P, g)
    return trsm!('R', u, t, g, one(T), P, B)
end

# the wrapper with its data converted to T (same structure)
tri_as(::Type{T}, A::CuTriangular{T}) where {T} = A
function tri_as(::Type{T}, A::CuTriAny) where {T}
    P, u, t, g = tri_parts(A)
    Q = convert_eltype(T, P)
    W = u == 'U' ? (g == 'U' ? UnitUpperTriangular : UpperTriangular) :
                   (g == 'U' ? UnitLowerTriangular : LowerTriangular)
    X = W(Q)
    return t == 'N' ? X : t == 'T' ? transpose(X) : adjoint(X)
end

function Base.:*(A::CuTriAny, B::CuVecOrMat)
    tri_check_left(A, B)
    T = promote_type(eltype(A), eltype(B))
    T <: BlasFloat || return CuArray(A) * B
    return lmul!(tri_as(T, A), copy_as(T, B))
end
function Base.:*(B::CuMatrix, A::CuTriAny)
    tri_check_right(B, A)
    T = promote_type(eltype(A), eltype(B))
    T <: BlasFloat || return B * CuArray(A)
    return rmul!(copy_as(T, B), tri_as(T, A))
end
Base.:*(A::CuTriAny, B::CuTriAny) = A * CuArray(B)
function Base.:\(A::CuTriAny, B::CuVecOrMat)
    tri_check_left(A, B)
    T = promote_type(factor_type(eltype(A), "\\"), eltype(B))
    return ldiv!(tri_as(T, A), copy_as(T, B))
end
function Base.:/(B::CuMatrix, A::CuTriAny)
    tri_check_right(B, A)
    T = promote_type(factor_type(eltype(A), "/"), eltype(B))
    return rdiv!(copy_as(T, B), tri_as(T, A))
end
function LinearAlgebra.mul!(C::CuVecOrMat{T}, A::CuTriangular{T}, B::CuVecOrMat{T}) where {T<:BlasFloat}
    tri_check_left(A, B)
    size(C) == (size(A, 1), size(B)[2:end]...) ||
        throw(DimensionMismatch("C has dimensions $(size(C)), should have $((size(A, 1), size(B)[2:end]...))"))
    return lmul!(A, copyto!(C, B))
end
function LinearAlgebra.mul!(C::CuMatrix{T}, B::CuMatrix{T}, A::CuTriangular{T}) where {T<:BlasFloat}
    tri_check_right(B, A)
    size(C) == (size(B, 1), size(A, 2)) ||
        throw(DimensionMismatch("C has dimensions $(size(C)), should have $((size(B, 1), size(A, 2)))"))
    return rmul!(copyto!(C, B), A)
end

## Symmetric and Hermitian

const CuSymOp{T} = Union{Symmetric{T,<:CuMatrix{T}},Hermitian{T,<:CuMatrix{T}}}
is_herm(A) = A isa Hermitian && eltype(A) <: Complex

"""
    CuMatrix(A::Union{Symmetric,Hermitian}{T,<:CuMatrix}) -> CuMatrix

The dense matrix: the stored triangle mirrored into the other (conjugated for
`Hermitian`, whose diagonal is made real), one kernel. `Array(A)` downloads it.
"""
function CuArray{T,2}(A::CuSymOp{S}) where {T,S}
    M = copy(parent(A))
    sym_fill!(M, A.uplo, is_herm(A))
    return T === S ? M : convert_eltype(T, M)
end
CuArray(A::CuSymOp{T}) where {T} = CuArray{T,2}(A)
CuArray{T}(A::CuSymOp) where {T} = CuArray{T,2}(A)
Base.Array(A::CuSymOp) = Array(CuArray(A))
Base.Matrix(A::CuSymOp) = Array(CuArray(A))

"""
    mul!(C, A::Union{Symmetric,Hermitian}{T,<:CuMatrix}, B, α, β) -> C
    mul!(C, B, A::Union{Symmetric,Hermitian}{T,<:CuMatrix}, α, β) -> C

`C = A*B*α + C*β` through cuBLAS's symm/symv (hemm/hemv for complex `Hermitian`), which
read only the wrapper's triangle; Julia's BLAS on the host device. `*` allocates. Other or
mixed element types go through the dense matrix.
"""
function LinearAlgebra.mul!(C::CuVecOrMat{T}, A::CuSymOp{T}, B::CuVecOrMat{T}, α::Number, β::Number) where {T<:BlasFloat}
    size(A, 2) == size(B, 1) || throw(DimensionMismatch("A has dimensions $(size(A)) but B has dimensions $(size(B))"))
    return symm!('L', A.uplo, α, parent(A), B, β, C; hermitian = A isa Hermitian)
end
function LinearAlgebra.mul!(C::CuMatrix{T}, B::CuMatrix{T}, A::CuSymOp{T}, α::Number, β::Number) where {T<:BlasFloat}
    size(B, 2) == size(A, 1) || throw(DimensionMismatch("A has dimensions $(size(B)) but B has dimensions $(size(A))"))
    return symm!('R', A.uplo, α, parent(A), B, β, C; hermitian = A isa Hermitian)
end
LinearAlgebra.mul!(C::CuVecOrMat{T}, A::CuSymOp{T}, B::CuVecOrMat{T}) where {T<:BlasFloat} = mul!(C, A, B, true, false)
LinearAlgebra.mul!(C::CuMatrix{T}, B::CuMatrix{T}, A::CuSymOp{T}) where {T<:BlasFloat} = mul!(C, B, A, true, false)

function Base.:*(A::CuSymOp, B::CuVecOrMat)
    size(A, 2) == size(B, 1) || throw(DimensionMismatch("A has dimensions $(size(A)) but B has dimensions $(size(B))"))
    T = promote_type(eltype(A), eltype(B))
    (T <: BlasFloat && eltype(A) === T && eltype(B) === T) || return CuArray(A) * B
    return mul!(similar(B, T, (size(A, 1), size(B)[2:end]...)), A, B, true, false)
end
function Base.:*(B::CuMatrix, A::CuSymOp)
    size(B, 2) == size(A, 1) || throw(DimensionMismatch("A has dimensions $(size(B)) but B has dimensions $(size(A))"))
    T = promote_type(eltype(A), eltype(B))
    (T <: BlasFloat && eltype(A) === T && eltype(B) === T) || return B * CuArray(A)
    return mul!(similar(B, T, (size(B, 1), size(A, 2))), B, A, true, false)
end
Base.:*(A::CuSymOp, B::CuSymOp) = A * CuArray(B)

# A symmetric/Hermitian system without a definiteness promise: LU of the dense matrix
# (LinearAlgebra uses Bunch-Kaufman, which cuSOLVER offers without its solve).
Base.:\(A::CuSymOp, B::CuVecOrMat) = lu(CuArray(A)) \ B

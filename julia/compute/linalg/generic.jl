# Matrix products beyond cuBLAS's four types (integers, Bool, Float16, mixed types, promoting
# as Base), the row-vector products with the user's shapes in errors, the symmetric fill
# of a stored triangle, UniformScaling (`A + I`, `A - λI`, `CuMatrix{T}(I, m, n)`,
# `copyto!(A, I)`), `diagm`, `kron`.

## generic matrix products

# op(A) as a plain CuMatrix (a copy for a transpose/adjoint), in element type T
materialize(::Type{T}, A::CuArray{T}) where {T} = A
materialize(::Type{T}, A::CuArray) where {T} = convert_eltype(T, A)
materialize(::Type{T}, A::Union{Adjoint,Transpose}) where {T} = materialize(T, copy(A))
as_matrix(B::CuVector) = reshape(B, length(B), 1)
as_matrix(B) = B
host_op(A::CuArray) = host_view(A)
host_op(A::Adjoint) = adjoint(host_view(parent(A)))
host_op(A::Transpose) = transpose(host_view(parent(A)))

# Every other CuArray product (compute/linalg/products.jl has cuBLAS's four types): promoting as Base.
LinearAlgebra.mul!(C::CuVecOrMat, A::AnyCuMatOperand, B::Union{CuVector,AnyCuMatOperand},
                   α::Number, β::Number) = generic_mul!(C, A, B, α, β)
# An outer product with a row vector (`mul!(C, a, transpose(x))`, `a` an m×1 matrix): the
# row as a 1×n matrix over the same memory (conjugated for an adjoint of complex numbers).
row_matrix(B::Transpose{<:Any,<:CuVector}) = reshape(parent(B), 1, length(B))
row_matrix(B::Adjoint{<:Real,<:CuVector}) = reshape(parent(B), 1, length(B))
row_matrix(B::Adjoint{<:Any,<:CuVector}) = reshape(conj(parent(B)), 1, length(B))
LinearAlgebra.mul!(C::CuMatrix, A::AnyCuMatOperand, B::Union{Transpose{<:Any,<:CuVector},Adjoint{<:Any,<:CuVector}},
                   α::Number, β::Number) = mul!(C, A, row_matrix(B), α, β)

"""
    mul!(C::CuVecOrMat, A, B, α, β) (other element types)

Matrix products of element types cuBLAS lacks or mixes, promoting as Base (the product's
type is `C`'s): Float32/Float64/ComplexF32/ComplexF64 results convert the operands and
run cuBLAS's gemm; Float16 results run cuBLAS's half gemm (Float32 accumulation, as
CUDA.jl and PyTorch); integer results (`Int32 * Int32`, `Bool * Bool -> Int`) run an
integer kernel that wraps on overflow as Base. On the host device: Base's generic matmul
on the same memory. `ArgumentError` for other result types (e.g. `Bool` or complex
integers).
"""
function generic_mul!(C::CuVecOrMat, A, B, α::Number, β::Number)
    check_devices("mul!", C, stored(A), B isa CuArray ? B : stored(B))
    mA, nA = size(A, 1), size(A, 2)
    mB, nB = size(B, 1), size(B, 2)
    nA == mB || throw(DimensionMismatch("A has dimensions ($mA,$nA) but B has dimensions ($mB,$nB)"))
    (size(C, 1) == mA && size(C, 2) == nB) ||
        throw(DimensionMismatch("C has dimensions $(size(C)), should have ($mA,$nB)"))
    (aliased(C, stored(A)) || (B isa CuArray ? aliased(C, B) : aliased(C, stored(B)))) &&
        throw(ArgumentError("output matrix must not be aliased with input matrix"))
    T = eltype(C)
    # the same answer on every device: result types without a GPU product are refused
    T <: Union{BlasFloat,Float16,Base.BitInteger} || throw_mul_eltypes(C, A, B)
    if on_host()
        GC.@preserve C A B mul!(host_view(C), host_op(A), host_op(B), α, β)
        return C
    end
    (mA == 0 || nB == 0) && return C
    if T <: BlasFloat || T === Float16
        a, b = materialize(T, A), materialize(T, B)
        r = T === Float16 ? gemm!('N', 'N', α, a, b, β, C) : cu_gemm!(C, a, b, α, β)
        a === A || unsafe_free!(a); b === B || unsafe_free!(b)
        return r
    elseif T <: Base.BitInteger
        a, b = materialize(T, A), materialize(T, as_matrix(B))
        if nA == 0
            C .= iszero(β) ? zero(T) : C .* convert(T, β)
        elseif isone(α) && iszero(β)
            int_matmul!(as_matrix(C), a, b)
        else
            P = int_matmul!(CuMatrix{T}(undef, mA, nB), a, b)
            Cm = as_matrix(C)
            Cm .= iszero(β) ? P .* convert(T, α) : P .* convert(T, α) .+ Cm .* convert(T, β)
            unsafe_free!(P)
        end
        a === A || unsafe_free!(a); b === B || unsafe_free!(b)
        return C
    end
    throw_mul_eltypes(C, A, B)
end

"""
    CuMem.gemm!(tA, tB, alpha, A::CuMatrix{Float16}, B::CuVecOrMat{Float16}, beta, C::CuVecOrMat{Float16}) -> C

Float16 gemm: cuBLAS's `cublasGemmEx` with Float16 operands and Float32 accumulation
(`alpha`, `beta` as Float32); Base's generic matmul on the host device.
"""
function gemm!(tA::Char, tB::Char, alpha, A::CuMatrix{Float16}, B::CuVecOrMat{Float16}, beta,
               C::CuVecOrMat{Float16})
    opa, opb = blas_op(tA), blas_op(tB)
    m, n = size(C, 1), size(C, 2)
    am, ak = tA == 'N' ? (size(A, 1), size(A, 2)) : (size(A, 2), size(A, 1))
    bk, bn = tB == 'N' ? (size(B, 1), size(B, 2)) : (size(B, 2), size(B, 1))
    if am != m || bn != n || ak != bk
        throw(DimensionMismatch("gemm!: op(A) is $am×$ak, op(B) $bk×$bn, C $m×$n"))
    end
    check_devices("gemm!", A, B, C)
    activate()
    if on_host()
        op(t, X) = t == 'N' ? X : t == 'T' ? transpose(X) : adjoint(X)
        GC.@preserve A B C mul!(host_view(C), op(tA, host_view(A)), op(tB, host_mat(B)), alpha, beta)
        return C
    end
    a, b = Ref{Float32}(Float32(alpha)), Ref{Float32}(Float32(beta))
    GC.@preserve A B C a b check(c_gemm_async(current_handle(), Int32(4), opa, opb, m, n, ak,
                                        Base.unsafe_convert(Ptr{Cvoid}, a), devaddr(A), max(1, size(A, 1)),
                                        devaddr(B), max(1, size(B, 1)), Base.unsafe_convert(Ptr{Cvoid}, b),
                                        devaddr(C), max(1, size(C, 1))))
    return C
end

# a row vector times a matrix, with the user's shapes in the error (Base rewrites it as
# (A' x')', whose shapes would show transposed)
for W in (:Adjoint, :Transpose)
    @eval function Base.:*(x::$W{<:Any,<:CuVector}, A::AnyCuMatOperand)
        length(x) == size(A, 1) ||
            throw(DimensionMismatch("A has dimensions (1,$(length(x))) but B has dimensions $(size(A))"))
        return $(W === :Adjoint ? :adjoint : :transpose)($(W === :Adjoint ? :adjoint : :transpose)(A) * parent(x))
    end
end

## UniformScaling

"""
    CuMatrix{T}(I, m, n), CuMatrix{T}(I, (m, n)), CuArray{T}(I, m, n)
    copyto!(A::CuMatrix, J::UniformScaling) -> A

A matrix with `J.λ` on the diagonal and zeros elsewhere, as LinearAlgebra's
`Matrix{T}(I, m, n)` and `copyto!(A, I)` (a memset and a strided copy of the diagonal).
"""
function Base.copyto!(A::CuMatrix{T}, J::UniformScaling) where {T}
    fill!(A, zero(T))
    k = minimum(size(A))
    k > 0 && (A[diagind(A)] = fill!(CuVector{T}(undef, k), convert(T, J.λ)))
    return A
end
CuArray{T,2}(J::UniformScaling, m::Integer, n::Integer) where {T} = copyto!(CuArray{T,2}(undef, m, n), J)
CuArray{T,2}(J::UniformScaling, dims::Dims{2}) where {T} = CuArray{T,2}(J, dims...)
CuArray{T}(J::UniformScaling, m::Integer, n::Integer) where {T} = CuArray{T,2}(J, m, n)
CuArray{T}(J::UniformScaling, dims::Dims{2}) where {T} = CuArray{T,2}(J, dims...)
# `CuArray(3f0*I, m, n)`: the element type of J, as `Matrix(J, m, n)`.
CuArray(J::UniformScaling{T}, m::Integer, n::Integer) where {T} = CuArray{T,2}(J, m, n)
CuArray(J::UniformScaling{T}, dims::Dims{2}) where {T} = CuArray{T,2}(J, dims...)

"""
    LinearAlgebra.copytri!(A::CuMatrix, uplo, conjugate = false) -> A

Copies the upper (`uplo = 'U'`) triangle of the square `A` into its lower triangle (or the
lower into the upper, `'L'`), conjugated when `conjugate`, as LinearAlgebra's: the kept
triangle (`triu`/`tril` kernels) plus the transpose of its strict part, by broadcasts
(element types kernels do not take, e.g. Complex, on the host: one download and upload).
`DimensionMismatch` for a non-square `A`, `ArgumentError` for another `uplo`.
"""
function LinearAlgebra.copytri!(A::CuMatrix, uplo::AbstractChar, conjugate::Bool = false)
    n = LinearAlgebra.checksquare(A)
    uplo in ('U', 'L') || throw(ArgumentError("uplo argument must be 'U' (upper) or 'L' (lower), got $uplo"))
    n == 0 && return A
    # element types kernels do not take yet (Complex): on the host, one download and upload
    is_kernel_eltype(eltype(A)) ||
        return copyto!(A, LinearAlgebra.copytri!(Array(A), uplo, conjugate))
    keep = uplo == 'U' ? triu(A) : tril(A)
    strict = uplo == 'U' ? triu(A, 1) : tril(A, -1)
    A .= keep .+ (conjugate ? adjoint(strict) : transpose(strict))
    unsafe_free!(keep); unsafe_free!(strict)
    return A
end

"""
    A + J, J + A, A - J, J - A    (A::CuMatrix, J::UniformScaling, e.g. `A + I`, `A - 2f0*I`)

As LinearAlgebra: a new matrix of the promoted element type with `J.λ` added to (or
subtracted from) the diagonal; `DimensionMismatch` for a non-square `A`. A copy and one
kernel on the diagonal (`J - A` of complex elements negates on the host).
"""
function Base.:+(A::CuMatrix, J::UniformScaling)
    LinearAlgebra.checksquare(A)
    T = Base.promote_op(+, eltype(A), typeof(J.λ))
    return diag_add!(copy_as(T, A), J.λ)
end
Base.:+(J::UniformScaling, A::CuMatrix) = A + J
function Base.:-(A::CuMatrix, J::UniformScaling)
    LinearAlgebra.checksquare(A)
    T = Base.promote_op(-, eltype(A), typeof(J.λ))
    return diag_add!(copy_as(T, A), -J.λ)
end
function Base.:-(J::UniformScaling, A::CuMatrix)
    LinearAlgebra.checksquare(A)
    T = Base.promote_op(-, typeof(J.λ), eltype(A))
    # complex elements have no generated broadcast kernels yet: negated on the host
    B = is_kernel_eltype(T) ? (C = copy_as(T, A); C .= .-C) : CuArray{T}(.-Array(A))
    return diag_add!(B, J.λ)
end

## diagm, kron

"""
    diagm(v::CuVector), diagm(m, n, v::CuVector), diagm(k => v, ...), diagm(m, n, k => v, ...)

A `CuMatrix` with the vectors on the given diagonals, as LinearAlgebra (`DimensionMismatch`
when a vector does not fit, the element type promoted over the vectors). A memset and
one strided copy per diagonal.
"""
LinearAlgebra.diagm(v::CuVector) = diagm(0 => v)
LinearAlgebra.diagm(m::Integer, n::Integer, v::CuVector) = diagm(m, n, 0 => v)
function LinearAlgebra.diagm(kv::Pair{<:Integer,<:CuVector}...)
    n = mapreduce(p -> length(p.second) + abs(Int(p.first)), max, kv)
    return diagm(n, n, kv...)
end
function LinearAlgebra.diagm(m::Integer, n::Integer, kv::Pair{<:Integer,<:CuVector}...)
    T = promote_type(map(p -> eltype(p.second), kv)...)
    A = CuMem.zeros(T, m, n)
    for p in kv
        k, v = Int(p.first), p.second
        len = k >= 0 ? min(m, n - k) : min(m + k, n)
        length(v) <= max(len, 0) ||
            throw(DimensionMismatch("diagonal $k of a $m×$n matrix has $(max(len, 0)) elements, the vector $(length(v))"))
        isempty(v) && continue
        idx = diagind(m, n, k)[1:length(v)]
        A[idx] = copy_as(T, v)
    end
    return A
end

"""
    kron(A::CuMatrix, B::CuMatrix), kron(a::CuVector, b::CuVector)

The Kronecker product as LinearAlgebra: one broadcast of `A`'s and `B`'s elements laid out
in four dimensions (real element types; complex ones are computed on the host until the
kernel generator handles complex numbers).
"""
function LinearAlgebra.kron(A::CuMatrix, B::CuMatrix)
    ma, na = size(A); mb, nb = size(B)
    T = Base.promote_op(*, eltype(A), eltype(B))
    # complex elements have no generated broadcast kernels yet: computed on the host
    (is_kernel_eltype(eltype(A)) && is_kernel_eltype(eltype(B))) || return CuArray(kron(Array(A), Array(B)))
    R = reshape(B, mb, 1, nb, 1) .* reshape(A, 1, ma, 1, na)
    return reshape(R, ma * mb, na * nb)
end
LinearAlgebra.kron(a::CuVector, b::CuVector) = reshape(kron(reshape(a, length(a), 1), reshape(b, length(b), 1)), :)

"""
    A + D, D + A, A - D, D - A    (A::CuMatrix, D::Diagonal of a CuVector)

A copy of `A` (in the promoted element type, as LinearAlgebra) with `D`'s diagonal added
to (subtracted from) its diagonal, by one broadcast over the diagonal's strided view.
`DimensionMismatch` unless `A` is square of `D`'s size.
"""
function diag_add(A::CuMatrix, D::Diagonal, op, Dfirst::Bool)
    n = length(D.diag)
    size(A) == (n, n) ||
        throw(DimensionMismatch("dimensions must match: a has dims $(Dfirst ? (n, n) : size(A)), b has dims $(Dfirst ? size(A) : (n, n))"))
    T = Base.promote_op(op, eltype(A), eltype(D))
    B = Dfirst && op === (-) ? CuArray{T}(-A) : CuArray{T}(A)
    v = view(B, diagind(B))
    v .= Dfirst ? v .+ D.diag : op.(v, D.diag)
    return B
end
Base.:+(A::CuMatrix, D::Diagonal{<:Any,<:CuVector}) = diag_add(A, D, +, false)
Base.:-(A::CuMatrix, D::Diagonal{<:Any,<:CuVector}) = diag_add(A, D, -, false)
Base.:+(D::Diagonal{<:Any,<:CuVector}, A::CuMatrix) = diag_add(A, D, +, true)
Base.:-(D::Diagonal{<:Any,<:CuVector}, A::CuMatrix) = diag_add(A, D, -, true)

# A Diagonal of a CuVector on the host: `collect(D)`, `Matrix(D)`, `Array(D)` download the
# diagonal once and build LinearAlgebra's dense matrix there.
Base.collect(D::Diagonal{<:Any,<:CuVector}) = Matrix(Diagonal(Array(D.diag)))
Base.Matrix(D::Diagonal{<:Any,<:CuVector}) = Matrix(Diagonal(Array(D.diag)))
Base.Array(D::Diagonal{<:Any,<:CuVector}) = Matrix(Diagonal(Array(D.diag)))

"""
    copyto!(dest, A::CuMem.CuTriangular)
    copyto!(A::UpperTriangular, B::UpperTriangular) (and the other three, of CuMatrices)

A triangular wrapper copied as its dense matrix (zeros outside the triangle) into a CuArray
or a host array. Between two wrappers of the same kind, as LinearAlgebra: only the stored
triangle of `B` (without the diagonal for a unit triangle) is written into `A`'s parent,
the rest of `A`'s parent is kept (one masked broadcast). `BoundsError` when `A` is smaller.
"""
Base.copyto!(dest::CuArray, A::CuTriAny) = (M = CuArray(A); copyto!(dest, M); unsafe_free!(M); dest)
Base.copyto!(dest::Array, A::CuTriAny) = copyto!(dest, Array(A))

# (two methods, upper and lower, each narrower than LinearAlgebra's own pair)
const CuUpperTri = Union{UpperTriangular{<:Any,<:CuMatrix},UnitUpperTriangular{<:Any,<:CuMatrix}}
const CuLowerTri = Union{LowerTriangular{<:Any,<:CuMatrix},UnitLowerTriangular{<:Any,<:CuMatrix}}
Base.copyto!(A::T, B::T) where {T<:CuUpperTri} = copy_triangle!(A, B)
Base.copyto!(A::T, B::T) where {T<:CuLowerTri} = copy_triangle!(A, B)

function copy_triangle!(A, B)
    n = size(B, 1)
    checkbounds(A, n, n)
    n == 0 && return A
    upper = tri_uplo(B) == 'U'
    k = tri_diag(B) == 'U' ? (upper ? 1 : -1) : 0
    mask = fill!(CuMatrix{Bool}(undef, n, n), true)
    upper ? triu!(mask, k) : tril!(mask, k)
    dst = view(parent(A), 1:n, 1:n)
    dst .= ifelse.(mask, parent(B), dst)
    unsafe_free!(mask)
    return A
end

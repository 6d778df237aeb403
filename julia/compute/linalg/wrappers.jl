# The BLAS/LAPACK-level layer under the linear algebra of CuArrays: one function per
# cuBLAS/cuSOLVER routine, with LinearAlgebra.BLAS/LAPACK's argument conventions (chars
# for side/uplo/trans/diag, in-place results) and checks of the user's shapes. On a GPU
# each calls the engine (src/compute/blas_ext.rs, solver.rs) on the current stream; on
# the host device the same routine of Julia's BLAS/LAPACK runs on `host_view`s of the
# same memory, so CI runs every path above this layer.
using LinearAlgebra: BlasFloat, BlasReal, BlasInt, LAPACKException, SingularException, PosDefException, checksquare

## helpers of the layers above

# The floating-point type a factorization of T computes in, as LinearAlgebra's
# (Int → Float64, Float32 stays); cuSOLVER's four types only.
function factor_type(::Type{T}, what) where {T}
    S = typeof(oneunit(T) / oneunit(T))
    S <: BlasFloat && return S
    S === Float16 && return Float32
    S === ComplexF16 && return ComplexF32
    throw(ArgumentError("$what of a CuMatrix{$T}: cuSOLVER factors Float32, Float64, ComplexF32, ComplexF64"))
end
# `A` as a new CuMatrix{S} (a copy even when the type matches: factorizations overwrite)
float_copy(A::CuMatrix{T}, ::Type{S}) where {T,S} = T === S ? copy(A) : convert_eltype(S, A)
convert_eltype(::Type{S}, A::CuArray{T}) where {S,T} =
    is_kernel_eltype(T) && is_kernel_eltype(S) ? S.(A) : CuArray{S}(Array{S}(Array(A)))

# The diagonal of the factors on the host (n values: det, logdet need them all anyway).
host_diag(A::CuMatrix) = Array(A[diagind(A)])

# `B` as a new CuArray of element type T
copy_as(::Type{T}, B::CuArray{T}) where {T} = copy(B)
copy_as(::Type{T}, B::CuArray) where {T} = convert_eltype(T, B)

# LinearAlgebra's `SVD` keeps the singular values in a `Vector` up to Julia 1.7 and in any
# `AbstractVector` since; `F.S` stays on the device where the type allows it.
make_svd(U::CuMatrix, S::CuVector, Vt::CuMatrix) = SVD_DEVICE_S ? SVD(U, S, Vt) : SVD(U, Array(S), Vt)
# Julia ≤ 1.7: the field is `S::Vector{Tr}`; later a type parameter of its own
const SVD_DEVICE_S = fieldtype(Base.unwrap_unionall(SVD), :S) isa TypeVar


## cuBLAS

blas_side(c::Char) = c == 'L' ? Int32(0) : c == 'R' ? Int32(1) :
    throw(ArgumentError("side must be 'L' or 'R', got $(repr(c))"))
blas_uplo(c::Char) = c == 'L' ? Int32(0) : c == 'U' ? Int32(1) :
    throw(ArgumentError("uplo must be 'U' or 'L', got $(repr(c))"))
blas_diag(c::Char) = c == 'N' ? Int32(0) : c == 'U' ? Int32(1) :
    throw(ArgumentError("diag must be 'N' or 'U', got $(repr(c))"))
ld(A::CuArray) = max(1, size(A, 1))
# the matrix view of a vector or matrix operand (host side: an Array over the same memory)
host_mat(B::CuArray) = (H = host_view(B); ndims(H) == 1 ? reshape(H, length(H), 1) : H)

"""
    CuMem.trsm!(side, uplo, transa, diag, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}) -> B

Triangular solve in place, as `LinearAlgebra.BLAS.trsm!`: `B = alpha * op(A) \\ B`
(`side = 'L'`) or `B = alpha * B / op(A)` (`'R'`); `uplo` `'U'`/`'L'` names the triangle
of `A` read, `transa` `'N'`/`'T'`/`'C'`, `diag` `'N'`/`'U'` (unit diagonal, not read). A
vector `B` is one column (cuBLAS trsv). On a GPU cuBLAS on the current stream; on the host
device Julia's BLAS. `DimensionMismatch` for inconsistent sizes. A singular `A` gives
Inf/NaN, as BLAS (the `\\` methods check the diagonal first).
"""
function trsm!(side::Char, uplo::Char, ta::Char, diag::Char, alpha, A::CuMatrix{T},
               B::CuVecOrMat{T}) where {T<:BlasFloat}
    return tri!(c_trsm_async, LinearAlgebra.BLAS.trsm!, side, uplo, ta, diag, alpha, A, B)
end

"""
    CuMem.trmm!(side, uplo, transa, diag, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}) -> B

Triangular product in place, as `LinearAlgebra.BLAS.trmm!`: `B = alpha * op(A) * B`
(`'L'`) or `B = alpha * B * op(A)` (`'R'`); arguments as [`CuMem.trsm!`](@ref) (cuBLAS
trmm, trmv for a vector).
"""
function trmm!(side::Char, uplo::Char, ta::Char, diag::Char, alpha, A::CuMatrix{T},
               B::CuVecOrMat{T}) where {T<:BlasFloat}
    return tri!(c_trmm_async, LinearAlgebra.BLAS.trmm!, side, uplo, ta, diag, alpha, A, B)
end

function tri!(cf, hostf, side, uplo, ta, diag, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}) where {T}
    s, u, t, d = blas_side(side), blas_uplo(uplo), blas_op(ta), blas_diag(diag)
    m, n = size(B, 1), size(B, 2)
    k = side == 'L' ? m : n
    size(A, 1) == size(A, 2) || throw(DimensionMismatch("matrix is not square: dimensions are $(size(A))"))
    size(A, 1) == k || throw(DimensionMismatch(side == 'L' ?
        "A has dimensions $(size(A)) but B has $m rows" : "B has $n columns but A has dimensions $(size(A))"))
    check_devices("triangular product or solve", A, B)
    activate()
    (m == 0 || n == 0) && return B
    if on_host()
        GC.@preserve A B hostf(side, uplo, ta, diag, convert(T, alpha), host_view(A), host_mat(B))
        return B
    end
    a = Ref{T}(convert(T, alpha))
    GC.@preserve A B a check(cf(current_handle(), blas_dtype(T), s, u, t, d, m, n,
                                Base.unsafe_convert(Ptr{Cvoid}, a), devaddr(A), ld(A), devaddr(B), ld(B)))
    return B
end

"""
    CuMem.symm!(side, uplo, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}, beta, C::CuVecOrMat{T}; hermitian=false) -> C

`C = alpha * A * B + beta * C` (`side = 'L'`) or `alpha * B * A + beta * C` (`'R'`) with
`A` symmetric (or Hermitian with `hermitian = true`) of which the `uplo` triangle is read,
as `LinearAlgebra.BLAS.symm!`/`hemm!` (cuBLAS symm/hemm; symv/hemv for a vector). `C` must
not share memory with `A` or `B` (`ArgumentError`); `DimensionMismatch` for inconsistent
sizes.
"""
function symm!(side::Char, uplo::Char, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}, beta,
               C::CuVecOrMat{T}; hermitian::Bool = false) where {T<:BlasFloat}
    s, u = blas_side(side), blas_uplo(uplo)
    m, n = size(B, 1), size(B, 2)
    k = side == 'L' ? m : n
    size(A, 1) == size(A, 2) || throw(DimensionMismatch("matrix is not square: dimensions are $(size(A))"))
    size(A, 1) == k || throw(DimensionMismatch(side == 'L' ?
        "A has dimensions $(size(A)) but B has $m rows" : "B has $n columns but A has dimensions $(size(A))"))
    (size(C, 1), size(C, 2)) == (m, n) ||
        throw(DimensionMismatch("C has dimensions $(size(C)), should have ($m, $n)"))
    (aliased(C, A) || aliased(C, B)) &&
        throw(ArgumentError("output matrix must not be aliased with input matrix"))
    check_devices("symm!", A, B, C)
    activate()
    (m == 0 || n == 0) && return C
    herm = hermitian && T <: Complex
    if on_host()
        GC.@preserve A B C begin
            hA, hB, hC = host_view(A), host_mat(B), host_mat(C)
            (herm ? LinearAlgebra.BLAS.hemm! : LinearAlgebra.BLAS.symm!)(side, uplo, convert(T, alpha), hA, hB,
                                                                       convert(T, beta), hC)
        end
        return C
    end
    a, b = Ref{T}(convert(T, alpha)), Ref{T}(convert(T, beta))
    GC.@preserve A B C a b check(c_symm_async(current_handle(), blas_dtype(T), Int32(herm), s, u, m, n,
                                      Base.unsafe_convert(Ptr{Cvoid}, a), devaddr(A), ld(A), devaddr(B), ld(B),
                                      Base.unsafe_convert(Ptr{Cvoid}, b), devaddr(C), ld(C)))
    return C
end

const BatchFloat = Union{Float16,Float32,Float64,ComplexF32,ComplexF64}

"""
    CuMem.gemm_strided_batched!(tA, tB, alpha, A::CuArray{T,3}, B::CuArray{T,3}, beta, C::CuArray{T,3}) -> C

For each `k`, `C[:,:,k] = alpha * op(A[:,:,k]) * op(B[:,:,k]) + beta * C[:,:,k]`, as
`CUDA.CUBLAS.gemm_strided_batched!` (one cuBLAS call, `cublas<t>gemmStridedBatched`;
Float16 through `cublasGemmStridedBatchedEx` accumulating in Float32). `A` or `B` may
have one matrix (`size(_, 3) == 1`), then used for every `k`. `T` among Float16, Float32,
Float64, ComplexF32, ComplexF64. On the host device: Julia's BLAS (generic matmul for
Float16) per matrix. `DimensionMismatch` for inconsistent sizes; `ArgumentError` when `C`
shares memory with `A` or `B`.
"""
function gemm_strided_batched!(tA::Char, tB::Char, alpha, A::CuArray{T,3}, B::CuArray{T,3}, beta,
                               C::CuArray{T,3}) where {T<:BatchFloat}
    opa, opb = blas_op(tA), blas_op(tB)
    m, n, nb = size(C)
    am, ak = tA == 'N' ? (size(A, 1), size(A, 2)) : (size(A, 2), size(A, 1))
    bk, bn = tB == 'N' ? (size(B, 1), size(B, 2)) : (size(B, 2), size(B, 1))
    if am != m || bn != n || ak != bk
        throw(DimensionMismatch("gemm_strided_batched!: op(A) is $am×$ak, op(B) $bk×$bn, C $m×$n"))
    end
    for (name, X) in (("A", A), ("B", B))
        size(X, 3) in (1, nb) ||
            throw(DimensionMismatch("$name has $(size(X, 3)) matrices, C has $nb (give 1 or $nb)"))
    end
    (aliased(C, A) || aliased(C, B)) &&
        throw(ArgumentError("output array must not be aliased with input array"))
    check_devices("gemm_strided_batched!", A, B, C)
    activate()
    (m == 0 || n == 0 || nb == 0) && return C
    if on_host()
        GC.@preserve A B C begin
            hA, hB, hC = host_view(A), host_view(B), host_view(C)
            for k in 1:nb
                a = view(hA, :, :, size(A, 3) == 1 ? 1 : k)
                b = view(hB, :, :, size(B, 3) == 1 ? 1 : k)
                opA = tA == 'N' ? a : tA == 'T' ? transpose(a) : adjoint(a)
                opB = tB == 'N' ? b : tB == 'T' ? transpose(b) : adjoint(b)
                mul!(view(hC, :, :, k), opA, opB, convert(T, alpha), convert(T, beta))
            end
        end
        return C
    end
    S = T === Float16 ? Float32 : T
    a, b = Ref{S}(convert(S, alpha)), Ref{S}(convert(S, beta))
    stride(X) = size(X, 3) == 1 ? 0 : size(X, 1) * size(X, 2)
    dt = T === Float16 ? Int32(4) : blas_dtype(T)
    GC.@preserve A B C a b check(c_gemm_batched_async(current_handle(), dt, opa, opb, m, n, ak, nb,
                                              Base.unsafe_convert(Ptr{Cvoid}, a), devaddr(A), ld(A), stride(A),
                                              devaddr(B), ld(B), stride(B), Base.unsafe_convert(Ptr{Cvoid}, b),
                                              devaddr(C), ld(C), stride(C)))
    return C
end

"""
    CuMem.gemm_strided_batched(tA, tB, [alpha = 1,] A::CuArray{T,3}, B::CuArray{T,3}) -> CuArray{T,3}

The batched product of [`CuMem.gemm_strided_batched!`](@ref) into a new array.
"""
function gemm_strided_batched(tA::Char, tB::Char, alpha, A::CuArray{T,3}, B::CuArray{T,3}) where {T<:BatchFloat}
    m = tA == 'N' ? size(A, 1) : size(A, 2)
    n = tB == 'N' ? size(B, 2) : size(B, 1)
    C = CuArray{T}(undef, m, n, max(size(A, 3), size(B, 3)))
    return gemm_strided_batched!(tA, tB, alpha, A, B, zero(T), C)
end
gemm_strided_batched(tA::Char, tB::Char, A::CuArray{T,3}, B::CuArray{T,3}) where {T<:BatchFloat} =
    gemm_strided_batched(tA, tB, one(T), A, B)

## cuSOLVER

# Runs a cuSOLVER C function that reports LAPACK's info; returns the info.
function solver_call(f, args...)
    info = Ref{Int32}(0)
    check(f(current_handle(), args..., info))
    return Int(info[])
end

"""
    CuMem.getrf!(A::CuMatrix{T}) -> (A, ipiv::Vector{Int}, info::Int)

LU factorization with partial pivoting in place, as `LinearAlgebra.LAPACK.getrf!`:
`A` gets `L` (unit lower, strictly below the diagonal) and `U`; `ipiv` the row
interchanges (host `Vector{BlasInt}`, 1-based); `info > 0` when `U[info,info]` is exactly
zero. cusolverDnXgetrf on a GPU (workspace from the pool; waits for the stream to read
`info`), LAPACK on the host device.
"""
function getrf!(A::CuMatrix{T}) where {T<:BlasFloat}
    ipiv, info = getrf_pivots!(A)
    ipiv isa CuVector || return A, ipiv, info
    h = Vector{BlasInt}(Array(ipiv))
    unsafe_free!(ipiv)
    return A, h, info
end
# getrf! with the pivots where they lie: a CuVector{Int64} on a GPU (getrs! takes it as it
# is: `A \ b` needs no round trip through the host), a host Vector{BlasInt} on the host device
function getrf_pivots!(A::CuMatrix{T}) where {T<:BlasFloat}
    m, n = size(A)
    check_devices("getrf!", A)
    activate()
    (m == 0 || n == 0) && return BlasInt[], 0
    if on_host()
        _, ipiv, info = GC.@preserve A LinearAlgebra.LAPACK.getrf!(host_view(A))
        return ipiv, Int(info)
    end
    dipiv = CuVector{Int64}(undef, min(m, n))
    info = GC.@preserve A dipiv solver_call(c_getrf_async, blas_dtype(T), m, n, devaddr(A), ld(A), devaddr(dipiv))
    return dipiv, info
end

"""
    CuMem.getrs!(trans, A::CuMatrix{T}, ipiv::AbstractVector{<:Integer}, B::CuVecOrMat{T}) -> B

Solves `op(A) X = B` in place of `B` with the LU factors and pivots of
[`CuMem.getrf!`](@ref), as `LinearAlgebra.LAPACK.getrs!` (cusolverDnXgetrs; LAPACK on the
host device). `DimensionMismatch` for inconsistent sizes.
"""
function getrs!(trans::Char, A::CuMatrix{T}, ipiv::AbstractVector{<:Integer}, B::CuVecOrMat{T}) where {T<:BlasFloat}
    t = blas_op(trans)
    n = size(A, 1)
    size(A, 2) == n || throw(DimensionMismatch("matrix is not square: dimensions are $(size(A))"))
    size(B, 1) == n || throw(DimensionMismatch("B has $(size(B, 1)) rows, but needs $n"))
    length(ipiv) == n || throw(DimensionMismatch("ipiv has length $(length(ipiv)), but needs $n"))
    check_devices("getrs!", A, B)
    activate()
    nrhs = size(B, 2)
    (n == 0 || nrhs == 0) && return B
    if on_host()
        GC.@preserve A B LinearAlgebra.LAPACK.getrs!(trans, host_view(A), Vector{BlasInt}(ipiv), host_mat(B))
        return B
    end
    dipiv = ipiv isa CuVector{Int64} ? ipiv : CuVector{Int64}(Vector{Int64}(ipiv))
    GC.@preserve A B dipiv solver_call(c_getrs_async, blas_dtype(T), t, n, nrhs, devaddr(A), ld(A), devaddr(dipiv),
                                       devaddr(B), ld(B))
    dipiv === ipiv || unsafe_free!(dipiv)
    return B
end

"""
    CuMem.geqrf!(A::CuMatrix{T}, tau::CuVector{T}) -> (A, tau)

QR factorization in place in LAPACK's compact form (`R` on and above the diagonal, the
Householder vectors below, their scalars in `tau` of length `min(size(A)...)`), as
`LinearAlgebra.LAPACK.geqrf!` (cusolverDnXgeqrf; LAPACK on the host device).
"""
function geqrf!(A::CuMatrix{T}, tau::CuVector{T}) where {T<:BlasFloat}
    m, n = size(A)
    length(tau) == min(m, n) ||
        throw(DimensionMismatch("tau has length $(length(tau)), but needs length $(min(m, n))"))
    check_devices("geqrf!", A, tau)
    activate()
    (m == 0 || n == 0) && return A, tau
    if on_host()
        GC.@preserve A tau LinearAlgebra.LAPACK.geqrf!(host_view(A), host_view(tau))
        return A, tau
    end
    GC.@preserve A tau solver_call(c_geqrf_async, blas_dtype(T), m, n, devaddr(A), ld(A), devaddr(tau))
    return A, tau
end

"""
    CuMem.orgqr!(A::CuMatrix{T}, tau::CuVector{T}, k = length(tau)) -> A

The first `size(A, 2)` columns of `Q` in place of `A` from the `k` reflectors of
[`CuMem.geqrf!`](@ref) (orgqr/ungqr; needs `size(A,1) ≥ size(A,2) ≥ k`), as
`LinearAlgebra.LAPACK.orgqr!`.
"""
function orgqr!(A::CuMatrix{T}, tau::CuVector{T}, k::Integer = length(tau)) where {T<:BlasFloat}
    m, n = size(A)
    (m >= n >= k && k <= length(tau)) ||
        throw(DimensionMismatch("orgqr! needs size(A,1) ≥ size(A,2) ≥ k and k ≤ length(tau); got A $m×$n, k = $k, length(tau) = $(length(tau))"))
    check_devices("orgqr!", A, tau)
    activate()
    n == 0 && return A
    k == 0 && return copyto!(A, I)      # no reflectors: Q = I (cuSOLVER would leave A as it is)
    if on_host()
        GC.@preserve A tau LinearAlgebra.LAPACK.orgqr!(host_view(A), host_view(tau), k)
        return A
    end
    GC.@preserve A tau solver_call(c_orgqr_async, blas_dtype(T), m, n, k, devaddr(A), ld(A), devaddr(tau))
    return A
end

"""
    CuMem.ormqr!(side, trans, A::CuMatrix{T}, tau::CuVector{T}, C::CuVecOrMat{T}) -> C

`C = op(Q) * C` (`side = 'L'`) or `C * op(Q)` (`'R'`) in place, `Q` given by the
reflectors in `A` and `tau` of [`CuMem.geqrf!`](@ref), `trans` `'N'`, `'T'` (real) or
`'C'`, as `LinearAlgebra.LAPACK.ormqr!` (ormqr/unmqr).
"""
function ormqr!(side::Char, trans::Char, A::CuMatrix{T}, tau::CuVector{T}, C::CuVecOrMat{T}) where {T<:BlasFloat}
    s, t = blas_side(side), blas_op(trans)
    T <: Complex && trans == 'T' && throw(ArgumentError("trans 'T' is not supported for complex Q (use 'C')"))
    m, n = size(C, 1), size(C, 2)
    k = length(tau)
    order = side == 'L' ? m : n
    size(A, 1) == order && size(A, 2) >= k ||
        throw(DimensionMismatch("Q of order $(size(A, 1)) with $k reflectors cannot multiply C of size $(size(C)) from the $(side == 'L' ? "left" : "right")"))
    check_devices("ormqr!", A, tau, C)
    activate()
    (m == 0 || n == 0 || k == 0) && return C
    if on_host()
        tr = T <: Real && trans == 'C' ? 'T' : trans
        GC.@preserve A tau C LinearAlgebra.LAPACK.ormqr!(side, tr, host_view(A), host_view(tau), host_mat(C))
        return C
    end
    GC.@preserve A tau C solver_call(c_ormqr_async, blas_dtype(T), s, t, m, n, k, devaddr(A), ld(A), devaddr(tau),
                                     devaddr(C), ld(C))
    return C
end

"""
    CuMem.potrf!(uplo, A::CuMatrix{T}) -> (A, info::Int)

Cholesky factorization in place of the `uplo` triangle of `A` (`A = U'U` for `'U'`,
`LL'` for `'L'`; the other triangle untouched), as `LinearAlgebra.LAPACK.potrf!`:
`info > 0` when the leading minor of that order is not positive definite
(cusolverDnXpotrf; LAPACK on the host device).
"""
function potrf!(uplo::Char, A::CuMatrix{T}) where {T<:BlasFloat}
    u = blas_uplo(uplo)
    n = LinearAlgebra.checksquare(A)
    check_devices("potrf!", A)
    activate()
    n == 0 && return A, 0
    if on_host()
        if capture_state() !== nothing     # recorded; info is not known at capture (0, as on a GPU)
            hA = host_view(A)
            host_run(() -> (LinearAlgebra.LAPACK.potrf!(uplo, hA); nothing))
            return A, 0
        end
        _, info = GC.@preserve A LinearAlgebra.LAPACK.potrf!(uplo, host_view(A))
        return A, Int(info)
    end
    info = GC.@preserve A solver_call(c_potrf_async, blas_dtype(T), u, n, devaddr(A), ld(A))
    return A, info
end

"""
    CuMem.potrs!(uplo, A::CuMatrix{T}, B::CuVecOrMat{T}) -> B

Solves `A X = B` in place of `B` with the Cholesky factor of [`CuMem.potrf!`](@ref) in the
`uplo` triangle of `A`, as `LinearAlgebra.LAPACK.potrs!` (cusolverDnXpotrs).
"""
function potrs!(uplo::Char, A::CuMatrix{T}, B::CuVecOrMat{T}) where {T<:BlasFloat}
    u = blas_uplo(uplo)
    n = LinearAlgebra.checksquare(A)
    size(B, 1) == n || throw(DimensionMismatch("first dimension of B, $(size(B, 1)), does not match the order of A, $n"))
    check_devices("potrs!", A, B)
    activate()
    (n == 0 || size(B, 2) == 0) && return B
    if on_host()
        GC.@preserve A B begin
            hA, hB = host_view(A), host_mat(B)
            host_run(() -> (LinearAlgebra.LAPACK.potrs!(uplo, hA, hB); nothing))
        end
        return B
    end
    GC.@preserve A B solver_call(c_potrs_async, blas_dtype(T), u, n, size(B, 2), devaddr(A), ld(A), devaddr(B), ld(B))
    return B
end

"""
    CuMem.gesvd!(A::CuMatrix{T}; vectors = :thin, jacobi = true) -> (U, S, Vt, info)

The singular value decomposition of `A` (`m × n`, destroyed): `S` a `CuVector` of the
`min(m,n)` singular values (real type, descending); with `vectors = :thin` also
`U` (`m × min(m,n)`) and `Vt` (`min(m,n) × n`), with `:full` square `U` and `Vt`, with
`:none` `nothing` for both. `jacobi = true`: cuSOLVER's gesvdj (Jacobi, PyTorch's default
driver), otherwise gesvd (QR iteration; for `m < n` run on `A'`). `info > 0`: the
iteration did not converge. On the host device: LAPACK's gesdd (divide and conquer) for
`jacobi = true`, gesvd otherwise.
"""
function gesvd!(A::CuMatrix{T}; vectors::Symbol = :thin, jacobi::Bool = true) where {T<:BlasFloat}
    vectors in (:none, :thin, :full) || throw(ArgumentError("vectors must be :none, :thin or :full, got :$vectors"))
    m, n = size(A)
    k = min(m, n)
    R = real(T)
    check_devices("gesvd!", A)
    activate()
    if on_host()
        job = vectors === :none ? 'N' : vectors === :thin ? 'S' : 'A'
        if k == 0
            U, Vt = vectors === :none ? (nothing, nothing) :
                (CuMem.zeros(T, m, job == 'A' ? m : k) , CuMem.zeros(T, job == 'A' ? n : k, n))
            U !== nothing && job == 'A' && copyto!(U, I); Vt !== nothing && job == 'A' && copyto!(Vt, I)
            return U, CuVector{R}(undef, 0), Vt, 0
        end
        hU, hS, hVt = GC.@preserve A (jacobi ? LinearAlgebra.LAPACK.gesdd!(job, host_view(A)) :
                                               LinearAlgebra.LAPACK.gesvd!(job, job, host_view(A)))
        vectors === :none && return nothing, CuArray(hS), nothing, 0
        return CuArray(hU), CuArray(hS), CuArray(hVt), 0
    end
    if k == 0
        U, Vt = vectors === :none ? (nothing, nothing) :
            (CuMem.zeros(T, m, vectors === :full ? m : 0), CuMem.zeros(T, vectors === :full ? n : 0, n))
        vectors === :full && (copyto!(U, I); copyto!(Vt, I))
        return U, CuVector{R}(undef, 0), Vt, 0
    end
    if !jacobi && m < n
        # gesvd needs m ≥ n: A' = V Σ U'
        At = copy(adjoint(A))
        V, S, Ut, info = gesvd!(At; vectors = vectors, jacobi = false)
        unsafe_free!(At)
        vectors === :none && return nothing, S, nothing, info
        U, Vt = copy(adjoint(Ut)), copy(adjoint(V))
        unsafe_free!(Ut); unsafe_free!(V)
        return U, S, Vt, info
    end
    S = CuVector{R}(undef, k)
    vec = vectors === :none ? 0 : 1
    econ = vectors !== :full
    if vectors === :none
        U = V = nothing
    elseif jacobi
        U = CuMatrix{T}(undef, m, econ ? k : m)
        V = CuMatrix{T}(undef, n, econ ? k : n)
    else
        U = CuMatrix{T}(undef, m, econ ? k : m)
        V = CuMatrix{T}(undef, econ ? k : n, n)   # receives Vᴴ
    end
    pu, pv = U === nothing ? (UInt64(0), UInt64(0)) : (devaddr(U), devaddr(V))
    ldu, ldv = U === nothing ? (max(1, m), max(1, jacobi ? n : k)) : (ld(U), ld(V))
    vcode = vec == 0 ? 0 : econ ? 1 : 2
    info = GC.@preserve A S U V solver_call(c_gesvd_async, blas_dtype(T), Int32(jacobi), Int32(vcode), m, n, devaddr(A),
                                            ld(A), devaddr(S), pu, ldu, pv, ldv)
    U === nothing && return nothing, S, nothing, info
    if jacobi
        Vt = copy(adjoint(V))   # (the tiled la_adjoint is defined in kernels.jl, included later; 0.03 % of an SVD)
        unsafe_free!(V)
        return U, S, Vt, info
    end
    return U, S, V, info
end

"""
    CuMem.syevd!(jobz, uplo, A::CuMatrix{T}) -> (W, A)

Eigenvalues `W` (a `CuVector` of the real type, ascending) and, for `jobz = 'V'`, the
orthonormal eigenvectors in place of `A`'s columns, of the symmetric/Hermitian matrix
whose `uplo` triangle `A` holds (cusolverDnXsyevd: syevd/heevd, divide and conquer, as
PyTorch's eigh; LAPACK's syevr/heevr on the host device). Throws `LAPACKException(info)`
when it does not converge.
"""
function syevd!(jobz::Char, uplo::Char, A::CuMatrix{T}) where {T<:BlasFloat}
    jobz in ('N', 'V') || throw(ArgumentError("jobz must be 'N' or 'V', got $(repr(jobz))"))
    u = blas_uplo(uplo)
    n = LinearAlgebra.checksquare(A)
    check_devices("syevd!", A)
    activate()
    R = real(T)
    n == 0 && return CuVector{R}(undef, 0), A
    if on_host()
        W, Z = GC.@preserve A LinearAlgebra.LAPACK.syevr!(jobz, 'A', uplo, host_view(A), zero(R), zero(R), 0, 0, -one(R))
        jobz == 'V' && copyto!(A, Z)
        return CuArray(W), A
    end
    W = CuVector{R}(undef, n)
    info = GC.@preserve A W solver_call(c_syevd_async, blas_dtype(T), Int32(jobz == 'V'), u, n, devaddr(A), ld(A), devaddr(W))
    info == 0 || throw(LAPACKException(info))
    return W, A
end

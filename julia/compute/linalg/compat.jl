# The parts of the CuArray linear algebra that depend on the Julia version's
# LinearAlgebra (not on compiler internals): keyed on what the running version defines.

# Pivoting arguments since Julia 1.7 (`RowMaximum()`, `NoPivot()`), beside `Val(true)`/`Val(false)`
if isdefined(LinearAlgebra, :RowMaximum)
    LinearAlgebra.lu!(A::CuMatrix{<:BlasFloat}, ::LinearAlgebra.RowMaximum; check::Bool = true) = cu_lu!(A, check)
    LinearAlgebra.lu(A::CuMatrix, ::LinearAlgebra.RowMaximum; check::Bool = true) = lu(A; check = check)
end
if isdefined(LinearAlgebra, :NoPivot)
    LinearAlgebra.qr!(A::CuMatrix{<:BlasFloat}, ::LinearAlgebra.NoPivot) = cu_qr!(A)
    LinearAlgebra.qr(A::CuMatrix, ::LinearAlgebra.NoPivot) = qr(A)
    LinearAlgebra.cholesky!(A::CuHermOrSym{<:BlasFloat}, ::LinearAlgebra.NoPivot; check::Bool = true) =
        cholesky!(A; check = check)
    LinearAlgebra.cholesky(A::Union{CuMatrix,CuHermOrSym}, ::LinearAlgebra.NoPivot; check::Bool = true) =
        cholesky(A; check = check)
end

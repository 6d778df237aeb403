# show/display/print of CuArrays, views of them and LinearAlgebra wrappers around them:
# the elements are downloaded once and Base prints the host copy (inside the same wrapper,
# so `Diagonal` still prints its dots and `UpperTriangular` its zeros). Nothing is read
# element by element, so showing works under `allowscalar(false)`.

# Arrays stored in a CuArray, directly or through a view/transpose/permutation.
const CuDense{T} = Union{CuArray{T},CuStridedWrapper{T}}

# LinearAlgebra's structured wrappers around device storage (and their transposes).
const CuStructuredInner{T} = Union{
    Diagonal{T,<:CuDense{T}}, Symmetric{T,<:CuDense{T}}, Hermitian{T,<:CuDense{T}},
    UpperTriangular{T,<:CuDense{T}}, LowerTriangular{T,<:CuDense{T}}}
const CuStructured{T} = Union{
    Diagonal{T,<:CuDense{T}}, Bidiagonal{T,<:CuDense{T}}, Tridiagonal{T,<:CuDense{T}},
    SymTridiagonal{T,<:CuDense{T}},
    Symmetric{T,<:CuDense{T}}, Hermitian{T,<:CuDense{T}},
    UpperTriangular{T,<:CuDense{T}}, LowerTriangular{T,<:CuDense{T}},
    UnitUpperTriangular{T,<:CuDense{T}}, UnitLowerTriangular{T,<:CuDense{T}},
    Adjoint{T,<:CuStructuredInner{T}}, Transpose{T,<:CuStructuredInner{T}}}

# CuMem.download_for_show(x)
#
# `x` with its device storage downloaded once (a host array of the same structure): what
# `show` prints for CuArrays, views and wrappers of them.
download_for_show(x::CuArray) = Array(x)
download_for_show(x::SubArray) =
    x isa CuStridedWrapper ? host_array(x) : view(download_for_show(parent(x)), parentindices(x)...)
download_for_show(x::PermutedDimsArray{T,N,perm}) where {T,N,perm} =
    x isa CuStridedWrapper ? host_array(x) : PermutedDimsArray(download_for_show(parent(x)), perm)
download_for_show(x::Base.ReshapedArray) = reshape(download_for_show(parent(x)), size(x))
download_for_show(x::Diagonal) = Diagonal(download_for_show(x.diag))
download_for_show(x::Bidiagonal) =
    Bidiagonal(download_for_show(x.dv), download_for_show(x.ev), Symbol(x.uplo))
download_for_show(x::Tridiagonal) =
    Tridiagonal(download_for_show(x.dl), download_for_show(x.d), download_for_show(x.du))
download_for_show(x::SymTridiagonal) = SymTridiagonal(download_for_show(x.dv), download_for_show(x.ev))
download_for_show(x::Symmetric) = Symmetric(download_for_show(parent(x)), Symbol(x.uplo))
download_for_show(x::Hermitian) = Hermitian(download_for_show(parent(x)), Symbol(x.uplo))
download_for_show(x::UpperTriangular) = UpperTriangular(download_for_show(parent(x)))
download_for_show(x::LowerTriangular) = LowerTriangular(download_for_show(parent(x)))
download_for_show(x::UnitUpperTriangular) = UnitUpperTriangular(download_for_show(parent(x)))
download_for_show(x::UnitLowerTriangular) = UnitLowerTriangular(download_for_show(parent(x)))
download_for_show(x::Adjoint) = adjoint(download_for_show(parent(x)))
download_for_show(x::Transpose) = transpose(download_for_show(parent(x)))
download_for_show(x) = adapt(Array, x)

const CuShowable = Union{CuStridedWrapper,CuStructured}

# text/plain (display, the REPL): Base prints the summary from the type alone, then the
# elements through print_array, which gets the downloaded copy.
Base.print_array(io::IO, x::CuShowable) = Base.print_array(io, download_for_show(x))
# show/print/repr/string
Base.show(io::IO, x::CuShowable) = show(io, download_for_show(x))

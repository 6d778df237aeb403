# show/display/print of CuArrays, views of them and LinearAlgebra wrappers around them:
# the elements are downloaded once and Base prints the host copy (inside the same wrapper,
# so `Diagonal` still prints its dots and `UpperTriangular` its zeros). Nothing is read
# element by element, so showing works under `allowscalar(false)`.


# LinearAlgebra's structured wrappers around device storage (and their transposes).
const CuStructuredInner{T} = Union{
    Diagonal{T,<:StridedCuArray{T}}, Symmetric{T,<:StridedCuArray{T}}, Hermitian{T,<:StridedCuArray{T}},
    UpperTriangular{T,<:StridedCuArray{T}}, LowerTriangular{T,<:StridedCuArray{T}}}
const CuStructured{T} = Union{
    Diagonal{T,<:StridedCuArray{T}}, Bidiagonal{T,<:StridedCuArray{T}}, Tridiagonal{T,<:StridedCuArray{T}},
    SymTridiagonal{T,<:StridedCuArray{T}},
    Symmetric{T,<:StridedCuArray{T}}, Hermitian{T,<:StridedCuArray{T}},
    UpperTriangular{T,<:StridedCuArray{T}}, LowerTriangular{T,<:StridedCuArray{T}},
    UnitUpperTriangular{T,<:StridedCuArray{T}}, UnitLowerTriangular{T,<:StridedCuArray{T}},
    Adjoint{T,<:CuStructuredInner{T}}, Transpose{T,<:CuStructuredInner{T}}}

# `adapt(Array, x)` downloads a strided wrapper of a CuArray (a view, a permutation, a
# reshape of a view) in one piece, its elements only, instead of the whole parent; the
# other wrappers (LinearAlgebra's, transposes) are rebuilt around their downloaded
# contents by array/adapt.jl's methods.
adapt_structure(to::Type{Array}, x::SubArray) =
    x isa CuStridedWrapper ? host_array(x) : view(adapt(to, parent(x)), parentindices(x)...)
adapt_structure(to::Type{Array}, x::PermutedDimsArray{T,N,perm}) where {T,N,perm} =
    x isa CuStridedWrapper ? host_array(x) : PermutedDimsArray(adapt(to, parent(x)), perm)

# CuMem.download_for_show(x)
#
# `x` with its device storage downloaded once (a host array of the same structure): what
# `show` prints for CuArrays, views and wrappers of them.
download_for_show(x) = adapt(Array, x)

const CuShowable = Union{CuStridedWrapper,CuStructured}

# text/plain (display, the REPL): Base prints the summary from the type alone, then the
# elements through print_array, which gets the downloaded copy.
Base.print_array(io::IO, x::CuShowable) = Base.print_array(io, download_for_show(x))
# show/print/repr/string
Base.show(io::IO, x::CuShowable) = show(io, download_for_show(x))

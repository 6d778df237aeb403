# A small stand-in for Adapt.jl (not installable here): `adapt(to, x)` rebuilds `x` with
# its storage converted by `to`, keeping wrappers and containers. Same three-level
# protocol as Adapt.jl, so code written against Adapt ports by renaming the module:
#
#   adapt(to, x)            = adapt_structure(to, x)
#   adapt_structure(to, x)  recurses through wrappers/containers, defaults to adapt_storage
#   adapt_storage(to, x)    converts leaves; defaults to `x` unchanged
#
# Extend `CuMem.adapt_structure` for your own wrapper types and `CuMem.adapt_storage`
# for your own targets.

"""
    CuMem.adapt(to, x)

Converts the storage of `x` with `to`, keeping its structure: tuples, named tuples,
`Adjoint`, `Transpose`, `Diagonal`, the triangular, `Symmetric`, `Hermitian`,
`Bidiagonal`, `Tridiagonal` and `SymTridiagonal` wrappers, `SubArray`,
`PermutedDimsArray` and reshaped arrays are rebuilt around their converted contents.
Targets: `CuArray` (upload, keeping the element type), `CuArray{T}` (upload converting
to `T`), `Array` (download). Arrays whose elements are not isbits (e.g. a vector of
arrays) are converted element by element. Values it does not know are returned
unchanged.

A stand-in for `Adapt.adapt` (Adapt.jl is not reachable here); extend
`CuMem.adapt_structure(to, x::MyWrapper)` and `CuMem.adapt_storage(to, x)` as with Adapt.
"""
adapt(to, x) = adapt_structure(to, x)

adapt_structure(to, x) = adapt_storage(to, x)
adapt_storage(to, x) = x

adapt_structure(to, xs::Tuple) = map(x -> adapt(to, x), xs)
adapt_structure(to, xs::NamedTuple) = map(x -> adapt(to, x), xs)
adapt_structure(to, r::Base.RefValue) = Ref(adapt(to, r[]))

adapt_structure(to, A::Adjoint) = adjoint(adapt(to, parent(A)))
adapt_structure(to, A::Transpose) = transpose(adapt(to, parent(A)))
adapt_structure(to, A::Diagonal) = Diagonal(adapt(to, A.diag))
adapt_structure(to, A::UpperTriangular) = UpperTriangular(adapt(to, parent(A)))
adapt_structure(to, A::LowerTriangular) = LowerTriangular(adapt(to, parent(A)))
adapt_structure(to, A::UnitUpperTriangular) = UnitUpperTriangular(adapt(to, parent(A)))
adapt_structure(to, A::UnitLowerTriangular) = UnitLowerTriangular(adapt(to, parent(A)))
adapt_structure(to, A::Symmetric) = Symmetric(adapt(to, parent(A)), Symbol(A.uplo))
adapt_structure(to, A::Hermitian) = Hermitian(adapt(to, parent(A)), Symbol(A.uplo))
adapt_structure(to, A::Bidiagonal) = Bidiagonal(adapt(to, A.dv), adapt(to, A.ev), Symbol(A.uplo))
adapt_structure(to, A::Tridiagonal) = Tridiagonal(adapt(to, A.dl), adapt(to, A.d), adapt(to, A.du))
adapt_structure(to, A::SymTridiagonal) = SymTridiagonal(adapt(to, A.dv), adapt(to, A.ev))
adapt_structure(to, A::SubArray) = SubArray(adapt(to, parent(A)), parentindices(A))   # as Adapt.jl: stays a SubArray
adapt_structure(to, A::PermutedDimsArray{T,N,perm}) where {T,N,perm} =
    PermutedDimsArray(adapt(to, parent(A)), perm)
adapt_structure(to, A::Base.ReshapedArray) = reshape(adapt(to, parent(A)), size(A))

# Element types that are a Union of isbits types (`Union{Missing,Float64}`): CUDA.jl 3
# and later store such arrays on the device; a CuArray cannot, and converting them element
# by element would silently leave them on the host.
isbits_union(T) = T isa Union && all_isbits_members(T.a) && all_isbits_members(T.b)
all_isbits_members(T) = T isa Union ? isbits_union(T) : isbitstype(T)

@noinline function throw_union_eltype(T)
    throw(ArgumentError("cannot upload an array with element type $T: a CuArray holds " *
                        "isbits elements only. Replace the missing (or other) values first, " *
                        "e.g. `cu(coalesce.(x, NaN))`, or keep a separate mask."))
end

# Leaves: storage conversions.
function adapt_storage(::Type{CuArray}, xs::AbstractArray)
    isbits_union(eltype(xs)) && throw_union_eltype(eltype(xs))
    return isbitstype(eltype(xs)) ? convert(CuArray, xs) : map(x -> adapt(CuArray, x), xs)
end
function adapt_storage(::Type{CuArray{T}}, xs::AbstractArray) where {T}
    isbits_union(eltype(xs)) && throw_union_eltype(eltype(xs))
    return isbitstype(eltype(xs)) ? convert(CuArray{T}, xs) : map(x -> adapt(CuArray{T}, x), xs)
end
adapt_storage(::Type{Array}, xs::CuArray) = Array(xs)
adapt_storage(::Type{Array}, xs::AbstractArray) =
    isbitstype(eltype(xs)) ? xs : map(x -> adapt(Array, x), xs)

# cu: CUDA.jl 2.x's CuArrayAdaptor.
struct Float32Adaptor end

function adapt_storage(to::Float32Adaptor, xs::AbstractArray)
    isbits_union(eltype(xs)) && throw_union_eltype(eltype(xs))
    return isbitstype(eltype(xs)) ? convert(CuArray, xs) : map(x -> adapt(to, x), xs)
end
# floating-point arrays only (CUDA.jl v2.6's src/array.jl): integers, Bool and Float16 keep their type
adapt_storage(::Float32Adaptor, xs::AbstractArray{<:AbstractFloat}) = convert(CuArray{Float32}, xs)
adapt_storage(::Float32Adaptor, xs::AbstractArray{Float16}) = convert(CuArray, xs)
adapt_storage(::Float32Adaptor, xs::AbstractArray{<:Complex{<:AbstractFloat}}) = convert(CuArray{ComplexF32}, xs)

"""
    cu(x)

Uploads `x` to the device as CUDA.jl v2.6's `cu` does: arrays of floating-point numbers
become `CuArray{Float32}` (complex ones `CuArray{ComplexF32}`; `Float16` is kept), other
isbits element types (integers, `Bool`, structs) are kept (`cu([1, 2]) isa CuVector{Int}`),
and structure is kept: `cu(Diagonal([1.0, 2.0]))` is a `Diagonal{Float32,CuArray{Float32,1}}`; adjoints,
transposes, tuples and named tuples likewise (see [`CuMem.adapt`](@ref)). Ranges, scalars
and other values are returned unchanged (`cu(1:3) === 1:3`, as CUDA.jl). A CuArray that already has the target type is
returned as is, not copied. Arrays with `missing` (element type `Union{Missing,T}`) are
an `ArgumentError`: a CuArray holds isbits elements only.
"""
cu(xs) = adapt(Float32Adaptor(), xs)
# Ranges stay ranges (CUDA.jl 2.x: `cu(1:3) === 1:3`): broadcasts take them by value.
adapt_structure(::Float32Adaptor, r::AbstractRange) = r

"""
    cu[x, y, ...]

A CuVector of the values, as CUDA.jl's `cu[1, 2, 3]`: `CuArray([x, y, ...])` (element
types as Base's vector literal, not converted to Float32).
"""
Base.getindex(::typeof(cu), xs...) = CuArray([xs...])

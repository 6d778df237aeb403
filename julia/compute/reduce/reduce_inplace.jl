# In-place reductions: Base.mapreducedim! on CuArrays, the one method under which Base's
# sum!, prod!, maximum!, minimum!, any!, all!, count! and reducedim! run (Base fills or
# copies the first slice into `R` first, `init = true`, then calls mapreducedim!). Base's
# generic mapreducedim! indexes element by element; GPUArrays.jl overrides the same
# function. Here: one reduction kernel (mapreduce.jl) over the dimensions where `R` has
# size 1, then one broadcast that combines it with `R`'s current values.

"""
    Base.mapreducedim!(f, op, R::AnyCuArray, A::AnyCuArray) -> R

`R[i] = op(R[i], op(f(A[j]) for the A[j] that reduce into R[i]))` on the device, over the
dimensions where `R` has size 1 (missing trailing dimensions of `R` count as 1), as Base's.
Errors as Base: `DimensionMismatch` when `R` has more dimensions than `A` or a size that is
neither 1 nor `A`'s. `R` is unchanged when `A` is empty. Backs `sum!`, `prod!`, `maximum!`,
`minimum!`, `any!`, `all!`, `count!` and `reducedim!` on CuArrays.
"""
function Base.mapreducedim!(f, op, R::AnyCuArray, A::AnyCuArray)
    check_devices("mapreducedim!", R, A)
    Base.check_reducedims(R, A)
    isempty(A) && return R
    N = ndims(A)
    rdims = [d for d in 1:N if size(R, d) == 1 && size(A, d) != 1]
    # Base accumulates `op(R[i], f(a))` in R's element type (sum! of ComplexF32 into
    # ComplexF64 adds in double precision): the partial reduction converts f's values first.
    g = reduce_into_fn(f, op, eltype(R), eltype(A))
    part = isempty(rdims) ? g.(A) : mapreduce(g, op, A; dims = rdims)
    # `part` has A's number of dimensions; R may have fewer (all trailing sizes 1)
    src = size(part) == size(R) ? part : reshape(part, size(R))
    R .= op.(R, src)
    part === A || unsafe_free!(part)
    return R
end

# `f` followed by a conversion to the type that `op(r::TR, f(a))` computes in, when that is
# concrete and not f's own result type (`f` itself otherwise).
struct ConvertAfter{S,F}
    f::F
end
@inline (c::ConvertAfter{S})(x) where {S} = convert(S, c.f(x))
function reduce_into_fn(f, op, ::Type{TR}, ::Type{TA}) where {TR,TA}
    TF = Base.promote_op(f, TA)
    S = Base.promote_op(op, TR, TF)
    (isconcretetype(S) && isconcretetype(TF) && S !== TF && S === promote_type(S, TF)) || return f
    return ConvertAfter{S,typeof(f)}(f)
end

# Base's copyfirst!/mapfirst! (the `init` of maximum! and minimum!): `map!` over the first
# slice of `A`, which may have more dimensions than `R` (R: (4,), slice: (4, 1)); CuMem's
# map! needs equal shapes, so the slice is copied and reshaped to R's shape. (Base-internal
# names, present in Julia 1.5 to 1.11; where they are missing Base's own path is used.)
@static if isdefined(Base, :mapfirst!) && isdefined(Base, :_firstreducedslice)
function Base.mapfirst!(f, R::AnyCuArray, A::AnyCuArray)
    Base.check_reducedims(R, A)
    s = view(A, Base._firstreducedslice(axes(R), axes(A))...)
    if size(s) == size(R)
        map!(f, R, s)
    else
        t = copy(s)
        map!(f, R, reshape(t, size(R)))
        unsafe_free!(t)
    end
    return R
end
end

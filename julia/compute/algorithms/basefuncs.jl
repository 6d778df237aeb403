# Base and Statistics functions whose generic methods read an array element by element
# (a scalar-indexing error under `allowscalar(false)`, a device-host copy per element
# otherwise), as device operations: `in`, `hash`, `filter`, `replace`/`replace!`,
# `searchsortedfirst`/`searchsortedlast`/`searchsorted`, `quantile`, `reverse!` with
# `dims`, `resize!`. Each gives Base's result.

"""
    in(v, x::AnyCuArray) -> Bool

Whether some element of `x` is `== v` (Base's `in`; `missing` is not an element type of
a CuArray): one reduction on the device.
"""
Base.in(v, x::AnyCuArray) = any(e -> e == v, x)

"""
    hash(x::CuArray, h::UInt) -> UInt

Base's hash of the same values as an `Array` (one download, not one copy per element),
so that `isequal(x, y)` of CuArrays and of a CuArray and its host copy imply equal hashes.
"""
Base.hash(x::CuArray, h::UInt) = (check_alive(x); hash(Array(x), h))

"""
    filter(f, x::AnyCuArray) -> CuVector

The elements of `x` for which `f` is true, in order (Base's `filter`; a vector for arrays
of any shape): `f` is broadcast to a Bool mask on the device, then a masked gather.
"""
function Base.filter(f, x::AnyCuArray)
    mask = map(e -> f(e)::Bool, x)
    out = x isa CuArray ? x[mask] : copy(x)[mask]
    unsafe_free!(mask)
    return vec(out)
end

# One element replaced as Base's replace: the first pair whose key `isequal`s it.
@inline replace_elem(e, T, ps::Tuple{}) = convert(T, e)
@inline replace_elem(e, T, ps::Tuple) =
    isequal(e, first(ps[1])) ? convert(T, last(ps[1])) : replace_elem(e, T, Base.tail(ps))
check_replace_count(count) = count === nothing ||
    throw(ArgumentError("replace on a CuArray with `count`: limiting the number of replacements needs them in order, which the device does not do; replace all (no `count`), or use a host copy"))

"""
    replace(x::AnyCuArray, old => new...; [count]) -> CuArray
    replace(f, x::AnyCuArray) / replace!(x, old => new...) / replace!(f, x)

Base's `replace`: every element `isequal` to an `old` becomes its `new` (the first pair
that matches), in an array of the promoted element type; with a function, `f` of each
element. One broadcast on the device. `count` (a limit on the replacements) is an
`ArgumentError`: it depends on the order of the elements.
"""
function Base.replace(x::AnyCuArray, pairs::Pair...; count::Union{Integer,Nothing} = nothing)
    check_replace_count(count)
    T = promote_type(eltype(x), map(p -> typeof(last(p)), pairs)...)
    out = similar(x, T, size(x))
    out .= replace_elem.(x, T, Ref(pairs))
    return out
end
function Base.replace!(x::AnyCuArray, pairs::Pair...; count::Union{Integer,Nothing} = nothing)
    check_replace_count(count)
    T = eltype(x)
    x .= replace_elem.(x, T, Ref(pairs))
    return x
end
Base.replace(f::Base.Callable, x::AnyCuArray; count::Union{Integer,Nothing} = nothing) =
    (check_replace_count(count); map(f, x))
Base.replace!(f::Base.Callable, x::AnyCuArray; count::Union{Integer,Nothing} = nothing) =
    (check_replace_count(count); x .= f.(x))

# Base's search order: lt(by(a), by(b)), reversed for rev.
search_lt(lt, by, rev) = rev ? ((a, b) -> lt(by(b), by(a))) : ((a, b) -> lt(by(a), by(b)))

"""
    searchsortedfirst(v::AnyCuVector, x; lt = isless, by = identity, rev = false) -> Int
    searchsortedlast(v, x; ...) / searchsorted(v, x; ...)

Base's binary searches of a sorted CuVector, as counts on the device: the first index
whose element is not before `x` is `1 +` the number of elements before `x` (`v` must be
sorted by the same order, as for Base).
"""
function Base.searchsortedfirst(v::AnyCuArray{<:Any,1}, x; lt = isless, by = identity, rev::Bool = false)
    o = search_lt(lt, by, rev)
    return firstindex(v) + count(e -> o(e, x), v)
end
function Base.searchsortedlast(v::AnyCuArray{<:Any,1}, x; lt = isless, by = identity, rev::Bool = false)
    o = search_lt(lt, by, rev)
    return firstindex(v) - 1 + count(e -> !o(x, e), v)
end
Base.searchsorted(v::AnyCuArray{<:Any,1}, x; kw...) =
    searchsortedfirst(v, x; kw...):searchsortedlast(v, x; kw...)

"""
    quantile(x::AnyCuArray, p; sorted = false) -> number (or an array for an array of p)

Statistics' `quantile` (its default definition 7: linear interpolation between the
order statistics around `(n - 1) p + 1`): `x` is sorted on the device unless `sorted`,
then only the two order statistics each `p` needs are downloaded. NaN is Statistics'
`ArgumentError`; an empty `x` too.
"""
function Statistics.quantile(x::AnyCuArray, p; sorted::Bool = false)
    n = length(x)
    n > 0 || throw(ArgumentError("empty data vector"))
    s = sorted ? vec(x isa CuArray ? x : copy(x)) : sort(vec(x isa CuArray ? x : copy(x)))
    last_ = Array(s[n:n])[1]
    last_ isa Number && isnan(last_) &&
        throw(ArgumentError("quantiles are undefined in presence of NaNs or missing values"))
    r = map(q -> quantile_at(s, n, q), p)
    s === x || sorted || unsafe_free!(s)
    return r
end
function quantile_at(s, n, p::Real)
    0 <= p <= 1 || throw(ArgumentError("input probability out of [0,1] range"))
    h = (n - 1) * p + 1
    j = clamp(floor(Int, h), 1, n)
    k = min(j + 1, n)
    ab = Array(s[j:k])
    a, b = ab[1], ab[end]
    γ = h - j
    return a + γ * (b - a)
end

"""
    reverse!(A::AnyCuArray; dims = :) -> A

`A` reversed in place along `dims` (all dimensions by default), as Base's `reverse!`
(Julia 1.6 and later): a reversed copy on the device written back.
"""
function Base.reverse!(A::AnyCuArray; dims = :)
    # all dimensions reversed is the linear order reversed
    tmp = dims isa Colon ? reshape(reverse(vec(A isa CuArray ? A : copy(A))), size(A)) :
                           reverse(A; dims = dims)
    copyto!(A, tmp)
    tmp isa CuArray && unsafe_free!(tmp)
    return A
end

"""
    resize!(v::CuVector, n::Integer) -> v

`v` with `n` elements, as Base's: the first `min(n, length(v))` elements kept, new ones
undefined. The elements move to a new allocation (one device copy; the old memory goes
back to the pool). A vector that shares its memory with a `reshape` or contiguous `view`
of it, and one wrapping memory it does not own (`unsafe_wrap(...; own = false)`), is an
`ArgumentError` (the other array would keep pointing at the old memory; the wrapped
memory is not CuMem's to reallocate).
"""
function Base.resize!(v::CuArray{T,1}, n::Integer) where {T}
    check_alive(v)
    n >= 0 || throw(ArgumentError("new length must be ≥ 0"))
    s = getfield(v, :shared)
    s === nothing || s.owned ||
        throw(ArgumentError("resize!: this CuVector wraps memory it does not own (unsafe_wrap with own = false); resize a copy instead"))
    s === nothing || s.refs[] == 1 ||
        throw(ArgumentError("resize!: this CuVector shares its memory with reshapes or views of it; resize a copy instead"))
    n == length(v) && return v
    new = CuArray{T,1}(undef, (Int(n),))
    m = min(n, length(v))
    m > 0 && copyto!(new, 1, v, 1, m)
    # v takes the new memory; `new` takes the old one and returns it to the pool
    for f in (:ptr, :dims, :shared)
        a, b = getfield(v, f), getfield(new, f)
        setfield!(v, f, b); setfield!(new, f, a)
    end
    unsafe_free!(new)
    return v
end

"""
    push!(v::CuVector, items...) -> v
    append!(v::CuVector, items) -> v

`v` with `items` added at its end, as Base's: through [`resize!`](@ref) (each call moves
the elements to a new allocation: build long vectors on the host, or `vcat` once, rather
than growing one element at a time) and one upload of `items` (a device copy for a
CuArray). Items are converted to `eltype(v)` (an `InexactError` and so on before `v`
changes). The `resize!` errors apply.
"""
function Base.push!(v::CuArray{T,1}, items...) where {T}
    isempty(items) && return v
    return bf_append!(v, T[convert(T, x) for x in items])
end
Base.append!(v::CuArray{T,1}, items::AbstractVector) where {T} =
    bf_append!(v, items isa AnyCuArray ? items : T[convert(T, x) for x in items])
Base.append!(v::CuArray{T,1}, items) where {T} = bf_append!(v, T[convert(T, x) for x in items])

function bf_append!(v::CuArray{T,1}, items::AbstractVector) where {T}
    m = length(items)
    m == 0 && return v
    # a device copy first: v's own memory moves in resize! (append!(v, v))
    items isa AnyCuArray && (items = items isa CuArray{T} ? copy(items) : CuArray{T}(items))
    n = length(v)
    resize!(v, n + m)
    copyto!(v, n + 1, items isa CuArray ? items : convert(Vector{T}, items), 1, m)
    return v
end

# CuIterator: uploads batches one at a time, freeing the previous one (CUDA.jl 2.x).

"""
    CuIterator(batches)

Iterates over `batches`, uploading each with `CuMem.adapt(CuArray, batch)` (element types
are kept): an array becomes a CuArray; a tuple, named tuple or vector of arrays has each
array uploaded; other values pass through unchanged. When the iterator advances, and when
it ends, the arrays it uploaded for the previous batch are freed with
[`unsafe_free!`](@ref), so a training loop holds one batch on the device at a time
without waiting for the GC. Keep no reference to a batch beyond its iteration (copy what
you need). CuArrays that were already in the input are passed through and never freed.

`length`, `size`, `IteratorSize` and (for arrays, tuples and named tuples of arrays)
`eltype` follow `batches`.
```julia
for (x, y) in CuIterator(zip(xs, ys))   # xs, ys: vectors of host arrays
    loss = ...                          # x, y: CuArrays
end
```
"""
mutable struct CuIterator{B}
    batches::B
    previous::Any       # the last uploaded batch, freed on the next step
    keep::Any           # CuArrays of the input batch (never freed), or nothing
    CuIterator(batches::B) where {B} = new{B}(batches, nothing, nothing)
end

function Base.iterate(c::CuIterator, state...)
    item = iterate(c.batches, state...)
    free_previous!(c)
    item === nothing && return nothing
    batch, next = item
    cubatch = adapt(CuArray, batch)
    c.previous = cubatch
    c.keep = input_cuarrays(batch)
    return cubatch, next
end

function free_previous!(c::CuIterator)
    prev, keep = c.previous, c.keep
    c.previous = nothing
    c.keep = nothing
    prev === nothing || free_batch(prev, keep)
    return nothing
end

# Frees the CuArrays inside an uploaded batch, except those in `keep`.
free_batch(x::CuArray, keep) = (keep !== nothing && x in keep) ? nothing : unsafe_free!(x)
free_batch(x::Union{Tuple,NamedTuple}, keep) = foreach(y -> free_batch(y, keep), x)
function free_batch(x::AbstractArray, keep)
    if !isbitstype(eltype(x)) && x isa Array
        foreach(y -> free_batch(y, keep), x)
    else    # wrappers: Adjoint, Diagonal, SubArray, Tridiagonal, ... hold their arrays in fields
        foreach(v -> free_batch(v, keep), array_fields(x))
    end
    return nothing
end
free_batch(x, keep) = nothing

# The fields of a (wrapper) array that are arrays themselves.
function array_fields(x)
    T = typeof(x)
    return Any[getfield(x, i) for i in 1:fieldcount(T) if isdefined(x, i) && getfield(x, i) isa AbstractArray]
end

# The CuArrays already present in an input batch (an IdSet), or nothing if none.
function input_cuarrays(batch)
    set = Base.IdSet{Any}()
    collect_cuarrays!(set, batch)
    return isempty(set) ? nothing : set
end
collect_cuarrays!(set, x::CuArray) = push!(set, x)
collect_cuarrays!(set, x::Union{Tuple,NamedTuple}) = foreach(y -> collect_cuarrays!(set, y), x)
function collect_cuarrays!(set, x::AbstractArray)
    if !isbitstype(eltype(x)) && x isa Array
        foreach(y -> collect_cuarrays!(set, y), x)
    else
        foreach(v -> collect_cuarrays!(set, v), array_fields(x))
    end
    return set
end
collect_cuarrays!(set, x) = set

Base.length(c::CuIterator) = length(c.batches)
Base.size(c::CuIterator, dims...) = size(c.batches, dims...)
Base.axes(c::CuIterator, dims...) = axes(c.batches, dims...)
Base.IteratorSize(::Type{CuIterator{B}}) where {B} = Base.IteratorSize(B)
Base.IteratorEltype(::Type{CuIterator{B}}) where {B} = Base.IteratorEltype(B)
Base.eltype(::Type{CuIterator{B}}) where {B} = device_type(eltype(B))

# The type `adapt(CuArray, x)` gives for an `x::T`, or `Any` where that is not simple.
function device_type(T::Type)
    if T <: CuArray
        return T
    elseif T <: Union{Array,AbstractRange}
        return T isa DataType && isbitstype(eltype(T)) ? CuArray{eltype(T),ndims(T)} : Any
    elseif T <: AbstractArray
        return Any
    elseif T <: Tuple
        (T isa DataType && !any(Base.isvarargtype, T.parameters)) || return Any
        return Tuple{map(device_type, T.parameters)...}
    elseif T <: NamedTuple
        (T isa DataType && length(T.parameters) == 2 && T.parameters[2] isa DataType) || return Any
        inner = device_type(T.parameters[2])
        return inner === Any ? Any : NamedTuple{T.parameters[1],inner}
    elseif isconcretetype(T)
        return T
    else
        return Any
    end
end

# Broadcast entry points outside the kernel path (broadcast.jl and fastpath.jl build and
# launch the kernels): what Base's Broadcast API asks of an array style besides computing.

# `similar(bc, T, dims)`: Base's method for an array style (broadcast.jl of Base) makes an
# `Array`; a broadcast of CuArrays gets a CuArray of those dimensions, as GPUArrays.jl.
Base.similar(bc::Broadcast.Broadcasted{CuArrayStyle{N}}, ::Type{T}, dims) where {N,T} =
    CuArray{T}(undef, dims)

# Ranges (`1:n`, `OneTo`, `StepRange`, `StepRangeLen`, `LinRange`) and `CartesianIndices`
# broadcast together with CuArrays: `x .* (1:n)`, `(1:k) .== labels'`, `x .* eachindex(x)`,
# `getindex.(CartesianIndices(A), 1)`. Passed into the kernel by value (a few fields, no
# upload): each thread computes its element as Base's `getindex(r, k)` does
# (compute/broadcast/bcfunction.jl's BcIndexed), so the result is Julia's to the last bit. A range
# whose fields are not isbits (of `BigFloat`s) is uploaded if its element type is a kernel
# type, and refused otherwise.
device_arg(x) = x
device_arg(r::AbstractRange) = is_byvalue_array(r) || !is_kernel_eltype(eltype(r)) ? r : CuArray(collect(r))
device_arg(bc::Broadcast.Broadcasted{S}) where {S} =
    Broadcast.Broadcasted{S}(bc.f, map(device_arg, bc.args), bc.axes)

function Broadcast.instantiate(bc::Broadcast.Broadcasted{S}) where {S<:CuArrayStyle}
    args = map(device_arg, bc.args)
    bc2 = args === bc.args ? bc : Broadcast.Broadcasted{S}(bc.f, args, bc.axes)
    return invoke(Broadcast.instantiate, Tuple{Broadcast.Broadcasted}, bc2)
end

"""
    clamp!(x::AnyCuArray, lo, hi) -> x

`x .= clamp.(x, lo, hi)` in one kernel (Base's clamp! loops element by element).
"""
Base.clamp!(x::AnyCuArray, lo, hi) = (x .= clamp.(x, lo, hi); x)

# map/map! over CuArrays of different shapes: Base zips the arrays, so only the first
# n = min(lengths) elements take part, by linear index (map then gives a vector of n).
# Equal shapes go to broadcast.jl's methods.
same_axes(dest, srcs) = all(s -> axes(s) == axes(dest), srcs)
linear_prefix(x::CuArray, n) = view(vec(x), 1:n)

function Base.map!(f, dest::CuArray, a::CuArray, rest::CuArray...)
    same_axes(dest, (a, rest...)) &&
        return cu_map!(f, dest, a, rest...)
    n = minimum(length, (dest, a, rest...))
    n == 0 && return dest
    map!(f, linear_prefix(dest, n), linear_prefix(a, n), map(r -> linear_prefix(r, n), rest)...)
    return dest
end

function Base.map(f, a::CuArray, rest::CuArray...)
    same_axes(a, rest) && return cu_map(f, a, rest...)
    n = minimum(length, (a, rest...))
    return map(f, linear_prefix(a, n), map(r -> linear_prefix(r, n), rest)...)
end

# Base's arithmetic on arrays (`x / 2`, `2 * x`, `x + y`, `-x`: arraymath.jl) runs
# `broadcast_preserving_zero_d`, which turns a 0-dimensional broadcast's scalar back into a
# 0-dimensional array. A broadcast of CuArrays already gives a 0-dimensional CuArray, so
# for 0-dimensional CuArrays it is the broadcast itself (Base's result: an array, not a
# scalar).
const CuArray0 = CuArray{<:Any,0}
Base.Broadcast.broadcast_preserving_zero_d(f, A::CuArray0, Bs::Union{Number,CuArray0}...) =
    Broadcast.materialize(Broadcast.broadcasted(f, A, Bs...))
Base.Broadcast.broadcast_preserving_zero_d(f, A::Number, B::CuArray0, Cs::Union{Number,CuArray0}...) =
    Broadcast.materialize(Broadcast.broadcasted(f, A, B, Cs...))

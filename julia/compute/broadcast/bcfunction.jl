# A broadcast expression as ONE Julia function of its arrays' elements: the
# `Broadcasted` tree becomes an isbits callable (`BcExpr`) whose scalars (numbers,
# structs, Refs' contents, captured values of closures) are fields, and whose array
# leaves take the elements passed to it, depth first. The typed-IR compiler
# (compute/compiler/) compiles it like any other function, so a fused expression is one
# `__device__` function and its scalars travel as one kernel parameter, read at each call.

using Base.Broadcast: Broadcasted

# An array leaf: takes the next element.
struct BcLeaf end
# A type argument (`round.(Int, x)`): a ghost standing for the type.
struct BcType{T} end
# A Symbol argument (`getfield.(xs, :a)`): a ghost standing for it, a constant in the
# compiled function as in CUDA.jl's.
struct BcSym{S} end
# An array passed by value (a range, `CartesianIndices`): its leaf's "element" is the
# 1-based linear index into it that the kernel computes, and the element is `r[k]`.
struct BcIndexed{R}
    r::R
end

# The arrays that travel into kernels by value rather than as device memory: ranges and
# CartesianIndices whose fields are isbits (`1:n`, `OneTo`, `StepRange`, `StepRangeLen`,
# `LinRange`, `CartesianIndices((2, 3))`), and their adjoints and transposes (`(1:n)'`).
is_byvalue_array(@nospecialize(a)) =
    (a isa AbstractRange || a isa CartesianIndices ||
     (a isa Union{Adjoint,Transpose} && (parent(a) isa AbstractRange || parent(a) isa CartesianIndices))) && isbits(a)

"""
    CuMem.BcExpr(f, args)

One node of a broadcast expression as a callable of the leaves' elements: `f` applied to
`args` (nested `BcExpr`s, `BcLeaf()` for arrays, `BcType{T}()` for types, or scalars).
`(e::BcExpr)(xs...)` computes the element of the whole expression from the elements `xs`
of its array leaves in depth-first order.
"""
struct BcExpr{F,A<:Tuple}
    f::F
    args::A
end

dc_callable_name(@nospecialize(T::Type{<:BcExpr})) = string("broadcast of ", dc_callable_name(T.parameters[1]))

@inline (e::BcExpr)(xs::Vararg{Any,N}) where {N} = bc_run(e, xs)[1]

@inline function bc_run(e::BcExpr, xs::Tuple)
    vals, rest = bc_args(e.args, xs)
    return (bc_call(e.f, vals...), rest)
end
# `f` applied to the values, a type argument (kept as `BcType{T}` so far, so that it stays a
# constant for inference) passed as the type itself.
@inline bc_u(x) = x
@inline bc_u(::BcType{T}) where {T} = T
@inline bc_u(::BcSym{S}) where {S} = S
for n in 0:16
    as = [Symbol(:a, k) for k in 1:n]
    @eval @inline bc_call(f, $(as...)) = f($([:(bc_u($a)) for a in as]...))
end
@inline bc_args(::Tuple{}, xs::Tuple) = ((), xs)
@inline function bc_args(args::Tuple, xs::Tuple)
    v, r = bc_run(args[1], xs)
    vs, r2 = bc_args(Base.tail(args), r)
    return ((v, vs...), r2)
end
@inline bc_run(::BcLeaf, xs::Tuple) = (xs[1], Base.tail(xs))
@inline bc_run(l::BcIndexed, xs::Tuple) = (@inbounds(l.r[xs[1]]), Base.tail(xs))
@inline bc_run(t::BcType, xs::Tuple) = (t, xs)
@inline bc_run(x, xs::Tuple) = (x, xs)

# The callable of a Broadcasted, and its array leaves (depth first).
bc_object(bc::Broadcasted) = BcExpr(bc_fun(bc.f), map(bc_object, bc.args))
bc_object(@nospecialize(a::AbstractArray)) = is_byvalue_array(a) ? BcIndexed(a) : BcLeaf()
bc_object(::Type{T}) where {T} = BcType{T}()
bc_object(x::Base.RefValue) = bc_scalar(x[])
# A 0-dimensional host array (Base's broadcastable of a Char, `fill(x)`): its one value.
bc_object(a::Array{<:Any,0}) = bc_scalar(a[])
bc_object(x) = bc_scalar(x)
bc_scalar(::Type{T}) where {T} = BcType{T}()
bc_scalar(x) = isbits(x) ? x : bc_reject(x)
bc_scalar(s::Symbol) = BcSym{s}()
bc_scalar(x::CuArray) = CuDeviceArray(x)     # `Ref(A)`: indexed inside the function (devarray.jl)
bc_fun(f) = f
bc_fun(::Type{T}) where {T} = BcType{T}()  # (constructors: called through `BcType`)
for n in 0:16
    as = [Symbol(:a, k) for k in 1:n]
    @eval (::BcType{T})($(as...)) where {T} = T($(as...))
end

function bc_reject(@nospecialize(x))
    if x isa AbstractArray || x isa Tuple
        throw(ArgumentError("cannot broadcast a $(typeof(x)) together with CuArrays: its data is on the " *
                            "host. Upload it first (`CuArray(x)` or `cu(x)`), or download the CuArrays (`Array(a)`)."))
    end
    throw(ArgumentError("cannot use a $(typeof(x)) in a GPU broadcast: kernels take CuArrays and isbits values " *
                        "(numbers, structs, tuples, functions whose captured values are isbits)"))
end

# The array leaves of a Broadcasted, depth first.
bc_leaves!(leaves, bc::Broadcasted) = (bc_leaves_t!(leaves, bc.args); leaves)
bc_leaves_t!(leaves, ::Tuple{}) = nothing
@inline bc_leaves_t!(leaves, args::Tuple) = (bc_leaves!(leaves, args[1]); bc_leaves_t!(leaves, Base.tail(args)))
bc_leaves!(leaves, @nospecialize(a::AnyCuArray)) = push!(leaves, a)
bc_leaves!(leaves, @nospecialize(a::CuReshaped)) = push!(leaves, a)   # its layout, or an ArgumentError
bc_leaves!(leaves, @nospecialize(a::AbstractArray)) = is_byvalue_array(a) ? push!(leaves, a) : bc_reject(a)
bc_leaves!(leaves, @nospecialize(a::Array{<:Any,0})) = isbitstype(eltype(a)) ? nothing : bc_reject(a)
bc_leaves!(leaves, @nospecialize(x)) = nothing

# The type of what the kernel passes for a leaf: its element, or the index into an array
# passed by value.
leaf_eltype(@nospecialize(a)) = is_byvalue_array(a) ? Int : eltype(a)

# The compiled element function of a broadcast whose leaves have element types `Ts`, and
# its result type. A function that always throws (result type `Union{}`) compiles too: its
# kernel throws Base's exception for the first element (gpu_broadcast! raises it at once).
bc_device_function(@nospecialize(obj), Ts::Tuple) = device_function(obj, Ts)

"""
    CuMem.bc_eltype(bc::Broadcasted) -> Type

The element type of the result of a GPU broadcast: the return type of the broadcast's
element function compiled for its arrays' element types (Base's `combine_eltypes` where
that is concrete).
"""
bc_eltype(@nospecialize(bc::Broadcasted)) = bc_function(bc).rettype

"""
    CuMem.bc_function(bc::Broadcasted) -> DeviceFunction

The compiled element function of the broadcast `bc` (of `bc_object(bc)` on its array
leaves' element types), kept by `typeof(bc)`, which fixes both (a typed look-up per call,
see `type_memo`; a method defined since compiles again).
"""
function bc_function(@nospecialize(bc::Broadcasted))
    df = type_memo(BcFunctionMaker(bc), Tuple{Val{:bc_function},typeof(bc)})
    return df === nothing ? bc_function_new(bc) : df::DeviceFunction
end
# (`type_memo`'s `make`: a callable whose field is `Any`, where a closure's type would carry
# the Broadcasted type and have its body inferred again for every broadcast type)
struct BcFunctionMaker
    bc::Any
end
(m::BcFunctionMaker)() = bc_fixed_by_type(typeof(m.bc)) ? bc_function_new(m.bc) : nothing
# Whether a Broadcasted type fixes its element function: not when a `Ref` holds a value of
# an abstract type (`Ref{Any}(2f0)`: the value's type is the scalar's), nor with a Symbol
# argument (`getfield.(xs, :a)`: `:a` and `:b` have one type but compile to different code).
function bc_fixed_by_type(@nospecialize(T))
    T isa DataType || return false
    T <: Broadcasted || return true
    A = T.parameters[4]
    A isa DataType && A <: Tuple || return false
    for P in A.parameters
        if P isa DataType && P <: Broadcasted
            bc_fixed_by_type(P) || return false
        elseif P === Symbol || P === Base.RefValue{Symbol} || P === Array{Symbol,0}
            return false    # compiled in as a constant (BcSym): the value, not the type, picks the code
        elseif P isa DataType && P <: Base.RefValue
            isconcretetype(P.parameters[1]) || return false
        end
    end
    return true
end
function bc_function_new(@nospecialize(bc::Broadcasted))
    leaves = bc_leaves!(Any[], bc)
    return bc_device_function(bc_object(bc), Tuple(Any[leaf_eltype(l) for l in leaves]))
end

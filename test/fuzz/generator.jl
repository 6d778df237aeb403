# The differential fuzzer's generator: random type-stable element functions as Julia source,
# from a seeded RNG (the same seed gives the same functions on every Julia version that
# keeps `MersenneTwister`'s stream). Every expression is built for a known type from
# variables of known types, so the function is type-stable by construction; it uses
# branches (`if`, `?:`, `ifelse`), a loop, conversions (`%`, `trunc`, `convert`, float
# constructors), arithmetic (wrapping, checked, division), bit operations, comparisons,
# Complex, a struct and tuples (constant tuples indexed at run time included). With some
# probability the result goes through one transcendental function (`sin`, `exp`, `log`,
# ...) at the root only, so that the comparison allows that function's documented ulps and
# nothing else (docs/compute.md's table; a composition would amplify them).

module FuzzGen

using Random

const INTS = (Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64)
const FLOATS = (Float16, Float32, Float64)
const REALS = (INTS..., FLOATS...)
"""The element types of the fuzzer's input arrays."""
const ARGTYPES = (Bool, REALS..., ComplexF32)
"""Transcendental functions applied at a float result's root, with their ulp tolerance's key."""
const TRANSCENDENTAL = (:sin, :cos, :exp, :log, :sqrt, :tanh, :atan, :cbrt, :exp2, :log2)

# What the generated code uses beside Base, defined in the module that evaluates the
# functions (and written at the top of every reproducer): a struct it builds and reads
# (FuzzS(a::Int32, b::Float32)), and the float sign tests it calls. The sign of a NaN that an
# invalid operation makes (`Inf - Inf`, `0 * Inf`, `0 / 0`) is the hardware's: negative on
# x86 (its "default NaN"), positive on ARM and on NVIDIA GPUs; IEEE 754 leaves it open and so
# does Julia (the same code gives other signs on x86 and aarch64 Julia). So the functions
# read a float's sign (`signbit`, and the sign argument of `copysign`/`flipsign`) only where
# it is not NaN; every other use of NaNs stays.
const STRUCT_DEF = """
struct FuzzS; a::Int32; b::Float32; end
nsignbit(x) = !isnan(x) & signbit(x)
ncopysign(x, y) = copysign(x, isnan(y) ? one(y) : y)
nflipsign(x, y) = flipsign(x, isnan(y) ? one(y) : y)"""

mutable struct Gen
    rng::MersenneTwister
    vars::Vector{Tuple{String,Any}}   # (name, type) in scope
    nv::Int
end

pick(g::Gen, xs) = xs[rand(g.rng, 1:length(xs))]
chance(g::Gen, p) = rand(g.rng) < p

function var_of(g::Gen, @nospecialize(T))
    vs = [v for (v, S) in g.vars if S === T]
    isempty(vs) ? nothing : pick(g, vs)
end

function literal(g::Gen, @nospecialize(T))
    T === Bool && return string(rand(g.rng, Bool))
    if T <: Integer
        k = pick(g, (0, 1, 2, 3, 5, 7, 13, -1, -3, 100))
        (T <: Unsigned && k < 0) && (k = -k)
        (T in (Int8, UInt8) && k > 100) && (k = 9)
        return "$(T)($k)"
    end
    T === ComplexF32 && return "ComplexF32($(pick(g, (0, 1, -2, 0.5))), $(pick(g, (0, 1, -1, 3))))"
    return "$(T)($(pick(g, ("0.5", "1", "2", "-3", "0.25", "10", "-0.0"))))"
end

# An expression of type T (depth d left).
function expr(g::Gen, @nospecialize(T), d::Int)
    if d <= 0 || chance(g, 0.2)
        v = var_of(g, T)
        v !== nothing && chance(g, 0.8) && return v
        d <= 0 && return v === nothing ? convert_from(g, T, 0) : v
    end
    T === Bool && return bool_expr(g, d)
    T <: Integer && return int_expr(g, T, d)
    T <: AbstractFloat && return float_expr(g, T, d)
    T === ComplexF32 && return complex_expr(g, d)
    error("no generator for $T")
end

# T from a variable of another type (or a literal).
function convert_from(g::Gen, @nospecialize(T), d::Int)
    isempty(g.vars) && return literal(g, T)
    v, S = pick(g, g.vars)
    S === T && return v
    if T === Bool
        S === Bool && return v
        S === ComplexF32 && return "iszero($v)"
        S <: AbstractFloat && return pick(g, ("iszero($v)", "nsignbit($v)", "isnan($v)"))
        return pick(g, ("iszero($v)", "signbit($v)", "isodd(count_ones($v))"))
    elseif T <: Integer
        S === Bool && return "$T($v)"
        S <: Integer && return pick(g, ("($v % $T)", "($v % $T)", "convert($T, $v)", "$T($v)"))
        S === ComplexF32 && return "trunc($T, real($v))"
        return pick(g, ("trunc($T, $v)", "round($T, $v)",
                        "(isfinite($v) && abs($v) < $(S)(100) ? trunc($T, $(T <: Unsigned ? "abs($v)" : v)) : $T(1))"))
    elseif T <: AbstractFloat
        S === ComplexF32 && return "$T(real($v))"
        return "$T($v)"
    else  # ComplexF32
        S === Bool && return "ComplexF32($v, false)"
        return "ComplexF32(Float32($v), $(literal(g, Float32)))"
    end
end

function bool_expr(g::Gen, d::Int)
    k = rand(g.rng, 1:6)
    if k == 1
        T = pick(g, REALS)
        return "($(expr(g, T, d - 1)) $(pick(g, ("<", "<=", "==", "!=", ">"))) $(expr(g, T, d - 1)))"
    elseif k == 2
        T = pick(g, FLOATS)
        return "$(pick(g, ("isnan", "isinf", "isfinite", "nsignbit", "iszero", "issubnormal")))($(expr(g, T, d - 1)))"
    elseif k == 3
        return "($(expr(g, Bool, d - 1)) $(pick(g, ("&", "|", "⊻", "&&", "||"))) $(expr(g, Bool, d - 1)))"
    elseif k == 4
        T = pick(g, REALS)
        return "$(pick(g, ("isless", "isequal")))($(expr(g, T, d - 1)), $(expr(g, T, d - 1)))"
    elseif k == 5
        return "!$(expr(g, Bool, d - 1))"
    end
    return convert_from(g, Bool, d)
end

function int_expr(g::Gen, @nospecialize(T), d::Int)
    k = rand(g.rng, 1:12)
    a() = expr(g, T, d - 1)
    if k <= 3
        return "($(a()) $(pick(g, ("+", "-", "*", "&", "|", "⊻"))) $(a()))"
    elseif k == 4
        return "$(pick(g, ("div", "rem", "mod", "fld", "cld")))($(a()), $(a()))"
    elseif k == 5
        return "($(a()) $(pick(g, ("<<", ">>", ">>>"))) $(expr(g, pick(g, (Int, UInt8, Int32)), d - 1)))"
    elseif k == 6
        return "($(pick(g, ("count_ones", "leading_zeros", "trailing_zeros", "count_zeros")))($(a())) % $T)"
    elseif k == 7
        return "$(pick(g, ("-", "~", "abs", "bswap", "bitreverse", "abs")))($(a()))"
    elseif k == 8
        return "Base.$(pick(g, ("checked_add", "checked_sub", "checked_mul")))($(a()), $(a()))"
    elseif k == 9
        return "ifelse($(expr(g, Bool, d - 1)), $(a()), $(a()))"
    elseif k == 10
        return "($(expr(g, Bool, d - 1)) ? $(a()) : $(a()))"
    elseif k == 11
        # a constant tuple indexed at run time, and a tuple of values
        n = rand(g.rng, 2:4)
        idx = "(Int(($(expr(g, T, d - 1))) & $(T)(1)) + 1)"
        if chance(g, 0.5)
            return "($(join([literal(g, T) for _ in 1:n], ", ")),)[$idx]"
        end
        return "($(a()), $(a()))[$idx]"
    elseif k == 12 && T === Int32
        return "FuzzS($(a()), $(expr(g, Float32, d - 1))).a"
    end
    return convert_from(g, T, d)
end

function float_expr(g::Gen, @nospecialize(T), d::Int)
    k = rand(g.rng, 1:11)
    a() = expr(g, T, d - 1)
    if k <= 3
        return "($(a()) $(pick(g, ("+", "-", "*", "/"))) $(a()))"
    elseif k == 4
        return "$(pick(g, ("min", "max", "ncopysign", "nflipsign")))($(a()), $(a()))"
    elseif k == 5
        return "$(pick(g, ("abs", "-", "floor", "ceil", "round", "trunc", "sign", "float")))($(a()))"
    elseif k == 6
        return "fma($(a()), $(a()), $(a()))"
    elseif k == 7
        return "ifelse($(expr(g, Bool, d - 1)), $(a()), $(a()))"
    elseif k == 8
        return "($(expr(g, Bool, d - 1)) ? $(a()) : $(a()))"
    elseif k == 9 && T === Float32
        return chance(g, 0.5) ? "FuzzS($(expr(g, Int32, d - 1)), $(a())).b" : "abs2($(expr(g, ComplexF32, d - 1)))"
    elseif k == 10
        return "($(a()) ^ $(pick(g, (2, 3, -1))))"
    elseif k == 11
        n = rand(g.rng, 2:3)
        return "($(join([literal(g, T) for _ in 1:n], ", ")),)[(Int($(expr(g, UInt8, d - 1)) % $n) + 1)]"
    end
    return convert_from(g, T, d)
end

function complex_expr(g::Gen, d::Int)
    k = rand(g.rng, 1:5)
    a() = expr(g, ComplexF32, d - 1)
    k == 1 && return "($(a()) $(pick(g, ("+", "-", "*"))) $(a()))"
    k == 2 && return "$(pick(g, ("conj", "-")))($(a()))"
    k == 3 && return "ComplexF32($(expr(g, Float32, d - 1)), $(expr(g, Float32, d - 1)))"
    k == 4 && return "($(a()) * $(expr(g, Float32, d - 1)))"
    return convert_from(g, ComplexF32, d)
end

"""
    gen_function(rng, name) -> (src, argtypes, rettype, transcendental)

One random function `name(x1, ...)` (one or two arguments): its source, its argument
types, the type it returns, and the transcendental function applied at its root (a
Symbol) or `nothing`.
"""
function gen_function(rng::MersenneTwister, name::String)
    g = Gen(rng, Tuple{String,Any}[], 0)
    nargs = rand(rng, 1:2)
    ats = Any[pick(g, ARGTYPES) for _ in 1:nargs]
    for (k, T) in enumerate(ats)
        push!(g.vars, ("x$k", T))
    end
    R = chance(g, 0.1) ? ComplexF32 : chance(g, 0.1) ? Bool : pick(g, REALS)
    io = IOBuffer()
    println(io, "function $name(", join(["x$k::$(ats[k])" for k in 1:nargs], ", "), ")")
    # locals
    for _ in 1:rand(rng, 0:2)
        T = pick(g, (REALS..., Bool))
        v = "v$(g.nv += 1)"
        println(io, "    $v = ", expr(g, T, 2))
        push!(g.vars, (v, T))
    end
    if chance(g, 0.3)        # a branch assigning a local
        T = pick(g, REALS)
        v = "v$(g.nv += 1)"
        println(io, "    if ", expr(g, Bool, 2))
        println(io, "        $v = ", expr(g, T, 2))
        println(io, "    else")
        println(io, "        $v = ", expr(g, T, 2))
        println(io, "    end")
        push!(g.vars, (v, T))
    end
    if chance(g, 0.3)        # a loop
        T = pick(g, REALS)
        v = "v$(g.nv += 1)"
        println(io, "    $v = ", expr(g, T, 1))
        println(io, "    for i in 1:", rand(rng, 1:4))
        push!(g.vars, (v, T))
        push!(g.vars, ("i", Int))
        println(io, "        $v = ", expr(g, T, 2))
        pop!(g.vars)
        println(io, "    end")
    end
    tr = nothing
    body = expr(g, R, 3)
    if R <: AbstractFloat && R !== Float16 && chance(g, 0.25)
        tr = pick(g, TRANSCENDENTAL)
        body = "$tr($body)"
    end
    println(io, "    return ", body)
    println(io, "end")
    return String(take!(io)), Tuple(ats), R, tr
end

"""
    special_values(T) -> Vector{T}

The special inputs of element type T: zeros of both signs, ±1, NaN, ±Inf, the smallest
normal and subnormal, the largest finite value (floats); 0, ±1, typemin, typemax and
small values (integers); both Bools; Complex values built from these.
"""
function special_values(::Type{T}) where {T}
    T === Bool && return [false, true]
    if T <: Integer
        v = T[0, 1, 2, 3, 7, typemax(T), typemin(T), typemax(T) - T(1), T(100)]
        T <: Signed && append!(v, T[-1, -2, -7, typemin(T) + T(1)])
        return v
    end
    if T <: AbstractFloat
        return T[0, -0.0, 1, -1, NaN, Inf, -Inf, floatmin(T), nextfloat(T(0)), -nextfloat(T(0)),
                 floatmax(T), -floatmax(T), 0.5, 2.7, -2.7, 1e3, eps(T), 3]
    end
    T === ComplexF32 && return ComplexF32[0, 1, -1, im, complex(NaN32, 1f0), complex(Inf32, -0f0), complex(2.5f0, -3f0),
                                          complex(-0f0, -0f0), complex(floatmax(Float32), 1f0)]
    error("no special values for $T")
end

"""
    inputs(rng, T, n) -> Vector{T}

`n` inputs of type T: its special values (in a random order), then random values.
"""
function inputs(rng::MersenneTwister, ::Type{T}, n::Int) where {T}
    s = shuffle(rng, special_values(T))
    v = T[]
    for k in 1:n
        if k <= length(s) && rand(rng) < 0.7
            push!(v, s[k])
        elseif T === Bool
            push!(v, rand(rng, Bool))
        elseif T <: Integer
            push!(v, rand(rng, (rand(rng, T), T(rand(rng, 0:20)))))
        elseif T === ComplexF32
            push!(v, complex(Float32(randn(rng) * 4), Float32(randn(rng) * 4)))
        else
            push!(v, T(randn(rng) * exp2(rand(rng, -4:8))))
        end
    end
    return v
end

end # module

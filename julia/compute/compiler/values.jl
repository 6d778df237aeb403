# The typed-IR compiler's state and values: one compilation (`DCState`: type
# definitions, device functions, call chain, globals read at launch), one function being
# translated (`DCFn`), and the C expression of each IR value: SSA locals, arguments,
# literals, global bindings (isbits constants fold; constant bindings to mutable objects
# are read at each launch through the context), conversions into and out of small Unions.

# One compilation: the type definitions and device functions it needs, the call chain.
mutable struct DCState
    tt::DCTypes
    fns::Vector{Pair{String,String}}          # C name => definition, callees first
    done::Dict{Any,Tuple{String,Any,Bool}}    # (signature,) => (C name, return type, may throw)
    stack::Vector{Any}                        # signatures being compiled (recursion check)
    chain::Vector{String}                     # call chain, for messages
    globals::Vector{Tuple{String,Module,Symbol,Any}}   # (field, module, name, type) read at launch
    world::UInt
end
DCState(world) = DCState(DCTypes(), Pair{String,String}[], Dict{Any,Tuple{String,Any,Bool}}(), Any[],
                         String[], Tuple{String,Module,Symbol,Any}[], world)

mutable struct DCFn
    st::DCState
    ci::Core.CodeInfo
    rettype::Any
    argtypes::Vector{Any}
    sparams::Core.SimpleVector
    io::IOBuffer
    errorly::BitVector
    may_throw::Bool
    payload::Int          # bytes of the error payload used by the current site
    payload_vals::Dict{Any,Any}   # the current site's recorded values: (:ssa | :arg, n) => (:payload, T, off)
    # SSA values that name a constant table (DC_TABLE_MIN): statement => the table's C name,
    # used in place of a local copy (no declaration, no assignment)
    tables::Dict{Int,String}
end

dc_ct(fn::DCFn, @nospecialize(T)) = dc_ctype!(fn.st.tt, T)
dc_line(fn::DCFn, i::Int) = ir_location(fn.ci, i)

function dc_ssatype(fn::DCFn, i::Int)
    t = fn.ci.ssavaluetypes
    return t isa Vector ? ir_widen(t[i]) : Any
end

# The inferred lattice element of an IR value (Const kept).
function dc_lattice(fn::DCFn, @nospecialize(x))
    if x isa Core.SSAValue
        return fn.ci.ssavaluetypes[x.id]
    end
    n = ir_argument_index(x)
    n > 0 && return fn.ci.slottypes[n]
    if x isa GlobalRef
        (isdefined(x.mod, x.name) && isconst(x.mod, x.name)) && return IR_CONST(getfield(x.mod, x.name))
        return Any
    end
    x isa QuoteNode && return IR_CONST(x.value)
    return IR_CONST(x)
end
dc_argtype(fn::DCFn, @nospecialize(x)) = (t = dc_lattice(fn, x); ir_is_const(t) ? dc_typeof_const(ir_const_value(t)) : ir_widen(t))
dc_typeof_const(@nospecialize(v)) = v isa Type ? Type{v} : typeof(v)

# The compile-time value of an IR value (or error).
function dc_constvalue(fn::DCFn, @nospecialize(x))
    t = dc_lattice(fn, x)
    ir_is_const(t) && return ir_const_value(t)
    T = ir_widen(t)
    T isa DataType && T <: Type && length(T.parameters) == 1 && !(T.parameters[1] isa TypeVar) && return T.parameters[1]
    dc_is_ghost(T) && isdefined(T, :instance) && return T.instance
    dc_refuse(fn.st, "a value that must be known when compiling is not (type $T)")
end

const DC_GHOST = "jl_ghost_t{}"

# The C expression of an IR value.
function dc_val(fn::DCFn, @nospecialize(x))
    if x isa Core.SSAValue
        t = fn.ci.ssavaluetypes[x.id]
        if ir_is_const(t)
            v = ir_const_value(t)
            (isbits(v) || dc_is_ghost(dc_typeof_const(v))) && return dc_literal(fn.st.tt, v)
            v isa Type && return DC_GHOST
        end
        dc_is_ghost(ir_widen(t)) && return DC_GHOST
        tab = get(fn.tables, x.id, nothing)
        tab === nothing || return tab
        return "s$(x.id)"
    end
    n = ir_argument_index(x)
    if n > 0
        dc_is_ghost(fn.argtypes[n]) && return DC_GHOST
        return "a$n"
    end
    x isa GlobalRef && return dc_global(fn, x)
    x isa QuoteNode && return dc_constant(fn, x.value)
    x isa Expr && dc_refuse(fn.st, "an expression $(x.head) used as a value")
    return dc_constant(fn, x)
end

function dc_constant(fn::DCFn, @nospecialize(v))
    (v isa Type || v isa Function || v isa Symbol) && dc_is_ghost(dc_typeof_const(v)) && return DC_GHOST
    v isa Type && return DC_GHOST
    isbits(v) && return dc_literal(fn.st.tt, v)
    dc_refuse(fn.st, "the value $(repr(v)) of type $(typeof(v)) is not isbits")
end

# A global binding: an isbits constant folds; a constant binding to a mutable object with
# isbits fields (`const R = Ref(2f0)`) is read on the host at each launch (a field of the
# context); anything else is refused.
function dc_global(fn::DCFn, g::GlobalRef)
    isdefined(g.mod, g.name) || dc_refuse(fn.st, "the global $(g.mod).$(g.name) is not defined")
    # the module that owns the binding: an imported one (`Main` seen from a bare Module())
    # is constant where it is defined
    if g.mod === Base && g.name in (:stdout, :stderr, :stdin)
        # printing: the standard streams are host objects (a `const ... = Ref(x)` cannot help)
        dc_refuse(fn.st, "printing or reading $(g.name) (`print`, `println`, `show`, `@show`, ...) cannot run in " *
                         "a kernel: print the results on the host (`Array(x)`), or use `@cuprintln` in a `@cuda` kernel")
    end
    if !isconst(Base.binding_module(g.mod, g.name), g.name)
        dc_refuse(fn.st, "the global variable $(g.mod).$(g.name) is not constant, so its type is unknown when " *
                         "compiling; use a constant binding to a Ref (`const $(g.name) = Ref(x)`, read as " *
                         "`$(g.name)[]`), which kernels read at each launch, or pass it as an argument")
    end
    v = getfield(g.mod, g.name)
    T = typeof(v)
    (dc_is_ghost(dc_typeof_const(v)) || v isa Type) && return DC_GHOST
    isbits(v) && return dc_literal(fn.st.tt, v)
    if ir_ismutable(T) && all(i -> isbitstype(fieldtype(T, i)), 1:fieldcount(T)) && fieldcount(T) > 0
        field = "g_" * dc_sanitize(string(g.mod, "_", g.name)) * "_" * dc_hash(string(g.mod, ".", g.name))
        any(x -> x[1] == field, fn.st.globals) || push!(fn.st.globals, (field, g.mod, g.name, T))
        dc_ct(fn, T)
        return "ctx->" * field
    end
    dc_refuse(fn.st, "the constant $(g.mod).$(g.name) is a $T, which a kernel cannot read (only isbits values " *
                     "and mutable objects with isbits fields, such as Ref(2f0), are passed to kernels)")
end

# A value converted from type S to type D (a small Union wraps/unwraps by tag).
function dc_conv(fn::DCFn, e::String, @nospecialize(S), @nospecialize(D))
    (S === D || D === Any) && return e
    dc_is_ghost(D) && return DC_GHOST
    if dc_is_small_union(D)
        un = dc_ct(fn, D)
        if dc_is_small_union(S)
            S <: D || dc_refuse(fn.st, "a value of type $S where $D is expected")
            # re-tag from S's numbering to D's
            parts = String[]
            for (k, t) in enumerate(Base.uniontypes(S))
                kd = dc_union_tag(D, t)
                push!(parts, dc_ghost_or(t, string("[&]() { ", un, " u{}; u.tag = $kd; ",
                                                   dc_is_ghost(t) ? "" : "u.v.m$kd = x.v.m$k; ", "return u; }()")))
            end
            return string("([&](", dc_ct(fn, S), " x) { ", join(["if (x.tag == $k) return $(parts[k]);" for k in 1:length(parts)], " "),
                          " return ", un, "{}; }(", e, "))")
        end
        k = dc_union_tag(D, S)
        k == 0 && dc_refuse(fn.st, "a value of type $S where $D is expected")
        return string("([&]() { ", un, " u{}; u.tag = $k; ", dc_is_ghost(S) ? "" : "u.v.m$k = $e; ", "return u; }())")
    end
    if dc_is_small_union(S)
        k = dc_union_tag(S, D)
        k == 0 && dc_refuse(fn.st, "a value of type $S where $D is expected")
        return string("(", e, ").v.m$k")
    end
    S === Union{} && return e
    dc_ct(fn, S) == dc_ct(fn, D) && return e
    dc_refuse(fn.st, "a value of type $S where $D is expected (the code is not type-stable)")
end
dc_ghost_or(@nospecialize(t), s) = s

# The zero value of the function's return type (returned after a throw).
dc_zero(fn::DCFn) = (R = fn.rettype; R === Union{} || dc_is_ghost(R) ? DC_GHOST : dc_ct(fn, R) * "{}")

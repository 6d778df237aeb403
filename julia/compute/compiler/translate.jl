# Typed IR -> CUDA C (issue 23): one `static __device__` function per method
# specialisation, from `code_typed(...; optimize = true)`. Every SSA value is a C local
# declared at the top (a goto must not skip an initialisation), every basic block starts
# with a label, phi nodes are parallel copies on each incoming edge, throw sites fill the
# error record (errors.jl). Statements that only build an exception (messages, exception
# objects) are not translated: the host evaluates them when it rebuilds the exception.

# One compilation: the type definitions and device functions it needs, the call chain.
mutable struct DCState
    tt::DCTypes
    fns::Vector{Pair{String,String}}          # C name => definition, callees first
    done::Dict{Any,Tuple{String,Any,Bool}}    # signature => (C name, return type, may throw)
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
    if !isconst(g.mod, g.name)
        dc_refuse(fn.st, "the global variable $(g.mod).$(g.name) is not constant, so its type is unknown when " *
                         "compiling; use a constant binding to a Ref (`const $(g.name) = Ref(x)`, read as " *
                         "`$(g.name)[]`), which kernels read at each launch, or pass it as an argument")
    end
    v = getfield(g.mod, g.name)
    T = typeof(v)
    (dc_is_ghost(dc_typeof_const(v)) || v isa Type) && return DC_GHOST
    isbits(v) && return dc_literal(fn.st.tt, v)
    if T.mutable && all(i -> isbitstype(fieldtype(T, i)), 1:fieldcount(T)) && fieldcount(T) > 0
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

## throw sites

# The expression the host evaluates to rebuild an exception, for IR value x; run-time
# values become payload fields, which `dc_throw_if` stores.
function dc_tree(fn::DCFn, @nospecialize(x))
    if x isa Core.SSAValue && fn.errorly[x.id]
        st = fn.ci.code[x.id]
        if st isa Expr && st.head === :call
            return (:call, map(a -> dc_tree(fn, a), st.args)...)
        elseif st isa Expr && st.head === :invoke
            return (:call, map(a -> dc_tree(fn, a), st.args[2:end])...)
        elseif st isa Expr && st.head === :new
            return (:new, dc_constvalue(fn, st.args[1]), map(a -> dc_tree(fn, a), st.args[2:end])...)
        elseif st isa Core.PiNode
            return dc_tree(fn, st.val)
        elseif st isa GlobalRef || st isa QuoteNode || !(st isa Expr || st isa Core.SSAValue)
            return dc_tree(fn, st)
        end
        return (:const, nothing)
    end
    t = dc_lattice(fn, x)
    ir_is_const(t) && return (:const, ir_const_value(t))
    if x isa GlobalRef
        return isdefined(x.mod, x.name) ? (:const, getfield(x.mod, x.name)) : (:const, nothing)
    end
    T = ir_widen(t)
    dc_is_ghost(T) && isdefined(T, :instance) && return (:const, T.instance)
    (T isa DataType && isbitstype(T)) || return (:unavailable, T)
    off = (fn.payload + Base.datatype_alignment(T) - 1) & -Base.datatype_alignment(T)
    off + sizeof(T) <= 64 || return (:unavailable, T)
    fn.payload = off + sizeof(T)
    println(fn.io, "      { ", dc_ct(fn, T), " v = ", dc_val(fn, x), "; jl_err_put(e, ", off, ", &v, sizeof(v)); }")
    return (:payload, T, off)
end

function dc_has_unavailable(tree)
    tree isa Tuple || return false
    tree[1] === :unavailable && return true
    return any(dc_has_unavailable, tree)
end

# `if (cond) { record site; return zero; }` (cond "true": unconditional).
function dc_throw_if(fn::DCFn, i::Int, cond::String, tree_of)
    fn.may_throw = true
    println(fn.io, "  if (", cond, ") {")
    println(fn.io, "    jl_err_t* e = ctx->err;")
    println(fn.io, "    if (jl_err_claim(e)) {")
    fn.payload = 0
    tree = tree_of isa Function ? tree_of() : tree_of
    name, file, line = dc_line(fn, i)
    where_ = string(name, " at ", file, ":", line)
    if dc_has_unavailable(tree)
        tree = (:call, (:const, error), (:const, "a GPU kernel threw an exception in $where_ whose values " *
                                                  "could not be recorded"))
    end
    site = dc_register_site(tree, where_)
    println(fn.io, "      jl_err_done(e, ", site, ");")
    println(fn.io, "    }")
    println(fn.io, "    ctx->thrown = 1; return ", dc_zero(fn), ";")
    println(fn.io, "  }")
    return nothing
end

## analysis

dc_is_root(fn::DCFn, i::Int) = (st = fn.ci.code[i]; st isa Expr && st.head in (:call, :invoke) &&
                                fn.ci.ssavaluetypes[i] === Union{})

function dc_foreach_use(f, @nospecialize(x))
    if x isa Core.SSAValue
        f(x.id)
    elseif x isa Expr
        for a in x.args
            dc_foreach_use(f, a)
        end
    elseif x isa Core.PhiNode
        for k in 1:length(x.values)
            isassigned(x.values, k) && dc_foreach_use(f, x.values[k])
        end
    elseif x isa Core.PiNode
        dc_foreach_use(f, x.val)
    elseif IR_HAS_RETURNNODE && x isa Core.ReturnNode
        isdefined(x, :val) && dc_foreach_use(f, x.val)
    elseif isdefined(Core, :GotoIfNot) && x isa getfield(Core, :GotoIfNot)
        dc_foreach_use(f, x.cond)
    end
end

# Statements used only to build exceptions (not translated).
function dc_errorly(fn::DCFn)
    code = fn.ci.code
    n = length(code)
    users = [Int[] for _ in 1:n]
    for j in 1:n
        dc_foreach_use(k -> push!(users[k], j), code[j])
    end
    el = falses(n)
    for i in n:-1:1
        st = code[i]
        ok = (st isa Expr && st.head in (:call, :invoke, :new)) || st isa GlobalRef || st isa Core.PiNode
        ok && !dc_is_root(fn, i) && !isempty(users[i]) || continue
        el[i] = all(j -> dc_is_root(fn, j) || el[j], users[i])
    end
    return el
end

## functions

# The signature's C function (compiled on first use): (name, return type, may throw).
function dc_compile_sig!(st::DCState, @nospecialize(sig), m::Method, sparams::Core.SimpleVector)
    r = get(st.done, sig, nothing)
    r === nothing || return r
    label = string(m.name, "(", join(map(string, sig.parameters[2:end]), ", "), ") at ", m.file, ":", m.line)
    any(s -> s == sig, st.stack) && dc_refuse(st, "recursion: $label calls itself (directly or through other functions)")
    length(st.stack) >= 40 && dc_refuse(st, "calls nested more than 40 deep")
    push!(st.stack, sig)
    push!(st.chain, m.name === :dc_apply ? st.chain[end] : label)
    try
        code = ir_typed_code(m, sig, sparams, st.world)
        code === nothing && dc_refuse(st, "type inference failed for $label")
        ci, rt = code
        name = "jlf_" * dc_sanitize(string(m.name)) * "_" * dc_hash(sig)
        argtypes = Any[sig.parameters...]
        if m.isva
            dc_refuse(st, "the varargs method $label (call it with a fixed number of arguments)")
        end
        fn = DCFn(st, ci, ir_widen(rt), argtypes, sparams, IOBuffer(), falses(0), false, 0)
        body = dc_function_body(fn)
        io = IOBuffer()
        print(io, "static __device__ ", dc_zero_type(fn), " ", name, "(jl_ctx_t* ctx")
        for (k, T) in enumerate(argtypes)
            print(io, ", ", dc_is_ghost(T) ? "jl_ghost_t" : dc_ct(fn, T), " a", k)
        end
        print(io, ") {\n", body, "}\n")
        push!(st.fns, name => String(take!(io)))
        res = (name, fn.rettype, fn.may_throw)
        st.done[sig] = res
        return res
    finally
        pop!(st.stack)
        pop!(st.chain)
    end
end

dc_zero_type(fn::DCFn) = (R = fn.rettype; R === Union{} || dc_is_ghost(R) ? "jl_ghost_t" : dc_ct(fn, R))

function dc_function_body(fn::DCFn)
    ci = fn.ci
    code = ci.code
    n = length(code)
    fn.errorly = dc_errorly(fn)
    # block starts: statement 1, jump targets, statements after jumps
    starts = falses(n + 1)
    starts[1] = true
    for (i, st) in enumerate(code)
        if st isa Core.GotoNode
            starts[st.label] = true
            starts[i+1] = true
        elseif ir_is_gotoifnot(st)
            starts[ir_gotoifnot(st)[2]] = true
            starts[i+1] = true
        elseif ir_is_return(st) || ir_is_unreachable(st)
            starts[i+1] = true
        end
    end
    # phis of each block start
    phis = Dict{Int,Vector{Int}}()
    for (i, st) in enumerate(code)
        if st isa Core.PhiNode
            b = i
            while !starts[b]
                b -= 1
            end
            push!(get!(phis, b, Int[]), i)
        end
    end
    fn.io = IOBuffer()
    body = fn.io
    for i in 1:n
        starts[i] && i > 1 && println(body, " L", i, ":;")
        st = code[i]
        try
            dc_statement(fn, i, st, phis, starts)
        catch err
            l = dc_line(fn, i)
            if err isa KernelCompileError && !occursin("\n  at ", err.msg) && l[3] != 0
                throw(KernelCompileError(err.msg * "\n  at $(l[1]) ($(l[2]):$(l[3]))"))
            end
            rethrow()
        end
        # falling through into the next block
        if i < n && starts[i+1] && !(st isa Core.GotoNode) && !ir_is_return(st) && !ir_is_unreachable(st)
            dc_edge(fn, i, i + 1, phis)
        end
    end
    # declarations of the SSA locals (and phi temporaries)
    decl = IOBuffer()
    for i in 1:n
        st = code[i]
        T = dc_ssatype(fn, i)
        (T === Union{} || dc_is_ghost(T) || fn.errorly[i]) && continue
        (st isa Expr && st.head in (:call, :invoke, :new, :foreigncall, :boundscheck)) || st isa Core.PhiNode ||
            st isa Core.PiNode || st isa GlobalRef || st isa Core.SSAValue || ir_argument_index(st) > 0 || continue
        ct = dc_ct(fn, T)
        print(decl, "  ", ct, " s", i, "{};")
        st isa Core.PhiNode && print(decl, " ", ct, " t", i, "{};")
        println(decl)
    end
    return String(take!(decl)) * String(take!(body))
end

# Parallel copies for the phis of block `dest` on the edge from statement `from`.
function dc_edge(fn::DCFn, from::Int, dest::Int, phis)
    ps = get(phis, dest, nothing)
    ps === nothing && return
    moves = Tuple{Int,String}[]
    for p in ps
        node = fn.ci.code[p]::Core.PhiNode
        T = dc_ssatype(fn, p)
        (dc_is_ghost(T) || T === Union{}) && continue
        for k in 1:length(node.edges)
            if node.edges[k] == from
                ir_phi_defined(node, k) || continue
                v = node.values[k]
                push!(moves, (p, dc_conv(fn, dc_val(fn, v), dc_argtype(fn, v), T)))
            end
        end
    end
    for (p, e) in moves
        println(fn.io, "  t", p, " = ", e, ";")
    end
    for (p, _) in moves
        println(fn.io, "  s", p, " = t", p, ";")
    end
end

const DC_SKIP_HEADS = (:meta, :inbounds, :loopinfo, :code_coverage_effect, :aliasscope, :popaliasscope,
                       :gc_preserve_end, :noinline)

function dc_statement(fn::DCFn, i::Int, @nospecialize(st), phis, starts)
    io = fn.io
    if st === nothing || st isa Core.NewvarNode || st isa LineNumberNode || st isa Core.PhiNode
        return
    elseif st isa Core.GotoNode
        dc_edge(fn, i, st.label, phis)
        println(io, "  goto L", st.label, ";")
    elseif ir_is_gotoifnot(st)
        c, d = ir_gotoifnot(st)
        println(io, "  if (!(", dc_val(fn, c), ")) {")
        dc_edge(fn, i, d, phis)
        println(io, "  goto L", d, "; }")
    elseif ir_is_return(st)
        x = ir_return_value(st)
        R = fn.rettype
        if R === Union{} || dc_is_ghost(R)
            println(io, "  return ", DC_GHOST, ";")
        else
            println(io, "  return ", dc_conv(fn, dc_val(fn, x), dc_argtype(fn, x), R), ";")
        end
    elseif ir_is_unreachable(st)
        println(io, "  return ", dc_zero(fn), ";")
    elseif fn.errorly[i]
        return
    elseif st isa Core.PiNode
        T = dc_ssatype(fn, i)
        dc_is_ghost(T) && return
        println(io, "  s", i, " = ", dc_conv(fn, dc_val(fn, st.val), dc_argtype(fn, st.val), T), ";")
    elseif st isa Expr
        dc_expr(fn, i, st)
    elseif st isa Core.UpsilonNode || st isa Core.PhiCNode
        dc_refuse(fn.st, "try/catch cannot be used in kernels"; line = dc_line(fn, i))
    else
        T = dc_ssatype(fn, i)
        (dc_is_ghost(T) || T === Union{}) && return
        println(io, "  s", i, " = ", dc_val(fn, st), ";")
    end
end

function dc_assign(fn::DCFn, i::Int, e)
    e === nothing && return
    T = dc_ssatype(fn, i)
    if T === Union{} || dc_is_ghost(T)
        println(fn.io, "  (void)(", e, ");")
    else
        println(fn.io, "  s", i, " = ", e, ";")
    end
end

function dc_expr(fn::DCFn, i::Int, ex::Expr)
    h = ex.head
    h in DC_SKIP_HEADS && return
    if h === :call
        if dc_is_root(fn, i)
            dc_throw_if(fn, i, "true", () -> (:call, map(a -> dc_tree(fn, a), ex.args)...))
            return
        end
        return dc_call(fn, i, ex)
    elseif h === :invoke
        if dc_is_root(fn, i)
            dc_throw_if(fn, i, "true", () -> (:call, map(a -> dc_tree(fn, a), ex.args[2:end])...))
            return
        end
        return dc_invoke(fn, i, ex)
    elseif h === :new
        T = dc_constvalue(fn, ex.args[1])
        dc_is_ghost(T) && return
        (T isa DataType && isbitstype(T)) || dc_refuse(fn.st, "allocation of a $T (not an isbits type) in a kernel"; line = dc_line(fn, i))
        parts = String[]
        for k in 1:fieldcount(T)
            F = fieldtype(T, k)
            dc_is_ghost(F) && continue
            a = ex.args[k+1]
            push!(parts, dc_conv(fn, dc_val(fn, a), dc_argtype(fn, a), F))
        end
        return dc_assign(fn, i, dc_make(dc_ct(fn, T), T, parts))
    elseif h === :foreigncall
        return dc_assign(fn, i, dc_foreigncall(fn, i, ex))
    elseif h === :boundscheck
        return dc_assign(fn, i, "true")
    elseif h === :static_parameter
        return
    elseif h in (:enter, :leave, :pop_exception)
        dc_refuse(fn.st, "try/catch cannot be used in kernels"; line = dc_line(fn, i))
    elseif h === :throw_undef_if_not
        dc_refuse(fn.st, "a variable that may be undefined"; line = dc_line(fn, i))
    elseif h === :gc_preserve_begin
        return
    end
    dc_refuse(fn.st, "the construct `$(h)` is not supported in kernels"; line = dc_line(fn, i))
end

# The callee of a :call: its value when known.
function dc_callee(fn::DCFn, @nospecialize(x))
    t = dc_lattice(fn, x)
    ir_is_const(t) && return ir_const_value(t)
    T = ir_widen(t)
    dc_is_ghost(T) && isdefined(T, :instance) && return T.instance
    return nothing
end

function dc_call(fn::DCFn, i::Int, ex::Expr)
    f = dc_callee(fn, ex.args[1])
    args = ex.args[2:end]
    R = dc_ssatype(fn, i)
    t = fn.ci.ssavaluetypes[i]
    if f isa Core.IntrinsicFunction
        # pure intrinsics inferred constant need nothing (their value is used as a literal)
        ir_is_const(t) && isbits(ir_const_value(t)) && !startswith(string(f), "checked_") && return
        return dc_assign(fn, i, dc_intrinsic(fn, i, f, args))
    elseif f isa Core.Builtin
        ir_is_const(t) && f !== Core.throw && return
        return dc_assign(fn, i, dc_builtin(fn, i, f, args))
    end
    name = f === nothing ? string(ex.args[1]) : string(f)
    types = join([string(dc_argtype(fn, a)) for a in args], ", ")
    dc_refuse(fn.st, "dynamic dispatch: the call `$name($types)` is not resolved when compiling " *
                     "(a type instability, or a function not known until run time)"; line = dc_line(fn, i))
end

function dc_invoke(fn::DCFn, i::Int, ex::Expr)
    mi = ex.args[1]::Core.MethodInstance
    sig = mi.specTypes
    fargs = ex.args[2:end]
    e = dc_math(fn, i, sig, fargs[2:end])
    e === nothing || return dc_assign(fn, i, e)
    name, rt, mt = dc_compile_sig!(fn.st, sig, mi.def::Method, mi.sparam_vals)
    ps = sig.parameters
    cargs = String["ctx"]
    for (k, a) in enumerate(fargs)
        P = k <= length(ps) ? ps[k] : Any
        push!(cargs, dc_is_ghost(P) ? DC_GHOST : dc_conv(fn, dc_val(fn, a), dc_argtype(fn, a), P))
    end
    call = string(name, "(", join(cargs, ", "), ")")
    R = dc_ssatype(fn, i)
    if R === Union{} || dc_is_ghost(R) || dc_is_ghost(rt) || rt === Union{}
        println(fn.io, "  (void)", call, ";")
    else
        println(fn.io, "  s", i, " = ", dc_conv(fn, call, rt, R), ";")
    end
    if mt
        fn.may_throw = true
        println(fn.io, "  if (ctx->thrown) return ", dc_zero(fn), ";")
    end
end

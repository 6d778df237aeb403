# Typed IR -> CUDA C: one `static __device__` function per method
# specialisation, from `code_typed(...; optimize = true)`. Every SSA value is a C local
# declared at the top (a goto must not skip an initialisation), every basic block starts
# with a label, phi nodes are parallel copies on each incoming edge; calls become mapped
# math (mathlib.jl), intrinsics (intrinsics.jl), builtins (builtins.jl), throw sites
# (throwsites.jl) or calls of other compiled functions.
# The signature's C function (compiled on first use): (name, return type, may throw).
function dc_compile_sig!(st::DCState, @nospecialize(sig), m::Method, sparams::Core.SimpleVector)
    r = get(st.done, (sig,), nothing)
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
        argtypes = dc_va_argtypes(m, sig)
        fn = DCFn(st, ci, ir_widen(rt), argtypes, sparams, IOBuffer(), falses(0), false, 0, Dict{Any,Any}(), Dict{Int,String}())
        body = dc_function_body(fn)
        io = IOBuffer()
        print(io, "static __device__ ", dc_zero_type(fn), " ", name, "(jl_ctx_t* ctx")
        for (k, T) in enumerate(argtypes)
            print(io, ", ", dc_is_ghost(T) ? "jl_ghost_t" : dc_ct(fn, T), " a", k)
        end
        print(io, ") {\n", body, "}\n")
        push!(st.fns, name => String(take!(io)))
        res = (name, fn.rettype, fn.may_throw)
        dc_done!(st.done, sig, res)
        return res
    finally
        pop!(st.stack)
        pop!(st.chain)
    end
end

# (keyed by `(sig,)`: `setindex!` of a `Dict{Any}` dispatched on a key that is itself a
# type would be compiled for every signature)
@noinline dc_done!(d::Dict{Any,Tuple{String,Any,Bool}}, @nospecialize(sig), @nospecialize(res)) = (d[(sig,)] = res; nothing)

# A method's argument types as its code sees them: for a varargs method the trailing
# arguments are one tuple (callers pack them, see dc_invoke).
function dc_va_argtypes(m::Method, @nospecialize(sig))
    ps = Any[sig.parameters...]
    m.isva || return ps
    n = Int(m.nargs)
    return Any[ps[1:n-1]..., Tuple{ps[n:end]...}]
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
        starts[i] && println(body, " L", i, ":;")
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
        (T === Union{} || dc_is_ghost(T) || fn.errorly[i] || haskey(fn.tables, i) || (T === Any && dc_unused(fn, i))) && continue
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
        v = dc_val(fn, st)
        # a constant table (a global such as Base's Float16 tables): its uses name it, and
        # no copy of it is made (NVVM took seconds over copies of 512-byte tables into locals)
        startswith(v, "jlk_") && (fn.tables[i] = v; return)
        println(io, "  s", i, " = ", v, ";")
    end
end

# Whether no statement uses the value of statement i. (Julia 1.5's optimiser types the
# unused result of a call that is not inlined as `Any`: a store's `nothing`, say.)
function dc_unused(fn::DCFn, i::Int)
    # (the IR's node types by their fields, whichever a Julia version has)
    used(@nospecialize(x)) = x isa Core.SSAValue ? x.id == i :
        x isa Expr ? any(used, x.args) :
        x isa Vector{Any} ? any(k -> isassigned(x, k) && used(x[k]), eachindex(x)) :
        nameof(typeof(x)) in (:PhiNode, :PiNode, :GotoIfNot, :ReturnNode, :UpsilonNode, :PhiCNode) ?
            any(f -> isdefined(x, f) && used(getfield(x, f)), fieldnames(typeof(x))) : false
    return !any(used, fn.ci.code)
end

function dc_assign(fn::DCFn, i::Int, e)
    e === nothing && return
    T = dc_ssatype(fn, i)
    if T === Union{} || dc_is_ghost(T) || (T === Any && dc_unused(fn, i))
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
    # a non-constant global among the arguments is the usual cause: say so
    for a in ex.args
        a isa Core.SSAValue && (a = fn.ci.code[a.id])
        a isa GlobalRef && !(isdefined(a.mod, a.name) && isconst(a.mod, a.name)) && dc_global(fn, a)
    end
    name = f === nothing ? string(ex.args[1]) : string(f)
    types = join([string(dc_argtype(fn, a)) for a in args], ", ")
    dc_refuse(fn.st, "dynamic dispatch: the call `$name($types)` is not resolved when compiling " *
                     "(a type instability, or a function not known until run time)"; line = dc_line(fn, i))
end

function dc_invoke(fn::DCFn, i::Int, ex::Expr)
    mi = ex.args[1]::Core.MethodInstance
    fargs = ex.args[2:end]
    sig, sparams = dc_type_specialize(fn, mi, fargs)
    e = dc_math(fn, i, sig, fargs[2:end])
    e === nothing || return dc_assign(fn, i, e)
    name, rt, mt = dc_compile_sig!(fn.st, sig, mi.def::Method, sparams)
    ps = sig.parameters
    cargs = String["ctx"]
    m = mi.def::Method
    nfix = m.isva ? Int(m.nargs) - 1 : length(fargs)
    for (k, a) in enumerate(fargs)
        k > nfix && break
        P = k <= length(ps) ? ps[k] : Any
        push!(cargs, dc_is_ghost(P) ? DC_GHOST : dc_conv(fn, dc_val(fn, a), dc_argtype(fn, a), P))
    end
    if m.isva
        VT = Tuple{ps[nfix+1:end]...}
        parts = String[]
        for (j, a) in enumerate(fargs[nfix+1:end])
            F = fieldtype(VT, j)
            dc_is_ghost(F) || push!(parts, dc_conv(fn, dc_val(fn, a), dc_argtype(fn, a), F))
        end
        push!(cargs, dc_is_ghost(VT) ? DC_GHOST : dc_make(dc_ct(fn, VT), VT, parts))
    end
    call = string(name, "(", join(cargs, ", "), ")")
    R = dc_ssatype(fn, i)
    fast = dc_steprange_fast(fn, sig, fargs, R)
    fast === nothing || println(fn.io, "  if (", fast, ") { s", i, " = ", dc_val(fn, fargs[2]), "; } else {")
    if R === Union{} || dc_is_ghost(R) || dc_is_ghost(rt) || rt === Union{}
        println(fn.io, "  (void)", call, ";")
    else
        println(fn.io, "  s", i, " = ", dc_conv(fn, call, rt, R), ";")
    end
    if mt
        fn.may_throw = true
        println(fn.io, "  if (ctx->thrown) return ", dc_zero(fn), ";")
    end
    fast === nothing || println(fn.io, "  }")
end

# Julia does not specialise a method on a type argument it only calls or passes on (its
# `Type{T} where T`, `DataType`), where the GPU needs the type known: CUDA.jl's kernels such
# as `kernel(a, T) = (a[1] = T(1); ...)` get `Type{Int32}` as GPUCompiler compiles the
# kernel for its exact argument types. The invoke's signature with such an argument
# narrowed to the caller's `Type{X}` (and the method's static parameters for it).
function dc_type_specialize(fn::DCFn, mi::Core.MethodInstance, fargs)
    sig = mi.specTypes
    ps = sig.parameters
    m = mi.def::Method
    (m.isva || length(ps) != length(fargs)) && return sig, mi.sparam_vals
    narrowed = false
    ts = Any[]
    for (k, a) in enumerate(fargs)
        P = ps[k]
        A = dc_argtype(fn, a)
        if !dc_is_ghost(P) && dc_is_ghost(A) && A <: Type && A <: P
            push!(ts, A); narrowed = true
        else
            push!(ts, P)
        end
    end
    narrowed || return sig, mi.sparam_vals
    sig2 = Tuple{ts...}
    ti, env = ccall(:jl_type_intersection_with_env, Any, (Any, Any), sig2, m.sig)::Core.SimpleVector
    ti === Union{} && return sig, mi.sparam_vals
    return sig2, env
end

# `start:step:stop` of Int32/Int64 computes its last element with Base.steprange_last (a
# division, checks and a throw for step 0). When 0 < step and 0 <= stop - start < step
# (one element: every thread of a grid-stride loop launched with one thread per element)
# Base's result is `start` (stop == start returns stop; else the remainder is stop - start,
# the difference taken unsigned as Base does on overflow), so the C tests that first and
# calls the compiled Base method otherwise. The condition's C, or nothing for other calls.
function dc_steprange_fast(fn, @nospecialize(sig), fargs, @nospecialize(R))
    ps = sig.parameters
    (length(ps) == 4 && ps[1] === typeof(Base.steprange_last)) || return nothing
    T = ps[2]
    (T === Int64 || T === Int32) && ps[3] === T && ps[4] === T && R === T || return nothing
    U = T === Int64 ? "uint64_t" : "uint32_t"
    start, step, stop = dc_val(fn, fargs[2]), dc_val(fn, fargs[3]), dc_val(fn, fargs[4])
    return string("(", step, ") > 0 && (", start, ") <= (", stop, ") && (", U, ")((", U, ")(", stop, ") - (", U,
                  ")(", start, ")) < (", U, ")(", step, ")")
end

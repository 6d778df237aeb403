# Throw sites of the typed-IR compiler. A statement that cannot return
# (`throw`, a call typed `Union{}`) becomes: claim the error record (kept by the throw of the
# lowest element number), store the run-time values its exception is built from (each
# once, any number of bytes: the record grows to the largest site's), return (memory/kernel_errors.jl rebuilds the
# exception on the host). Statements that only build exceptions (messages, exception
# objects) are not translated: the host evaluates them again from the recorded values.

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
    # each run-time value once (`x + x + ... + x` records x once)
    key = x isa Core.SSAValue ? (:ssa, x.id) : (:arg, ir_argument_index(x))
    key[2] isa Int && key[2] > 0 && haskey(fn.payload_vals, key) && return fn.payload_vals[key]
    off = (fn.payload + Base.datatype_alignment(T) - 1) & -Base.datatype_alignment(T)
    fn.payload = off + sizeof(T)
    println(fn.io, "      { ", dc_ct(fn, T), " v = ", dc_val(fn, x), "; jl_err_put(e, ", off, ", &v, sizeof(v)); }")
    t = (:payload, T, off)
    key[2] isa Int && key[2] > 0 && (fn.payload_vals[key] = t)
    return t
end

function dc_has_unavailable(tree)
    (tree isa Tuple && !isempty(tree)) || return false
    tree[1] === :unavailable && return true
    tree[1] === :const && return false           # a value (maybe a tuple, e.g. `()`), not a tree
    return any(dc_has_unavailable, tree)
end

# `if (cond) { record site; return zero; }` (cond "true": unconditional).
function dc_throw_if(fn::DCFn, i::Int, cond::String, tree_of)
    fn.may_throw = true
    println(fn.io, "  if (", cond, ") {")
    println(fn.io, "    jl_err_t* e = ctx->err;")
    println(fn.io, "    if (jl_err_claim(e, ctx->elem)) {")
    fn.payload = 0
    empty!(fn.payload_vals)
    tree = tree_of isa Function ? tree_of() : tree_of
    name, file, line = dc_line(fn, i)
    where_ = string(name, " at ", file, ":", line)
    if dc_has_unavailable(tree)
        tree = (:call, (:const, error), (:const, "a GPU kernel threw an exception in $where_ whose values " *
                                                  "could not be recorded"))
    end
    site = dc_register_site(tree, where_, fn.payload)
    println(fn.io, "      jl_err_done(e, ", site, ", ctx->elem);")
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

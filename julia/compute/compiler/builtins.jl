# Julia's builtin functions (Core.Builtin) as C for the typed-IR compiler:
# `getfield` (by name or index; a run-time index into a homogeneous tuple is
# bounds-checked, a BoundsError site), `===` (by content, floats by bits), `ifelse`,
# `isa` (a union's tag), `tuple`, `typeassert`, `sizeof`, `nfields`. Mutation
# (`setfield!`), `Core._apply_iterate` and the rest are refused.

function dc_builtin(fn, i::Int, f, args)
    R = dc_ssatype(fn, i)
    if f === getfield
        return dc_getfield(fn, i, args)
    elseif f === (===)
        return dc_egal(fn, args[1], args[2])
    elseif f === ifelse
        c = dc_val(fn, args[1])
        a = dc_conv(fn, dc_val(fn, args[2]), dc_argtype(fn, args[2]), R)
        b = dc_conv(fn, dc_val(fn, args[3]), dc_argtype(fn, args[3]), R)
        return string("((", c, ") ? (", a, ") : (", b, "))")
    elseif f === isa
        X = dc_argtype(fn, args[1])
        T = dc_constvalue(fn, args[2])
        X <: T && return "true"
        if dc_is_small_union(X)
            ks = [k for (k, t) in enumerate(Base.uniontypes(X)) if t <: T]
            isempty(ks) && return "false"
            x = dc_val(fn, args[1])
            return "(" * join(["($x).tag == $k" for k in ks], " || ") * ")"
        end
        return "false"
    elseif f === tuple
        dc_is_ghost(R) && return nothing
        parts = String[]
        for (k, a) in enumerate(args)
            F = fieldtype(R, k)
            dc_is_ghost(F) && continue
            push!(parts, dc_conv(fn, dc_val(fn, a), dc_argtype(fn, a), F))
        end
        return dc_make(dc_ct(fn, R), R, parts)
    elseif f === typeassert
        return dc_conv(fn, dc_val(fn, args[1]), dc_argtype(fn, args[1]), R)
    elseif f === Core.sizeof
        return dc_literal(fn.st.tt, sizeof(dc_argtype(fn, args[1])))
    elseif f === Core.nfields
        return dc_literal(fn.st.tt, fieldcount(dc_argtype(fn, args[1])))
    elseif f === setfield!
        dc_refuse(fn.st, "`setfield!`: kernels cannot modify mutable objects"; line = dc_line(fn, i))
    elseif f === Core._apply_iterate || (isdefined(Core, :_apply) && f === getfield(Core, :_apply))
        dc_refuse(fn.st, "splatting (`f(xs...)` of a collection whose length is not known when compiling)"; line = dc_line(fn, i))
    end
    dc_refuse(fn.st, "the builtin `$f` is not supported in kernels"; line = dc_line(fn, i))
end

function dc_getfield(fn, i::Int, args)
    X = dc_argtype(fn, args[1])
    x = dc_val(fn, args[1])
    R = dc_ssatype(fn, i)
    X isa DataType || dc_refuse(fn.st, "a field of a value of type $X (not a concrete type)"; line = dc_line(fn, i))
    fl = dc_lattice(fn, args[2])
    if ir_is_const(fl)
        fld = ir_const_value(fl)
        k = fld isa Symbol ? Base.fieldindex(X, fld, false) : Int(fld)
        (1 <= k <= fieldcount(X)) || return dc_bounds_site(fn, i, args, "true")
        F = fieldtype(X, k)
        dc_is_ghost(F) && return DC_GHOST
        return string("(", x, ").", dc_field_name(k))
    end
    # a run-time index: homogeneous tuples only
    (X <: Tuple && fieldcount(X) > 0 && all(k -> fieldtype(X, k) === fieldtype(X, 1), 1:fieldcount(X))) ||
        dc_refuse(fn.st, "a field of a $X chosen at run time (only tuples of one element type can be indexed so)"; line = dc_line(fn, i))
    E = fieldtype(X, 1)
    n = fieldcount(X)
    idx = dc_val(fn, args[2])
    check = length(args) < 3 || !(ir_is_const(dc_lattice(fn, args[3])) && ir_const_value(dc_lattice(fn, args[3])) === false)
    check && dc_bounds_site(fn, i, args, string("(uint64_t)((int64_t)(", idx, ") - 1) >= ", n, "ULL"))
    dc_is_ghost(E) && return DC_GHOST
    ct = dc_ct(fn, E)
    # elements of an isbits tuple are stored at a stride of their size; the tuple is bound
    # to a reference first, as it may be an rvalue (a constant tuple's literal)
    return string("([&](const ", dc_ct(fn, X), "& t_) { return ((const ", ct, "*)&t_)[(int64_t)(", idx,
                  ") - 1]; }(", x, "))")
end

function dc_bounds_site(fn, i, args, cond)
    dc_throw_if(fn, i, cond, () -> (:call, (:const, getfield), dc_tree(fn, args[1]), dc_tree(fn, args[2])))
    return cond == "true" ? nothing : nothing
end

function dc_egal(fn, a, b)
    A, B = dc_argtype(fn, a), dc_argtype(fn, b)
    if dc_is_ghost(A) && dc_is_ghost(B)
        return A === B ? "true" : "false"
    end
    if A === B
        return string("jl_egal(", dc_val(fn, a), ", ", dc_val(fn, b), ")")
    end
    if dc_is_small_union(A) && !dc_is_small_union(B)
        A, B, a, b = B, A, b, a
    end
    if dc_is_small_union(B) && !dc_is_small_union(A)
        k = dc_union_tag(B, A)
        k == 0 && return "false"
        dc_is_ghost(A) && return string("((", dc_val(fn, b), ").tag == $k)")
        vb = dc_val(fn, b)
        return string("((", vb, ").tag == $k && jl_egal(", dc_val(fn, a), ", (", vb, ").v.m$k))")
    end
    return "false"
end

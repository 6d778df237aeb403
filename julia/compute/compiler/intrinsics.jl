# Julia's intrinsics (Core.Intrinsics) as C expressions for the typed-IR compiler.
# Integer arithmetic goes through the unsigned type of at least 32 bits, so it
# wraps as Julia's does (no undefined behaviour in C); shifts follow Julia's rule (counts
# of at least the width give 0 or the sign); checked divisions are throw sites whose
# DivideError the host rebuilds; Float16 computes in float and rounds after each
# operation (exact for + - * / of Float16 inputs).

dc_signed(sz::Int) = sz == 1 ? "int8_t" : sz == 2 ? "int16_t" : sz == 4 ? "int32_t" : "int64_t"
dc_uns(sz::Int) = DC_UNSIGNED[sz]
dc_wide(sz::Int) = sz <= 4 ? "uint32_t" : "uint64_t"
# (a) as an unsigned value of at least 32 bits
dc_u(T, a) = string("((", dc_wide(sizeof(T)), ")(", dc_uns(sizeof(T)), ")(", a, "))")
dc_cast(fn, T, e) = string("((", dc_ct(fn, T), ")(", e, "))")

# Float16 operands compute in float; results round back.
dc_f(T, a) = T === Float16 ? string("jl_h2f(", a, ")") : a
dc_fr(T, e) = T === Float16 ? string("jl_f2h(", e, ")") : e
dc_libm(T, name) = T === Float64 ? name : name * "f"

const DC_INT_BINOPS = Dict(:add_int => "+", :sub_int => "-", :mul_int => "*")
const DC_BIT_BINOPS = Dict(:and_int => "&", :or_int => "|", :xor_int => "^")
const DC_FLOAT_BINOPS = Dict(:add_float => "+", :sub_float => "-", :mul_float => "*", :div_float => "/",
                             :add_float_fast => "+", :sub_float_fast => "-", :mul_float_fast => "*",
                             :div_float_fast => "/")
const DC_FLOAT_CMPS = Dict(:eq_float => "==", :ne_float => "!=", :lt_float => "<", :le_float => "<=",
                           :eq_float_fast => "==", :ne_float_fast => "!=", :lt_float_fast => "<",
                           :le_float_fast => "<=")
const DC_FLOAT_UNARY = Dict(:abs_float => "fabs", :sqrt_llvm => "sqrt", :floor_llvm => "floor",
                            :ceil_llvm => "ceil", :trunc_llvm => "trunc", :rint_llvm => "rint",
                            :sqrt_llvm_fast => "sqrt")

# The C expression of intrinsic `f` applied to IR arguments `args` in statement i (may
# write statements before it, e.g. a divide check).
function dc_intrinsic(fn, i::Int, f, args)
    name = Symbol(string(f))
    n = length(args)
    a(k) = dc_val(fn, args[k])
    T(k) = dc_argtype(fn, args[k])
    R = dc_ssatype(fn, i)
    if haskey(DC_INT_BINOPS, name)
        t = T(1)
        return dc_cast(fn, t, string(dc_u(t, a(1)), " ", DC_INT_BINOPS[name], " ", dc_u(t, a(2))))
    elseif haskey(DC_BIT_BINOPS, name)
        return dc_cast(fn, T(1), string("(", a(1), ") ", DC_BIT_BINOPS[name], " (", a(2), ")"))
    elseif name === :neg_int
        return dc_cast(fn, T(1), string("(", dc_wide(sizeof(T(1))), ")0 - ", dc_u(T(1), a(1))))
    elseif name === :not_int
        T(1) === Bool && return string("(!(", a(1), "))")
        return dc_cast(fn, T(1), string("~", dc_u(T(1), a(1))))
    elseif name in (:sdiv_int, :srem_int, :udiv_int, :urem_int, :checked_sdiv_int, :checked_srem_int,
                    :checked_udiv_int, :checked_urem_int)
        return dc_division(fn, i, f, name, args)
    elseif name in (:eq_int, :ne_int)
        return string("((", a(1), ") ", name === :eq_int ? "==" : "!=", " (", a(2), "))")
    elseif name in (:slt_int, :sle_int)
        s = dc_signed(sizeof(T(1)))
        return string("((", s, ")(", a(1), ") ", name === :slt_int ? "<" : "<=", " (", s, ")(", a(2), "))")
    elseif name in (:ult_int, :ule_int)
        s = dc_uns(sizeof(T(1)))
        return string("((", s, ")(", a(1), ") ", name === :ult_int ? "<" : "<=", " (", s, ")(", a(2), "))")
    elseif name in (:shl_int, :lshr_int, :ashr_int)
        t = T(1)
        h = name === :shl_int ? "jl_shl" : name === :lshr_int ? "jl_lshr" : "jl_ashr"
        return string(h, "<", dc_ct(fn, t), ", ", dc_uns(sizeof(t)), ">(", a(1), ", (uint64_t)(",
                      dc_uns(sizeof(T(2))), ")(", a(2), "))")
    elseif haskey(DC_FLOAT_BINOPS, name)
        t = T(1)
        return dc_fr(t, string("(", dc_f(t, a(1)), " ", DC_FLOAT_BINOPS[name], " ", dc_f(t, a(2)), ")"))
    elseif haskey(DC_FLOAT_CMPS, name)
        t = T(1)
        return string("(", dc_f(t, a(1)), " ", DC_FLOAT_CMPS[name], " ", dc_f(t, a(2)), ")")
    elseif name === :neg_float || name === :neg_float_fast
        T(1) === Float16 && return string("((half_t)((", a(1), ") ^ 0x8000))")
        return string("(-(", a(1), "))")
    elseif name === :rem_float || name === :rem_float_fast
        t = T(1)
        return dc_fr(t, string(dc_libm(t === Float16 ? Float32 : t, "fmod"), "(", dc_f(t, a(1)), ", ", dc_f(t, a(2)), ")"))
    elseif haskey(DC_FLOAT_UNARY, name)
        t = T(1)
        t === Float16 && name === :abs_float && return string("((half_t)((", a(1), ") & 0x7fff))")
        return dc_fr(t, string(dc_libm(t === Float16 ? Float32 : t, DC_FLOAT_UNARY[name]), "(", dc_f(t, a(1)), ")"))
    elseif name === :copysign_float
        t = T(1)
        t === Float16 && return string("((half_t)(((", a(1), ") & 0x7fff) | ((", a(2), ") & 0x8000)))")
        return string(dc_libm(t, "copysign"), "(", a(1), ", ", a(2), ")")
    elseif name === :fma_float || name === :muladd_float
        t = T(1)
        return dc_fr(t, string(dc_libm(t === Float16 ? Float32 : t, "fma"), "(", dc_f(t, a(1)), ", ",
                               dc_f(t, a(2)), ", ", dc_f(t, a(3)), ")"))
    elseif name === :fpiseq || name === :fpislt
        t = T(1)
        t === Float16 && return string("jl_", name, "(jl_h2f(", a(1), "), jl_h2f(", a(2), "))")
        return string("jl_", name, "(", a(1), ", ", a(2), ")")
    elseif name === :flipsign_int
        t = T(1)
        return string("(", dc_signed(sizeof(t)), ")(", a(2), ") < 0 ? ",
                      dc_cast(fn, t, string("(", dc_wide(sizeof(t)), ")0 - ", dc_u(t, a(1)))), " : (", a(1), ")")
    elseif name in (:sext_int, :zext_int, :trunc_int)
        D = dc_typearg(fn, args[1])
        S = T(2)
        D === Bool && return string("((bool)((", a(2), ") & 1))")
        src = name === :sext_int ? dc_signed(sizeof(S)) : dc_uns(sizeof(S))
        name === :trunc_int && return dc_cast(fn, D, string("(", dc_uns(sizeof(D)), ")(", src, ")(", a(2), ")"))
        return dc_cast(fn, D, string("(", src, ")(", a(2), ")"))
    elseif name in (:fptosi, :fptoui)
        D = dc_typearg(fn, args[1])
        return dc_cast(fn, D, dc_f(T(2), a(2)))
    elseif name in (:sitofp, :uitofp)
        D = dc_typearg(fn, args[1])
        S = T(2)
        src = S === Bool ? "(int)(" * a(2) * ")" : string("(", name === :sitofp ? dc_signed(sizeof(S)) : dc_uns(sizeof(S)), ")(", a(2), ")")
        D === Float16 && return string("jl_d2h((double)", src, ")")
        return string("((", dc_ct(fn, D), ")", src, ")")
    elseif name in (:fpext, :fptrunc)
        D = dc_typearg(fn, args[1])
        S = T(2)
        S === Float16 && return D === Float64 ? string("jl_h2d(", a(2), ")") : string("jl_h2f(", a(2), ")")
        D === Float16 && return S === Float64 ? string("jl_d2h(", a(2), ")") : string("jl_f2h(", a(2), ")")
        return string("((", dc_ct(fn, D), ")(", a(2), "))")
    elseif name === :bitcast
        D = dc_typearg(fn, args[1])
        cd, cs = dc_ct(fn, D), dc_ct(fn, T(2))
        cd == cs && return a(2)
        return string("jl_bitcast<", cd, ", ", cs, ">(", a(2), ")")
    elseif name in (:ctpop_int, :ctlz_int, :cttz_int)
        t = T(1)
        w = 8 * sizeof(t)
        u = dc_uns(sizeof(t))
        e = if name === :ctpop_int
            w == 64 ? "__popcll((uint64_t)(" * a(1) * "))" : "__popc((uint32_t)(" * u * ")(" * a(1) * "))"
        elseif name === :ctlz_int
            w == 64 ? "((" * a(1) * ") == 0 ? 64 : __clzll((long long)(" * a(1) * ")))" :
                string("(((", u, ")(", a(1), ")) == 0 ? $w : __clz((int)(uint32_t)(", u, ")(", a(1), ")) - ", 32 - w, ")")
        else
            w == 64 ? "((" * a(1) * ") == 0 ? 64 : __ffsll((long long)(" * a(1) * ")) - 1)" :
                string("(((", u, ")(", a(1), ")) == 0 ? $w : __ffs((int)(uint32_t)(", u, ")(", a(1), ")) - 1)")
        end
        return dc_cast(fn, t, e)
    elseif name === :bswap_int
        # the bytes reversed, by shifts and masks (plain C: NVRTC and the g++ emulation alike);
        # 16 bits through the prelude's jl_bswap16
        t = T(1)
        nb = sizeof(t)
        nb == 1 && return a(1)
        u = dc_uns(nb)
        nb == 2 && return dc_cast(fn, t, string("jl_bswap16((uint16_t)(", a(1), "))"))   # prelude.cuh: a ptxas 13.0 fault
        x = string("((", u, ")(", a(1), "))")
        e = join((string("((", u, ")((", x, " >> ", 8k, ") & 0xff) << ", 8 * (nb - 1 - k), ")") for k in 0:nb-1), " | ")
        return dc_cast(fn, t, "(" * e * ")")
    elseif name in (:checked_sadd_int, :checked_ssub_int, :checked_smul_int, :checked_uadd_int,
                    :checked_usub_int, :checked_umul_int)
        return dc_checked_arith(fn, i, name, args)
    elseif name === :have_fma
        return "true"
    elseif name === :pointerref || name === :pointerset
        return dc_pointer_intrinsic(fn, name, args)
    elseif name === :arraylen
        dc_refuse(fn.st, "arrays cannot be used inside a kernel's element function (`length` of an Array)"; line = dc_line(fn, i))
    end
    dc_refuse(fn.st, "the intrinsic $name is not supported in kernels"; line = dc_line(fn, i))
end

# A type argument of a conversion intrinsic (`sext_int(Int64, x)`): the Type value.
function dc_typearg(fn, @nospecialize(x))
    v = dc_constvalue(fn, x)
    v isa Type || dc_refuse(fn.st, "a conversion to a type that is not known when compiling")
    return v
end

# Integer division and remainder; the checked forms throw DivideError (and sdiv of typemin
# by -1), which the host rebuilds by calling the intrinsic with the same values.
function dc_division(fn, i, f, name, args)
    t = dc_argtype(fn, args[1])
    a, b = dc_val(fn, args[1]), dc_val(fn, args[2])
    s, u = dc_signed(sizeof(t)), dc_uns(sizeof(t))
    signed = name in (:sdiv_int, :srem_int, :checked_sdiv_int, :checked_srem_int)
    if startswith(string(name), "checked_")
        cond = string("(", b, ") == 0")
        if name === :checked_sdiv_int
            cond *= string(" || ((", s, ")(", b, ") == -1 && (", u, ")(", a, ") == (", u, ")1 << ", 8sizeof(t) - 1, ")")
        end
        dc_throw_if(fn, i, cond, () -> (:call, (:const, f), dc_tree(fn, args[1]), dc_tree(fn, args[2])))
    end
    if signed
        op = name in (:sdiv_int, :checked_sdiv_int) ? "/" : "%"
        # typemin / -1 is UB in C: Julia's srem gives 0 there (sdiv threw above)
        return dc_cast(fn, t, string("((", s, ")(", b, ") == -1 ? (", s, ")", op == "/" ? "((uint64_t)0 - (uint64_t)(" * a * "))" : "0",
                                     " : (", s, ")(", a, ") ", op, " (", s, ")(", b, "))"))
    end
    op = name in (:udiv_int, :checked_udiv_int) ? "/" : "%"
    return dc_cast(fn, t, string("(", u, ")(", a, ") ", op, " (", u, ")(", b, ")"))
end

# checked_{s,u}{add,sub,mul}_int: a (value, overflowed) tuple.
function dc_checked_arith(fn, i, name, args)
    t = dc_argtype(fn, args[1])
    a, b = dc_val(fn, args[1]), dc_val(fn, args[2])
    ct, s, u = dc_ct(fn, t), dc_signed(sizeof(t)), dc_uns(sizeof(t))
    R = dc_ssatype(fn, i)
    tn = dc_ct(fn, R)
    op = occursin("add", string(name)) ? "+" : occursin("sub", string(name)) ? "-" : "*"
    r = "r$i"
    io = fn.io
    println(io, "  { ", ct, " x = ", a, ", y = ", b, "; ", ct, " ", r, " = ", dc_cast(fn, t, string(dc_u(t, "x"), " ", op, " ", dc_u(t, "y"))), "; bool o;")
    sg = startswith(string(name), "checked_s")
    if op == "+"
        if sg
            println(io, "    o = (((", s, ")(x ^ $r) & (", s, ")(y ^ $r)) < 0);")
        else
            println(io, "    o = ((", u, ")$r < (", u, ")x);")
        end
    elseif op == "-"
        if sg
            println(io, "    o = (((", s, ")(x ^ y) & (", s, ")(x ^ $r)) < 0);")
        else
            println(io, "    o = ((", u, ")x < (", u, ")y);")
        end
    else
        if sizeof(t) <= 2 || (sizeof(t) == 4)
            w = sg ? "int64_t" : "uint64_t"
            println(io, "    { ", w, " p = (", w, ")x * (", w, ")y; o = p != (", w, ")", r, "; }")
        elseif sg
            println(io, "    o = (x != 0) && ((y == (", s, ")((uint64_t)1 << 63) && x == -1) || (", s, ")", r, " / x != y);")
        else
            println(io, "    o = (x != 0) && ((", u, ")", r, " / (", u, ")x != (", u, ")y);")
        end
    end
    println(io, "    s$i = ", dc_make(tn, R, [r, "o"]), "; }")
    return nothing
end

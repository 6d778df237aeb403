# Base math mapped to CUDA's math library. On 1.5 these methods stay `invoke`s
# in optimized code (their Julia bodies are large and some, as `sin`'s Payne-Hanek
# reduction, use Int128 and global arrays): each maps to the CUDA function, with Julia's
# DomainError check in front where Julia has one (the host rebuilds the exception by
# calling the Julia function with the same argument). `foreigncall`s of libm and
# `llvm.pow` (from `exp2`, `expm1`, `log2`, `log10`, `^`) map the same way. Float16
# computes in float through the hardware conversions. docs/compute.md has the table.

# f => (CUDA name of the Float64 function (Float32: suffix f), domain-error condition over
# x, y or nothing)
const DC_MATH1 = IdDict{Any,Tuple{String,Union{Nothing,String}}}(
    sin => ("sin", "isinf(x)"), cos => ("cos", "isinf(x)"), tan => ("tan", "isinf(x)"),
    asin => ("asin", "fabs(x) > 1"), acos => ("acos", "fabs(x) > 1"), atan => ("atan", nothing),
    sinh => ("sinh", nothing), cosh => ("cosh", nothing), tanh => ("tanh", nothing),
    asinh => ("asinh", nothing), acosh => ("acosh", "x < 1"), atanh => ("atanh", "fabs(x) > 1"),
    exp => ("exp", nothing), exp2 => ("exp2", nothing), exp10 => ("exp10", nothing),
    expm1 => ("expm1", nothing), log => ("log", "x < 0"), log2 => ("log2", "x < 0"),
    log10 => ("log10", "x < 0"), log1p => ("log1p", "x < -1"), sqrt => ("sqrt", "x < 0"),
    cbrt => ("cbrt", nothing), sinpi => ("sinpi", "isinf(x)"), cospi => ("cospi", "isinf(x)"),
)
const DC_MATH2 = IdDict{Any,Tuple{String,Union{Nothing,String}}}(
    atan => ("atan2", nothing), hypot => ("hypot", nothing),
    (^) => ("pow", "r != r && (x + y) == (x + y)"),
)
# libm / LLVM names seen in `foreigncall`s -> (CUDA name, argument count)
const DC_FOREIGN = Dict{String,String}(
    "llvm.pow.f32" => "powf", "llvm.pow.f64" => "pow",
    "exp2f" => "exp2f", "exp2" => "exp2", "expm1f" => "expm1f", "expm1" => "expm1",
    "log2f" => "log2f", "log2" => "log2", "log10f" => "log10f", "log10" => "log10",
    "log1pf" => "log1pf", "log1p" => "log1p", "cbrtf" => "cbrtf", "cbrt" => "cbrt",
    "llvm.sqrt.f32" => "sqrtf", "llvm.sqrt.f64" => "sqrt", "fmodf" => "fmodf", "fmod" => "fmod",
    "llvm.floor.f32" => "floorf", "llvm.floor.f64" => "floor", "llvm.ceil.f32" => "ceilf",
    "llvm.ceil.f64" => "ceil", "llvm.trunc.f32" => "truncf", "llvm.trunc.f64" => "trunc",
    "llvm.rint.f32" => "rintf", "llvm.rint.f64" => "rint", "llvm.fabs.f32" => "fabsf",
    "llvm.fabs.f64" => "fabs", "llvm.copysign.f32" => "copysignf", "llvm.copysign.f64" => "copysign",
    "llvm.fma.f32" => "fmaf", "llvm.fma.f64" => "fma", "llvm.exp2.f32" => "exp2f", "llvm.exp2.f64" => "exp2",
)

# Tries to translate an invoke of `sig` (a Tuple type) as mapped math; the C expression
# or nothing. `args` are the IR arguments after the function.
function dc_math(fn, i::Int, @nospecialize(sig), args)
    ps = sig.parameters
    F = ps[1]
    isdefined(F, :instance) || return nothing
    f = F.instance
    n = length(ps) - 1
    ts = ps[2:end]
    val(k) = dc_val(fn, args[k])
    e = dc_devmem(fn, f, ts, args)     # CuDeviceArray's loads and stores (devmem.jl)
    e === nothing || return e
    e = dc_device_call(fn, i, f, ts, args)   # the kernel language's intrinsics (kernelcalls.jl)
    e === nothing || return e
    # Float16 through the hardware conversions
    if n == 1 && ts[1] === Float16 && (f === Float32 || f === Float64)
        return f === Float32 ? string("jl_h2f(", val(1), ")") : string("jl_h2d(", val(1), ")")
    elseif n == 1 && f === Float16 && (ts[1] === Float32 || ts[1] === Float64)
        return ts[1] === Float32 ? string("jl_f2h(", val(1), ")") : string("jl_d2h(", val(1), ")")
    elseif n == 2 && ts[1] === Float16 && ts[2] === Float16 && (f === (+) || f === (-) || f === (*) || f === (/))
        return string("jl_f2h(jl_h2f(", val(1), ") ", string(f), " jl_h2f(", val(2), "))")
    elseif n == 1 && ts[1] === Float16 && f === (-)
        return string("((half_t)((", val(1), ") ^ 0x8000))")
    end
    if n == 1 && (ts[1] === Float32 || ts[1] === Float64) && haskey(DC_MATH1, f)
        cname, check = DC_MATH1[f]
        T = ts[1]
        x = val(1)
        if check !== nothing
            println(fn.io, "  { ", dc_ct(fn, T), " x = ", x, ";")
            dc_throw_if(fn, i, replace(check, "fabs" => dc_libm(T, "fabs")), () -> (:call, (:const, f), dc_tree(fn, args[1])))
            println(fn.io, "  }")
        end
        return string(dc_libm(T, cname), "(", x, ")")
    elseif n == 1 && (ts[1] === Float32 || ts[1] === Float64) && f === sincos
        T = ts[1]
        x = val(1)
        println(fn.io, "  { ", dc_ct(fn, T), " x = ", x, ";")
        dc_throw_if(fn, i, "isinf(x)", () -> (:call, (:const, f), dc_tree(fn, args[1])))
        println(fn.io, "  }")
        R = dc_ssatype(fn, i)
        return dc_make(dc_ct(fn, R), R, [string(dc_libm(T, "sin"), "(", x, ")"), string(dc_libm(T, "cos"), "(", x, ")")])
    elseif n == 2 && ts[1] === ts[2] && (ts[1] === Float32 || ts[1] === Float64) && haskey(DC_MATH2, f)
        cname, check = DC_MATH2[f]
        T = ts[1]
        e = string(dc_libm(T, cname), "(", val(1), ", ", val(2), ")")
        if check !== nothing
            println(fn.io, "  { ", dc_ct(fn, T), " x = ", val(1), ", y = ", val(2), ", r = ", e, ";")
            dc_throw_if(fn, i, check, () -> (:call, (:const, f), dc_tree(fn, args[1]), dc_tree(fn, args[2])))
            println(fn.io, "  }")
        end
        return e
    elseif n == 2 && f === (^) && ts[1] <: Base.BitInteger && ts[2] <: Base.BitInteger
        T, P = ts[1], ts[2]
        x, p = val(1), val(2)
        println(fn.io, "  { int64_t p = (int64_t)(", p, "); ", dc_ct(fn, T), " x = ", x, ";")
        neg1 = T <: Signed ? " && x != -1" : ""
        dc_throw_if(fn, i, "p < 0 && x != 1" * neg1, () -> (:call, (:const, f), dc_tree(fn, args[1]), dc_tree(fn, args[2])))
        println(fn.io, "  }")
        return string("jl_ipow<", dc_ct(fn, T), ", ", dc_wide(sizeof(T)), ">(", x, ", (int64_t)(", p, "))")
    end
    return nothing
end

# A foreigncall: mapped math, or a refusal naming it.
function dc_foreigncall(fn, i::Int, ex::Expr)
    name = ex.args[1]
    name isa QuoteNode && (name = name.value)
    name isa Tuple && (name = name[1])
    # `(name, lib)` spelled as a call of `tuple` (libm calls in Base.Math)
    name isa Expr && name.head === :call && length(name.args) >= 2 && (name = name.args[2])
    name isa QuoteNode && (name = name.value)
    s = name isa Symbol || name isa String ? String(name) : string(name)
    argtys = ex.args[3]
    nargs = length(argtys)
    # utf8proc (Base's Char functions): tables built at precompile time (unicode.jl)
    haskey(UC_TABLES, s) && nargs == 1 && return dc_unicode_call(fn.st, s, dc_val(fn, ex.args[6]))
    cname = get(DC_FOREIGN, s, nothing)
    if cname === nothing
        what = s in ("jl_threadid", "jl_get_current_task") ? " (process state, e.g. `rand()` without an RNG argument)" :
               occursin("alloc", s) ? " (memory allocation)" :
               s in ("jl_clock_now", "jl_hrtime") ? " (the clock)" : ""
        dc_refuse(fn.st, "the call `ccall($(repr(s)))`$what cannot run in a kernel"; line = dc_line(fn, i))
    end
    args = [dc_val(fn, ex.args[5 + k]) for k in 1:nargs]
    return string(cname, "(", join(args, ", "), ")")
end

# Tracing Julia functions into CUDA C expressions, the element-type -> C type mapping and
# the kernel cache shared by broadcasting and reductions.
#
# A function is traced by interpreting its lowered code with symbolic arguments (`Sym`s,
# each a C expression of a known Julia type). Calls of supported functions on `Sym`s build
# C expressions whose types come from Base itself (`Base.promote_op` on the real types), so
# a kernel computes what Base would (wrapping integer arithmetic, promotion, NaN rules of
# `max`/`min`, `div`/`rem`/`mod` signs). Calls on plain values run natively (they are
# constants, e.g. `zero(Float32)`); calls of other functions with `Sym` arguments are
# interpreted in turn, so user functions built from supported ones compile. The approach
# follows what CUDA.jl reaches through LLVM and what CuPy's ElementwiseKernel asks users to
# write in C.

"""
    CuMem.KernelTraceError(msg)

Thrown when a function given to broadcasting, `map` or a reduction cannot become a GPU
kernel: an unsupported function (the message names it and lists what is supported), a
branch on an element value (use `ifelse`), a non-constant global, or a result that is not
a real number. Thrown the same way on the host device and on a GPU.
"""
struct KernelTraceError <: Exception
    msg::String
end
Base.showerror(io::IO, e::KernelTraceError) = print(io, "KernelTraceError: ", e.msg)

## element types

# Element types kernels handle.
const KERNEL_ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
                        Float16, Float32, Float64)
const KernelReal = Union{KERNEL_ELTYPES...}

const CTYPES = IdDict{Any,String}(Bool => "bool", Int8 => "int8_t", Int16 => "int16_t",
                                  Int32 => "int32_t", Int64 => "int64_t", UInt8 => "uint8_t",
                                  UInt16 => "uint16_t", UInt32 => "uint32_t", UInt64 => "uint64_t",
                                  Float16 => "half_t", Float32 => "float", Float64 => "double")

"""
    CuMem.codegen_ctype(T::Type) -> String

The C type that stores a Julia element type `T` in generated kernels: `Float32` ->
`"float"`, `Int8` -> `"int8_t"`, `Bool` -> `"bool"`, `Float16` -> `"half_t"` (its bits; kernels
compute Float16 in `float` and round after each operation, as Julia does). Throws an
`ArgumentError` for other types. The typedefs are in [`CuMem.C_PRELUDE`](@ref).
"""
function codegen_ctype(::Type{T}) where {T}
    s = get(CTYPES, T, nothing)
    s === nothing && throw(ArgumentError("GPU kernels support the element types " *
                                         join(KERNEL_ELTYPES, ", ") * "; not $T"))
    return s
end

# The C type expressions of `T` compute in (Float16 computes in float).
ctype_compute(::Type{Float16}) = "float"
ctype_compute(::Type{T}) where {T} = codegen_ctype(T)

"""
    CuMem.C_PRELUDE :: String

The CUDA C that every generated kernel starts with: fixed-width integer typedefs (NVRTC
has no `<stdint.h>`), `half_t` with round-to-nearest conversions, and the helpers that
give kernels Julia's semantics (`max`/`min` with NaN, `mod`, `fld`, shifts, integer
powers).
"""
const C_PRELUDE = raw"""
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
typedef unsigned short half_t;
static __device__ __forceinline__ float jl_h2f(half_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
static __device__ __forceinline__ half_t jl_f2h(float f) { half_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
static __device__ __forceinline__ half_t jl_d2h(double f) { half_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(f)); return h; }
static __device__ __forceinline__ float jl_rh(float f) { return jl_h2f(jl_f2h(f)); }
static __device__ __forceinline__ float jl_rhd(double f) { return jl_h2f(jl_d2h(f)); }
template <typename T> static __device__ __forceinline__ bool jl_isnan(T x) { return x != x; }
static __device__ __forceinline__ bool jl_signbit(float x) { return __float_as_int(x) < 0; }
static __device__ __forceinline__ bool jl_signbit(double x) { return __double_as_longlong(x) < 0; }
/* Julia's max/min for floats: NaN wins, -0.0 < 0.0 */
template <typename T> static __device__ __forceinline__ T jl_fmax(T x, T y) {
  return ((y > x) | (jl_signbit(y) < jl_signbit(x))) ? (jl_isnan(x) ? x : y) : (jl_isnan(y) ? y : x); }
template <typename T> static __device__ __forceinline__ T jl_fmin(T x, T y) {
  return ((y < x) | (jl_signbit(y) > jl_signbit(x))) ? (jl_isnan(x) ? x : y) : (jl_isnan(y) ? y : x); }
template <typename T> static __device__ __forceinline__ T jl_imax(T x, T y) { return y > x ? y : x; }
template <typename T> static __device__ __forceinline__ T jl_imin(T x, T y) { return y < x ? y : x; }
/* integer div/rem with defined results where Julia throws: x/0 == 0, x%0 == 0, typemin/-1 wraps */
template <typename T, typename U> static __device__ __forceinline__ T jl_div(T x, T y) {
  return y == 0 ? (T)0 : ((T)-1 < 0 && y == (T)-1) ? (T)((U)0 - (U)x) : (T)(x / y); }
template <typename T> static __device__ __forceinline__ T jl_rem(T x, T y) {
  return (y == 0 || ((T)-1 < 0 && y == (T)-1)) ? (T)0 : (T)(x % y); }
template <typename T, typename U> static __device__ __forceinline__ T jl_fld(T x, T y) {
  T d = jl_div<T, U>(x, y); T r = jl_rem<T>(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? (T)(d - 1) : d; }
template <typename T, typename U> static __device__ __forceinline__ T jl_cld(T x, T y) {
  T d = jl_div<T, U>(x, y); T r = jl_rem<T>(x, y);
  return (r != 0 && ((r > 0) == (y > 0))) ? (T)(d + 1) : d; }
template <typename T> static __device__ __forceinline__ T jl_mod(T x, T y) {
  T r = jl_rem<T>(x, y); return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r; }
template <typename T> static __device__ __forceinline__ T jl_fmod(T x, T y) {
  T r = fmod(x, y); return r == 0 ? copysign((T)0, y) : (((r > 0) != (y > 0)) ? r + y : r); }
/* shifts with Julia's rules: counts >= the bit width give 0 (or the sign for >>), negative counts shift the other way */
template <typename T, typename U> static __device__ __forceinline__ T jl_shl_u(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (T)0 : (T)((U)x << n); }
template <typename T> static __device__ __forceinline__ T jl_shr_u(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (x < 0 ? (T)-1 : (T)0) : (T)(x >> n); }
template <typename T, typename U> static __device__ __forceinline__ T jl_lshr_u(T x, uint64_t n) {
  return n >= 8 * sizeof(T) ? (T)0 : (T)((U)x >> n); }
template <typename T, typename U, typename N> static __device__ __forceinline__ T jl_shl(T x, N n) {
  return n >= 0 ? jl_shl_u<T, U>(x, (uint64_t)n) : jl_shr_u<T>(x, (uint64_t)0 - (uint64_t)n); }
template <typename T, typename U, typename N> static __device__ __forceinline__ T jl_shr(T x, N n) {
  return n >= 0 ? jl_shr_u<T>(x, (uint64_t)n) : jl_shl_u<T, U>(x, (uint64_t)0 - (uint64_t)n); }
template <typename T, typename U, typename N> static __device__ __forceinline__ T jl_lshr(T x, N n) {
  return n >= 0 ? jl_lshr_u<T, U>(x, (uint64_t)n) : jl_shl_u<T, U>(x, (uint64_t)0 - (uint64_t)n); }
/* integer power by squaring, wrapping; negative exponents give 0 except for bases 1 and -1 (Julia throws) */
template <typename T, typename U> static __device__ __forceinline__ T jl_ipow(T x, int64_t p) {
  if (p < 0) return x == 1 ? (T)1 : (((T)-1 < 0 && x == (T)-1) ? ((p & 1) ? x : (T)1) : (T)0);
  U r = 1, b = (U)x; while (p) { if (p & 1) r *= b; b *= b; p >>= 1; } return (T)r; }
template <typename T> static __device__ __forceinline__ T jl_sign(T x) { return x < 0 ? (T)-1 : (x > 0 ? (T)1 : x); }
"""

# Whether `T` is a signed integer type (Bool is not).
issignedint(::Type{T}) where {T} = T <: Signed
unsigned_ctype(::Type{T}) where {T} = sizeof(T) <= 4 ? "uint32_t" : "uint64_t"

## symbolic values

# A traced value: a C expression (compute type of T) whose Julia type is T.
# (Not parametric: one concrete type keeps the tracer from compiling a specialization
# per combination of element types.)
struct Sym
    T::DataType
    ex::String
end
symtype(s::Sym) = s.T
symtype(@nospecialize(x)) = typeof(x)

# The C literal for a plain value (exact: floats by their bits).
function c_literal(x::T) where {T}
    if T === Bool
        return x ? "true" : "false"
    elseif T <: Integer
        return string("((", codegen_ctype(T), ")0x", string(reinterpret(unsigned(T), x), base = 16), "ULL)")
    elseif T === Float16
        return string("__int_as_float(0x", string(reinterpret(UInt32, Float32(x)), base = 16), ")")
    elseif T === Float32
        return string("__int_as_float(0x", string(reinterpret(UInt32, x), base = 16), ")")
    elseif T === Float64
        return string("__longlong_as_double(0x", string(reinterpret(UInt64, x), base = 16), "LL)")
    end
    throw(KernelTraceError("the value $(repr(x)) of type $T cannot be used in a GPU kernel"))
end

tosym(x::Sym) = x
tosym(@nospecialize(x::KernelReal)) = Sym(typeof(x), c_literal(x))
tosym(x) = throw(KernelTraceError("the value $(repr(x)) of type $(typeof(x)) cannot be used in a GPU kernel; kernels compute with $(join(KERNEL_ELTYPES, ", "))"))

# `x` (Sym or plain value) converted to type `T`, as a C expression of T's compute type.
function cv(@nospecialize(x), @nospecialize(T::Type))
    s = tosym(x)
    S = symtype(s)
    S === T && return s.ex
    if T === Bool
        return string("((", s.ex, ") != 0)")
    elseif T === Float16
        return S === Float32 || S === Float16 ? string("jl_rh(", s.ex, ")") : string("jl_rhd((double)(", s.ex, "))")
    else
        return string("((", codegen_ctype(T), ")(", s.ex, "))")
    end
end
conv(@nospecialize(x), @nospecialize(T::Type)) = Sym(T, cv(x, T))

# Float16 results are rounded after each operation (Julia computes Float16 through Float32).
rnd(::Type{Float16}, ex::String) = string("jl_rh(", ex, ")")
rnd(::Type, ex::String) = ex

# The result type Base gives `f` on these argument types, required to be a kernel eltype.
function result_type(@nospecialize(f), @nospecialize(types...))
    R = Base.promote_op(f, types...)
    R in KERNEL_ELTYPES && return R
    throw(KernelTraceError("`$(fname(f))` on ($(join(types, ", "))) gives $R in Base, which GPU kernels cannot compute"))
end

function fname(@nospecialize(f))
    f isa Function || return string(f)
    s = string(nameof(f))
    m = match(r"^#([^#]+)#\d+$", s)        # a local function `g` is named "#g#12"
    return m === nothing ? s : m.captures[1]
end

## primitives: handlers for supported functions called with Sym arguments

const PRIMITIVES = IdDict{Any,Function}()

function arith(op::String, f)
    return function (a, b)
        R = result_type(f, symtype(a), symtype(b))
        if R <: Integer
            U = unsigned_ctype(R)
            return Sym(R, string("((", codegen_ctype(R), ")((", U, ")", cv(a, R), " ", op, " (", U, ")", cv(b, R), "))"))
        end
        return Sym(R, rnd(R, string("(", cv(a, R), " ", op, " ", cv(b, R), ")")))
    end
end
PRIMITIVES[+] = arith("+", +)
PRIMITIVES[*] = arith("*", *)
let sub = arith("-", -)
    PRIMITIVES[-] = function (a, b = nothing)
        b === nothing || return sub(a, b)
        R = result_type(-, symtype(a))
        R <: Integer && return Sym(R, string("((", codegen_ctype(R), ")(0ULL - (uint64_t)", cv(a, R), "))"))
        return Sym(R, string("(-", cv(a, R), ")"))
    end
end
PRIMITIVES[+] = let add = PRIMITIVES[+]
    (a, b = nothing, c...) -> b === nothing ? conv(a, result_type(+, symtype(a))) :
        isempty(c) ? add(a, b) : PRIMITIVES[+](add(a, b), c...)
end
PRIMITIVES[*] = let mul = PRIMITIVES[*]
    (a, b, c...) -> isempty(c) ? mul(a, b) : PRIMITIVES[*](mul(a, b), c...)
end
PRIMITIVES[Base.add_sum] = (a, b) -> PRIMITIVES[+](a, b)
PRIMITIVES[Base.mul_prod] = (a, b) -> PRIMITIVES[*](a, b)
PRIMITIVES[/] = function (a, b)
    R = result_type(/, symtype(a), symtype(b))
    return Sym(R, rnd(R, string("(", cv(a, R), " / ", cv(b, R), ")")))
end
PRIMITIVES[\] = (a, b) -> PRIMITIVES[/](b, a)
PRIMITIVES[inv] = a -> PRIMITIVES[/](one(symtype(a)), a)

# Comparisons compare exactly across signed and unsigned integers, as Julia does.
function compare(op::String, f)
    return function (a, b)
        result_type(f, symtype(a), symtype(b))
        A, B = symtype(a), symtype(b)
        if A <: Integer && B <: Integer && A !== Bool && B !== Bool && (A <: Signed) != (B <: Signed)
            sa, sb = tosym(a).ex, tosym(b).ex
            neg_a = A <: Signed ? "($sa < 0)" : "false"
            neg_b = B <: Signed ? "($sb < 0)" : "false"
            ua, ub = "((uint64_t)$sa)", "((uint64_t)$sb)"
            ex = op == "==" ? "(!$neg_a && !$neg_b && $ua == $ub)" :
                 op == "!=" ? "($neg_a || $neg_b || $ua != $ub)" :
                 op == "<" ? "($neg_a && !$neg_b) || (!$neg_a && !$neg_b && $ua < $ub) || ($neg_a && $neg_b && $ua < $ub)" :
                 op == "<=" ? "($neg_a && !$neg_b) || (!$neg_a && !$neg_b && $ua <= $ub) || ($neg_a && $neg_b && $ua <= $ub)" :
                 error("unreachable")
            return Sym(Bool, "(" * ex * ")")
        end
        P = promote_type(A, B)
        P in KERNEL_ELTYPES || throw(KernelTraceError("cannot compare $A and $B in a GPU kernel"))
        return Sym(Bool, string("(", cv(a, P), " ", op, " ", cv(b, P), ")"))
    end
end
PRIMITIVES[==] = compare("==", ==)
PRIMITIVES[!=] = compare("!=", !=)
PRIMITIVES[<] = compare("<", <)
PRIMITIVES[<=] = compare("<=", <=)
PRIMITIVES[>] = (a, b) -> PRIMITIVES[<](b, a)
PRIMITIVES[>=] = (a, b) -> PRIMITIVES[<=](b, a)
PRIMITIVES[isless] = function (a, b)      # floats: NaN sorts last, -0.0 < 0.0
    P = promote_type(symtype(a), symtype(b))
    P <: AbstractFloat || return PRIMITIVES[<](a, b)
    x, y = cv(a, P), cv(b, P)
    return Sym(Bool, "((jl_isnan($y) && !jl_isnan($x)) || (!jl_isnan($x) && !jl_isnan($y) && ($x < $y || ($x == $y && jl_signbit($x) && !jl_signbit($y)))))")
end
PRIMITIVES[isequal] = function (a, b)
    P = promote_type(symtype(a), symtype(b))
    P <: AbstractFloat || return PRIMITIVES[==](a, b)
    x, y = cv(a, P), cv(b, P)
    return Sym(Bool, "((jl_isnan($x) && jl_isnan($y)) || ($x == $y && jl_signbit($x) == jl_signbit($y)))")
end

function bitwise(op::String, f)
    return function (a, b, c...)
        R = result_type(f, symtype(a), symtype(b))
        s = Sym(R, string("((", codegen_ctype(R), ")(", cv(a, R), " ", op, " ", cv(b, R), "))"))
        return isempty(c) ? s : PRIMITIVES[f](s, c...)
    end
end
PRIMITIVES[&] = bitwise("&", &)
PRIMITIVES[|] = bitwise("|", |)
PRIMITIVES[xor] = bitwise("^", xor)
PRIMITIVES[~] = function (a)
    R = result_type(~, symtype(a))
    R === Bool && return Sym(Bool, "(!$(cv(a, Bool)))")
    return Sym(R, string("((", codegen_ctype(R), ")(~", cv(a, R), "))"))
end
PRIMITIVES[!] = a -> (symtype(a) === Bool ? Sym(Bool, "(!$(tosym(a).ex))") : (result_type(!, symtype(a)); error("unreachable")))

function shift(helper::String, f)
    return function (a, n)
        T, N = symtype(a), symtype(n)
        R = result_type(f, T, N)
        N <: Integer || throw(KernelTraceError("shift counts must be integers, got $N"))
        # >>> shifts the bits of R's own width: its unsigned type of the same size
        U = helper == "jl_lshr" && R <: Signed ? codegen_ctype(unsigned(R)) : unsigned_ctype(R)
        ex = N <: Unsigned || N === Bool ? string(helper, "_u<", codegen_ctype(R), helper == "jl_shr" ? "" : ", " * U, ">(", cv(a, R), ", (uint64_t)", tosym(n).ex, ")") :
             string(helper, "<", codegen_ctype(R), ", ", U, ", ", codegen_ctype(N), ">(", cv(a, R), ", ", tosym(n).ex, ")")
        # jl_shr_u takes one template argument
        ex = replace(ex, r"^jl_shr_u<([a-z0-9_]+), [a-z0-9_]+>" => s"jl_shr_u<\1>")
        return Sym(R, ex)
    end
end
PRIMITIVES[<<] = shift("jl_shl", <<)
PRIMITIVES[>>] = shift("jl_shr", >>)
PRIMITIVES[>>>] = shift("jl_lshr", >>>)

function intdiv(helper::String, f, fallback::String)
    return function (a, b)
        R = result_type(f, symtype(a), symtype(b))
        if R <: Integer && R !== Bool
            U = unsigned_ctype(R)
            tmpl = helper in ("jl_rem", "jl_mod") ? "<$(codegen_ctype(R))>" : "<$(codegen_ctype(R)), $U>"
            return Sym(R, string(helper, tmpl, "(", cv(a, R), ", ", cv(b, R), ")"))
        elseif R === Bool
            # Bool ÷ Bool, etc.: Julia computes in Bool (true ÷ true == true); through Int.
            r = PRIMITIVES[f](conv(a, Int), conv(b, Int))
            return conv(r, Bool)
        end
        x, y = cv(a, R), cv(b, R)
        return Sym(R, rnd(R, replace(replace(fallback, "X" => x), "Y" => y)))
    end
end
PRIMITIVES[div] = intdiv("jl_div", div, "trunc((X - fmod(X, Y)) / Y)")
PRIMITIVES[rem] = intdiv("jl_rem", rem, "fmod(X, Y)")
PRIMITIVES[fld] = intdiv("jl_fld", fld, "floor((X - jl_fmod(X, Y)) / Y)")
PRIMITIVES[cld] = intdiv("jl_cld", cld, "ceil((X - jl_fmod(X, Y)) / Y)")
PRIMITIVES[mod] = intdiv("jl_mod", mod, "jl_fmod(X, Y)")

function minmax_prim(f, fhelper::String, ihelper::String)
    return function (a, b, c...)
        R = result_type(f, symtype(a), symtype(b))
        h = R <: AbstractFloat ? fhelper : ihelper
        s = Sym(R, string(h, "<", ctype_compute(R), ">(", cv(a, R), ", ", cv(b, R), ")"))
        return isempty(c) ? s : PRIMITIVES[f](s, c...)
    end
end
PRIMITIVES[max] = minmax_prim(max, "jl_fmax", "jl_imax")
PRIMITIVES[min] = minmax_prim(min, "jl_fmin", "jl_imin")
PRIMITIVES[clamp] = function (x, lo, hi)
    # Base: ifelse(x > hi, convert(T, hi), ifelse(x < lo, convert(T, lo), convert(T, x)))
    T = promote_type(symtype(x), symtype(lo), symtype(hi))
    T in KERNEL_ELTYPES || throw(KernelTraceError("clamp of $(symtype(x)) between $(symtype(lo)) and $(symtype(hi)) is not supported"))
    gt, lt = PRIMITIVES[>](x, hi), PRIMITIVES[<](x, lo)
    return Sym(T, "($(gt.ex) ? $(cv(hi, T)) : ($(lt.ex) ? $(cv(lo, T)) : $(cv(x, T))))")
end
PRIMITIVES[abs] = function (a)
    R = result_type(abs, symtype(a))
    R <: Unsigned || R === Bool && return conv(a, R)
    R <: AbstractFloat && return Sym(R, "fabs($(cv(a, R)))")
    x = cv(a, R)
    return Sym(R, "(($(codegen_ctype(R)))($x < 0 ? (0ULL - (uint64_t)$x) : (uint64_t)$x))")
end
PRIMITIVES[abs2] = a -> PRIMITIVES[*](a, a)
PRIMITIVES[sign] = function (a)
    R = result_type(sign, symtype(a))
    return Sym(R, "jl_sign<$(ctype_compute(R))>($(cv(a, R)))")
end
PRIMITIVES[signbit] = a -> (T = symtype(a); T <: AbstractFloat ? Sym(Bool, "jl_signbit($(tosym(a).ex))") :
                                                T <: Signed ? Sym(Bool, "($(tosym(a).ex) < 0)") : Sym(Bool, "false"))
PRIMITIVES[copysign] = function (a, b)
    R = result_type(copysign, symtype(a), symtype(b))
    R <: AbstractFloat && return Sym(R, "copysign($(cv(a, R)), $(cv(b, ctype_compute(R) == "float" ? Float32 : Float64)))")
    return PRIMITIVES[ifelse](PRIMITIVES[signbit](b), PRIMITIVES[-](PRIMITIVES[abs](a)), PRIMITIVES[abs](a))
end
PRIMITIVES[flipsign] = (a, b) -> PRIMITIVES[ifelse](PRIMITIVES[signbit](b), PRIMITIVES[-](a), conv(a, result_type(-, symtype(a))))
PRIMITIVES[isnan] = a -> symtype(a) <: AbstractFloat ? Sym(Bool, "jl_isnan($(tosym(a).ex))") : Sym(Bool, "false")
PRIMITIVES[isinf] = a -> symtype(a) <: AbstractFloat ? Sym(Bool, "isinf($(tosym(a).ex))") : Sym(Bool, "false")
PRIMITIVES[isfinite] = a -> symtype(a) <: AbstractFloat ? Sym(Bool, "isfinite($(tosym(a).ex))") : Sym(Bool, "true")
PRIMITIVES[iszero] = a -> PRIMITIVES[==](a, zero(symtype(a)))
PRIMITIVES[isone] = a -> PRIMITIVES[==](a, one(symtype(a)))
PRIMITIVES[identity] = a -> a
PRIMITIVES[muladd] = (a, b, c) -> PRIMITIVES[+](PRIMITIVES[*](a, b), c)
PRIMITIVES[fma] = function (a, b, c)
    R = result_type(fma, symtype(a), symtype(b), symtype(c))
    R <: AbstractFloat || return PRIMITIVES[muladd](a, b, c)
    R === Float16 && return Sym(R, "jl_rhd(fma((double)$(cv(a, R)), (double)$(cv(b, R)), (double)$(cv(c, R))))")
    return Sym(R, "fma($(cv(a, R)), $(cv(b, R)), $(cv(c, R)))")
end

# Floating-point functions of one argument: computed in the result type's C type (CUDA's
# math library overloads float and double), Float16 through float.
function float_fn(f, cname::String = string(nameof(f)))
    return function (a)
        R = result_type(f, symtype(a))
        R <: AbstractFloat || throw(KernelTraceError("`$(fname(f))` of $(symtype(a)) is not supported in GPU kernels"))
        return Sym(R, rnd(R, string(cname, "(", cv(a, R), ")")))
    end
end
for f in (exp, exp2, exp10, expm1, log, log2, log10, log1p, sqrt, cbrt, sin, cos, tan, asin, acos,
          sinh, cosh, tanh, asinh, acosh, atanh, sinpi, cospi)
    PRIMITIVES[f] = float_fn(f)
end
PRIMITIVES[atan] = function (a, b = nothing)
    b === nothing && return float_fn(atan)(a)
    R = result_type(atan, symtype(a), symtype(b))
    return Sym(R, rnd(R, "atan2($(cv(a, R)), $(cv(b, R)))"))
end
PRIMITIVES[hypot] = function (a, b)
    R = result_type(hypot, symtype(a), symtype(b))
    return Sym(R, rnd(R, "hypot($(cv(a, R)), $(cv(b, R)))"))
end
PRIMITIVES[^] = function (a, b)
    A, B = symtype(a), symtype(b)
    R = result_type(^, A, B)
    if R <: Integer && B <: Integer
        R === Bool && return Sym(Bool, "($(cv(a, Bool)) || $(cv(b, Int64)) == 0)")
        return Sym(R, "jl_ipow<$(codegen_ctype(R)), $(unsigned_ctype(R))>($(cv(a, R)), $(cv(b, Int64)))")
    end
    B <: Integer && return Sym(R, rnd(R, "pow($(cv(a, R)), ($(ctype_compute(R)))$(cv(b, Int64)))"))
    return Sym(R, rnd(R, "pow($(cv(a, R)), $(cv(b, R)))"))
end
PRIMITIVES[Base.literal_pow] = function (f, a, ::Val{p}) where {p}
    f === (^) || throw(KernelTraceError("literal_pow of $(f) is not supported"))
    T = symtype(a)
    R = result_type(Base.literal_pow, typeof(^), T, Val{p})
    if p == 0
        return tosym(one(R))
    elseif p == 1
        return conv(a, R)
    elseif p == 2
        return PRIMITIVES[*](conv(a, R), conv(a, R))
    elseif p == 3
        return PRIMITIVES[*](PRIMITIVES[*](conv(a, R), conv(a, R)), conv(a, R))
    elseif p == -1 && R <: AbstractFloat
        return PRIMITIVES[inv](conv(a, R))
    end
    return PRIMITIVES[^](a, p)
end

# Rounding: round/floor/ceil/trunc(x), and (T, x) forms that convert (unchecked in kernels).
function rounding(f, cname::String)
    return function (a, b = nothing, rest...)
        if a isa Type
            T, x = a, b
            T in KERNEL_ELTYPES || throw(KernelTraceError("`$(fname(f))($T, x)` is not supported in GPU kernels"))
            S = symtype(x)
            S <: Integer && return conv(x, T)
            return conv(Sym(S, rnd(S, string(cname, "(", tosym(x).ex, ")"))), T)
        end
        b === nothing || throw(KernelTraceError("`$(fname(f))` with digits or a rounding mode is not supported in GPU kernels"))
        R = result_type(f, symtype(a))
        R <: Integer && return conv(a, R)
        return Sym(R, rnd(R, string(cname, "(", cv(a, R), ")")))
    end
end
PRIMITIVES[round] = rounding(round, "rint")
PRIMITIVES[floor] = rounding(floor, "floor")
PRIMITIVES[ceil] = rounding(ceil, "ceil")
PRIMITIVES[trunc] = rounding(trunc, "trunc")
PRIMITIVES[unsafe_trunc] = rounding(trunc, "trunc")

# Conversions.
function convert_to(T, x)
    T isa Type && T in KERNEL_ELTYPES ||
        throw(KernelTraceError("conversion of a $(symtype(x)) to $T is not supported in GPU kernels"))
    return conv(x, T)
end
PRIMITIVES[convert] = convert_to
PRIMITIVES[oftype] = (x, y) -> convert_to(symtype(x), y)
PRIMITIVES[zero] = x -> tosym(zero(x isa Type ? x : symtype(x)))
PRIMITIVES[one] = x -> tosym(one(x isa Type ? x : symtype(x)))
PRIMITIVES[typemin] = x -> tosym(typemin(symtype(x)))
PRIMITIVES[typemax] = x -> tosym(typemax(symtype(x)))
PRIMITIVES[eps] = x -> tosym(eps(symtype(x)))
PRIMITIVES[float] = x -> conv(x, result_type(float, symtype(x)))
PRIMITIVES[Base.rem] = let r = PRIMITIVES[rem]
    (a, b) -> b isa Type ? convert_to(b, a) : r(a, b)      # x % Int8 wraps
end
PRIMITIVES[Core.ifelse] = function (c, a, b)
    symtype(c) === Bool || throw(KernelTraceError("ifelse needs a Bool condition, got $(symtype(c))"))
    c isa Bool && return c ? a : b
    T = promote_type(symtype(a), symtype(b))
    T in KERNEL_ELTYPES || throw(KernelTraceError("ifelse between $(symtype(a)) and $(symtype(b)) is not supported"))
    return Sym(T, "($(c.ex) ? $(cv(a, T)) : $(cv(b, T)))")
end
PRIMITIVES[ifelse] = PRIMITIVES[Core.ifelse]

# The list shown in errors.
supported_list() = join(sort!(unique!([fname(f) for f in keys(PRIMITIVES)])), ", ") *
    ", and conversions T(x) to " * join(KERNEL_ELTYPES, ", ")

## the tracer: an interpreter of lowered code with Sym values

mutable struct TraceContext
    lifted::IdDict{Any,Dict{Symbol,Any}}   # objects (closures, boxes) -> fields that are kernel parameters
    stack::Vector{Any}                     # functions being interpreted (for messages)
    steps::Int
    globals::Vector{Tuple{GlobalRef,DataType}}   # non-constant global numbers read (kernel parameters g1, g2, ...)
end
TraceContext() = TraceContext(IdDict{Any,Dict{Symbol,Any}}(), Any[], 0, Tuple{GlobalRef,DataType}[])

const MAX_TRACE_STEPS = 100_000
const MAX_TRACE_DEPTH = 64

has_sym(args) = any(a -> a isa Sym || (a isa Tuple && has_sym(a)), args)

where_str(ctx) = isempty(ctx.stack) ? "" : " in `" * fname(ctx.stack[end]) * "`"

function trace_call(ctx::TraceContext, @nospecialize(f), @nospecialize(args...))
    if f === typeof && length(args) == 1 && args[1] isa Sym
        return symtype(args[1])
    elseif f === isa && length(args) == 2 && args[1] isa Sym
        return symtype(args[1]) <: args[2]
    elseif f === getfield && haskey(ctx.lifted, args[1]) && args[2] isa Symbol && haskey(ctx.lifted[args[1]], args[2])
        return ctx.lifted[args[1]][args[2]]
    elseif f === getfield && haskey(ctx.lifted, args[1]) && args[2] isa Integer
        name = fieldname(typeof(args[1]), args[2])
        haskey(ctx.lifted[args[1]], name) && return ctx.lifted[args[1]][name]
    end
    lifted_f = haskey(ctx.lifted, f)
    if !has_sym(args) && !lifted_f
        return f(args...)                      # a constant
    end
    if f isa Type && f in KERNEL_ELTYPES && length(args) == 1
        return convert_to(f, args[1])
    end
    h = get(PRIMITIVES, f, nothing)
    h !== nothing && return h(args...)
    if f === Core._apply || (isdefined(Core, :_apply_iterate) && f === Core._apply_iterate)
        rest = f === Core._apply ? args : args[2:end]
        g = rest[1]
        flat = Any[]
        for t in rest[2:end]
            append!(flat, t isa Sym ? Any[t] : collect(Any, t))
        end
        return trace_call(ctx, g, flat...)
    end
    if f === Core.typeassert && args[1] isa Sym
        symtype(args[1]) <: args[2] || throw(TypeError(:typeassert, "", args[2], symtype(args[1])))
        return args[1]
    elseif f === tuple
        return tuple(args...)
    elseif f === (===)
        return args[1] === args[2]
    elseif f isa Core.Builtin
        (f === getfield || f === Core.getfield) && return f(args...)
        throw(KernelTraceError("`$(fname(f))`$(where_str(ctx)) cannot take traced values in a GPU kernel"))
    end
    return interpret(ctx, f, args)
end

function unsupported(ctx, f, args)
    types = join(map(a -> a isa Sym ? string(symtype(a)) : string(typeof(a)), args), ", ")
    return KernelTraceError("`$(fname(f))($types)`$(where_str(ctx)) cannot be compiled into a GPU kernel. " *
                            "Supported: $(supported_list()); and functions written with these " *
                            "(no branches on element values: use ifelse).")
end

is_base_module(m::Module) = m === Base || m === Core || parentmodule(m) === Base
const BASE_INTERPRETED = Any[|>, ∘, Base.splat]

get_ir(m::Method) = isdefined(Base, :uncompressed_ir) ? Base.uncompressed_ir(m) : Base.uncompressed_ast(m)

function method_for(f, args)
    argtypes = Tuple{typeof(f), map(a -> a isa Type ? Type{a} : typeof(a), args)...}
    ms = Base._methods_by_ftype(argtypes, -1, typemax(UInt))
    (ms === false || length(ms) != 1) && return nothing
    m = ms[1]
    if m isa Core.SimpleVector || m isa Tuple
        return m[3]::Method, m[2]
    end
    return m.method::Method, m.sparams
end

function interpret(ctx::TraceContext, @nospecialize(f), @nospecialize(args))
    found = method_for(f, args)
    found === nothing && throw(unsupported(ctx, f, args))
    m, sparams = found
    # Base's own functions are not interpreted (their internals branch and call intrinsics)
    # except for the plumbing below and callable objects with fields (Fix1, Fix2, ∘, ...).
    if is_base_module(m.module) && Base.issingletontype(typeof(f)) && !startswith(string(m.name), "#") &&
       !(f in BASE_INTERPRETED)
        throw(unsupported(ctx, f, args))
    end
    isdefined(m, :generator) && m.generator !== nothing && throw(unsupported(ctx, f, args))
    length(ctx.stack) >= MAX_TRACE_DEPTH && throw(KernelTraceError("`$(fname(f))` recurses too deeply to compile into a GPU kernel"))
    ci = get_ir(m)
    nargs = Int(m.nargs)
    slots = Vector{Any}(undef, length(ci.slotnames))
    slots[1] = f
    if m.isva
        for i in 1:nargs-2
            slots[i+1] = args[i]
        end
        slots[nargs] = tuple(args[nargs-1:end]...)
    else
        for i in 1:nargs-1
            slots[i+1] = args[i]
        end
    end
    push!(ctx.stack, f)
    try
        return run_ir(ctx, ci, slots, sparams, m)
    finally
        pop!(ctx.stack)
    end
end

function evalarg(ctx, @nospecialize(x), ssa, slots, sparams, m)
    if x isa Core.SSAValue
        return ssa[x.id]
    elseif x isa Core.SlotNumber || x isa Core.TypedSlot
        return slots[x.id]
    elseif x isa GlobalRef
        isdefined(x.mod, x.name) || throw(UndefVarError(x.name))
        v = getfield(x.mod, x.name)
        if !isconst(x.mod, x.name) && v isa KernelReal
            # a non-constant global number: a kernel parameter read at each launch
            i = findfirst(g -> g[1] == x, ctx.globals)
            if i === nothing
                push!(ctx.globals, (x, typeof(v)))
                i = length(ctx.globals)
            end
            ctx.globals[i][2] === typeof(v) || throw(KernelTraceError("the global `$(x.name)` changed type while tracing"))
            return Sym(typeof(v), "g$i")
        elseif !isconst(x.mod, x.name) && !(v isa Function || v isa Type || v isa Module)
            throw(KernelTraceError("`$(fname(ctx.stack[end]))` reads the non-constant global `$(x.name)`, a " *
                                   "$(typeof(v)); GPU kernels read global numbers only: declare it `const` or pass it as an argument"))
        end
        return v
    elseif x isa QuoteNode
        return x.value
    elseif x isa Expr && x.head === :static_parameter
        return sparams[x.args[1]]
    elseif x isa Expr && x.head === :boundscheck
        return false
    elseif x isa Expr
        throw(KernelTraceError("`$(fname(ctx.stack[end]))` uses `$(x.head)`, which GPU kernels do not support"))
    end
    return x
end

function branch_error(ctx, m)
    return KernelTraceError("`$(fname(ctx.stack[end]))` ($(m.file):$(m.line)) branches on a value computed from " *
                            "array elements (`if`, `&&`, `||` or `?:` on it). GPU kernels are compiled from the " *
                            "function traced with symbolic elements and cannot branch on them: use " *
                            "`ifelse(cond, a, b)` (both sides are computed), e.g. `ifelse(x > 0, x, zero(x))`.")
end

function run_ir(ctx, ci, slots, sparams, m)
    code = ci.code
    ssa = Vector{Any}(undef, length(code))
    ev(x) = evalarg(ctx, x, ssa, slots, sparams, m)
    pc = 1
    while true
        (ctx.steps += 1) > MAX_TRACE_STEPS && throw(KernelTraceError("`$(fname(ctx.stack[end]))` is too long to compile into a GPU kernel (loops over element values?)"))
        stmt = code[pc]
        if stmt isa Expr
            h = stmt.head
            if h === :call
                vals = map(ev, stmt.args)
                ssa[pc] = trace_call(ctx, vals...)
            elseif h === :(=)
                rhs = stmt.args[2]
                v = rhs isa Expr && rhs.head === :call ? trace_call(ctx, map(ev, rhs.args)...) :
                    rhs isa Expr && rhs.head === :new ? new_struct(ctx, map(ev, rhs.args)) : ev(rhs)
                slots[stmt.args[1].id] = v
                ssa[pc] = v
            elseif h === :return
                return ev(stmt.args[1])
            elseif h === :gotoifnot
                c = ev(stmt.args[1])
                c isa Sym && throw(branch_error(ctx, m))
                c isa Bool || throw(TypeError(:if, "", Bool, c))
                if !c
                    pc = stmt.args[2]
                    continue
                end
            elseif h === :new
                ssa[pc] = new_struct(ctx, map(ev, stmt.args))
            elseif h === :splatnew
                vals = map(ev, stmt.args)
                ssa[pc] = new_struct(ctx, Any[vals[1], vals[2]...])
            elseif h in (:meta, :inbounds, :loopinfo, :gc_preserve_begin, :gc_preserve_end, :aliasscope,
                         :popaliasscope, :code_coverage_effect, :throw_undef_if_not, :enter, :leave, :pop_exception)
                h in (:enter,) && throw(KernelTraceError("`$(fname(ctx.stack[end]))` uses try/catch, which GPU kernels do not support"))
                ssa[pc] = nothing
            elseif h === :isdefined
                ssa[pc] = true
            else
                ssa[pc] = ev(stmt)
            end
        elseif stmt isa Core.GotoNode
            pc = stmt.label
            continue
        elseif isdefined(Core, :GotoIfNot) && stmt isa getfield(Core, :GotoIfNot)
            c = ev(stmt.cond)
            c isa Sym && throw(branch_error(ctx, m))
            if !c
                pc = stmt.dest
                continue
            end
        elseif isdefined(Core, :ReturnNode) && stmt isa getfield(Core, :ReturnNode)
            isdefined(stmt, :val) || throw(KernelTraceError("`$(fname(ctx.stack[end]))` cannot be compiled (unreachable code)"))
            return ev(stmt.val)
        elseif stmt isa Core.NewvarNode || stmt === nothing
            ssa[pc] = nothing
        else
            ssa[pc] = ev(stmt)
        end
        pc += 1
    end
end

function new_struct(ctx, vals)
    T = vals[1]
    fields = vals[2:end]
    has_sym(fields) && throw(KernelTraceError("`$(fname(ctx.stack[end]))` builds a `$T` from element values; GPU kernels compute with numbers only"))
    return ccall(:jl_new_structv, Any, (Any, Ptr{Any}, UInt32), T, fields, length(fields))
end

"""
    CuMem.trace_fn(ctx::TraceContext, f, args::Vector{Any}) -> Sym

Traces `f` called with `args` (symbolic arguments such as `Sym(T, "x1")`, and plain
values for captured constants) in the trace context `ctx`, and returns the resulting C
expression. Used by broadcasting and reductions.
"""
function trace_fn(ctx::TraceContext, @nospecialize(f), args::Vector{Any})
    r = try
        trace_call(ctx, f, args...)
    catch e
        if e isa TypeError && e.func === :if
            throw(KernelTraceError("`$(fname(f))` uses a non-Bool as a condition"))
        end
        rethrow()
    end
    r isa Sym && return r
    r isa KernelReal && return tosym(r)
    throw(KernelTraceError("`$(fname(f))` returns a $(typeof(r)) for element values; GPU kernels need a real number ($(join(KERNEL_ELTYPES, ", ")))"))
end

## kernel parameters from closures

# Walks the captured values of a function object: real scalars become kernel parameters
# (their values do not enter the source, so the cache does not grow with them), nested
# closures and boxes are walked, singletons are part of the type, other isbits values are
# baked into the source and recorded in `baked` (part of the cache key).
function lift_captures!(ctx::Union{TraceContext,Nothing}, params::Vector{Any}, baked::Vector{Any}, @nospecialize(f))
    f isa Type && return nothing
    T = typeof(f)
    (Base.issingletontype(T) || fieldcount(T) == 0) && return nothing
    fields = Dict{Symbol,Any}()
    for i in 1:fieldcount(T)
        isdefined(f, i) || continue
        v = getfield(f, i)
        name = fieldname(T, i)
        if v isa KernelReal
            push!(params, v)
            fields[name] = Sym(typeof(v), "p$(length(params))")
        elseif v isa Core.Box || v isa Function
            lift_captures!(ctx, params, baked, v)
        elseif v isa Type || Base.issingletontype(typeof(v))
            # part of the type: nothing to do
        elseif isbits(v)
            push!(baked, v)
        else
            throw(KernelTraceError("`$(fname(f))` captures a $(typeof(v)), which GPU kernels cannot use; " *
                                   "capture numbers (or pass arrays as broadcast arguments)"))
        end
    end
    ctx !== nothing && !isempty(fields) && (ctx.lifted[f] = fields)
    return nothing
end

## the kernel cache

mutable struct CacheStats
    hits::Int
    misses::Int
    nvrtc_checks::Int
end
const CACHE_STATS = CacheStats(0, 0, 0)
const KERNEL_CACHE = Dict{Any,Any}()
const KERNEL_CACHE_LOCK = ReentrantLock()

"""
    CuMem.kernel_cache_stats() -> NamedTuple

Counters of the compute kernel cache: `entries` (distinct kernels generated), `hits`
(calls that reused one), `misses` (calls that generated CUDA C; on a GPU each is one
NVRTC compile), `nvrtc_checks` (on the host device: sources compiled to PTX to check them,
when libnvrtc is available). A cache entry is keyed by the expression's types (functions,
element types, array wrappers, dimensionality, 32- or 64-bit indexing), never by values.
"""
kernel_cache_stats() = lock(KERNEL_CACHE_LOCK) do
    (entries = length(KERNEL_CACHE), hits = CACHE_STATS.hits, misses = CACHE_STATS.misses,
     nvrtc_checks = CACHE_STATS.nvrtc_checks)
end

# The cache entry for `key`, made by `make()` (returns (source, name, extra)) on a miss:
# on a GPU the kernel is compiled and loaded; on the host device the source is compiled to
# PTX once when libnvrtc is available.
struct CachedKernel
    source::String
    name::String
    kernel::Any          # Kernel on a GPU, nothing on the host device
    extra::Any
    globals::Vector{Tuple{GlobalRef,DataType}}   # read at each launch (kernel parameters g1, ...)
end

# Whether the non-constant globals a kernel reads still have the types it was traced with.
globals_valid(globals) = all(g -> typeof(getfield(g[1].mod, g[1].name)) === g[2], globals)
global_values(globals) = Any[getfield(g[1].mod, g[1].name) for g in globals]

function cached_kernel(make, key)
    # Kernels are loaded per device: other devices' entries are keyed by their ordinal.
    MULTI[] && (dev = task_device(); dev != 0) && (key = (dev, key))
    lock(KERNEL_CACHE_LOCK)
    try
        e = get(KERNEL_CACHE, key, nothing)
        if e !== nothing && globals_valid(e.globals)
            CACHE_STATS.hits += 1
            return e::CachedKernel
        end
    finally
        unlock(KERNEL_CACHE_LOCK)
    end
    source, name, extra, globals = make()
    kernel = nothing
    if on_host()
        if nvrtc_available()
            compile_ptx(source)
            lock(() -> CACHE_STATS.nvrtc_checks += 1, KERNEL_CACHE_LOCK)
        end
    else
        kernel = load_kernel(source, name)
    end
    e = CachedKernel(source, name, kernel, extra, globals)
    lock(KERNEL_CACHE_LOCK) do
        CACHE_STATS.misses += 1
        KERNEL_CACHE[key] = e
    end
    return e
end

# C parameter declaration and the Julia value passed for a kernel parameter of type T.
param_decl(::Type{Float16}, name) = "half_t $(name)_raw"
param_decl(::Type{T}, name) where {T} = "$(codegen_ctype(T)) $name"
param_unpack(::Type{Float16}, name) = "  const float $name = jl_h2f($(name)_raw);\n"
param_unpack(::Type, name) = ""
param_value(x::Float16) = reinterpret(UInt16, x)
param_value(x) = x

function print_params(io, ptypes, globals)
    for (j, T) in enumerate(ptypes)
        print(io, ", ", param_decl(T, "p$j"))
    end
    for (j, g) in enumerate(globals)
        print(io, ", ", param_decl(g[2], "g$j"))
    end
end
function print_unpack(io, ptypes, globals)
    for (j, T) in enumerate(ptypes)
        print(io, param_unpack(T, "p$j"))
    end
    for (j, g) in enumerate(globals)
        print(io, param_unpack(g[2], "g$j"))
    end
end

# The type a function returns on elements of the given types (traced once per type).
const TRACED_TYPES = Dict{Any,Any}()
function traced_type(f, Ts::Type...)
    ps, baked = Any[], Any[]
    lift_captures!(nothing, ps, baked, f)
    key = (typeof(f), Ts, baked)
    e = lock(() -> get(TRACED_TYPES, key, nothing), KERNEL_CACHE_LOCK)
    e === nothing || !globals_valid(e[2]) || return e[1]
    ctx = TraceContext()
    lift_captures!(ctx, Any[], Any[], f)
    R = symtype(trace_fn(ctx, f, Any[Sym(T, "x$i") for (i, T) in enumerate(Ts)]))
    lock(() -> TRACED_TYPES[key] = (R, ctx.globals), KERNEL_CACHE_LOCK)
    return R
end

# The tables keyed by functions and types hash object identities, which differ in every
# session: after loading a precompiled image, reinsert their entries.
function rehash_iddict!(d::IdDict)
    kv = collect(pairs(d))
    empty!(d)
    for (k, v) in kv
        d[k] = v
    end
    return d
end
function init_codegen()
    rehash_iddict!(PRIMITIVES)
    rehash_iddict!(CTYPES)
    return nothing
end

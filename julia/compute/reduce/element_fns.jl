# The element functions of the kernel families built on reductions and scans (mapreduce,
# findmax/findmin, accumulate, the bitonic sort): the one place they ask the compiler
# (compiler/, `device_function`) for a Julia function of element values, the wrappers that
# give its result the accumulator's type, and how a kernel skeleton declares, receives and
# calls function objects. The skeletons themselves (grid-stride loops, warp shuffles, tile
# scans) are C templates in each family's file.

"""
    CuMem.Converted{T}(f)

The function `(xs...) -> convert(T, f(xs...))` (one or two arguments), compiled as one
device function: how reductions and scans bring `f`'s result, or an operator's, to the
accumulator type (as Base's `mapreduce` does through `promote_op`). Captured values of `f`
travel in its field.
"""
struct Converted{T,F}
    f::F
end
Converted{T}(f::F) where {T,F} = Converted{T,F}(f)
(c::Converted{T})(x) where {T} = convert(T, c.f(x))
(c::Converted{T})(x, y) where {T} = convert(T, c.f(x, y))

"""
    CuMem.WithInit(op, init)

`acc -> op(init, acc)`: the `init` of `mapreduce`/`accumulate`, applied once to a result as
Base applies it (`init` travels in the function object, read at each launch).
"""
struct WithInit{O,I}
    op::O
    init::I
end
(g::WithInit)(acc) = g.op(g.init, acc)

"""
    CuMem.element_function(f, argtypes::Type...) -> DeviceFunction

`f` applied to elements of types `argtypes`, compiled from Julia's typed IR (see
[`device_function`](@ref)): every kernel family's element function, operator or predicate
comes from here. Throws `KernelCompileError` for what cannot compile.
"""
element_function(f, argtypes::Type...) = device_function(f, argtypes)

"""
    CuMem.converted_function(T, f, argtypes::Type...) -> (DeviceFunction, function object)

`convert(T, f(args...))` compiled (see [`Converted`](@ref)), and the object a kernel is
passed for it: `f` itself when its result type is already `T`, else `Converted{T}(f)`.
"""
function converted_function(::Type{T}, f, argtypes::Type...) where {T}
    df = element_function(f, argtypes...)
    df.rettype === T && return df, f
    c = Converted{T}(f)
    return element_function(c, argtypes...), c
end

# The function object's type of a compiled function, and whether it has no storage (a
# ghost: a singleton function, a type, or a closure capturing nothing). A ghost is a
# `jl_ghost_t` declared inside the kernel; other function objects are kernel parameters,
# passed by value at each launch (captured values are read then, never baked in).
fn_type(df) = df.argtypes[1]
is_ghost(df) = dc_is_ghost(fn_type(df))

# C: the kernel parameter for the function object `name` of `df` (", F name"; none for a ghost).
fn_param(df, name) = is_ghost(df) ? "" : ", $(c_type(fn_type(df))) $name"
# C: the declaration of a ghost function object inside the kernel.
fn_local(df, name) = is_ghost(df) ? "  const jl_ghost_t $name = {};\n" : ""
# C: a call of `df` on argument expressions (the kernel's context parameter is `ctx`).
fn_call(df, name, args...) = string(df.name, "(&ctx, ", name, isempty(args) ? "" : ", ", join(args, ", "), ")")
# Whether a compiled function calls a transcendental function of CUDA's math library
# (compiler/mathlib.jl's table, square roots aside): their accurate implementations are long
# (`sinf`'s Payne-Hanek reduction, `powf`), so kernels inline fewer copies of such a function.
fn_heavy(df) = occursin(FN_HEAVY_MATH, df.source)
const FN_HEAVY_MATH = Regex("\\b(" * join(sort!(unique!(filter(!=("sqrt"), [first(v) for v in Iterators.flatten((values(DC_MATH1), values(DC_MATH2)))]))), "|") * ")f?\\(")

# The kernel arguments of function objects (ghosts pass nothing).
fn_values!(args::Vector{Any}, fs...) = (for f in fs; dc_is_ghost(dc_typeof_const(f)) || push!(args, f); end; args)

"""
    CuMem.result_type(f, argtypes::Type...) -> Type

The type `f` returns on elements of `argtypes`, as the compiled device function has it
(Julia's inference; `Union{}` when it always throws).
"""
result_type(f, argtypes::Type...) = element_function(f, argtypes...).rettype

# The distinct compiled functions of a kernel (a function may serve twice, e.g. a load and a
# store conversion that are both `identity`): what kernel_source and launch_context take.
function unique_fns(fns)
    out = Any[]
    for f in fns
        f === nothing || any(g -> g === f, out) || push!(out, f)
    end
    return Tuple(out)
end

# The name of a function for messages: "f" for `f`, "g" for a local function `g` ("#g#12").
function fname(@nospecialize(f))
    f isa Function || return string(f)
    s = string(nameof(f))
    m = match(r"^#([^#]+)#\d+$", s)
    return m === nothing ? s : m.captures[1]
end

# The compiler's tables keyed by types and functions hash object identities: after loading
# the precompiled image, their entries are inserted again (as Julia's own IdDicts would need
# if an identity moved).
# (Base's own rehash of the table, one call, where the running Julia has it; else the entries
# are copied out and in, which compiles Base's IdDict methods for these types at each load.)
function rehash_iddict!(d::IdDict)
    if hasmethod(Base.rehash!, Tuple{typeof(d),Int})
        Base.rehash!(d, length(d.ht))
        return d
    end
    kv = collect(pairs(d))
    empty!(d)
    for (k, v) in kv
        d[k] = v
    end
    return d
end
init_compiled_tables() = (foreach(rehash_iddict!, (DC_PRIMS, DC_MATH1, DC_MATH2)); nothing)

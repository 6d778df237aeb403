# The compiler's interface (docs/compute.md describes what it compiles): `device_function`
# compiles an element function for given argument types into a `DeviceFunction` (cached,
# revalidated when methods are defined), `kernel_source` puts kernels together,
# `launch_context` builds the context argument at each launch.

"""
    CuMem.ContextLayout

What a kernel's context argument holds besides the error record's address: the constant
bindings to mutable objects (`const R = Ref(2f0)`) its code reads, each as
`(C field name, module, binding name, type)`. Their contents are read on the host at each
launch ([`launch_context`](@ref)), so changing `R[]` changes the next launch's result.
"""
struct ContextLayout
    globals::Vector{Tuple{String,Module,Symbol,Any}}
end

"""
    CuMem.DeviceFunction

An element function compiled to CUDA C by [`device_function`](@ref): `name` (the C
entry function, called as `R y = name(&ctx, f, a1, a2, ...)`), `source` (type definitions
and every `__device__` function it needs, without the prelude), `rettype` (its Julia
result type; `Union{}` when it always throws), `argtypes` (the function's type first),
`ctx` (a [`ContextLayout`](@ref)) and `may_throw` (false: the kernel cannot throw).
"""
mutable struct DeviceFunction     # mutable for identity: `===` and `objectid` by address, not
    name::String                  # by hashing the source (kernel cache keys and checks use both)
    source::String
    rettype::Type
    argtypes::Tuple
    ctx::ContextLayout
    may_throw::Bool
end

# The entry: `dc_apply(f, args...)` calls `f`, so that every kind of callable (a closure,
# a type such as `Int8`, a mapped math function such as `sin`) compiles the same way.
for n in 0:64
    as = [Symbol(:a, k) for k in 1:n]
    @eval dc_apply(f, $(as...)) = f($(as...))
end

const DC_CACHE = Dict{Any,Tuple{DeviceFunction,UInt}}()
const DC_CACHE_LOCK = ReentrantLock()
const DC_STATS = Ref((compiles = 0, hits = 0))

## typed memo tables

# What the general paths compute from types only (a broadcast's compiled function, a
# reduction's accumulator type, ...) kept under one concrete key type built from those
# types (`Tuple{typeof(f), Float32, ...}`): a look-up hashes one pointer (a type's object
# id is its address), takes no lock and allocates nothing, where `Dict{Any}` look-ups of
# tuples of types, `promote_op` (inference) or `objectid` of a compiled function (a hash of
# its whole source) cost microseconds on every call. An entry is valid in the world age it
# was made in: after a method definition it is made again (a redefined function compiles
# again, as `device_function` revalidates). Readers take the current table without a lock;
# a writer copies it, adds the entry and publishes the copy (fastpath.jl's scheme).
struct MemoEntry
    value::Any
    world::UInt
end
const TYPE_MEMO = Ref(IdDict{Any,Any}())
const TYPE_MEMO_LOCK = ReentrantLock()

@inline memo_world() = ccall(:jl_get_world_counter, UInt, ())

"""
    CuMem.type_memo(make, K::Type)

The value `make()` gave for the key type `K` in this world age, made (and kept) on the
first call and again after methods were defined. `K` must stand for everything the value
depends on (types only, never values) and be a concrete type such as
`Tuple{Val{:tag}, F, T}`; a key that collapsed to `Union{}` is not kept.
"""
@inline function type_memo(make, @nospecialize(K::Type))
    w = memo_world()
    e = get(TYPE_MEMO[], K, nothing)
    e === nothing || (e::MemoEntry).world != w || return e.value
    return memo_make(make, K, w)
end
@noinline function memo_make(make, @nospecialize(K::Type), w::UInt)
    v = make()
    K === Union{} && return v
    lock(TYPE_MEMO_LOCK)
    try
        d = copy(TYPE_MEMO[])
        d[K] = MemoEntry(v, w)
        TYPE_MEMO[] = d
    finally
        unlock(TYPE_MEMO_LOCK)
    end
    return v
end

"""
    CuMem.device_function(f, argtypes::Tuple) -> DeviceFunction

`f` applied to arguments of the isbits types `argtypes`, compiled from Julia's typed IR
(`code_typed(f, argtypes; optimize = true)`) to CUDA C: control flow (branches, loops,
early returns), structs, tuples, NamedTuples, Complex, small Unions, Float16, calls of
other Julia functions (compiled too), Base math mapped to CUDA's library with Julia's
domain checks, and Julia's exceptions as error records ([`check_kernel_errors`](@ref)).
`f` may be a closure (its captured values travel in the function argument, by value), a
singleton function or a type. Cached by `(typeof(f), argtypes)`; when methods have been
defined since (a new world age) it is translated again, so redefined functions take
effect.

Throws [`KernelCompileError`](@ref) naming the construct, the function, its file:line and
the call chain for what cannot run on a GPU: dynamic dispatch (type instability),
non-constant globals, allocation, non-isbits values, recursion, try/catch, calls such as
`rand()`, `time()`, I/O or `ccall`.
"""
function device_function(@nospecialize(f), @nospecialize(argtypes::Tuple))
    F = dc_typeof_const(f)
    # a hit: one typed look-up (the table below revalidates in a new world)
    dc_all_datatypes(argtypes) &&
        return type_memo(() -> device_function_table(F, argtypes), Tuple{F, argtypes...})::DeviceFunction
    return device_function_table(F, argtypes)
end
function dc_all_datatypes(argtypes::Tuple)
    for T in argtypes
        T isa DataType || return false
    end
    return true
end

function device_function_table(@nospecialize(F), @nospecialize(argtypes::Tuple))
    key = (F, argtypes)
    world = Base.get_world_counter()
    e = lock(() -> get(DC_CACHE, key, nothing), DC_CACHE_LOCK)
    if e !== nothing && e[2] == world
        DC_STATS[] = (compiles = DC_STATS[].compiles, hits = DC_STATS[].hits + 1)
        return e[1]
    end
    df = dc_compile_entry(F, argtypes, world)
    # a new world with the same code keeps the old object (and kernels keyed by it)
    e !== nothing && e[1].source == df.source && e[1].ctx.globals == df.ctx.globals && (df = e[1])
    lock(() -> (DC_CACHE[key] = (df, world)), DC_CACHE_LOCK)
    DC_STATS[] = (compiles = DC_STATS[].compiles + 1, hits = DC_STATS[].hits)
    return df
end

function dc_compile_entry(@nospecialize(F), argtypes::Tuple, world::UInt)
    for T in argtypes
        (T isa DataType && (isbitstype(T) || dc_is_ghost(T))) ||
            throw(KernelCompileError("cannot compile for the GPU: an argument of type $T (kernels take isbits values)"))
    end
    (F isa DataType && (isbitstype(F) || dc_is_ghost(F))) || dc_not_isbits(F)
    length(argtypes) <= 64 || throw(KernelCompileError("cannot compile for the GPU: more than 64 arguments"))
    sig = Tuple{typeof(dc_apply), F, argtypes...}
    m = ir_method_for(sig, world)
    m === nothing && error("internal: no unique dc_apply method for $sig")
    st = DCState(world)
    fname = dc_callable_name(F)
    push!(st.chain, string(fname, "(", join(map(string, argtypes), ", "), ")"))
    # does the function exist for these types at all?
    inner = Tuple{F, argtypes...}
    ms = Base._methods_by_ftype(inner, -1, world)
    (ms isa Vector && !isempty(ms)) ||
        throw(KernelCompileError("cannot compile for the GPU: no method matching $fname($(join(map(t -> "::$t", argtypes), ", ")))"))
    # anything else the translator hits (e.g. Julia asking the size of a String inside a
    # callee) is still a refusal, never another exception type
    name, rt, mt = try
        dc_compile_sig!(st, sig, m[1], m[2])
    catch err
        err isa KernelCompileError && rethrow()
        throw(KernelCompileError("cannot compile for the GPU: " * sprint(showerror, err) *
                                 "\n  call chain: " * join(st.chain, " -> ")))
    end
    rt === Union{} || dc_ctype!(st.tt, rt)
    for T in argtypes
        dc_ctype!(st.tt, T)
    end
    dc_is_ghost(F) || dc_ctype!(st.tt, F)
    ename = "jle_" * dc_hash(inner)
    io = IOBuffer()
    for (k, d) in st.tt.defs
        print(io, "/*@T ", k, "*/\n", d)
    end
    for (k, d) in st.fns
        print(io, "/*@F ", k, "*/\n", d)
    end
    RT = rt === Union{} || dc_is_ghost(rt) ? "jl_ghost_t" : dc_ctype!(st.tt, rt)
    # a long function is called, not inlined, where a kernel calls it: kernels call their
    # element function from several unrolled or vectorised steps, and NVRTC's time grows
    # with every inlined copy
    noinline = position(io) > DC_NOINLINE_BYTES ? "__noinline__ " : ""
    print(io, "/*@F ", ename, "*/\nstatic __device__ ", noinline, RT, " ", ename, "(jl_ctx_t* ctx, ",
          dc_is_ghost(F) ? "jl_ghost_t" : dc_ctype!(st.tt, F), " f")
    for (k, T) in enumerate(argtypes)
        print(io, ", ", dc_is_ghost(T) ? "jl_ghost_t" : dc_ctype!(st.tt, T), " x", k)
    end
    print(io, ") { return ", name, "(ctx, jl_ghost_t{}, f")
    for k in 1:length(argtypes)
        print(io, ", x", k)
    end
    print(io, "); }\n")
    return DeviceFunction(ename, String(take!(io)), rt, (F, argtypes...), ContextLayout(st.globals), mt)
end

"""
    CuMem.DC_NOINLINE_BYTES

The length of C (bytes of types and functions) above which a compiled element function's
entry is `__noinline__`: kernels call it from each unrolled or vectorised step (a
broadcast's vector loop over Int8 elements: 17 call sites; a whole-array reduction: up to
25), and NVRTC compiles every inlined copy. With the fuzzer's longest functions (seed 77,
NVRTC 13, the loaded 2-core development machine) a broadcast kernel of 434 KB of C gave
4.5 MB of PTX in 10.7 CPU s inlined; a call costs a few instructions beside thousands.
"""
const DC_NOINLINE_BYTES = 4096

# A readable name of a callable type (a broadcast's expression by its function).
dc_callable_name(@nospecialize(F)) = F <: Function && isdefined(F, :instance) ? dc_print_string(F.instance) : dc_print_string(F)
# `string(x)` by a call compiled once (`string`'s varargs are compiled for each function type).
dc_print_string(@nospecialize(x)) = (io = IOBuffer(); print(io, x); String(take!(io)))

# The refusal of a function object that is not isbits, naming the field that makes it so.
function dc_not_isbits(@nospecialize(F))
    why = "it captures arrays, strings or mutable values"
    bad = dc_non_isbits_field(F)
    if bad !== nothing
        path, T = bad
        why = T <: Type ? "it captures `$path`, a type held in a variable (of type $T): use `oftype(x, v)` or " *
                          "`typeof(x)` on an argument, or make the type a static parameter" :
                          "it captures `$path` of type $T (pass arrays as broadcast arguments)"
    end
    throw(KernelCompileError("cannot compile for the GPU: the function object of type $F is not isbits: $why"))
end
function dc_non_isbits_field(@nospecialize(T), path = "")
    T isa DataType || return nothing
    for i in 1:fieldcount(T)
        F = fieldtype(T, i)
        p = isempty(path) ? string(fieldname(T, i)) : string(path, ".", fieldname(T, i))
        (isbitstype(F) || dc_is_ghost(F)) && continue
        if F isa DataType && !(F <: Type) && !ir_ismutable(F) && !(F <: AbstractArray)
            r = dc_non_isbits_field(F, p)       # an immutable wrapper: the culprit is inside
            r === nothing || return r
        end
        return (p, F)
    end
    return nothing
end

# The chunks of a source (marker key => text).
function dc_chunks(src::String)
    out = Pair{String,String}[]
    parts = split(src, "/*@")
    for p in parts
        isempty(p) && continue
        j = findfirst("*/\n", p)
        j === nothing && continue
        push!(out, String(p[1:first(j)-1]) => String(p[last(j)+1:end]))
    end
    return out
end

# The globals of several device functions, one each, in a fixed order.
dc_merged_globals(dfs) = sort!(unique(x -> x[1], reduce(vcat, [d.ctx.globals for d in dfs]; init = Tuple{String,Module,Symbol,Any}[])); by = first)

"""
    CuMem.kernel_source(dfs::DeviceFunction...; body::String) -> String

The CUDA C of a kernel: [`C_PRELUDE_V2`](@ref), the type definitions of `dfs` (each
once), the context type `jl_ctx_t` (the error record's address, a flag, the number of the
element being computed (`elem`, see `jl_elem`: a throw of a lower one wins), the launch-time
values of the constant bindings the functions read), `prelude` (helpers the functions call,
e.g. the kernel language's device helpers), every `__device__` function (each
once), then `body`: the kernel family's `extern "C" __global__` function, which takes
`jl_ctx_t ctx` as its first parameter and calls each entry as `name(&ctx, f, a1, ...)`.
After an entry call, `ctx.thrown != 0` means it threw (the error is recorded; its result
is meaningless).
"""
function kernel_source(dfs::DeviceFunction...; body::AbstractString, prelude::AbstractString = "")
    types = Pair{String,String}[]
    fns = Pair{String,String}[]
    seen = Set{String}()
    for d in dfs
        for (k, v) in dc_chunks(d.source)
            k in seen && continue
            push!(seen, k)
            push!(startswith(k, "T ") ? types : fns, k => v)
        end
    end
    io = IOBuffer()
    print(io, C_PRELUDE_V2)
    for (_, v) in types
        print(io, v)
    end
    print(io, "struct jl_ctx_t { jl_err_t* err; uint32_t thrown; uint32_t elem;")
    tt = DCTypes()
    for (field, _, _, T) in dc_merged_globals(dfs)
        print(io, " ", dc_ctype!(tt, T), " ", field, ";")
    end
    print(io, " };\n")
    print(io, prelude)
    for (_, v) in fns
        print(io, v)
    end
    print(io, body)
    return String(take!(io))
end

# The context of a kernel whose functions read no global: the error record and the flag.
struct DCContext0
    err::UInt64
    thrown::UInt64
end

"""
    CuMem.launch_context(dfs::DeviceFunction...) -> isbits value

The kernel's context argument for this launch (pass it first; C type `jl_ctx_t`): the
error record's address, and the current contents of every constant binding to a mutable
object the functions read (`const R = Ref(2f0)`: `R[]` as it is now). When a function
can throw, the next read-back first waits and checks ([`CuMem.check_thrown_before_read`](@ref)).
"""
function launch_context(dfs::DeviceFunction...)
    addr = kernel_error_address()
    any(d -> d.may_throw, dfs) && (DC_UNCHECKED[] = true)    # (a download waits and checks first)
    all(d -> isempty(d.ctx.globals), dfs) && return DCContext0(addr, 0)
    gs = dc_merged_globals(dfs)
    off = 16
    align = 8
    layout = Tuple{Int,Any,Any}[]
    for (field, mod, name, T) in gs
        a = Base.datatype_alignment(T)
        align = max(align, a)
        off = (off + a - 1) & -a
        obj = getfield(mod, name)
        typeof(obj) === T || throw(KernelCompileError("the constant $mod.$name changed type"))
        push!(layout, (off, obj, T))
        off += sizeof(T)
    end
    total = (off + align - 1) & -align
    buf = Base.zeros(UInt8, total)
    GC.@preserve buf begin
        unsafe_store!(Ptr{UInt64}(pointer(buf)), addr)
        for (o, obj, T) in layout
            GC.@preserve obj unsafe_copyto!(pointer(buf) + o, Ptr{UInt8}(pointer_from_objref(obj)), sizeof(T))
        end
    end
    return dc_bytes_tuple(buf)
end

dc_bytes_tuple(buf::Vector{UInt8}) = (w = reinterpret(UInt64, buf); ntuple(i -> w[i], length(w)))

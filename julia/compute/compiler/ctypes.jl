# C spellings of Julia's isbits types for the typed-IR compiler, with Julia's
# memory layout, so a CuArray{T}'s memory reads as the C type: integers, Bool, Char,
# Float16 (its bits, `half_t`; arithmetic goes through the hardware conversions),
# Float32/64, structs (Complex included) and tuples/NamedTuples with Julia's field
# offsets (explicit padding), small Unions of isbits types as tagged structs, and ghost
# (zero-size) types as the empty `jl_ghost_t`. Literals of these types, exact to the bit.

const DC_PRIMS = IdDict{Any,String}(Bool => "bool", Int8 => "int8_t", Int16 => "int16_t",
                                    Int32 => "int32_t", Int64 => "int64_t", UInt8 => "uint8_t",
                                    UInt16 => "uint16_t", UInt32 => "uint32_t", UInt64 => "uint64_t",
                                    Float16 => "half_t", Float32 => "float", Float64 => "double",
                                    Char => "uint32_t")
const DC_UNSIGNED = Dict(1 => "uint8_t", 2 => "uint16_t", 4 => "uint32_t", 8 => "uint64_t")

# Types whose values occupy no memory (singletons: functions without captures, `nothing`,
# `Val`s, `Type{T}`): passed and stored as the empty `jl_ghost_t`.
dc_is_ghost(@nospecialize(T)) = T isa DataType && (Base.issingletontype(T) || (isbitstype(T) && sizeof(T) == 0) ||
                                                   (T.name === Type.body.name && !(T.parameters[1] isa TypeVar)))

# A small Union of isbits (or ghost) types, which compiles as a tagged struct.
function dc_is_small_union(@nospecialize(T))
    T isa Union || return false
    ts = Base.uniontypes(T)
    length(ts) <= 8 || return false
    return all(t -> t isa DataType && (isbitstype(t) || dc_is_ghost(t)), ts)
end

# Deterministic short hash of a type's printed form (the same in every process, so the
# generated source, and the disk kernel cache's key, are too).
dc_hash(@nospecialize(x)) = string(hash(string(x)) % UInt32, base = 16, pad = 8)
dc_sanitize(s) = (t = replace(String(s), r"[^A-Za-z0-9_]" => "_"); length(t) > 40 ? t[1:40] : t)

# The type definitions one compilation needs, in dependency order (each chunk marked so
# kernel_source can merge several compilations' sources without duplicates).
mutable struct DCTypes
    names::IdDict{Any,String}
    defs::Vector{Pair{String,String}}     # key => C definition
end
DCTypes() = DCTypes(IdDict{Any,String}(), Pair{String,String}[])

dc_type_error(@nospecialize(T), why) =
    throw(KernelCompileError("the type $T cannot be used in a GPU kernel: $why"))

"""
    CuMem.c_type(T::Type) -> String

The C spelling of the isbits Julia type `T` in code from the typed-IR compiler:
`Float32` -> `"float"`, `Int8` -> `"int8_t"`, `Bool` -> `"bool"`, `Float16` -> `"half_t"`
(its 16 bits), a struct, tuple, NamedTuple or `Complex` -> a generated struct with
Julia's field offsets (so a `CuArray{T}`'s memory reads as it), a small isbits `Union` ->
a tagged struct, a zero-size type -> `"jl_ghost_t"`. The definitions themselves are in a
[`DeviceFunction`](@ref)'s source. Throws `KernelCompileError` for other types (mutable
or non-isbits types, pointers, 128-bit integers).
"""
c_type(@nospecialize(T::Type)) = dc_ctype!(DCTypes(), T)

function dc_ctype!(tt::DCTypes, @nospecialize(T))
    s = get(DC_PRIMS, T, nothing)
    s === nothing || return s
    s = get(tt.names, T, nothing)
    s === nothing || return s
    T === Union{} && return "jl_ghost_t"
    dc_is_ghost(T) && return "jl_ghost_t"
    if dc_is_small_union(T)
        return dc_union_def!(tt, T)
    end
    T isa DataType || dc_type_error(T, "it is not a concrete type (an abstract or Union type: the code is not type-stable)")
    T <: Ptr && return "uint64_t"      # an address (kernels' `pointer(A)`; atomics)
    if isprimitivetype(T)
        sz = sizeof(T)
        haskey(DC_UNSIGNED, sz) || dc_type_error(T, "primitive types of $(8sz) bits are not supported")
        return DC_UNSIGNED[sz]
    end
    if ir_ismutable(T)
        # a mutable object is only ever a launch-time snapshot of a const binding
        all(i -> isbitstype(fieldtype(T, i)) || dc_is_ghost(fieldtype(T, i)), 1:fieldcount(T)) ||
            dc_type_error(T, "a mutable object read in a kernel must have isbits fields only")
    else
        isbitstype(T) || dc_type_error(T, "it is not an isbits type (it holds references: arrays, strings, mutable objects)")
    end
    return dc_struct_def!(tt, T)
end

dc_field_name(i::Int) = "f$i"

function dc_struct_def!(tt::DCTypes, T::DataType)
    name = "jlt_" * dc_sanitize(string(nameof(T))) * "_" * dc_hash(T)
    fields = Tuple{Int,String,Int,Int}[]       # (index, C type, offset, size)
    for i in 1:fieldcount(T)
        F = fieldtype(T, i)
        dc_is_ghost(F) && continue
        if F isa Union
            dc_type_error(T, "its field $(fieldname(T, i)) is a Union (stored inline with a selector byte)")
        end
        ct = dc_ctype!(tt, F)
        push!(fields, (i, ct, Int(fieldoffset(T, i)), sizeof(F)))
    end
    io = IOBuffer()
    print(io, "struct ", name, " {")
    off = 0
    for (i, ct, o, sz) in fields
        if o > off
            print(io, " char _p$i[", o - off, "];")
        end
        print(io, " ", ct, " ", dc_field_name(i), ";")
        off = o + sz
    end
    if sizeof(T) > off
        print(io, " char _pend[", sizeof(T) - off, "];")
    end
    print(io, " };\n")
    # equality by content (`===`): field by field, floats by their bits
    print(io, "static __device__ __forceinline__ bool jl_egal(const ", name, "& a, const ", name, "& b) { return true")
    for (i, _, _, _) in fields
        print(io, " && jl_egal(a.", dc_field_name(i), ", b.", dc_field_name(i), ")")
    end
    print(io, "; }\n")
    tt.names[T] = name
    push!(tt.defs, name => String(take!(io)))
    return name
end

function dc_union_def!(tt::DCTypes, U::Union)
    ts = Base.uniontypes(U)
    name = "jlu_" * dc_hash(U)
    io = IOBuffer()
    maxsz = maximum(t -> dc_is_ghost(t) ? 0 : sizeof(t), ts)
    print(io, "struct ", name, " { union { char _b[", max(maxsz, 1), "];")
    for (k, t) in enumerate(ts)
        dc_is_ghost(t) && continue
        print(io, " ", dc_ctype!(tt, t), " m$k;")
    end
    print(io, " } v; uint8_t tag; };\n")
    print(io, "static __device__ __forceinline__ bool jl_egal(const ", name, "& a, const ", name, "& b) { if (a.tag != b.tag) return false;")
    for (k, t) in enumerate(ts)
        dc_is_ghost(t) || print(io, " if (a.tag == $k) return jl_egal(a.v.m$k, b.v.m$k);")
    end
    print(io, " return true; }\n")
    tt.names[U] = name
    push!(tt.defs, name => String(take!(io)))
    return name
end

# The tag of member type `T` in union `U` (1-based), or 0.
dc_union_tag(U::Union, @nospecialize(T)) = something(findfirst(t -> t === T, Base.uniontypes(U)), 0)

## literals

function dc_float_literal(x::Float32)
    isfinite(x) || return string("__int_as_float(0x", string(reinterpret(UInt32, x), base = 16), ")")
    return string("(", @sprintf("%a", Float64(x)), "f)")
end
function dc_float_literal(x::Float64)
    isfinite(x) || return string("__longlong_as_double(0x", string(reinterpret(UInt64, x), base = 16), "LL)")
    return string("(", @sprintf("%a", x), ")")
end

"""
    CuMem.dc_literal(tt, x) -> String

The C expression of the isbits value `x` (exact to the bit), defining its type in `tt`.
"""
function dc_literal(tt::DCTypes, @nospecialize(x))
    T = typeof(x)
    dc_is_ghost(T) && return "jl_ghost_t{}"
    T === Bool && return x ? "true" : "false"
    T === Float32 && return dc_float_literal(x)
    T === Float64 && return dc_float_literal(x)
    T === Float16 && return string("((half_t)0x", string(reinterpret(UInt16, x), base = 16), ")")
    if isprimitivetype(T)
        ct = dc_ctype!(tt, T)
        sz = sizeof(T)
        U = sz == 1 ? UInt8 : sz == 2 ? UInt16 : sz == 4 ? UInt32 : UInt64
        return string("((", ct, ")0x", string(reinterpret(U, x), base = 16), "ULL)")
    end
    isbitstype(T) || dc_type_error(T, "the value $(repr(x)) is not isbits")
    tab = dc_table_literal(tt, T, x)
    tab === nothing || return tab
    name = dc_ctype!(tt, T)
    parts = String[]
    for i in 1:fieldcount(T)
        dc_is_ghost(fieldtype(T, i)) && continue
        push!(parts, dc_literal(tt, getfield(x, i)))
    end
    return dc_make(name, T, parts)
end

"""
    CuMem.DC_TABLE_MIN

The length from which a constant tuple of one primitive type (a lookup table, e.g. Base's
`Float16` conversion tables of 512 entries, which every `Float16(::Float32)` inlines) is
written once per kernel as a `static __device__ const` array-like struct with a brace
initializer, and named where it is used, instead of being built field by field at each use:
NVRTC and g++ then parse and optimise it once (a broadcast kernel with the two `Float16`
tables three times inlined was 436 KB of C, 0.49 s of NVRTC), and the GPU reads it from
global memory instead of building it in each thread's local memory.
"""
const DC_TABLE_MIN = 9

# The name of the file-scope constant holding the tuple `x::T` (defined in `tt`, once per
# value), or nothing when `x` is not such a table: fewer than DC_TABLE_MIN fields, fields of
# several or non-primitive types, or a float that is not finite (its literal,
# `__int_as_float(...)`, is no constant expression).
function dc_table_literal(tt::DCTypes, @nospecialize(T), @nospecialize(x))
    (T <: Tuple && fieldcount(T) >= DC_TABLE_MIN) || return nothing
    E = fieldtype(T, 1)
    (isprimitivetype(E) && !dc_is_ghost(E) && haskey(DC_PRIMS, E)) || return nothing
    for i in 2:fieldcount(T)
        fieldtype(T, i) === E || return nothing
    end
    # (an isbits value is its own key in the identity dictionary: equal contents, one entry)
    cname = get(tt.names, x, nothing)
    cname === nothing || return cname
    io = IOBuffer()
    for i in 1:fieldcount(T)
        v = getfield(x, i)
        v isa Union{Float32,Float64} && !isfinite(v) && return nothing
        i > 1 && print(io, ", ")
        print(io, dc_literal(tt, v))
    end
    init = String(take!(io))
    name = dc_ctype!(tt, T)
    cname = "jlk_" * string(hash(string(name, "=", init)), base = 16, pad = 16)
    tt.names[x] = cname
    push!(tt.defs, cname => string("static __device__ const ", name, " ", cname, " = { ", init, " };\n"))
    return cname
end

# An expression building a struct of type `T` (C name `name`) from its non-ghost fields'
# C expressions, in order.
function dc_make(name::String, @nospecialize(T), parts::Vector{String})
    isempty(parts) && return name * "{}"
    io = IOBuffer()
    print(io, "([&]() { ", name, " r{};")
    k = 0
    for i in 1:fieldcount(T)
        dc_is_ghost(fieldtype(T, i)) && continue
        k += 1
        print(io, " r.", dc_field_name(i), " = ", parts[k], ";")
    end
    print(io, " return r; }())")
    return String(take!(io))
end

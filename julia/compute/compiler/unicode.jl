# Base's Char functions in kernels: `uppercase`, `lowercase`, `titlecase` and the
# category tests (`isletter`, `isuppercase`, `islowercase`, `isnumeric`, `ispunct`,
# `isprint`, ...) and `textwidth` end in `ccall`s of utf8proc, the C library Julia links.
# A kernel cannot call it; these calls read tables instead, built here when the package is
# precompiled by calling the same utf8proc functions for every code point 0 .. 0x10FFFF,
# so that a kernel gives Base's answer for every Char (the tables are Julia's own utf8proc
# version's). A mapping is the sorted code points utf8proc changes and their images; a
# property is runs of equal values. The look-ups are julia/cuda/unicode.cuh; a kernel's
# source holds a table only when one of its functions calls it.

# utf8proc's functions of one UInt32 code point that kernels may call: C name => (table
# kind, the function as Julia calls it). Newer Julia versions call utf8proc_isupper /
# utf8proc_islower from `isuppercase` / `islowercase`; a name the running Julia's utf8proc
# lacks gets no table (and nothing calls it).
const UC_FUNCS = (
    ("utf8proc_toupper", :map, c -> ccall(:utf8proc_toupper, UInt32, (UInt32,), c)),
    ("utf8proc_tolower", :map, c -> ccall(:utf8proc_tolower, UInt32, (UInt32,), c)),
    ("utf8proc_totitle", :map, c -> ccall(:utf8proc_totitle, UInt32, (UInt32,), c)),
    ("utf8proc_category", :runs, c -> Int(ccall(:utf8proc_category, Cint, (UInt32,), c))),
    ("utf8proc_charwidth", :runs, c -> Int(ccall(:utf8proc_charwidth, Cint, (UInt32,), c))),
    ("utf8proc_isupper", :runs, c -> Int(ccall(:utf8proc_isupper, Bool, (UInt32,), c))),
    ("utf8proc_islower", :runs, c -> Int(ccall(:utf8proc_islower, Bool, (UInt32,), c))),
)

# The C of one table and its function `jl_uc_<name>(uint32_t) -> uint32_t | int`, or
# nothing when this Julia's utf8proc lacks the function.
function uc_table_source(name::String, kind::Symbol, f)
    try
        f(UInt32(0x41))
    catch
        return nothing
    end
    short = replace(name, "utf8proc_" => "")
    io = IOBuffer()
    ints(v) = join(v, ",")
    if kind === :map
        keys, vals = UInt32[], UInt32[]
        for c in UInt32(0):UInt32(0x10ffff)
            m = f(c)
            m == c || (push!(keys, c); push!(vals, m))
        end
        # utf8proc maps what is past Unicode's range (and negative as Int32) to itself
        f(UInt32(0x110000)) == 0x110000 && f(typemax(UInt32)) == typemax(UInt32) ||
            error("utf8proc's $name does not map code points past 0x10FFFF to themselves")
        n = length(keys)
        print(io, "static __device__ const unsigned int jl_uc_", short, "_k[", n, "] = {", ints(keys), "};\n")
        print(io, "static __device__ const unsigned int jl_uc_", short, "_v[", n, "] = {", ints(vals), "};\n")
        print(io, "static __device__ uint32_t jl_uc_", short, "(uint32_t c) { return jl_uc_map(jl_uc_", short,
              "_k, jl_uc_", short, "_v, ", n, ", c); }\n")
    else
        starts, vals = UInt32[], Int[]
        for c in UInt32(0):UInt32(0x10ffff)
            v = f(c)
            (isempty(vals) || vals[end] != v) && (push!(starts, c); push!(vals, v))
        end
        all(v -> -128 <= v <= 127, vals) || error("utf8proc's $name has values outside Int8")
        past = f(UInt32(0x110000))
        f(typemax(UInt32)) == past || error("utf8proc's $name differs past 0x10FFFF")
        n = length(starts)
        print(io, "static __device__ const unsigned int jl_uc_", short, "_s[", n, "] = {", ints(starts), "};\n")
        print(io, "static __device__ const signed char jl_uc_", short, "_r[", n, "] = {", ints(vals), "};\n")
        print(io, "static __device__ int jl_uc_", short, "(uint32_t c) { return c >= 0x110000u ? ", past,
              " : jl_uc_run(jl_uc_", short, "_s, jl_uc_", short, "_r, ", n, ", c); }\n")
    end
    return String(take!(io))
end

"""
    CuMem.UC_TABLES :: Dict{String,String}

utf8proc function name (e.g. `"utf8proc_toupper"`) => the CUDA C of its table and of
`jl_uc_<name>(uint32_t)`, the function a kernel calls in its place. Built when the package
is precompiled, from the utf8proc of the Julia that builds it, over every code point
0 .. 0x10FFFF (julia/cuda/unicode.cuh has the look-ups).
"""
const UC_TABLES = let d = Dict{String,String}()
    for (name, kind, f) in UC_FUNCS
        s = uc_table_source(name, kind, f)
        s === nothing || (d[name] = s)
    end
    d
end
const UC_LOOKUP_SOURCE = cuda_source("unicode.cuh")

# The C of a `ccall` of the utf8proc function `name` (a key of UC_TABLES) of the code
# point `arg` (C) in a kernel; its table and the look-ups become chunks of the
# compilation's source, once each.
function dc_unicode_call(st, name::String, arg::String)
    src = UC_TABLES[name]
    key = "jl_uc_" * replace(name, "utf8proc_" => "")
    if !any(p -> p.first == key, st.fns)
        any(p -> p.first == "jl_uc_lookup", st.fns) || push!(st.fns, "jl_uc_lookup" => UC_LOOKUP_SOURCE)
        push!(st.fns, key => src)
    end
    return string(key, "((uint32_t)(", arg, "))")
end

# The Julia bindings against the C header (include/cumem.h, generated from the engine's
# Rust sources by cbindgen and pinned by tests/header.rs): every `ccall` of
# julia/lib/libcumem.jl names a function of the header with its return and argument
# types; every CUMEM_* constant and C record of julia/lib/header.jl matches the header;
# and every wrapper of a call that acts on "the current device" switches the engine to
# the task's device first. Nothing else in julia/ calls the engine.
#
#   julia --project test/lib/header_tests.jl

using CuMem, Test

const ROOT = normpath(joinpath(@__DIR__, "..", ".."))
const HEADER = read(joinpath(ROOT, "include", "cumem.h"), String)
const BINDINGS = joinpath(ROOT, "julia", "lib", "libcumem.jl")
# the C calls of graphs, in a file of their own (libcumem.jl is at the 500-line bound)
const BINDING_FILES = [BINDINGS, joinpath(ROOT, "julia", "lib", "graphs.jl")]

# C type spelling -> the Julia type a ccall must declare for it.
const RECORDS = Dict("cumem_stats_t" => CuMem.CStats, "cumem_event_t" => CuMem.CEvent,
                     "cumem_segment_t" => CuMem.CSegment, "cumem_block_t" => CuMem.CBlock,
                     "cumem_leak_t" => CuMem.CLeak, "cumem_compact_t" => CuMem.CCompact,
                     "cumem_graph_pool_t" => CuMem.CGraphPool, "cumem_graph_info_t" => CuMem.CGraphInfo)
const SCALARS = Dict("int32_t" => Int32, "uint32_t" => UInt32, "int64_t" => Int64, "uint64_t" => UInt64,
                     "uint8_t" => UInt8, "double" => Float64, "float" => Float32, "size_t" => Csize_t,
                     "void" => Cvoid, "char" => UInt8)

# The Julia types a C type may be declared as: `const char *` is a Cstring (a string
# argument or result) or a Ptr{UInt8} (a buffer); pointers to pointers are Ptr{Ptr{...}}.
function julia_types(c::AbstractString)
    c = strip(replace(c, r"\bconst\b" => ""))
    stars = count(==('*'), c)
    base = strip(replace(c, "*" => ""))
    T = haskey(RECORDS, base) ? RECORDS[base] : SCALARS[base]
    stars == 0 && return Any[T]
    inner = stars == 1 ? Any[T] : Any[Ptr{T}]
    stars == 2 && base == "char" && (inner = Any[Ptr{UInt8}, Cstring])
    types = Any[Ptr{t} for t in inner]
    stars == 1 && base == "char" && push!(types, Cstring)
    return types
end

# name => (return type, [argument types]) for every function of the header.
function prototypes()
    protos = Dict{String,Tuple{String,Vector{String}}}()
    text = replace(HEADER, r"//[^\n]*" => "")
    for m in eachmatch(r"\n([A-Za-z_][\w \*]*?\**)\s*\b(cumem_\w+)\(([^)]*)\);", text)
        ret = strip(m[1])
        args = String[]
        for a in split(m[3], ',')
            a = strip(a)
            (isempty(a) || a == "void") && continue
            # drop the parameter name: the last identifier
            push!(args, strip(replace(a, r"\b\w+\s*$" => "")))
        end
        protos[m[2]] = (String(ret), args)
    end
    return protos
end

# Every ccall in a Julia file: (C name, return type expr, argument type exprs, line,
# the enclosing top-level definition).
function ccalls(path)
    text = read(path, String)
    out = []
    pos = 1
    while pos <= ncodeunits(text)
        line = count(==('\n'), SubString(text, 1, pos)) + 1
        ex, pos = Meta.parse(text, pos; greedy = true)
        ex === nothing && continue
        walk(e) = e isa Expr && (if e.head === :call && e.args[1] === :ccall && Meta.isexpr(e.args[2], :tuple)
                                    push!(out, (string(e.args[2].args[1].value), e.args[3], e.args[4].args, line, ex))
                                 end; foreach(walk, e.args))
        walk(ex)
    end
    return out
end

# The C functions that name an address, a stream or an event handle (the engine finds
# the device from it), or act on no device: their wrappers do not switch devices (frees
# and destroys run in finalizers). Every other wrapper must call `activate()`.
const NO_DEVICE = Set(["cumem_init", "cumem_version", "cumem_log_capture", "cumem_log_next", "cumem_last_error",
                       "cumem_free", "cumem_copy_htod", "cumem_copy_dtoh", "cumem_copy_dtod", "cumem_memset",
                       "cumem_copy_peer", "cumem_device_count", "cumem_set_device", "cumem_get_device",
                       "cumem_device_is_open", "cumem_can_access_peer",
                       "cumem_stream_destroy", "cumem_stream_synchronize", "cumem_stream_query",
                       "cumem_stream_wait_event", "cumem_event_destroy", "cumem_event_record",
                       "cumem_event_query", "cumem_event_synchronize", "cumem_event_elapsed",
                       "cumem_host_free", "cumem_host_unregister", "cumem_is_pinned",
                       "cumem_set_next_origin", "cumem_nvrtc_version", "cumem_kernel_params",
                       "cumem_kernel_cache_config", "cumem_kernel_cache_stats",
                       "cumem_graph_pool_release", "cumem_graph_destroy", "cumem_graph_exec_destroy",
                       "cumem_graph_info", "cumem_set_pdl", "cumem_kernel_uses_pdl"])

# Header functions Julia does not call by name, each with its reason.
const UNUSED = Dict("cumem_init" => "c_init calls it through the handle open_library opened (no by-name ccall: julia/tools/sysimage.jl, step 2)",
                    "cumem_memory_status" => "cumem_memory_status_ex with flags 0 is the same",
                    "cumem_host_registered" => "the registered ranges are reported by memory_status's text",
                    "cumem_graph_launch" => "the package calls cumem_graph_launch_async with the task's stream",
                    "cumem_stream_is_capturing" => "the package keeps the capture of its tasks itself (CuMem.is_capturing)",
                    "cumem_graph_pool_of" => "a CuGraph keeps its pool's id")
for f in ("trsm", "trmm", "symm", "gemm_strided_batched", "getrf", "getrs", "geqrf", "orgqr", "ormqr",
          "potrf", "potrs", "gesvd", "syevd")
    UNUSED["cumem_$f"] = "the package calls cumem_$(f)_async with the task's stream"
end

calls_activate(ex) = ex isa Expr && ((ex.head === :call && ex.args[1] === :activate) || any(calls_activate, ex.args))

@testset "julia/lib against include/cumem.h" begin
    protos = prototypes()
    @test length(protos) >= 80
    calls = reduce(vcat, [ccalls(f) for f in BINDING_FILES])
    @test !isempty(calls)
    wrapped = Set{String}()
    @testset "$name" for (name, ret, args, line, def) in calls
        push!(wrapped, name)
        @test haskey(protos, name)
        haskey(protos, name) || continue
        cret, cargs = protos[name]
        @test Core.eval(CuMem, ret) in julia_types(cret)
        @test length(args) == length(cargs)
        for (a, c) in zip(args, cargs)
            T = Core.eval(CuMem, a)
            ok = T in julia_types(c)
            ok || @warn "$name (lib/libcumem.jl:$line): argument declared $T, header says `$c`"
            @test ok
        end
        # the current-device rule
        if name in NO_DEVICE
            @test !calls_activate(def)
        else
            calls_activate(def) || @warn "$name (lib/libcumem.jl:$line) acts on the current device and does not activate()"
            @test calls_activate(def)
        end
    end
    # every header function is called, or listed as unused with its reason
    for name in keys(protos)
        ok = name in wrapped || haskey(UNUSED, name)
        ok || @warn "$name is in include/cumem.h but julia/lib/libcumem.jl does not wrap it"
        @test ok
    end
    @test all(n -> haskey(protos, n), keys(UNUSED))
    # no other file calls the engine
    for (dir, _, files) in walkdir(joinpath(ROOT, "julia")), f in files
        endswith(f, ".jl") || continue
        path = joinpath(dir, f)
        path in BINDING_FILES && continue
        others = filter(c -> startswith(c[1], "cumem_"), ccalls(path))
        isempty(others) || @warn "$(relpath(path, ROOT)) calls $(first.(others)) outside lib/libcumem.jl"
        @test isempty(others)
    end
end

@testset "CUMEM_* constants of julia/lib/header.jl" begin
    defines = Dict(m[1] => parse(BigInt, m[2]) for m in eachmatch(r"#define (CUMEM_\w+) (\d+)(?:ull)?\n", HEADER))
    @test length(defines) >= 30
    for (name, v) in defines
        ok = isdefined(CuMem, Symbol(name)) && getfield(CuMem, Symbol(name)) == v
        ok || @warn "$name = $v in include/cumem.h: CuMem.$name is missing or differs"
        @test ok
    end
    # and no Julia CUMEM_* constant that the header lacks
    for n in names(CuMem; all = true)
        startswith(string(n), "CUMEM_") || continue
        @test haskey(defines, string(n))
    end
    @test CuMem.COPY_PATHS[CuMem.CUMEM_COPY_PATH_HOST + 1] === :host
    @test CuMem.EVENT_KINDS[CuMem.CUMEM_EVENT_OOM + 1] === :oom
    @test CuMem.BLOCK_STATES[CuMem.CUMEM_BLOCK_INACTIVE_SPLIT + 1] === :inactive_split
    @test CuMem.TIMELINE_FORMATS.chrome == CuMem.CUMEM_TIMELINE_CHROME
end

@testset "C records of julia/lib/header.jl" begin
    ctypes = Dict("uint64_t" => UInt64, "double" => Float64, "int64_t" => Int64, "uint32_t" => UInt32,
                  "int32_t" => Int32)
    for (cname, T) in RECORDS
        m = match(Regex("typedef struct \\{([^}]*)\\} $cname;"), HEADER)
        @test m !== nothing
        m === nothing && continue
        fields = Tuple{Symbol,DataType}[]
        for line in split(m[1], '\n')
            f = match(r"^\s*(\w+)\s+(\w+);", line)
            f === nothing && continue
            push!(fields, (Symbol(f[2]), ctypes[f[1]]))
        end
        @test length(fields) == fieldcount(T)
        offset = 0
        for (i, (name, FT)) in enumerate(fields)
            offset = cld(offset, sizeof(FT)) * sizeof(FT)
            @test fieldname(T, i) == name
            @test fieldtype(T, i) == FT
            @test fieldoffset(T, i) == offset
            offset += sizeof(FT)
        end
        @test sizeof(T) == cld(offset, 8) * 8
    end
end

@testset "docs/contract.md names every C function" begin
    contract = read(joinpath(ROOT, "docs", "contract.md"), String)
    for name in keys(prototypes())
        ok = occursin("`$name`", contract)
        ok || @warn "$name is in include/cumem.h but not in docs/contract.md's function table"
        @test ok
    end
end


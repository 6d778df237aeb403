# The fixed CUDA C in julia/cuda/*.cuh (julia/compute/compiler/cuda_sources.jl reads it):
#  - the splice of `#include "x.cuh"` lines (cuda_source) and the include dependencies;
#  - no Julia string under julia/ (outside julia/compute/compiler/, the compiler's
#    generated output) holds a kernel (`__global__`) or more than a few lines of C: fixed
#    CUDA C belongs in a .cuh file;
#  - with NVRTC (CUMEM_NVRTC_LIBRARY, no GPU needed): every .cuh compiles to PTX on its own
#    and after the compiler's prelude, and each family compiles instantiated for the element types the
#    package uses, through CuMem.compile_ptx (skipped, with a message, without NVRTC).
#
#   CUMEM_DEVICE=host CUMEM_NVRTC_LIBRARY=.../libnvrtc.so julia --project=. test/compute/runtime/cuh_tests.jl
using CuMem, Test

const JULIA_DIR = normpath(joinpath(@__DIR__, "..", "..", "..", "julia"))
const CUDA_DIR = joinpath(JULIA_DIR, "cuda")

## Julia strings holding C

# Files whose kernels are being moved to .cuh files by the sort/scan work (sort.cuh,
# scan.cuh); their offenders are listed, not failed. Empty this when that work is in.
const PENDING = String[]

# Every top-level expression of a file (Meta.parseall needs Julia 1.6).
function parse_file(path)
    text = read(path, String)
    exprs = Any[]
    pos = 1
    while pos <= ncodeunits(text)
        ex, pos = Meta.parse(text, pos; greedy = true, raise = true)
        ex === nothing || push!(exprs, ex)
    end
    return exprs
end

isdoc(f) = f == GlobalRef(Core, Symbol("@doc")) || f === Symbol("@doc")

# The string literals of `ex` (interpolations as `$(...)`), docstrings left out.
function literals!(out::Vector{String}, ex)
    if ex isa String
        push!(out, ex)
    elseif ex isa Expr
        if ex.head === :macrocall && isdoc(ex.args[1])
            foreach(a -> literals!(out, a), ex.args[4:end])     # the documented expression
        elseif ex.head === :string
            push!(out, join([a isa String ? a : "\$(...)" for a in ex.args]))
            foreach(a -> a isa String || literals!(out, a), ex.args)
        else
            foreach(a -> literals!(out, a), ex.args)
        end
    end
    return out
end

# Lines of a string that look like C: statements, braces, preprocessor lines.
c_lines(s) = count(l -> (l = strip(l); !isempty(l) && (occursin(r"[;{}]$", l) || startswith(l, "#define") ||
                                                       startswith(l, "#include") || occursin("__device__", l))),
                   split(s, '\n'))
const MAX_C_LINES = 5

# "file: excerpt" for each literal of a file holding a kernel or more than MAX_C_LINES of C.
function c_offenders(path)
    bad = String[]
    for ex in parse_file(path), s in literals!(String[], ex)
        if occursin("__global__", s) || c_lines(s) > MAX_C_LINES
            push!(bad, string(relpath(path, JULIA_DIR), ": ", first(strip(s), 60)))
        end
    end
    return bad
end

@testset "fixed CUDA C lives in julia/cuda/*.cuh" begin
    files = String[]
    for (dir, _, fs) in walkdir(JULIA_DIR), f in fs
        endswith(f, ".jl") && push!(files, joinpath(dir, f))
    end
    compiler = joinpath(JULIA_DIR, "compute", "compiler")
    checked = 0
    for path in files
        startswith(path, compiler) && continue
        bad = c_offenders(path)
        if relpath(path, JULIA_DIR) in PENDING
            isempty(bad) || @info "pending move to .cuh: $(length(bad)) C strings in $(relpath(path, JULIA_DIR))"
            continue
        end
        checked += 1
        for b in bad
            @warn "CUDA C in a Julia string (move it to julia/cuda/*.cuh)" b
        end
        @test isempty(bad)
    end
    @test checked > 50
    # the checker finds a kernel and a block of C, and passes docstrings and short lines
    mktempdir() do dir
        p = joinpath(dir, "a.jl")
        write(p, "\"\"\"\n    f()\n\nLaunches an `extern \"C\" __global__` kernel.\n\"\"\"\nf() = 1\n" *
                 "g(T) = print(io, \"  const \$T x = 1;\\n\")\n")
        @test isempty(c_offenders(p))
        write(p, "const S = raw\"\"\"\nextern \"C\" __global__ void k() {}\n\"\"\"\n")
        @test length(c_offenders(p)) == 1
        write(p, "h(T) = \"\"\"\n  a = 1;\n  b = 2;\n  if (a) {\n    c = \$T(3);\n  }\n  d = 4;\n\"\"\"\n")
        @test length(c_offenders(p)) == 1
    end
end

## the splice

@testset "cuda_source" begin
    cuhs = sort(filter(f -> endswith(f, ".cuh"), readdir(CUDA_DIR)))
    @test "common.cuh" in cuhs
    common = read(joinpath(CUDA_DIR, "common.cuh"), String)
    for f in cuhs
        s = CuMem.cuda_source(f)
        @test !occursin(r"(?m)^\s*#\s*include\s+\"", s)
        if occursin("#include \"common.cuh\"", read(joinpath(CUDA_DIR, f), String))
            @test count("#ifndef CUMEM_COMMON_CUH", s) == 1       # spliced once
            @test occursin(common, s)
        end
    end
    @test_throws ArgumentError CuMem.cuda_source("no-such-file.cuh")
    # the package's sources are these files' text
    @test occursin(CuMem.cuda_source("linalg.cuh"), CuMem.LINALG_KERNELS_SOURCE)
    @test occursin(CuMem.cuda_source("strided.cuh"), CuMem.STRIDED_COPY_SOURCE)
    @test CuMem.SEARCH_SOURCE == CuMem.cuda_source("search.cuh")
    @test CuMem.C_PRELUDE_V2 == CuMem.cuda_source("prelude.cuh")
    # constants the .cuh files repeat from Julia
    @test occursin("#define MAX_RANK $(CuMem.MAX_RANK)\n", read(joinpath(CUDA_DIR, "strided.cuh"), String))
    @test occursin("__launch_bounds__($(CuMem.FULL_THREADS), 4)", read(joinpath(CUDA_DIR, "reduce_all.cuh"), String))
end

## NVRTC

const ELTYPES = (CuMem.KERNEL_ELTYPES..., ComplexF32, ComplexF64)

ptx_ok(src) = (p = CuMem.compile_ptx(src); occursin(".version", p))

if !CuMem.nvrtc_available()
    @info "NVRTC not found (set CUMEM_NVRTC_LIBRARY): the .cuh files are not compiled to PTX"
else
    # Families whose text needs a generated prefix (typedefs of the instantiation) and whose
    # instantiations the sort/scan tests compile.
    NEEDS_PREFIX = ("sort.cuh", "scan.cuh")
    @testset "every .cuh compiles with NVRTC $(CuMem.nvrtc_version())" begin
        for f in sort(filter(f -> endswith(f, ".cuh"), readdir(CUDA_DIR)))
            f in NEEDS_PREFIX && (@info "$f: compiled instantiated by its family's tests"; continue)
            @test ptx_ok(CuMem.cuda_source(f))                       # on its own
            @test ptx_ok(CuMem.C_PRELUDE_V2 * CuMem.cuda_source(f))  # after the prelude
        end
        # common.cuh's helpers instantiated
        @test ptx_ok(CuMem.C_PRELUDE_V2 * """
            struct pair_t { double a; float b; };
            CUMEM_KERNEL void t(pair_t* p, long long* q) {
              const int i = cumem_thread_index<int>();
              p[i] = cumem_shfl_down(p[i], 1);
              q[i] = cumem_shfl_down(q[i], cumem_grid_threads<int>() % 32);
            }
            """)
    end
    @testset "families instantiated for the package's element types" begin
        # linear algebra, strided copies, searching: one source each, all kernels
        @test ptx_ok(CuMem.LINALG_KERNELS_SOURCE)
        @test ptx_ok(CuMem.STRIDED_COPY_SOURCE)
        @test ptx_ok(CuMem.SEARCH_SOURCE)
        # random numbers: every element type, uniform and normal
        for T in CuMem.KERNEL_ELTYPES
            @test ptx_ok(CuMem.random_source(T, false))
        end
        for T in (Float16, Float32, Float64)
            @test ptx_ok(CuMem.random_source(T, true))
        end
        # reductions over dimensions and findmax/findmin: kept/reduced dimension counts,
        # contiguous or not, 32/64-bit indices, partial or final
        for T in ELTYPES
            fdf = CuMem.element_function(identity, T)
            odf = CuMem.element_function(T === Bool ? (|) : (+), T, T)
            for (nk, nr, linear) in ((0, 1, true), (1, 1, true), (2, 2, false)), idx64 in (false, true)
                @test ptx_ok(CuMem.reduce_source(fdf, odf, nothing, T, T, T, nk, nr, linear, true, idx64))
            end
            T <: Complex && continue
            for ismax in (true, false), (nk, nr, linear) in ((0, 1, true), (2, 1, false)), idx64 in (false, true)
                bdf = CuMem.element_function(CuMem.FindBetter{ismax}(), T, T)
                @test ptx_ok(CuMem.findext_source(bdf, T, nk, nr, linear, idx64))
            end
        end
        # whole-array reductions: one and two sources, 16-byte loads or not
        for (Ts, W) in (((Float32,), 4), ((Float64,), 2), ((Int8,), 0), ((Float32, Float32), 4), ((Float16, Int64), 0))
            K = length(Ts)
            f = K == 1 ? abs : (*)
            fdf = CuMem.element_function(f, Ts...)
            A = fdf.rettype
            odf = CuMem.element_function(+, A, A)
            xs = join(["x$q" for q in 1:K], ", ")
            header = "#define CUMEM_F($xs) " * CuMem.fn_call(fdf, "f", ["x$q" for q in 1:K]...) * "\n" *
                     "#define CUMEM_OP(a, b) " * CuMem.fn_call(odf, "op", "a", "b") * "\n"
            AC = CuMem.c_type(A)
            for idx64 in (false, true), unroll in (true, false)
                body = CuMem.full_reduce_source(header, String[CuMem.c_type(T) for T in Ts], AC, W, "neut";
                                                params = ", $AC neut", unpack = CuMem.fn_local(fdf, "f") * CuMem.fn_local(odf, "op"),
                                                idx64 = idx64, unroll = unroll)
                # the inlined copies of f: 4W + W + 4 + 1 unrolled, W + 1 not
                @test count("CUMEM_ACC_AT(", body) - count("CUMEM_ACC_AT(", CuMem.REDUCE_ALL_CUH) == (unroll ? 5W + 5 : W + 1)
                @test ptx_ok(CuMem.kernel_source(CuMem.unique_fns((fdf, odf))...; body = body))
            end
        end
    end
end

## programmatic dependent launch: every kernel starts with CUMEM_PDL_ENTRY()

# The kernels defined in `src` (`extern "C" __global__` or CUMEM_KERNEL, prototypes left
# out; also inside #define bodies) whose body does not start with CUMEM_PDL_ENTRY(): the
# engine would launch them without PDL (src/compute/module.rs looks for the wait in the PTX).
function pdl_unguarded(src::AbstractString)
    bad = String[]
    for m in eachmatch(r"(?:extern \"C\" __global__|CUMEM_KERNEL)\s+void\s+(?:(?:CUMEM_\w+|__launch_bounds__\([^)]*\))\s+)*(\w+)\s*\([^;{]*?\)\s*\{\s*(?:\\\s*)?(\S{0,18})", src)
        m.captures[2] == "CUMEM_PDL_ENTRY();" || push!(bad, m.captures[1])
    end
    return bad
end
# The names of the PTX entries whose body executes griddepcontrol.wait, and of all entries
# (src/compute/module.rs, ptx_grid_waits, does the same).
function ptx_waits(ptx::AbstractString)
    all, waits = String[], String[]
    for m in eachmatch(r"\.entry\s+(\w+)\s*\("s, ptx)
        push!(all, m.captures[1])
        i = findnext('{', ptx, m.offset)
        depth, j = 0, i
        while j <= lastindex(ptx)
            c = ptx[j]
            c == '{' && (depth += 1)
            c == '}' && (depth -= 1; depth == 0 && break)
            j = nextind(ptx, j)
        end
        occursin("griddepcontrol.wait", SubString(ptx, i, j)) && push!(waits, m.captures[1])
    end
    return all, waits
end

@testset "programmatic dependent launch: CUMEM_PDL_ENTRY() first in every kernel" begin
    # the checker
    @test pdl_unguarded("CUMEM_KERNEL void a(int* p) { CUMEM_PDL_ENTRY(); p[0] = 1; }\n" *
                        "CUMEM_KERNEL void CUMEM_BOUNDS b(int* p);\nCUMEM_KERNEL void CUMEM_BOUNDS b(int* p)\n{\n  p[0] = 1;\n}\n" *
                        "#define K(S) extern \"C\" __global__ void k_##S(int* p) {                \\\n    CUMEM_PDL_ENTRY(); }\n") == ["b"]
    # the fixed CUDA C: the kernels of every .cuh file, macros' included
    nk = 0
    for f in sort(filter(f -> endswith(f, ".cuh"), readdir(CUDA_DIR)))
        text = read(joinpath(CUDA_DIR, f), String)
        nk += length(collect(eachmatch(r"(?:extern \"C\" __global__|CUMEM_KERNEL)\s+void\s[^;{]*\{", text)))
        @test (f, pdl_unguarded(text)) == (f, String[])
    end
    @test nk >= 20
    # the generated kernels, a source of each generator (no operation run, no compile):
    # broadcast, reduction with dims, findmax, whole-array reduction, bitonic sort, scan, and
    # the kernel language's @cuda (the radix sort is sort.cuh, checked above)
    fdf, odf = CuMem.element_function(identity, Float32), CuMem.element_function(+, Float32, Float32)
    bdf = CuMem.element_function(CuMem.FindBetter{true}(), Float32, Float32)
    cdf = CuMem.element_function(CuMem.SortLess(isless, identity, false), Int16, Int16)
    header = "#define CUMEM_F(x1) " * CuMem.fn_call(fdf, "f", "x1") * "\n#define CUMEM_OP(a, b) " * CuMem.fn_call(odf, "op", "a", "b") * "\n"
    full = CuMem.full_reduce_source(header, ["float"], "float", 4, "neut"; params = ", float neut",
                                    unpack = CuMem.fn_local(fdf, "f") * CuMem.fn_local(odf, "op"))
    k = CuMem.cufunction((a, b) -> (a[1] = b; nothing), Tuple{CuMem.CuDeviceVector{Float32},Float32})
    srcs = [CuMem.bcast_source(CuMem.device_function(+, (Float32, Float32)), nothing, Float32, true,
                               [(Float32, true), (Float32, true)], 1, false),
            CuMem.reduce_source(fdf, odf, nothing, Float32, Float32, Float32, 1, 1, true, true, false),
            CuMem.findext_source(bdf, Float32, 0, 1, true, false),
            CuMem.kernel_source(CuMem.unique_fns((fdf, odf))...; body = full),
            CuMem.bitonic_source(cdf, Int16), k.fun.source]
    for s in srcs
        @test pdl_unguarded(s) == String[]
        @test occursin("CUMEM_PDL_ENTRY();", s)
    end
    # the scans' source: the one cumsum builds (the host device keeps it in its kernel table;
    # a GPU may load it from the kernel index an earlier process filled instead)
    cumsum(CuArray(Float32[1, 2, 3]))
    scans = vcat([e.source for (key, e) in CuMem.KERNEL_TABLE if key[2] isa Tuple && key[2][1] === :scan1],
                 [e.source for (key, e) in CuMem.INDEX_TRIED if e isa CuMem.KernelEntry])
    @test !isempty(scans) && all(s -> pdl_unguarded(s) == String[] && occursin("CUMEM_PDL_ENTRY();", s), scans)
    # the switch (no GPU: nothing is launched, but the state is the process's)
    was = CuMem.pdl!(false)
    @test CuMem.pdl!(was) == false
    @test CuMem.pdl!(was) == (was && get(ENV, "CUMEM_PDL", "1") != "0")
    if CuMem.nvrtc_available()
        # sm_90: every entry waits; compute_75 (the host device's): none does (sort_ptx_tests.jl
        # checks the sorts' and scans' sm_90 PTX the same way)
        for s in (CuMem.SEARCH_SOURCE, CuMem.GEMM_SOURCE, srcs[1], srcs[end])
            all90, waits90 = ptx_waits(CuMem.compile_ptx(s; arch = "compute_90"))
            @test !isempty(all90) && waits90 == all90
        end
        @test isempty(ptx_waits(CuMem.compile_ptx(CuMem.SEARCH_SOURCE; arch = "compute_75"))[2])
    end
end

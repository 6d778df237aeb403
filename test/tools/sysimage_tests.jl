# CuMem.create_sysimage (julia/tools/sysimage.jl): its errors leave nothing behind; an image
# built from a small workload starts a process in which CuMem works (allocation, broadcast,
# a reduction equal to Base's; its __init__ ran again: the engine's handle is this process's),
# knows its sources are current, and runs the workload's operations compiling almost none of
# CuMem's methods (Julia's --trace-compile lists them; without the image, many). Slow:
# the build compiles Base's code again: only with CUMEM_TEST_SYSIMAGE=1 (test/runtests.jl).
using CuMem, Test

const ROOT = normpath(joinpath(@__DIR__, "..", ".."))
const JULIA = joinpath(Sys.BINDIR, Base.julia_exename())

# What the check process and the workload both run (the same types, so the same methods).
const OPS = """
x = CuArray(Float32[1, 2, 3, 4, 5, 6, 7, 8])
y = x .+ x
s = sum(y)
z = Array(y)
"""

@testset "create_sysimage's errors" begin
    dir = mktempdir()
    img = joinpath(dir, "img.so")
    wl = joinpath(dir, "wl.jl")
    write(wl, "using CuMem\n")
    @test_throws ErrorException CuMem.create_sysimage(dir; workload = wl)                     # a directory
    @test_throws ErrorException CuMem.create_sysimage(joinpath(dir, "no", "img.so"); workload = wl)
    @test_throws ErrorException CuMem.create_sysimage(img; workload = joinpath(dir, "missing.jl"))
    e = try CuMem.create_sysimage(img; workload = wl, cc = "no-such-cc-cumem") catch e; e end
    @test e isa ErrorException && occursin("no C compiler", e.msg)
    # a failing step: its name and the end of its output, and nothing at `path`
    write(wl, "using CuMem\nerror(\"the workload broke: 4711\")\n")
    e = try CuMem.create_sysimage(img; workload = wl) catch e; e end
    @test e isa ErrorException && occursin("step 1", e.msg) && occursin("the workload broke: 4711", e.msg)
    @test readdir(dir) == ["wl.jl"]
    rm(dir; recursive = true)
end

const BUILD = get(ENV, "CUMEM_TEST_SYSIMAGE", "0") == "1"
BUILD || @info "CUMEM_TEST_SYSIMAGE is not 1: no system image is built (test/runtests.jl)"

BUILD && @testset "an image built from a workload" begin
    dir = mktempdir()
    img = joinpath(dir, "cumem.so")
    wl = joinpath(dir, "workload.jl")
    write(wl, "using CuMem\n" * OPS)
    # the kernel caches on disk empty in the build and in both checks: the same code paths
    r = withenv("CUMEM_CACHE_DIR" => mktempdir()) do
        CuMem.create_sysimage(img; workload = wl)
    end
    println("create_sysimage: ", r)
    @test r.path == img && isfile(img) && r.bytes == filesize(img) > 0
    @test r.statements > 0 && 0 < r.precompiled <= r.statements
    @test length(r.step_seconds) == 3 && all(>(0), r.step_seconds) && sum(r.step_seconds) <= r.seconds
    @test readdir(dir) == ["cumem.so", "workload.jl"]       # no temporary files left

    check = """
    t0 = time()
    using CuMem
    h = CuMem.LIBRARY_HANDLE[]
    println("handle ", h != C_NULL, " ", h == ccall(:dlopen, Ptr{Cvoid}, (Cstring, Cint), CuMem.library_path(), 0x2 | 0x4))   # RTLD_NOLOAD
    println("image ", CuMem.SYSIMAGE_SOURCES[] != 0, " stale ", CuMem.sysimage_stale())
    $OPS
    println("values ", z == 2 .* Float32[1, 2, 3, 4, 5, 6, 7, 8], " ", s == sum(z), " ", s)
    """
    function run_check(args...)
        trace = tempname()
        out = withenv("CUMEM_CACHE_DIR" => mktempdir()) do
            read(`$JULIA --startup-file=no $args --project=$ROOT --trace-compile=$trace -e $check`, String)
        end
        lines = isfile(trace) ? readlines(trace) : String[]
        rm(trace; force = true)
        return out, count(l -> occursin("CuMem.", l), lines)
    end
    out, compiled = run_check("-J", img)
    print(out)
    @test occursin("handle true true", out)           # __init__ opened the engine in this process
    @test occursin("image true stale false", out)
    @test occursin("values true true 72.0", out)
    out0, compiled0 = run_check()
    println("CuMem methods compiled by the workload's operations: $compiled with the image, $compiled0 without")
    @test occursin("image false stale nothing", out0) && occursin("values true true 72.0", out0)
    # The image has the native code of nearly all of them (a few small `@inline` methods that
    # a dynamic call reaches are compiled at their first call all the same: Julia 1.5's image
    # keeps native code only of instances it would not inline)
    @test compiled0 >= 20
    @test compiled <= compiled0 ÷ 5
    rm(dir; recursive = true)
end

@testset "staleness: the sources' digest and the warning" begin
    # a copy of the package's sources has the same digest; one changed byte changes it
    dir = mktempdir()
    cp(joinpath(ROOT, "julia"), joinpath(dir, "julia"))
    cp(joinpath(ROOT, "Project.toml"), joinpath(dir, "Project.toml"))
    d = CuMem.package_sources_digest(dir)
    @test d == CuMem.package_sources_digest(ROOT)
    f = joinpath(dir, "julia", "tools", "sysimage.jl")
    write(f, read(f, String) * " ")
    @test CuMem.package_sources_digest(dir) != d
    rm(dir; recursive = true)
    # a package loaded as a package is not from an image; from an image built from other sources it warns
    @test CuMem.sysimage_stale() === nothing
    @test_logs CuMem.init_sysimage()
    try
        CuMem.SYSIMAGE_SOURCES[] = d + 1
        @test CuMem.sysimage_stale() === true
        @test_logs (:warn, r"built from other CuMem sources") CuMem.init_sysimage()
        CuMem.SYSIMAGE_SOURCES[] = d
        @test CuMem.sysimage_stale() === false
        @test_logs CuMem.init_sysimage()
    finally
        CuMem.SYSIMAGE_SOURCES[] = 0
    end
end

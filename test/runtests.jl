# CuMem's tests. The engine reads its configuration (JULIA_CUDA_MEMORY_POOL,
# JULIA_CUDA_MEMORY_LIMIT, CUMEM_DEBUG, ...) once, when the package initialises, so every
# configuration is tested in a Julia process of its own:
#
#   pool tests × {binned, split, expandable, simple, none}   test/pooltests.jl (2 threads)
#   out of memory under a 64 MiB limit             test/memory/oomtests.jl
#   no spurious out of memory with 2 threads       test/memory/thread_oom_tests.jl
#   the leak report under -g2 and CUMEM_DEBUG=2    test/memory/debugtests.jl
#   injected device failures (CUMEM_FAULT)          test/memory/faulttests.jl
#   pinned host memory under a 64 MiB limit          test/memory/pinned_tests.jl
#   bad configuration / missing library            `using CuMem` must fail clearly
#   installing by name, path and dev               test/registrytests.jl
#   compute: NVRTC, kernels, gemm!                 test/compute/runtime/compute_tests.jl
#   CUDA graphs, graph-private pools                test/compute/runtime/graphs_tests.jl
#   the kernel language (@cuda, intrinsics)        test/compute/device/kernel_tests.jl
#   the kernel language's CUDA.jl names            test/compute/device/kernel_cudajl_tests.jl
#   user kernels' CUDA C on g++ threads             test/compute/device/kernel_emulation_tests.jl
#   the fixed CUDA C (julia/cuda/*.cuh) to PTX      test/compute/runtime/cuh_tests.jl
#   indexing, linear algebra, show                  test/compute/{algorithms/indexing,linalg/linalg,show}_tests.jl
#   factorizations, triangular/symmetric, generic   test/compute/linalg/linalg_factor_tests.jl
#   linear-algebra kernels emulated with g++        test/compute/linalg/linalg_kernel_tests.jl
#   array library its kernels on g++ threads   test/compute/algorithms/arraylib{,_emulation}_tests.jl
#   reductions/scans/findmax/sorts on g++ threads     test/compute/reduce/reduce_emulation_tests.jl
#   onesweep sort, one-pass scan on g++ threads; PTX  test/compute/algorithms/sort_{emulation,ptx}_tests.jl
#   the CUDA.jl user checklist (host:2)            test/compute/parity_tests.jl
#   several devices (host:2 stand-ins)              test/devices/multidevice_tests.jl
#   Distributed, 2 workers, one device each         test/devices/distributed_tests.jl
#   the demo (an MLP trained on the digits)         demo/demo.jl
#   include order, file sizes, C bindings            test/layers_tests.jl, test/lib/header_tests.jl
#   README's Julia session (split pool)             test/tools/readme_tests.jl
#   create_sysimage (a build: CUMEM_TEST_SYSIMAGE=1)  test/tools/sysimage_tests.jl
#
# The processes run in parallel (CUMEM_TEST_JOBS, default: the number of CPU threads).
# CUMEM_DEVICE defaults to `host` (set it to `cuda` to test on a GPU); CUMEM_TEST_POOLS
# narrows the pools (e.g. "binned split"); CUMEM_TEST_SKIP_INSTALL=1 skips the install
# tests; CUMEM_TEST_ONLY=<regex> runs only the jobs whose names it matches;
# CUMEM_TEST_CPU=1 prints each job's CPU seconds beside its wall time; CUMEM_TEST_SYSIMAGE=1
# also builds a system image (test/tools/sysimage_tests.jl, minutes).

using Test

const ROOT = normpath(joinpath(@__DIR__, ".."))
const PROJECT = Base.active_project()       # under Pkg.test: its environment with CuMem and Test
const DEVICE = get(ENV, "CUMEM_DEVICE", "host")
const POOLS = split(get(ENV, "CUMEM_TEST_POOLS", "binned split expandable simple none"))
const NJOBS = parse(Int, get(ENV, "CUMEM_TEST_JOBS", string(max(1, Sys.CPU_THREADS))))

struct Job
    name::String
    cmd::Cmd
    check::Function        # (exit code, stdout+stderr) -> Bool, may run @test itself
    cost::Float64          # seconds it took on the 2-core CI machine, roughly: longest first
end
Job(name, cmd, check; cost = 5) = Job(name, cmd, check, cost)

# The g++ emulation tests' libraries and precompiled headers (test/compute/gxx.jl), one
# directory for all the processes of this run: a kernel that two test files generate is
# compiled once.
const EMU_CACHE = get(ENV, "CUMEM_EMU_CACHE", "") == "" ? mktempdir() : ENV["CUMEM_EMU_CACHE"]

# The environment of a subprocess: ours, with CUMEM_DEVICE defaulted and the
# configuration variables that the job does not set removed.
function job_env(pairs...)
    env = copy(ENV)
    for k in ("JULIA_CUDA_MEMORY_POOL", "JULIA_CUDA_MEMORY_LIMIT", "CUMEM_DEBUG",
              "CUMEM_FAULT", "CUMEM_PINNED_LIMIT", "JULIA_NUM_THREADS")
        delete!(env, k)
    end
    env["CUMEM_DEVICE"] = DEVICE
    env["CUMEM_EMU_CACHE"] = EMU_CACHE
    for (k, v) in pairs
        env[k] = v
    end
    return env
end

julia(args...; env...) = setenv(`$(Base.julia_cmd()) --startup-file=no --project=$PROJECT $args`,
                                job_env((string(k) => string(v) for (k, v) in env)...))

testfile(name) = joinpath(@__DIR__, name)

# Jobs that compile hundreds of methods which they then run once, on small arrays, and
# measure nothing (no timing, allocation or inference checks): Julia's interpreter runs
# them (`--compile=min`: new code is interpreted, the system image's native code still
# runs), the same package code with the same results, without the compile time that was
# most of their time (user seconds with and without, on this machine: linear algebra
# 11.6 / 46.9, indexing 19.9 / ~180, show 3.9 / ~45). Not for the broadcast and
# reduction suites: interpreted, the tracer and host broadcasts run far slower than they
# compile.
# Also the jobs that start the package only to check a message, the library chosen or a
# few values (bad configuration, which library, the engine's log, the API docs' check):
# 1.7-2.0 s of CPU each instead of 2.0-3.5, most of it compiling the error and logging
# paths (12 jobs, 34.1 -> 22.8 s together); and the out-of-memory, pinned-memory and
# README jobs (no timing or allocation checks; what they free is unreachable interpreted
# too): 24.5 -> 12.5 s together.
# On a GPU (CUMEM_DEVICE=cuda) they compile as usual: there the compute suite runs its
# checks on larger arrays, and interpreted it took 334 s instead of 41 (H100, 2026-11-23).
interpreted(args...; env...) =
    DEVICE == "cuda" ? julia(args...; env...) : julia("--compile=min", args...; env...)

# Jobs that check results only (no allocation, timing or inference checks) but run too
# much code to be interpreted: Julia's -O1 (LLVM's short pass pipeline instead of -O2's)
# compiles their many methods faster; the same package code with the same results (no
# fast-math either way). Not for the jobs whose allocation counts differ at -O1, which
# leaves out the pass that removes allocations (the pool tests: 14 failures in
# hotpath_tests.jl and array_tests.jl); the broadcast suite's one check, that the typed
# fast path's look-up allocates nothing, holds at -O1 (and so at -O2, which only removes).
# Measured on this 2-core machine under load, CPU seconds (user+sys) of one file:
# linalg_kernel_tests.jl 46.1 at -O2, 31.2 at -O1; broadcast_tests.jl 173.0 / 145.9 (run
# side by side); mapreduce, random and draws tests 126.7 / 101.1 (one after the other);
# kernel_cudajl_tests.jl 18.0 / 15.6; the CUDA.jl parity checklist 70.4 / 53.5 (its one
# allocation check counts device bytes, CuMem.@allocated), the demo 30.0 / 25.6 (its check
# is the accuracy target), compute_bench --quick 24.9 / 18.6 (its check: six lines of
# positive figures). Not the fault-injection jobs: 20.0 at -O2, 24.2 at -O1.
# On a GPU (CUMEM_DEVICE=cuda) as usual.
shortopt(args...; env...) = DEVICE == "cuda" ? julia(args...; env...) : julia("-O1", args...; env...)

passed(code, out) = code == 0

function failed_with(msgs...)
    return (code, out) -> code != 0 && all(m -> occursin(m, out), msgs)
end

jobs = Job[]
for pool in POOLS
    push!(jobs, Job("pool $pool",
                    julia(testfile("pooltests.jl"); JULIA_CUDA_MEMORY_POOL = pool, JULIA_NUM_THREADS = 2,
                          CUMEM_TEST_POOL_FREE = pool == POOLS[1] ? 1 : 0),
                    passed; cost = 60))
end
push!(jobs, Job("compute (NVRTC, kernels, gemm!)", interpreted(testfile(joinpath("compute", "runtime", "compute_tests.jl"))), passed; cost = 16))
# CUDA graphs: capture and replay of each operation family, refusals, graph pools' lifetime
push!(jobs, Job("graphs (capture, replay, graph pools)", interpreted(testfile(joinpath("compute", "runtime", "graphs_tests.jl"))), passed; cost = 30))
# the kernel language: @cuda, intrinsics, shared memory, atomics, shuffles (host device: the
# threads as tasks; every kernel's C compiled to PTX when libnvrtc is there)
push!(jobs, Job("kernel language (@cuda, intrinsics)", shortopt(testfile(joinpath("compute", "device", "kernel_tests.jl"))), passed; cost = 22))
# CUDA.jl's kernel API beyond that: type arguments, closures over CuArrays, launch bounds, a
# kernel's resources, >48 KiB dynamic shared memory, clock, pow, @atomic's errors
push!(jobs, Job("kernel language, CUDA.jl names", shortopt(testfile(joinpath("compute", "device", "kernel_cudajl_tests.jl"))), passed; cost = 90))
# julia/cuda/*.cuh compiled to PTX by NVRTC for the element types the package uses (a
# message, no compile, without NVRTC), and no CUDA C left in Julia strings
push!(jobs, Job("fixed CUDA C (julia/cuda/*.cuh)", shortopt(testfile(joinpath("compute", "runtime", "cuh_tests.jl"))), passed; cost = 20))
# the differential fuzzer (test/fuzz/): its regression cases, random functions from a fixed
# seed and from one printed per run; and two threads compiling new functions at once
push!(jobs, Job("fuzzer (host device)", shortopt(testfile(joinpath("fuzz", "fuzz_tests.jl"))), passed; cost = 60))
push!(jobs, Job("concurrent compilation (2 threads)", shortopt(testfile(joinpath("fuzz", "threads_stress.jl")); JULIA_NUM_THREADS = 2),
                passed; cost = 60))
# broadcasting, reductions and random numbers against Base, under one pool: what they
# test does not depend on the pool (their arrays' memory is the pool tests' subject, under
# every pool), and a second run was 160 s of CI
for pool in POOLS[1:min(1, end)]
    push!(jobs, Job("compute (broadcast, mapreduce, random), pool $pool",
                    shortopt("-e", "for f in ARGS; Base.include(Module(), f); end",
                          testfile(joinpath("compute", "broadcast", "broadcast_tests.jl")), testfile(joinpath("compute", "reduce", "mapreduce_tests.jl")), testfile(joinpath("compute", "random", "random_tests.jl")), testfile(joinpath("compute", "random", "draws_tests.jl"));
                          JULIA_CUDA_MEMORY_POOL = pool),
                    passed; cost = 370))
end
# the generated CUDA C of broadcasts and random numbers compiled by g++ and run on the CPU
# (host device only: the emulation stands in for the GPU)
if DEVICE != "cuda" && Sys.which("g++") !== nothing && success(pipeline(`g++ -x c++ -std=c++17 -fsyntax-only -`, stdin = IOBuffer("_Float16 h;"), stderr = devnull))
    push!(jobs, Job("compute kernels emulated on the CPU (g++)", shortopt(testfile(joinpath("compute", "compiler", "kernel_emulation_tests.jl"))), passed;
                    cost = 310))
    # the differential fuzzer's regression cases and random functions, run by g++ threads
    push!(jobs, Job("fuzzer through the g++ emulation", shortopt(testfile(joinpath("fuzz", "fuzz_tests.jl")), "emu"), passed; cost = 60))
    push!(jobs, Job("user kernels (@cuda) emulated on the CPU (g++)", shortopt(testfile(joinpath("compute", "device", "kernel_emulation_tests.jl"))),
                    passed; cost = 25))
    push!(jobs, Job("linear-algebra kernels emulated on the CPU (g++)", shortopt(testfile(joinpath("compute", "linalg", "linalg_kernel_tests.jl"))),
                    passed; cost = 35))
else
    @info "g++ with _Float16 not found: the emulated-kernel tests are skipped"
end
push!(jobs, Job("pinned host memory", interpreted(testfile(joinpath("memory", "pinned_tests.jl")); CUMEM_PINNED_LIMIT = "64MiB",
                                           JULIA_NUM_THREADS = 2), passed; cost = 9))
push!(jobs, Job("bad pinned memory limit",
                interpreted("-e", "using CuMem"; CUMEM_PINNED_LIMIT = "lots"),
                failed_with("CUMEM_PINNED_LIMIT=\"lots\"", "accepted")))
# millions of keys and elements: on a GPU the onesweep sort's and the one-pass scan's
# decoupled look-back with thousands of tiles in flight (the emulation runs tiles in order)
if DEVICE == "cuda"
    push!(jobs, Job("large sorts and scans against Base", julia(testfile(joinpath("compute", "algorithms", "sort_large_tests.jl"))),
                    passed; cost = 60))
end
push!(jobs, Job("sort.cuh and scan.cuh to sm_90 PTX (NVRTC)", shortopt(testfile(joinpath("compute", "algorithms", "sort_ptx_tests.jl"))),
                passed; cost = 30))
push!(jobs, Job("indexing and copies", interpreted(testfile(joinpath("compute", "algorithms", "indexing_tests.jl"))), passed; cost = 12))
# CUDA.jl parity: Base/Statistics/LinearAlgebra functions without scalar indexing, the
# scalar error's text, broadcasts of Symbols, Chars and writes through Ref(A)
push!(jobs, Job("Base and LinearAlgebra without scalar indexing",
                shortopt("-e", "for f in ARGS; Base.include(Module(), f); end",
                      testfile(joinpath("compute", "algorithms", "basefuncs_tests.jl")),
                      testfile(joinpath("compute", "linalg", "extras_tests.jl")),
                      testfile(joinpath("compute", "broadcast", "bcparity_tests.jl"))), passed; cost = 55))
# issue 24's array library (statistics, sorts, scans, searching, masks, random) against
# Base; its block-level kernels (tile scans, radix ranks, bitonic steps) run by g++ threads
push!(jobs, Job("array library (statistics, sorting, scans, searching, masks)",
                shortopt(testfile(joinpath("compute", "algorithms", "arraylib_tests.jl"))), passed; cost = 170))
if DEVICE != "cuda" && Sys.which("g++") !== nothing &&
   success(pipeline(`g++ -x c++ -std=c++20 -fsyntax-only -`, stdin = IOBuffer("#include <barrier>\n_Float16 h;"), stderr = devnull))
    push!(jobs, Job("array-library kernels emulated on CPU threads (g++)", shortopt(testfile(joinpath("compute", "algorithms", "arraylib_emulation_tests.jl"))),
                    passed; cost = 70))
    # the onesweep sort and one-pass scan (julia/cuda/sort.cuh, scan.cuh), look-back included
    push!(jobs, Job("onesweep sort and one-pass scan emulated on CPU threads (g++)",
                    shortopt(testfile(joinpath("compute", "algorithms", "sort_emulation_tests.jl"))), passed; cost = 75))
    # reductions, scans, findmax and sorts with compiled element functions, on g++ threads
    push!(jobs, Job("reduction kernels emulated on CPU threads (g++)", shortopt(testfile(joinpath("compute", "reduce", "reduce_emulation_tests.jl"))),
                    passed; cost = 150))
end
# Several devices: two host devices standing in for GPUs (two GPUs with CUMEM_DEVICE=cuda).
const MULTI_DEVICE = DEVICE == "cuda" ? "cuda" : "host:2"
# the CUDA.jl user's checklist, item by item (its device-rule items need two devices)
push!(jobs, Job("CUDA.jl user parity checklist ($MULTI_DEVICE)",
                shortopt(testfile(joinpath("compute", "parity_tests.jl")); CUMEM_DEVICE = MULTI_DEVICE), passed; cost = 60))
push!(jobs, Job("several devices ($MULTI_DEVICE)",
                shortopt(testfile(joinpath("devices", "multidevice_tests.jl")); CUMEM_DEVICE = MULTI_DEVICE, JULIA_CUDA_MEMORY_LIMIT = "1GiB"),
                passed; cost = 19))
push!(jobs, Job("Distributed, one device per worker ($MULTI_DEVICE)",
                julia(testfile(joinpath("devices", "distributed_tests.jl")); CUMEM_DEVICE = MULTI_DEVICE), passed; cost = 17))
push!(jobs, Job("linear algebra", interpreted(testfile(joinpath("compute", "linalg", "linalg_tests.jl"))), passed; cost = 7))
push!(jobs, Job("factorizations, triangular/symmetric, generic products",
                interpreted(testfile(joinpath("compute", "linalg", "linalg_factor_tests.jl"))), passed; cost = 25))
push!(jobs, Job("show of arrays and wrappers", interpreted(testfile(joinpath("compute", "show_tests.jl"))), passed; cost = 5))
push!(jobs, Job("precompiled first operations", interpreted(testfile(joinpath("compute", "precompile_tests.jl"))), passed; cost = 5))
# `make demo`: the MLP on the digits data set must reach its accuracy target
push!(jobs, Job("demo (MLP on the digits)", shortopt(joinpath(ROOT, "demo", "demo.jl")),
                (code, out) -> code == 0 && occursin("OK: held-out accuracy", out); cost = 26))
push!(jobs, Job("method ambiguities",
                julia("-e", "using CuMem, Test, LinearAlgebra, Random, Statistics; include($(repr(testfile("ambiguity_tests.jl"))))"),
                passed; cost = 21))
if get(ENV, "CUMEM_TEST_SKIP_INSTALL", "") != "1"
    push!(jobs, Job("installing (registry, add, dev)", shortopt(testfile("registrytests.jl")), passed; cost = 150))
end
for pool in POOLS[1:min(2, end)]
    push!(jobs, Job("out of memory, pool $pool",
                    interpreted(testfile(joinpath("memory", "oomtests.jl")); JULIA_CUDA_MEMORY_POOL = pool,
                          JULIA_CUDA_MEMORY_LIMIT = "64MiB"),
                    passed; cost = 7))
end
push!(jobs, Job("out of memory, 2 threads",
                julia(testfile(joinpath("memory", "thread_oom_tests.jl")); JULIA_NUM_THREADS = 2, JULIA_CUDA_MEMORY_LIMIT = "8MiB"),
                passed; cost = 15))
for pool in intersect(POOLS, ["split", "expandable", "none"])
    push!(jobs, Job("injected device failures, pool $pool",
                    julia(testfile(joinpath("memory", "faulttests.jl")); JULIA_CUDA_MEMORY_POOL = pool,
                          CUMEM_FAULT = "alloc:0.3,free:0.2,copy:0.05,stream:0.02,seed=11"),
                    passed; cost = 17))
end
push!(jobs, Job("leak report, julia -g2", julia("-g2", testfile(joinpath("memory", "debugtests.jl")); JULIA_NUM_THREADS = 2), passed; cost = 11))
push!(jobs, Job("leak report, CUMEM_DEBUG=2", julia(testfile(joinpath("memory", "debugtests.jl")); CUMEM_DEBUG = 2), passed; cost = 9))
push!(jobs, Job("bad pool name",
                interpreted("-e", "using CuMem"; JULIA_CUDA_MEMORY_POOL = "bogus"),
                failed_with("cannot initialise the CuMem engine",
                            "JULIA_CUDA_MEMORY_POOL=\"bogus\" is not a pool",
                            "accepted: binned, split, expandable, simple, none")))
push!(jobs, Job("bad memory limit",
                interpreted("-e", "using CuMem"; JULIA_CUDA_MEMORY_LIMIT = "lots"),
                failed_with("JULIA_CUDA_MEMORY_LIMIT=\"lots\"", "accepted")))
push!(jobs, Job("missing library",
                interpreted("-e", "using CuMem"; CUMEM_LIBRARY = joinpath(tempdir(), "no-such-dir", "libcumem.so")),
                failed_with("does not exist", "Pkg.build(\"CuMem\")", "cargo build --release")))
# The bundled wrapper (`make julia`) keeps a caller's JULIA_DEPOT_PATH first, so that
# packages land in the caller's depot, not in the clone (issue 22). Only where the
# wrapper was installed (not on a machine carrying a Julia bundle).
const WRAPPER = joinpath(ROOT, ".julia-local", "bin", "julia")
if isfile(WRAPPER)
    let own = mktempdir()
        push!(jobs, Job("the Julia wrapper keeps JULIA_DEPOT_PATH first",
                        setenv(`$WRAPPER --startup-file=no -e 'foreach(println, DEPOT_PATH)'`,
                               job_env("JULIA_DEPOT_PATH" => own)),
                        (code, out) -> code == 0 && startswith(out, own * "\n") &&
                                       occursin(joinpath(ROOT, ".julia-local", "depot") * "\n", out)))
    end
end
# A file that is no shared library: the loader's message about that file (issue 22)
push!(jobs, Job("library that is not a shared library",
                interpreted("-e", "using CuMem"; CUMEM_LIBRARY = "/etc/passwd"),
                (code, out) -> failed_with("\"/etc/passwd\" cannot be loaded", "ELF")(code, out) &&
                               !occursin("passwd.so", out)))
# deps/build.jl with no cargo to be found (skipped if a system-wide cargo is in /usr/bin)
let env = job_env("PATH" => "/usr/bin:/bin", "CARGO_HOME" => joinpath(tempdir(), "no-such-cargo"),
                  "HOME" => joinpath(tempdir(), "no-such-home"), "CUMEM_LIBRARY" => "")
    cmd = setenv(`$(Base.julia_cmd()) --startup-file=no $(joinpath(ROOT, "deps", "build.jl"))`, env)
    if !isfile("/usr/bin/cargo")
        push!(jobs, Job("Pkg.build without cargo", cmd,
                        failed_with("`cargo` was not found", "https://rustup.rs", "CUMEM_LIBRARY")))
    end
end
# The package is precompiled, and the library is chosen when it loads: the same cache
# serves CUMEM_LIBRARY=<a copy> and the package's own build, and `ccall` reaches the file
# that was chosen (its functions, not another build's; /proc/self/maps shows one
# libcumem).
# Without the package's own build (a GPU machine with a carried CUMEM_LIBRARY), the jobs
# that need it are left out and the copy is made from CUMEM_LIBRARY.
const OWN_LIB = joinpath(ROOT, "target", "release", "libcumem.so")
const HAVE_OWN_LIB = isfile(OWN_LIB)
const LIBCOPY = joinpath(mktempdir(), "libcumem-copy.so")
cp(HAVE_OWN_LIB ? OWN_LIB : ENV["CUMEM_LIBRARY"], LIBCOPY)
HAVE_OWN_LIB || @info "$OWN_LIB is not built: the jobs that load the package's own library are skipped"
const WHICH_LIB = """
    using CuMem, Libdl
    println("CACHES ", length(Base.find_all_in_cache_path(Base.PkgId(CuMem))))
    lib = CuMem.library_path()
    println("LIBRARY ", lib)
    @assert cglobal((:cumem_init, CuMem.libcumem)) == Libdl.dlsym(Libdl.dlopen(lib), :cumem_init)
    maps = unique(filter(p -> occursin("libcumem", p), [split(l)[end] for l in readlines("/proc/self/maps") if length(split(l)) >= 6]))
    println("MAPPED ", join(maps, " "))
    @assert Array(CuArray([1, 2])) == [1, 2]
    """
push!(jobs, Job("precompiled, CUMEM_LIBRARY chosen at load",
                interpreted("-e", WHICH_LIB; CUMEM_LIBRARY = LIBCOPY),
                (code, out) -> code == 0 && occursin("LIBRARY $LIBCOPY\n", out) &&
                               occursin("MAPPED $LIBCOPY\n", out) && occursin(r"CACHES [1-9]", out)))
if HAVE_OWN_LIB
    push!(jobs, Job("precompiled, the package's own library",
                    interpreted("-e", WHICH_LIB; CUMEM_LIBRARY = ""),
                    (code, out) -> code == 0 && occursin("MAPPED $OWN_LIB\n", out)))
    # Another libcumem.so loaded first would take the name: refused, not mixed.
    push!(jobs, Job("another libcumem already loaded",
                    interpreted("-e", "using Libdl; Libdl.dlopen($(repr(LIBCOPY)), Libdl.RTLD_GLOBAL); using CuMem";
                          CUMEM_LIBRARY = ""),
                    failed_with("another engine library", LIBCOPY, "is already loaded")))
end
# The engine's log goes through Julia's logging: shown as Julia log records (here debug
# records, enabled with JULIA_DEBUG), never as env_logger's own stderr lines, and
# silenced by the usual means.
const LOG_SCRIPT = """
    using CuMem
    x = CuArray{UInt8}(undef, 3 << 20)
    unsafe_free!(x); reclaim()
    CuMem.flush_engine_log()
    println("LOG_DONE")
    """
push!(jobs, Job("engine log through Julia's logging",
                interpreted("-e", LOG_SCRIPT; CUMEM_LOG = "debug", JULIA_DEBUG = "CuMem"),
                (code, out) -> code == 0 && occursin("┌ Debug: CuMem engine: device allocation of", out) &&
                               !occursin(r"\[\S+ DEBUG cumem", out) && occursin("LOG_DONE", out) &&
                               # each line says "CuMem engine" once (issue 22)
                               occursin("CuMem engine: binned pool on", out) &&
                               !occursin("CuMem engine: CuMem engine", out)))
push!(jobs, Job("engine log silenced by Logging",
                interpreted("-e", "using Logging; Logging.disable_logging(Logging.Warn); " * LOG_SCRIPT;
                      CUMEM_LOG = "debug", JULIA_DEBUG = "CuMem", CUMEM_DEVICE = "auto"),
                (code, out) -> code == 0 && !occursin("CuMem engine", out) && !occursin("cumem", lowercase(replace(out, "LOG_DONE" => ""))) &&
                               occursin("LOG_DONE", out)))
push!(jobs, Job("docs/api.md matches the docstrings",
                interpreted(joinpath(ROOT, "scripts", "gen-api-docs.jl"), "--check"), passed))
push!(jobs, Job("README.md's Julia session prints what it shows",
                interpreted(testfile(joinpath("tools", "readme_tests.jl")); JULIA_CUDA_MEMORY_POOL = "split"), passed; cost = 8))
# CuMem.create_sysimage: its errors and the staleness check; with CUMEM_TEST_SYSIMAGE=1 also
# a real build from a small workload (minutes: the build compiles Base's code again) and a
# process started from the image (CuMem works, the workload's methods need no compilation)
const SYSIMAGE_BUILD = get(ENV, "CUMEM_TEST_SYSIMAGE", "0") == "1"
push!(jobs, Job(SYSIMAGE_BUILD ? "system image (create_sysimage, a build and a process from it)" : "system image (create_sysimage's errors)",
                interpreted(testfile(joinpath("tools", "sysimage_tests.jl"))), passed; cost = SYSIMAGE_BUILD ? 170 : 5))
# The Julia package's structure: include order = dependency order, file sizes, and the
# bindings (every ccall, constant and record) against include/cumem.h.
push!(jobs, Job("julia/ layering and the C bindings",
                julia("-e", "for f in ARGS; include(f); end", testfile("layers_tests.jl"),
                      testfile(joinpath("lib", "header_tests.jl"))), passed; cost = 8))
push!(jobs, Job("environment read at load",
                interpreted("-e", """
                      using CuMem
                      ENV["JULIA_CUDA_MEMORY_LIMIT"] = "1GiB"   # too late: no effect
                      ENV["JULIA_CUDA_MEMORY_POOL"] = "none"
                      @assert memory_stats().limit_bytes == 2 << 20
                      @assert occursin("Memory limit: 2.000 MiB", sprint(memory_status))
                      @assert CuMem.pool_name() == "simple"
                      err = try CuArray{UInt8}(undef, 8 << 20); nothing; catch e; e; end
                      @assert err isa OutOfGPUMemoryError
                      println("ENVIRONMENT_OK")
                      """; JULIA_CUDA_MEMORY_LIMIT = "2MiB", JULIA_CUDA_MEMORY_POOL = "simple"),
                (code, out) -> code == 0 && occursin("ENVIRONMENT_OK", out)))

# The Julia-level benchmark's quick mode (bench/julia/julia_bench.jl) prints its three JSON
# lines with plausible figures.
function bench_ok(code, out)
    code == 0 || return false
    lines = filter(l -> startswith(l, "{"), split(out, '\n'))
    num(key, l) = (m = match(Regex("\"$key\":([0-9.eE+-]+)"), l); m === nothing ? NaN : parse(Float64, m[1]))
    kinds = [match(r"\"bench\":\"(\w+)\"", l)[1] for l in lines]
    return kinds == ["julia_pair", "julia_gc_pair", "julia_replay"] &&
           num("ns_per_pair", lines[1]) > 0 && num("ns_per_alloc", lines[2]) > 0 &&
           num("ns_per_event_warm", lines[3]) > 0 && num("events", lines[3]) == 2000
end
push!(jobs, Job("julia_bench --quick", julia(joinpath(@__DIR__, "..", "bench", "julia", "julia_bench.jl"), "--quick";
                                               JULIA_CUDA_MEMORY_POOL = "split"), bench_ok))

# The compute benchmark's quick mode (bench/julia/compute_bench.jl) prints its six JSON lines
# with positive figures.
function compute_bench_ok(code, out)
    code == 0 || return false
    lines = filter(l -> startswith(l, "{"), split(out, '\n'))
    num(key, l) = (m = match(Regex("\"$key\":([0-9.eE+-]+)"), l); m === nothing ? NaN : parse(Float64, m[1]))
    kinds = [match(r"\"bench\":\"(\w+)\"", l)[1] for l in lines]
    return kinds == ["axpy", "copy", "sum", "matmul", "latency", "mlp_step"] &&
           all(l -> any(k -> num(k, l) > 0, ("gbps", "tflops", "us", "ms")), lines)
end
push!(jobs, Job("compute_bench --quick", shortopt(joinpath(@__DIR__, "..", "bench", "julia", "compute_bench.jl"), "--quick"),
                compute_bench_ok; cost = 16))

# Longest first, so that two processes at a time end together (the costs are rough
# figures from a CI log of 2026-11-28, the emulated kernels' after their threads became
# fibers; each job's time is printed below for updating them).
sort!(jobs, by = j -> -j.cost)
# CUMEM_TEST_ONLY=<regex>: only the jobs whose name it matches (to time or rerun a few)
const ONLY = get(ENV, "CUMEM_TEST_ONLY", "")
isempty(ONLY) || filter!(j -> occursin(Regex(ONLY), j.name), jobs)

# CUMEM_TEST_CPU=1: each job runs under `sh`, whose `times` gives the CPU seconds (user +
# sys) of the job's process and the processes it waited for (g++, cargo, workers), printed
# beside its wall time; the sum over the jobs is printed at the end. Wall times on a busy
# machine are noise; CPU seconds are what two cores have to share.
const REPORT_CPU = get(ENV, "CUMEM_TEST_CPU", "") == "1"

# The CPU seconds of the children of a shell from its `times` output (second line: the
# children's user and system time, as `1m2.345s 0m0.678s`); NaN if it cannot be read.
function children_cpu(text)
    lines = split(strip(text), '\n')
    length(lines) >= 2 || return NaN
    secs = [parse(Int, m[1]) * 60 + parse(Float64, m[2]) for m in eachmatch(r"(\d+)m([\d.]+)s", lines[2])]
    return length(secs) == 2 ? sum(secs) : NaN
end

function run_job(job::Job)
    out = IOBuffer()
    cmd, timesfile = job.cmd, ""
    if REPORT_CPU
        timesfile = tempname()
        cmd = Cmd(Cmd(["sh", "-c", "\"\$@\"; rc=\$?; times > '$timesfile'; exit \$rc", "sh", job.cmd.exec...]);
                  env = job.cmd.env, dir = job.cmd.dir)
    end
    t = @elapsed p = run(pipeline(ignorestatus(cmd), stdout = out, stderr = out))
    cpu = REPORT_CPU && isfile(timesfile) ? children_cpu(read(timesfile, String)) : NaN
    REPORT_CPU && rm(timesfile, force = true)
    # as it ends, so that a CI log shows progress and which job is slow
    println("  [$(round(Int, time() - t0)) s] $(job.name): $(round(t, digits = 1)) s",
            REPORT_CPU ? ", $(round(cpu, digits = 1)) s CPU" : "")
    flush(stdout)
    return (code = p.exitcode, out = String(take!(out)), time = t, cpu = cpu)
end

# Precompile once, before processes start in parallel (each would otherwise compile
# the package into the same cache file). Quietly: a failure here shows in the jobs.
success(pipeline(julia("-e", "using CuMem"), stdout = devnull, stderr = devnull))

@info "CuMem tests: $(length(jobs)) Julia processes, $NJOBS at a time, device $DEVICE"
t0 = time()
results = asyncmap(run_job, jobs; ntasks = NJOBS)

failed = []
@testset "CuMem" begin
    for (job, r) in zip(jobs, results)
        ok = job.check(r.code, r.out)
        ok || push!(failed, (job, r))
        println("─── $(job.name): $(ok ? "ok" : "FAILED") in $(round(r.time, digits = 1)) s (exit code $(r.code))")
        if !ok || get(ENV, "CUMEM_TEST_VERBOSE", "") == "1"
            print(r.out)
        else
            # the subprocess's test summary, without the engine's log lines, and what it
            # skipped or checked beyond its tests (the compute tests' PTX check)
            for line in split(r.out, '\n')
                (startswith(line, "Test Summary") || occursin(r"\|\s+\d+\s+\d+\s*$", line) ||
                 occursin("SKIPPED", line) || startswith(line, "NVRTC ")) && println(line)
            end
        end
        @test ok
    end
    # The failed jobs again, last, on stderr: a CI log that keeps only its end (or shows
    # stderr after stdout) still says which job failed and why.
    if !isempty(failed)
        println(stderr, "CuMem tests: $(length(failed)) of $(length(jobs)) jobs FAILED: ",
                join((job.name for (job, _) in failed), "; "))
        for (job, r) in failed
            lines = split(rstrip(r.out), '\n')
            println(stderr, "──── the end of $(job.name) (exit code $(r.code)):")
            foreach(l -> println(stderr, "  ", l), lines[max(1, end - 30):end])
        end
    end
end
println("CuMem tests: $(round(time() - t0, digits = 1)) s in all",
        REPORT_CPU ? ", $(round(sum(r.cpu for r in results), digits = 1)) s CPU in the jobs" : "")

# CuMem's differential fuzzer: random type-stable element functions (test/fuzz/generator.jl)
# run through broadcast, `map`, `mapreduce` and `sum` on CuArrays and compared with Base
# on the same inputs (special values first): values with `isequal` (a transcendental
# function at the result's root within its documented ulps, test/fuzz/ulps.jl), exceptions
# by type and message. Every disagreement is written as a reproducer (a Julia file that
# defines the function, its inputs and both results).
#
#   julia --project=. test/fuzz/fuzz.jl [--mode host|emu] [--seed S] [--n N] [--len L]
#                                       [--seconds T] [--out DIR] [--ulps] [--profile] [--partial]
#                                       [--warmup W]
#
# --mode host (default): the device of CUMEM_DEVICE (host: Base runs the elements, every
#   kernel is still generated and, with libnvrtc, compiled to PTX; cuda: the GPU runs it);
# --mode emu: every generated kernel compiled by g++ and run on CPU threads
#   (test/compute/emulation_threads.jl);
# --seed (default: from the clock, printed), --n functions (default 100), --len elements
#   per input (default 24), --out the reproducers' folder (default fuzz-failures/);
# --seconds: stop starting new functions after T seconds of fuzzing (the loading before
#   it not counted), whichever of --n and --seconds comes first (--n 0: no count limit);
#   test/fuzz/campaign.sh runs many such processes side by side; --profile: also print the
#   CPU seconds per function of each part (generating, Base's calls, CuMem's calls);
#   --partial: also print the summary after every function, marked "partial": true (a
#   process stopped from outside keeps the counts of the functions it finished);
# --warmup W: first run W functions of seed S + 1 (their summary printed first), so that
#   the run's figures (cpu_s, --profile) are those of a process past its first functions
#   (docs/reliability.md, "Cheaper functions");
# --ulps: instead, measure each mapped transcendental function alone on this device (max
#   ulp difference from Base over special and random inputs) and print the table.
# Prints one JSON line per run: mode, seed, functions, checks, disagreements by kind, the
# seconds of fuzzing and of loading before it (startup_s: from the process's start).
# A wrong value is checked again against Julia's interpreter (`julia --compile=min`): where
# the interpreter gives CuMem's result, Base's compiled code was wrong ("base_miscompiled",
# reproducer written, not a failure; see `interpreted_reference`).
# Exit status 1 when a value, an exception or a crash disagreed.

# When this process started (Linux's /proc/self/stat; elsewhere when this file began to
# run): the JSON summary's startup_s is the loading before the first function.
const STARTED = try
    fields = split(split(read("/proc/self/stat", String), ')')[end])   # fields 3... of proc(5)
    up = parse(Float64, split(read("/proc/uptime", String))[1])
    time() - (up - parse(Int, fields[20]) / 100)                          # field 22, clock ticks
catch
    time()
end
# CPU seconds of this process and its finished children so far (all threads, NVRTC's and
# the emulation's g++ included): utime + stime + cutime + cstime of /proc/self/stat (clock
# ticks of 1/100 s), elsewhere the C library's clock() (this process only)
function cpu_seconds()
    try
        f = split(split(read("/proc/self/stat", String), ')')[end])
        return sum(parse(Int, f[i]) for i in 12:15) / 100
    catch
        return ccall(:clock, Clong, ()) / 1e6
    end
end
const ARGS_D = Dict{String,String}()
let i = 1
    while i <= length(ARGS)
        a = ARGS[i]
        if a in ("--ulps", "--quiet", "--profile", "--partial")
            ARGS_D[a[3:end]] = "1"; i += 1
        else
            startswith(a, "--") && i < length(ARGS) || error("usage: fuzz.jl [--mode host|emu] [--seed S] [--n N] [--len L] [--seconds T] [--out DIR] [--ulps] [--profile] [--partial] [--warmup W]")
            ARGS_D[a[3:end]] = ARGS[i+1]; i += 2
        end
    end
end
const MODE = get(ARGS_D, "mode", "host")
MODE in ("host", "emu") || error("--mode is host or emu")
if MODE == "emu"
    include(joinpath(@__DIR__, "..", "compute", "emulation_threads.jl"))
end
using CuMem, Random, Printf
include(joinpath(@__DIR__, "generator.jl"))
include(joinpath(@__DIR__, "ulps.jl"))
using .FuzzGen

const SEED = Ref(parse(Int, get(ARGS_D, "seed", string(time_ns() % 1_000_000_000))))
const N = parse(Int, get(ARGS_D, "n", "100"))
const SECONDS = parse(Float64, get(ARGS_D, "seconds", "Inf"))
const PARTIAL = get(ARGS_D, "partial", "0") == "1"
const LEN = parse(Int, get(ARGS_D, "len", "24"))
const WARMUP = parse(Int, get(ARGS_D, "warmup", "0"))
const OUTDIR = get(ARGS_D, "out", "fuzz-failures")
const DEVICE_NAME = MODE == "emu" ? "emu" : CuMem.on_host() ? "host" : "cuda"

struct Ok; v::Any; end
struct Err; e::Any; end
run_(f) = try
    Ok(f())
catch e
    Err(e)
end

# ulps between two floats of one type (Inf when one is NaN or infinite and they differ)
function ulps(a::T, b::T) where {T<:AbstractFloat}
    isequal(a, b) && return 0.0
    (isnan(a) || isnan(b) || isinf(a) || isinf(b)) && return Inf
    a == b && return 0.0     # ±0
    return Float64(abs(big(a) - big(b)) / eps(b == 0 ? floatmin(T) : abs(b)))
end

# Whether the GPU's result `got` agrees with Base's `want`; tol: ulps allowed (0: isequal).
function agree(got, want, tol)
    if got isa Err || want isa Err
        (got isa Err && want isa Err) || return false
        typeof(got.e) === typeof(want.e) || return false
        return sprint(showerror, got.e) == sprint(showerror, want.e)
    end
    g, w = got.v, want.v
    w isa BitArray && (w = Array(w))      # (Base's broadcast of a Bool result)
    typeof(g) === typeof(w) || return false
    g isa AbstractArray && size(g) != size(w) && return false
    isequal(g, w) && return true
    tol > 0 || return false
    gs, ws = g isa AbstractArray ? (g, w) : ([g], [w])
    return all(ulps(x, y) <= tol for (x, y) in zip(gs, ws))
end

# The function as Base's reference calls it: through one dynamic call. Base's broadcast,
# `map`, `mapreduce` and `sum` then run their own code (the same methods, element order,
# pairwise reduction and result types) compiled once per element types, instead of once per
# generated function (each is a new type: Julia inferred and compiled Base's broadcast and
# reduction anew for every one, about 0.15 CPU s). The one thing Base takes from inference
# of the function is a broadcast's element type: inferred as a concrete type, it is the type
# of the values of the type-stable functions that the generator makes, and otherwise (here:
# `Any`) Base takes the values' types, so the result is the same array; empty inputs, whose
# result type comes from inference alone, call the function itself (fuzz_tests.jl checks
# that both references agree).
struct Dyn <: Function
    f::Any
end
(d::Dyn)(x) = d.f(x)
(d::Dyn)(x, y) = d.f(x, y)
(d::Dyn)(x...) = d.f(x...)
reference_function(f, xs) = any(isempty, xs) ? f : Dyn(f)

show_result(r::Ok) = repr(r.v)
show_result(r::Err) = "throws " * sprint(showerror, r.e)

const COUNTS = Dict{String,Int}("wrong value" => 0, "exception mismatch" => 0, "crash" => 0, "refused" => 0,
                                "Base miscompiled" => 0)
const CHECKS = Ref(0)

# Base's and CuMem's call of `what` as source text over inputs named x1, x2, ...
function call_exprs(src, xs, what)
    fname = match(r"function (\w+)", src).captures[1]
    args = join(["x$i" for i in 1:length(xs)], ", ")
    cargs = join(["CuArray(x$i)" for i in 1:length(xs)], ", ")
    return what == "broadcast" ? ("$fname.($args)", "Array($fname.($cargs))") :
           what == "map" ? ("map($fname, $args)", "Array(map($fname, $cargs))") :
           (replace(what, "CA" => "x1"), replace(what, "CA" => "CuArray(x1)"))
end

# Base's answer for `what` from Julia's interpreter: a fresh `julia --compile=min` process
# (no LLVM optimization) defines the function and its inputs and prints `repr` of Base's
# result, or `nothing` when that process fails. Julia 1.5's compiled code gets some signed
# zeros wrong where its interpreter and IEEE 754 agree (`-fma(x, x, x)` of x = -0.0f0 is
# -0.0 interpreted and 0.0 compiled at -O2: LLVM folds the negation into the fma's
# operands, which is not exact for a zero result); a wrong value whose interpreted
# reference is CuMem's result is counted as "Base miscompiled", not as CuMem's error.
function interpreted_reference(src, xs, what)
    script = tempname() * ".jl"
    try
        open(script, "w") do io
            println(io, FuzzGen.STRUCT_DEF)
            println(io, src)
            for (i, x) in enumerate(xs)
                println(io, "x$i = ", repr(x))
            end
            println(io, "print(repr(let r = ", call_exprs(src, xs, what)[1], "; r isa BitArray ? Array(r) : r; end))")
        end
        return read(pipeline(`$(Base.julia_cmd()) --startup-file=no --compile=min $script`; stderr = devnull), String)
    catch
        return nothing
    finally
        rm(script; force = true)
    end
end

function write_repro(k, src, xs, what, got, want, kind)
    mkpath(OUTDIR)
    path = joinpath(OUTDIR, "fuzz_$(DEVICE_NAME)_$(SEED[])_$(k)_$(replace(what, r"\W" => "_")).jl")
    open(path, "w") do io
        println(io, "# CuMem fuzzer reproducer: $kind in `$what` (mode $MODE, seed $(SEED[]), function $k)")
        println(io, "# Base: ", replace(show_result(want), "\n" => "\n#   "))
        println(io, "# CuMem: ", replace(show_result(got), "\n" => "\n#   "))
        println(io, "using CuMem")
        println(io, FuzzGen.STRUCT_DEF)
        println(io, src)
        for (i, x) in enumerate(xs)
            println(io, "x$i = ", repr(x))
        end
        ex = call_exprs(src, xs, what)
        println(io, "want = try; ", ex[1], "; catch e; e; end")
        println(io, "got = try; ", ex[2], "; catch e; e; end")
        println(io, "println(\"Base:  \", want)\nprintln(\"CuMem: \", got)")
    end
    return path
end

# CPU seconds by part of the work (--profile): generating the function, Base's and CuMem's
# call of each kind; /proc's clock ticks of 10 ms add up over many functions
const CPU_BY = Dict{String,Float64}()
function cpu!(f, key)
    c = cpu_seconds()
    try
        return f()
    finally
        CPU_BY[key] = get(CPU_BY, key, 0.0) + cpu_seconds() - c
    end
end
call_kind(what) = first(split(what, '('))

function check!(k, src, xs, what, want, gotf, tol)
    CHECKS[] += 1
    got = cpu!(() -> run_(gotf), "CuMem " * call_kind(what))
    if got isa Err && got.e isa CuMem.KernelCompileError
        kind = "refused"
    elseif agree(got, want, tol)
        return true
    elseif got isa Err && !(want isa Err) || want isa Err && !(got isa Err) || (got isa Err && want isa Err)
        kind = got isa Err && !(got.e isa Exception) ? "crash" : "exception mismatch"
        got isa Err && !(want isa Err) && !(got.e isa Exception) && (kind = "crash")
    else
        kind = "wrong value"
        ref = cpu!(() -> interpreted_reference(src, xs, what), "interpreter recheck")
        ref !== nothing && got isa Ok && ref == repr(got.v) && (kind = "Base miscompiled")
    end
    COUNTS[kind] += 1
    p = write_repro(k, src, xs, what, got, want, kind)
    get(ARGS_D, "quiet", "0") == "1" || println("  $kind: $what of function $k -> $p")
    return false
end

inflight_path() = (mkpath(OUTDIR); joinpath(OUTDIR, "inflight_$(DEVICE_NAME)_$(SEED[]).jl"))

function fuzz_one(rng, k)
    name = "fz$k"
    src, ats, R, tr, f, xs = cpu!("generating and defining the function") do
        src, ats, R, tr = FuzzGen.gen_function(rng, name)
        # the function being run, kept if the process dies in it (removed at fuzz_main's end)
        write(inflight_path(), "# fuzz.jl: the function that was running (mode $MODE, seed $(SEED[]), function $k)\n", src, "\n")
        M = Module(:FuzzFns)
        include_string(M, FuzzGen.STRUCT_DEF)
        f = Core.eval(M, Meta.parse(src))
        src, ats, R, tr, f, Any[FuzzGen.inputs(rng, T, LEN) for T in ats]
    end
    tol = tr === nothing ? 0 : ulp_tolerance(tr, R, DEVICE_NAME)
    cxs = Any[CuArray(x) for x in xs]
    g = reference_function(f, xs)
    want = cpu!(() -> Base.invokelatest(() -> run_(() -> g.(xs...))), "Base broadcast")
    check!(k, src, xs, "broadcast", want, () -> Base.invokelatest(() -> Array(f.(cxs...))), tol)
    want = cpu!(() -> Base.invokelatest(() -> run_(() -> map(g, xs...))), "Base map")
    check!(k, src, xs, "map", want, () -> Base.invokelatest(() -> Array(map(f, cxs...))), tol)
    if length(xs) == 1 && R !== ComplexF32
        op = R === Bool ? (|) : R <: Integer ? (+) : max
        opn = R === Bool ? "|" : R <: Integer ? "+" : "max"
        want = cpu!(() -> Base.invokelatest(() -> run_(() -> mapreduce(g, op, xs[1]))), "Base mapreduce")
        # Base's `max` reduction (Julia 1.5 and later: JuliaLang/julia#45932) mends a result of
        # -0.0 with the first element of the *unmapped* array that is 0.0, so
        # `mapreduce(f, max, x)` can give an element of `x` where every `f(x[i])` is -0.0; the
        # reference there is the reduction of the mapped values
        if op === max && want isa Ok && want.v isa AbstractFloat && iszero(want.v)
            want = cpu!(() -> Base.invokelatest(() -> run_(() -> reduce(max, map(g, xs[1])))), "Base mapreduce")
        end
        check!(k, src, xs, "mapreduce($(name), $opn, CA)", want, () -> Base.invokelatest(() -> mapreduce(f, op, cxs[1])), tol)
        if R <: Integer
            want = cpu!(() -> Base.invokelatest(() -> run_(() -> sum(g, xs[1]))), "Base sum")
            check!(k, src, xs, "sum($name, CA)", want, () -> Base.invokelatest(() -> sum(f, cxs[1])), 0)
        end
    end
    return nothing
end

function measure_ulps(rng)
    println("| function | type | max ulps ($(DEVICE_NAME)) | inputs |")
    println("|---|---|---:|---:|")
    for fn in FuzzGen.TRANSCENDENTAL, T in (Float32, Float64)
        f = getfield(Base, fn)
        x = vcat(FuzzGen.special_values(T), FuzzGen.inputs(rng, T, 4000), T.(randn(rng, 2000) .* 100))
        fn in (:log, :sqrt, :log2) && (x = abs.(x))
        # only inputs Base answers for (sin(Inf) is a DomainError: compared as exceptions by
        # the fuzzer proper, not in ulps)
        x = filter(v -> try f(v); true catch; false end, x)
        want = f.(x)
        got = Array(f.(CuArray(x)))
        m = maximum(ulps(g, w) for (g, w) in zip(got, want))
        @printf("| %s | %s | %s | %d |\n", fn, T, m == Inf ? "Inf" : string(round(m; digits = 2)), length(x))
    end
end

"""
    fuzz_main(; seed, n, seconds) -> Int

Runs `n` random functions from `seed` (`n == 0`: no limit), starting no new one after
`seconds` of fuzzing (or, with --ulps, the ulp measurement); prints the JSON summary (the
functions that ran, which is fewer than `n` when the time ran out); 0 when nothing
disagreed (refusals are counted, not failures), else 1.
"""
function fuzz_main(; seed::Int = SEED[], n::Int = N, seconds::Float64 = SECONDS)
    n == 0 && !isfinite(seconds) && throw(ArgumentError("fuzz_main: n = 0 (no count limit) needs a finite number of seconds"))
    SEED[] = seed
    foreach(k -> COUNTS[k] = 0, collect(keys(COUNTS)))
    CHECKS[] = 0
    empty!(CPU_BY)
    rng = MersenneTwister(seed)
    println("fuzz: mode $MODE, device $(DEVICE_NAME), seed $seed, ", n == 0 ? "no count limit" : "$n functions",
            isfinite(seconds) ? ", $seconds s" : "", ", $LEN elements")
    if get(ARGS_D, "ulps", "0") == "1"
        measure_ulps(rng)
        return 0
    end
    t0, c0 = time(), cpu_seconds()
    startup = t0 - STARTED
    done = 0
    summary(partial) = @printf("{\"mode\":\"%s\",\"device\":\"%s\",\"seed\":%d,\"functions\":%d,\"checks\":%d,\"wrong_values\":%d,\"exception_mismatches\":%d,\"crashes\":%d,\"refused\":%d,\"base_miscompiled\":%d,\"seconds\":%.1f,\"cpu_s\":%.1f,\"startup_s\":%.1f%s}\n",
                               MODE, DEVICE_NAME, seed, done, CHECKS[], COUNTS["wrong value"], COUNTS["exception mismatch"], COUNTS["crash"],
                               COUNTS["refused"], COUNTS["Base miscompiled"], time() - t0, cpu_seconds() - c0, startup, partial ? ",\"partial\":true" : "")
    for k in 1:(n == 0 ? typemax(Int) : n)
        time() - t0 >= seconds && break
        done += 1
        try
            fuzz_one(rng, k)
        catch e
            # the fuzzer's own failure (a generated function Base cannot even define): a crash
            COUNTS["crash"] += 1
            println("  crash in function $k: ", first(sprint(showerror, e), 500))
        end
        # (--partial: the counts so far, so that a process stopped from outside keeps them)
        PARTIAL && (summary(true); flush(stdout))
    end
    rm(inflight_path(); force = true)
    bad = COUNTS["wrong value"] + COUNTS["exception mismatch"] + COUNTS["crash"]
    summary(false)
    if get(ARGS_D, "profile", "0") == "1" && done > 0
        println("fuzz: CPU s per function by part (", done, " functions, the first one's compilation included): ",
                join(("$k $(round(v / done; digits = 3))" for (k, v) in sort(collect(CPU_BY); by = last, rev = true)), ", "))
    end
    return bad == 0 ? 0 : 1
end

if abspath(PROGRAM_FILE) == abspath(@__FILE__())
    let s0 = SEED[]
        WARMUP > 0 && fuzz_main(seed = s0 + 1, n = WARMUP, seconds = Inf)
        exit(fuzz_main(seed = s0))
    end
end

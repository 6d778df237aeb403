# Time to first result: seconds from a fresh process's `using CuMem` to its first results.
# Every row runs in new Julia processes (what a user pays once per session), with the
# engine's kernel cache on disk empty ("cold": CUMEM_CACHE_DIR points at a new temporary
# directory) or filled by an earlier process that ran the same row ("warm": the same
# directory after one untimed run). One JSON line per timed process on stdout.
#
#   julia --project=. bench/julia/first_result.jl [--reps N] [--cache cold,warm] [--rows using,bcast,...]
#
# Rows:
#   using   `using CuMem` (and each __init__ step: CuMem.INIT_TIMES)
#   bcast   the first `x .+ y` (Float32 vectors, synchronized)
#   sum     the first `sum(x)`
#   sort    the first `sort(x)`
#   ten     ten first operations, each timed: x .+ y, sum, A * A, sort, qr, maximum(A; dims = 1),
#           cumsum, findall, CuMem.rand, mean(A; dims = 2); `total_s` is their sum (after `using`)
#   demo    demo/demo.jl for 3 epochs: the first epoch's mean ms/step beside epoch 2's median
#           (its own process, timed whole: `process_s`)
#   newfn   a brand-new element function's first calls after another function warmed the
#           paths: `f.(x)`, `mapreduce(f, +, x)` and `sum(f, x)` for three new anonymous
#           functions (`a -> sin(a) * c + a / 3f0`, each c its own); the medians of the three
#           (`bcast_s`, `bcast_cpu_s`, ...; cold: NVRTC compiles each kernel, warm: the disk cache has them)
# The device is the environment's (CUMEM_DEVICE); the anchors are
# bench/anchors/first_result_anchor.py (PyTorch, CuPy).
#
# FR_SYSIMAGE=<path>: every process starts with `-J <path>`, a system image built by
# CuMem.create_sysimage (CuMem is then loaded, and its __init__ run, before `using`; each line
# says "sysimage": the file's name or "none"). Every line also has `start_s` and `start_cpu_s`:
# wall seconds from the driver starting the process to `using` done, and the process's CPU
# seconds by then (Julia's own start, the image's load and __init__ included either way).

const ROOT = get(ENV, "FIRST_RESULT_ROOT", normpath(joinpath(@__DIR__, "..", "..")))   # the checkout to measure
const SELF = @__FILE__
const ROWS = ("using", "bcast", "sum", "sort", "ten", "demo", "newfn")

jnum(x::Real) = string(round(x; digits = 4))
jnum(x::Integer) = string(x)
jstr(s) = string('"', escape_string(string(s)), '"')
json(ps) = string("{", join([string(jstr(k), ":", v isa AbstractString ? jstr(v) : v isa Real ? jnum(v) : string(v))
                             for (k, v) in ps], ","), "}")

# One row in this process (a child started by the driver below); prints one JSON line.
# CPU seconds of this process (all threads; wall clock misleads on a loaded machine).
cpu_s() = ccall(:clock, Clong, ()) / 1e6

function child(row::String, t_using::Float64, cpu_using::Float64)
    M = getfield(Main, :CuMem)
    start_s = time() - parse(Float64, get(ENV, "FIRST_RESULT_T0", string(time())))
    out = Pair{String,Any}["bench" => "first_result", "impl" => "CuMem", "row" => row,
                           "cache" => get(ENV, "FIRST_RESULT_CACHE", "?"), "using_s" => t_using, "using_cpu_s" => cpu_using,
                           "start_s" => start_s, "start_cpu_s" => cpu_s(),
                           "sysimage" => basename(get(ENV, "FR_SYSIMAGE", "none"))]
    if isdefined(M, :INIT_TIMES)
        for (k, v) in M.INIT_TIMES
            push!(out, string("init_", replace(string(k), "init_" => ""), "_s") => v)
        end
    end
    sync() = M.synchronize()
    timed(f) = (c = cpu_s(); t = @elapsed (f(); sync()); (t, cpu_s() - c))
    if row == "bcast"
        x, y = M.fill(1f0, 1024), M.fill(2f0, 1024)
        t, c = timed(() -> x .+ y)
        push!(out, "first_s" => t, "first_cpu_s" => c)
    elseif row == "sum"
        x = M.fill(1f0, 1024)
        t, c = timed(() -> sum(x))
        push!(out, "first_s" => t, "first_cpu_s" => c)
    elseif row == "sort"
        x = M.CuArray(rand(Float32, 1024))
        t, c = timed(() -> sort(x))
        push!(out, "first_s" => t, "first_cpu_s" => c)
    elseif row == "ten"
        x, y = M.CuArray(rand(Float32, 1024)), M.CuArray(rand(Float32, 1024))
        A = M.CuArray(rand(Float32, 64, 64))
        b = M.CuArray(rand(Bool, 1024))
        ops = (("bcast", () -> x .+ y), ("sum", () -> sum(x)), ("matmul", () -> A * A), ("sort", () -> sort(x)),
               ("qr", () -> Main.LinearAlgebra.qr(A)), ("maximum_dims", () -> maximum(A; dims = 1)),
               ("cumsum", () -> cumsum(x)), ("findall", () -> findall(b)), ("rand", () -> M.rand(Float32, 1024)),
               ("mean_dims", () -> Main.Statistics.mean(A; dims = 2)))
        total = total_cpu = 0.0
        for (name, f) in ops
            t, c = timed(f)
            total += t
            total_cpu += c
            push!(out, string(name, "_s") => t, string(name, "_cpu_s") => c)
        end
        push!(out, "total_s" => total, "total_cpu_s" => total_cpu)
    elseif row == "newfn"
        x = M.CuArray(rand(Float32, 1024))
        f0 = a -> a * 2f0 + 1f0
        timed(() -> (f0.(x); mapreduce(f0, +, x); sum(f0, x)))
        ops = (("bcast", f -> f.(x)), ("mapreduce", f -> mapreduce(f, +, x)), ("sum", f -> sum(f, x)))
        ts = Dict(name => Tuple{Float64,Float64}[] for (name, _) in ops)
        for k in 1:3
            f = Core.eval(Main, :(a -> sin(a) * $(Float32(k) + 0.5f0) + a / 3f0))
            for (name, op) in ops
                push!(ts[name], timed(() -> Base.invokelatest(op, f)))
            end
        end
        med(v) = sort(v)[(length(v) + 1) ÷ 2]
        for (name, _) in ops
            push!(out, string(name, "_s") => med(first.(ts[name])), string(name, "_cpu_s") => med(last.(ts[name])))
        end
    elseif row != "using"
        error("unknown row $row (rows: $(join(ROWS, ", ")))")
    end
    push!(out, "device" => M.device_name(), "julia" => string(VERSION))
    if isdefined(M, :disk_cache_stats)
        s = M.disk_cache_stats()
        push!(out, "disk_hits" => s.hits, "disk_misses" => s.misses)
    end
    println(json(out))
end

function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : ARGS[i+1]
end

# The driver: every row in new processes, cold then warm.
function driver()
    reps = parse(Int, option("--reps", "2"))
    caches = split(option("--cache", "cold,warm"), ',')
    rows = split(option("--rows", join(ROWS, ',')), ',')
    julia = joinpath(Sys.BINDIR, Base.julia_exename())
    for row in rows, cache in caches
        warmdir = nothing
        if cache == "warm"
            warmdir = mktempdir()
            run_child(julia, row, warmdir, "prime"; quiet = true)   # fills the disk cache, untimed
        end
        for _ in 1:reps
            dir = cache == "warm" ? warmdir : mktempdir()
            run_child(julia, row, dir, cache)
            cache == "cold" && rm(dir; recursive = true, force = true)
        end
        warmdir === nothing || rm(warmdir; recursive = true, force = true)
    end
end

# `-J FR_SYSIMAGE` when it is set (an empty command otherwise)
sysimage_args() = (img = get(ENV, "FR_SYSIMAGE", ""); isempty(img) ? `` : `-J $img`)

function run_child(julia, row, dir, cache; quiet = false)
    env = copy(ENV)
    env["CUMEM_CACHE_DIR"] = dir
    env["FIRST_RESULT_CACHE"] = cache
    if row == "demo"
        # (three epochs fall short of the demo's accuracy target, so it exits 1: its timings
        # are still what this row measures)
        cmd = ignorestatus(setenv(`$julia $(sysimage_args()) --project=$ROOT $(joinpath(ROOT, "demo", "demo.jl")) --epochs 3`, env))
        t = @elapsed text = read(pipeline(cmd; stderr = stderr), String)
        quiet && return
        first_ms = match(r"first epoch ([0-9.]+) ms/step", text)
        epochs = collect(eachmatch(r"epoch +\d+ +loss [0-9.]+ +([0-9.]+) ms/step", text))
        first_ms === nothing && error("demo output without its first-epoch line:\n", text)
        f, st = parse(Float64, first_ms[1]), parse(Float64, epochs[2][1])   # epoch 2: compiled, not profiled
        println(json(Pair{String,Any}["bench" => "first_result", "impl" => "CuMem", "row" => "demo", "cache" => cache,
                                      "first_epoch_ms_per_step" => f, "steady_ms_per_step" => st,
                                      "first_over_steady" => f / st, "process_s" => t]))
        return
    end
    env["FIRST_RESULT_T0"] = string(time())
    cmd = setenv(`$julia $(sysimage_args()) --project=$ROOT $SELF --child $row`, env)
    out = read(pipeline(cmd; stderr = stderr), String)
    quiet || for l in split(out, '\n')
        startswith(l, "{") && (println(l); flush(stdout))
    end
end

if length(ARGS) >= 2 && ARGS[1] == "--child"
    t0, c0 = time_ns(), cpu_s()
    @eval Main using CuMem, LinearAlgebra, Statistics
    Base.invokelatest(child, String(ARGS[2]), (time_ns() - t0) / 1e9, cpu_s() - c0)
else
    driver()
end

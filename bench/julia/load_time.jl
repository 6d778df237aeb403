# Where `using CuMem` goes, in fresh processes: its wall and CPU seconds (the minimum of
# --reps processes, each line printed too), `CuMem.INIT_TIMES` (each `__init__` step), the
# method instances that loading invalidates and the new methods that invalidated them, and
# what loading compiles (`--trace-compile`: lines beyond those of a process that loads
# nothing). One JSON line per process, then a summary line (`"row":"summary"`).
#
#   julia --project=. bench/julia/load_time.jl [--reps N]
#
# The device is the environment's (CUMEM_DEVICE). Wall clock on a loaded machine varies
# with the load: compare `using_cpu_s` (CPU seconds of the process during `using`).

const ROOT = get(ENV, "FIRST_RESULT_ROOT", normpath(joinpath(@__DIR__, "..", "..")))
const SELF = @__FILE__

jnum(x::Integer) = string(x)
jnum(x::Real) = string(round(x; digits = 4))
jstr(s) = string('"', escape_string(string(s)), '"')
json(ps) = string("{", join([string(jstr(k), ":", v isa AbstractString ? jstr(v) : v isa Real ? jnum(v) : string(v))
                             for (k, v) in ps], ","), "}")
cpu_s() = ccall(:clock, Clong, ()) / 1e6

# Julia's invalidation log, the only Julia-internal part of this script (keyed by version).
# 1.5: a C global; set, the runtime prints each invalidated method instance to C stdout
# (indented under the one whose backedge reached it) and `>> ` before the new method that
# caused them. 1.6 and later: `jl_debug_method_invalidation(1)` returns a list that the
# runtime fills with method instances, the new methods and tags (SnoopCompile's format).
function invalidation_log_on()
    if VERSION < v"1.6"
        unsafe_store!(cglobal(:jl_debug_method_invalidation, Cint), 1)
        return nothing
    end
    return ccall(:jl_debug_method_invalidation, Any, (Cint,), 1)
end
function invalidation_log_off(list)
    if VERSION < v"1.6"
        Base.Libc.flush_cstdio()
        unsafe_store!(cglobal(:jl_debug_method_invalidation, Cint), 0)
        return nothing
    end
    ccall(:jl_debug_method_invalidation, Any, (Cint,), 0)
    return (count(x -> x isa Core.MethodInstance, list), count(x -> x isa Method, list))
end
# (invalidated method instances, new methods that invalidated some) from 1.5's printed log.
count_printed(text) = (count(l -> !isempty(l) && !startswith(l, ">>") && !startswith(l, "{"), split(text, '\n')),
                       count(l -> startswith(l, ">>"), split(text, '\n')))

function child(mode)
    if mode == "invalidations"
        list = invalidation_log_on()
        @eval Main using CuMem
        r = invalidation_log_off(list)
        r === nothing || println(json(["row" => "invalidations", "invalidated" => r[1], "methods" => r[2]]))
        return
    end
    t0, c0 = time_ns(), cpu_s()
    @eval Main using CuMem
    Base.invokelatest(report, (time_ns() - t0) / 1e9, cpu_s() - c0)
end

function report(t, c)
    M = getfield(Main, :CuMem)
    out = Pair{String,Any}["bench" => "load_time", "row" => "using", "using_s" => t, "using_cpu_s" => c]
    for (k, v) in M.INIT_TIMES
        push!(out, string("init_", replace(string(k), "init_" => ""), "_s") => v)
    end
    push!(out, "device" => M.device_name(), "julia" => string(VERSION))
    println(json(out))
end

function driver()
    i = findfirst(==("--reps"), ARGS)
    reps = i === nothing ? 5 : parse(Int, ARGS[i+1])
    julia = joinpath(Sys.BINDIR, Base.julia_exename())
    function run_(args; trace = nothing)
        opts = ["--startup-file=no", "--project=$ROOT"]
        trace === nothing || push!(opts, "--trace-compile=$trace")
        return read(pipeline(`$julia $opts $args`; stderr = stderr), String)
    end
    rows = Dict{String,Any}[]
    for _ in 1:reps
        for l in split(run_(`$SELF --child using`), '\n')
            startswith(l, "{") || continue
            println(l); flush(stdout)
            m = Dict{String,Any}()
            for kv in eachmatch(r"\"([a-z_]+)\":(-?[0-9.e-]+)[,}]", l)
                m[kv[1]] = parse(Float64, kv[2])
            end
            push!(rows, m)
        end
    end
    text = run_(`$SELF --child invalidations`)
    inv = match(r"\"invalidated\":(\d+),\"methods\":(\d+)", text)
    n_inv, n_meth = inv === nothing ? count_printed(text) : (parse(Int, inv[1]), parse(Int, inv[2]))
    traced = Int[]
    for args in (`-e 1`, `$SELF --child using`)
        f = tempname()
        run_(args; trace = f)
        push!(traced, countlines(f))
        rm(f; force = true)
    end
    summary = Pair{String,Any}["bench" => "load_time", "row" => "summary", "reps" => reps,
                               "using_s_min" => minimum(r -> r["using_s"], rows),
                               "using_cpu_s_min" => minimum(r -> r["using_cpu_s"], rows)]
    for k in sort(unique(k for r in rows for k in keys(r) if startswith(k, "init_")))
        push!(summary, string(k, "_min") => minimum(r -> get(r, k, Inf), rows))
    end
    push!(summary, "invalidated" => n_inv, "invalidating_methods" => n_meth,
          "compiled_at_load" => traced[2] - traced[1], "julia" => string(VERSION))
    println(json(summary))
end

if length(ARGS) >= 2 && ARGS[1] == "--child"
    child(ARGS[2])
else
    driver()
end

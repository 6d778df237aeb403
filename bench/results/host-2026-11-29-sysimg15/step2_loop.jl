# Runs step 2 of CuMem.create_sysimage (`julia --output-o`) `n` times on one recorded
# trace, counting the runs that abort with Julia 1.5's "FATAL ERROR: Symbol ... not found".
# The builder retries that abort once, so a whole build hides it; this calls the step itself.
#   julia --project=<CuMem root> step2_loop.jl <label> <n> <results.jsonl> [trace.jl]
# Without a trace, step 1 (the default workload under --trace-compile) records one first.
using CuMem, Libdl
label, n, results = ARGS[1], parse(Int, ARGS[2]), ARGS[3]
root = CuMem.PACKAGE_ROOT
julia = joinpath(Sys.BINDIR, Base.julia_exename())
base = CuMem.default_julia_sysimage()
tmp = mktempdir()
trace = length(ARGS) >= 4 ? ARGS[4] : joinpath(tmp, "trace.jl")
if !isfile(trace)
    t = @elapsed run(pipeline(`$julia --startup-file=no -J $base --project=$root --trace-compile=$trace $(CuMem.DEFAULT_SYSIMAGE_WORKLOAD)`;
                              stdout = joinpath(tmp, "workload.log"), stderr = joinpath(tmp, "workload.log")))
    println("step 1: $(round(t; digits = 1)) s, trace $trace")
end
script = joinpath(tmp, "output.jl")
report = joinpath(tmp, "count.txt")
write(script, CuMem.sysimage_output_script(trace, CuMem.package_sources_digest(root), report))
# (the sources' digest names the code under test; a copy of the tree outside git has no commit)
sources = string(CuMem.package_sources_digest(root); base = 16)
for i in 1:n
    obj = joinpath(tmp, "cumem.o"); rm(obj; force = true)
    log = joinpath(tmp, "output_$i.log")
    t = @elapsed ok = success(pipeline(`$julia --startup-file=no --cpu-target=native --project=$root -J $base --output-o=$obj $script`;
                                       stdout = log, stderr = log))
    text = read(log, String)
    m = match(r"Symbol \"?([^\" ]*)\"? ?not found", text)
    line = string("{\"label\":\"", label, "\",\"run\":", i, ",\"ok\":", ok, ",\"abort\":", m === nothing ? "null" : "\"$(m[1])\"",
                  ",\"object_bytes\":", isfile(obj) ? filesize(obj) : 0, ",\"seconds\":", round(t; digits = 1),
                  ",\"sources\":\"", sources, "\"}")
    println(line); flush(stdout)
    open(io -> println(io, line), results, "a")
    # a failed run's log (an abort's backtrace names the compilation that needed the symbol)
    ok || cp(log, string(results, ".", label, ".", i, ".", round(Int, time()), ".log"); force = true)
end

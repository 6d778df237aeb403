# Writes julia/compute/precompile_ops.txt: the signatures of CuMem's own methods that
# scripts/precompile_workload.jl compiles, for julia/compute/precompile.jl to precompile.
#
#   CUMEM_DEVICE=host julia --project=. --trace-compile=/tmp/trace.jl scripts/precompile_workload.jl
#   CUMEM_DEVICE=host julia --project=. scripts/gen_precompile.jl /tmp/trace.jl
#
# Kept: methods owned by CuMem (Julia 1.5 caches their inference in the package's image;
# Base's methods specialised on CuMem's types it does not), named by a stable name (no
# anonymous functions or keyword bodies, whose generated names change with any edit), and
# that evaluate in CuMem now.
using CuMem
trace = ARGS[1]
out = joinpath(@__DIR__, "..", "julia", "compute", "precompile_ops.txt")
keep = String[]
for line in eachline(trace)
    m = match(r"^precompile\((Tuple\{.*\})\)$", line)
    m === nothing && continue
    sig = m[1]
    (occursin("var\"", sig) || occursin("Main.", sig)) && continue
    startswith(sig, "Tuple{typeof(CuMem.") || startswith(sig, "Tuple{Type{CuMem.") || continue
    T = try
        Core.eval(CuMem, Meta.parse(sig))
    catch
        continue
    end
    T isa Type || continue
    occursin("CuMem.__init__)", sig) && continue            # CuMem.jl precompiles it (defined after precompile.jl)
    isempty(Base._methods_by_ftype(T, -1, typemax(UInt))) && continue   # no method (a trace of an abstract call)
    push!(keep, sig)
end
keep = unique(keep)
open(out, "w") do io
    for s in keep
        println(io, s)
    end
end
println(length(keep), " signatures written to ", out)

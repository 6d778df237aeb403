# Inference of the broadcast machinery, cached in the package's precompile file. Every
# process's first broadcast otherwise infers the tracer and code generator (codegen.jl,
# broadcast.jl), whose methods take their arguments unspecialised: about 10 s on a CI
# machine, paid again in each of the test suite's ~40 processes. These signatures are
# the ones that inference reaches from any broadcast, so one statement each covers all
# element types and expressions (measured: the first `x .+ 1` 14.6 s → 1.0 s; the
# commit message has the command).

using Base.Broadcast: Broadcasted

precompile(gpu_broadcast!, (AnyCuArray, Broadcasted))
precompile(bc_eltype, (Broadcasted,))
precompile(trace_fn, (TraceContext, Any, Vector{Any}))
precompile(trace_call, (TraceContext, Any, Vararg{Any}))
# the common first broadcast, whose inference reaches the rest of the path
precompile(Base.Broadcast.materialize, (Broadcasted{CuArrayStyle{2},Nothing,typeof(+),Tuple{CuArray{Float32,2},Int64}},))

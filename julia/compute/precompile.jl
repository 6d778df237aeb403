# Inference of the broadcast machinery, cached in the package's precompile file. Every
# process's first broadcast otherwise infers the compiler and the broadcast path (compiler/,
# broadcast.jl), whose methods take their arguments unspecialised: about 10 s on a CI
# machine, paid again in each of the test suite's ~40 processes. These signatures are
# the ones that inference reaches from any broadcast, so one statement each covers all
# element types and expressions (measured: the first `x .+ 1` 14.6 s → 1.0 s; the
# commit message has the command).

using Base.Broadcast: Broadcasted

precompile(gpu_broadcast!, (AnyCuArray, Broadcasted))
precompile(bc_eltype, (Broadcasted,))
# the common first broadcast, whose inference reaches the rest of the path
precompile(Base.Broadcast.materialize, (Broadcasted{CuArrayStyle{2},Nothing,typeof(+),Tuple{CuArray{Float32,2},Int64}},))

# The common signatures of small operations (issue 26), so that a fresh process's first
# `x .+ y`, `y .= a .* x .+ y`, `sum(x)` or `fill!` on Float32/Float64 vectors and matrices
# runs without inferring them first; with the kernel on disk (the engine's kernel cache)
# that first call then costs the launch path's first run.
for T in (Float32, Float64), N in (1, 2)
    A = CuArray{T,N}
    S = CuArrayStyle{N}
    for op in (+, -, *, /)
        precompile(Base.Broadcast.materialize, (Broadcasted{S,Nothing,typeof(op),Tuple{A,A}},))
        precompile(Base.Broadcast.materialize!, (A, Broadcasted{S,Nothing,typeof(op),Tuple{A,A}}))
    end
    precompile(Base.Broadcast.materialize, (Broadcasted{S,Nothing,typeof(*),Tuple{T,A}},))
    precompile(Base.Broadcast.materialize!,
               (A, Broadcasted{S,Nothing,typeof(+),Tuple{Broadcasted{S,Nothing,typeof(*),Tuple{T,A}},A}}))
    for f in (sum, maximum, minimum)
        precompile(f, (A,))
    end
    precompile(fill!, (A, T))
    precompile(copyto!, (A, A))
end

# The kernel index (kernel_index.jl), which a fresh process's first broadcast or sum of a
# type seen before runs instead of the code generator.
precompile(index_key, (DataType,))
precompile(index_lookup, (String,))
precompile(index_kernel, (String,))
precompile(index_store, (String, String, String))
precompile(index_safe, (DataType,))
precompile(index_first_try!, (DataType,))
precompile(load_kernel, (String, String))

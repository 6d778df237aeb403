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
# the general path of a type's first broadcast (fastpath.jl), compiled once for all types
precompile(copy_general, (Any, Dims, Any, Any, Bool, Bool))
precompile(general_broadcast!, (Any, Any, Bool, Any))
precompile(remember_fast!, (Any, Any, Any))
# the common first broadcast, whose inference reaches the rest of the path
precompile(Base.Broadcast.materialize, (Broadcasted{CuArrayStyle{2},Nothing,typeof(+),Tuple{CuArray{Float32,2},Int64}},))

# The common signatures of small operations, so that a fresh process's first
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

# The typed-IR compiler: a few translations at precompilation, so that its
# methods' inference is cached and a process's first new kernel pays only their native
# compilation (its caches are emptied again: world ages differ in each process).
for (f, Ts) in ((+, (Float32, Float32)), (*, (ComplexF64, ComplexF64)), (div, (Int, Int)), (sin, (Float32,)),
                (x -> x > 0 ? x : zero(x), (Float64,)), (x -> Int8(x), (Int,)), (t -> t[1] + t[2], (Tuple{Int,Int},)),
                (+, (Float16, Float16)), (x -> x > 0 ? x : nothing, (Int32,)))
    try
        df = device_function(f, Ts)
        kernel_source(df; body = "")
    catch err
        @warn "precompiling the kernel compiler failed" f Ts err
    end
end
empty!(DC_CACHE)
TYPE_MEMO[] = IdDict{Any,Any}()
empty!(DC_SITES)
precompile(gpu_broadcast!, (CuArray{Float32,1}, Broadcasted{Nothing,Tuple{Base.OneTo{Int}},typeof(+),Tuple{CuArray{Float32,1},CuArray{Float32,1}}}))

# The kernel index (kernel_index.jl), which a fresh process's first broadcast or sum of a
# type seen before runs instead of the code generator.
precompile(index_key, (DataType,))
precompile(index_lookup, (String,))
precompile(index_store, (String, String, String))
precompile(index_safe, (DataType,))
precompile(index_entry, (Any, Any, Any, Any, Any, Bool))
precompile(index_entry_on, (Int, Any, Any, Any, Any, Any, Bool))
for (ikey, build) in ((fast_index_ikey, fast_slot_build), (copy_index_ikey, copy_eltype_build), (full_index_ikey, full_slot_build),
                      (dims_index_ikey, dims_slot_build), (scan_index_ikey, scan_index_build))
    precompile(ikey, (Any, Any))
    precompile(build, (Any, Any, String, Vector{Any}))
end
precompile(load_kernel, (String, String))

# What every `using CuMem` runs: __init__'s steps (Julia caches no inference of them
# unless asked; CuMem.jl asks for __init__ itself).
for f in (init_library, init_kernel_cache, init_pressure, init_tracking, init_compiled_tables, init_broadcast)
    precompile(f, ())
end
foreach(d -> precompile(rehash_iddict!, (typeof(d),)), (DC_PRIMS, DC_MATH1, DC_MATH2))

# The first operations users run (scripts/precompile_workload.jl on the host device: broadcasts
# of Float32/Float64/Int64/Int32 of one to three operands, reductions with and without dims,
# mapreduce, findall, cumsum, sort, sortperm, copies, show, products, qr, lu, rand, cu,
# CuIterator): the signatures of CuMem's own methods they compiled, one a line in
# precompile_ops.txt (scripts/gen_precompile.jl writes it). Julia caches the inference of
# these in the package's image; a signature that no longer names a method is recorded in
# PRECOMPILE_STALE (test/compute/precompile_tests.jl requires it empty).
const PRECOMPILE_OPS_FILE = joinpath(@__DIR__, "precompile_ops.txt")
include_dependency(PRECOMPILE_OPS_FILE)
const PRECOMPILE_STALE = String[]
for sig in eachline(PRECOMPILE_OPS_FILE)
    isempty(strip(sig)) && continue
    ok = try
        precompile(Core.eval(@__MODULE__, Meta.parse(sig)))
    catch
        false
    end
    ok || push!(PRECOMPILE_STALE, sig)
end

# The user-level entry points of the first operations (`sort(x)`, `cumsum(x)`,
# `maximum(A; dims = 1)`, ...) for the common element types. Each first call otherwise infers
# its whole call tree again in every process (measured on the host device: `sort(x)` 5.2 s of
# inference, `cumsum(x)` 2.2 s); the statements above name only CuMem's inner methods.
# A statement that names no method any more is recorded in PRECOMPILE_STALE, as above.
precompile_entry(f, types::Tuple) = precompile(f, types) || push!(PRECOMPILE_STALE, string(f, types))
let kwd(f) = Core.kwfunc(f), D = NamedTuple{(:dims,),Tuple{Int}}
    for T in (Float32, Float64, Int32, Int64)
        V, M = CuArray{T,1}, CuArray{T,2}
        foreach(f -> precompile_entry(f, (V,)), (sort, sort!, sortperm, cumsum, sum, maximum, minimum, copy))
        for f in (sum, maximum, minimum, cumsum, sort)
            precompile_entry(kwd(f), (D, typeof(f), M))
        end
        if T <: AbstractFloat
            precompile_entry(Statistics.mean, (V,))
            precompile_entry(kwd(Statistics.mean), (D, typeof(Statistics.mean), M))
        end
    end
    precompile_entry(findall, (CuArray{Bool,1},))
end

# What first calls run behind inference barriers, compiled once for all types (their
# arguments arrive as `Any`): the kernel table's miss and build, the kernel index of
# reductions over one dimension and of scans; their inference cached here.
for F in (Tuple{}, Tuple{DeviceFunction}, Tuple{DeviceFunction,DeviceFunction}, Tuple{DeviceFunction,DeviceFunction,DeviceFunction})
    precompile_entry(kernel_entry_miss, (Any, Any, F))
    precompile_entry(kernel_build, (Any, Any, F))
end
precompile_entry(index_dims_slot, (Any, Int, Bool, Any, Any, Any))
precompile_entry(scan_index_entry, (Any, Any))
for names in (Tuple{String}, Tuple{String,String})
    precompile_entry(scan_generate, (Function, Tuple{Symbol,DataType,DataType,DataType,DataType,Int,Bool,ScanTuning}, names, Type))
end

# Runs device operations once each for a profiler: every operation first runs untimed at its
# size (so its kernels are compiled and loaded), then once more between cuProfilerStart and
# cuProfilerStop, so that `ncu --profile-from-start off` (or `nsys --capture-range=cudaProfilerApi`)
# sees only the kernels of that second call. bench/gpu/run.sh's `profile` suite runs it under ncu.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/profile_ops.jl [OP[:N] ...]
#
# OPs: sort_f32 sort_i64 sort_u32 sortperm_f32 cumsum_f32 sum_f32 copy_f32 axpy_f32 (N: elements,
# default 10^8); mlp_eager and mlp_graph: the demo's MLP step (demo/mlp.jl, batch N, default
# 64) eager, or one replay of it captured as a CUDA graph (ncu profiles each kernel node).
# Prints one JSON line per operation: {"op", "n", "profiled": true|false} (false: the driver
# refused cuProfilerStart, e.g. no context on this thread).
using CuMem, Libdl, Random

const LIBCUDA = Ref{Ptr{Cvoid}}(C_NULL)
function profiler(on::Bool)
    LIBCUDA[] == C_NULL && (LIBCUDA[] = Libdl.dlopen("libcuda.so.1"))
    f = Libdl.dlsym(LIBCUDA[], on ? :cuProfilerStart : :cuProfilerStop)
    return ccall(f, Cint, ()) == 0
end

const WANT_MLP = any(a -> startswith(a, "mlp"), ARGS)
WANT_MLP && include(joinpath(@__DIR__, "..", "..", "demo", "mlp.jl"))
function mlp_setup(n; graph::Bool)
    rng = Random.MersenneTwister(1)
    m = MLP(rng)
    x, y = CuArray(rand(rng, Float32, 64, n)), CuArray(onehot(rand(rng, 0:9, n)))
    loss = CuMem.zeros(Float32, 1, 1)
    train_step_loss!(m, x, y, 0.05f0, loss)           # compiled
    return graph ? GraphStep(m, x, y, 0.05f0) : (m, x, y, loss)
end

const OPS = Dict{String,Tuple{Any,Any}}(   # op => (setup(n), run(x))
    "mlp_eager" => (n -> mlp_setup(n; graph = false), s -> train_step_loss!(s[1], s[2], s[3], 0.05f0, s[4])),
    "mlp_graph" => (n -> mlp_setup(n; graph = true), gs -> CuMem.launch(gs.exec)),
    "sort_f32" => (n -> CuMem.rand(Float32, n), x -> sort!(x)),
    "sort_i64" => (n -> CuMem.rand(Int64, n), x -> sort!(x)),
    "sort_u32" => (n -> CuMem.rand(UInt32, n), x -> sort!(x)),
    "sortperm_f32" => (n -> CuMem.rand(Float32, n), x -> CuMem.unsafe_free!(sortperm(x))),
    "cumsum_f32" => (n -> CuMem.rand(Float32, n), x -> CuMem.unsafe_free!(cumsum(x))),
    "sum_f32" => (n -> CuMem.rand(Float32, n), x -> sum(x)),
    "copy_f32" => (n -> CuMem.rand(Float32, n), x -> CuMem.unsafe_free!(copy(x))),
    "axpy_f32" => (n -> (CuMem.rand(Float32, n), CuMem.rand(Float32, n)), xy -> (xy[2] .= 2f0 .* xy[1] .+ xy[2])),
)

for arg in (isempty(ARGS) ? ["sort_f32", "cumsum_f32"] : ARGS)
    name, nstr = occursin(':', arg) ? split(arg, ':') : (arg, startswith(arg, "mlp") ? "64" : "100000000")
    haskey(OPS, name) || error("unknown op $name: one of $(join(sort!(collect(keys(OPS))), ' '))")
    setup, op = OPS[name]
    n = parse(Int, nstr)
    x = setup(n); op(x); CuMem.synchronize()        # compiled, loaded, pools warm
    x = setup(n); CuMem.synchronize()
    ok = profiler(true)
    op(x)
    CuMem.synchronize()
    ok &= profiler(false)
    println("{\"op\": \"$name\", \"n\": $n, \"profiled\": $ok}")
    flush(stdout)
end

# The demo's MLP step (64 -> 128 -> 10, batch 64, SGD; demo/mlp.jl) eager against its
# replay from a CUDA graph (`CuMem.capture`, demo/mlp.jl's GraphStep), on the GPU
# (`bench/gpu/run.sh graphs`, beside bench/anchors/graph_anchor.py: PyTorch eager and
# `torch.cuda.graph` replay of the same step) or the host device. Prints one JSON line per
# figure:
#   {"impl":"cumem","mode":"eager"|"graph"|"graph_chain"|"eager_cublas"|"graph_cublas","us":median µs per
#     step, "steps":n, ...} ("..._cublas": the matrix products on cuBLAS, CuMem.small_gemm!(false))
#     every step timed alone, `synchronize()` before the clock stops; "graph" has edges that
#     follow the data (the default), "graph_chain" is the same step captured as one chain
#     (`edges = false`); both carry the graph's shape (CuMem.graph_info): "nodes",
#     "kernels", "memcpys", "memsets", "others", "edges", "depth" (nodes on the longest
#     dependency chain), "programmatic" (edges of programmatic dependent launch, PDL);
#     "eager_nopdl" and "graph_nopdl" are "eager" and "graph" with PDL off (CuMem.pdl!(false),
#     as CUMEM_PDL=0); every row has "pdl_kernels" of "loaded_kernels": how many of the
#     package's loaded kernels were launched with PDL during it (0 on the host device and
#     below sm_90);
#   {"check":"small_gemm", "max_rel_diff", "within_tolerance"}: the step's products by CuMem's
#     small-gemm kernel against cuBLAS (largest difference / largest |result|, tolerance 1e-5);
#   {"check":"weights", "equal":true|false, "max_abs_diff":...}: a model trained eagerly and one
#     trained by replays (same seed, same batches) end with the same weights; "weights_chain"
#     and "weights_nopdl": the one-chain and the PDL-off graph's model against the graph's;
#   {"check":"memory", "graph_reserved_bytes", "graph_allocated_bytes", "step_peak_bytes",
#     "growth_bytes", "replays"}: the graph pool's memory against the eager step's peak live
#     memory (allocated bytes above those before the step), and the growth of the pool and of
#     reserved memory over `replays` replays (expected 0).
#
#   julia --project=. bench/julia/graph_bench.jl [--steps N] [--replays N]

using CuMem, Random, Printf, LinearAlgebra

include(joinpath(@__DIR__, "..", "..", "demo", "mlp.jl"))

opt(name, default) = (i = findfirst(==(name), ARGS); i === nothing ? default : parse(Int, ARGS[i+1]))
const STEPS = opt("--steps", CuMem.on_host() ? 200 : 2000)
const REPLAYS = opt("--replays", CuMem.on_host() ? 1000 : 10_000)
const BATCH, LR = 64, 0.05f0
const DEVICE = CuMem.device_name()

rng = MersenneTwister(1)
xs = [CuArray(rand(rng, Float32, 64, BATCH)) for _ in 1:8]
ys = [CuArray(onehot(rand(rng, 0:9, BATCH))) for _ in 1:8]

function time_steps(f, n)
    ts = Vector{Float64}(undef, n)
    for i in 1:n
        t0 = time_ns()
        f(i)
        CuMem.synchronize()
        ts[i] = (time_ns() - t0) / 1e3
    end
    return median_of(ts)
end

# (kernels launched with PDL, kernels loaded) among the package's kernels (CuMem.uses_pdl)
function pdl_counts()
    ks = [k for e in values(CuMem.KERNEL_TABLE) for k in e.kernels if k isa CuMem.Kernel]
    return count(CuMem.uses_pdl, ks), length(ks)
end
pdl_fields() = ((n, t) = pdl_counts(); ("pdl_kernels" => n, "loaded_kernels" => t))

json(pairs...) = println("{", join(("\"$k\":" * (v isa AbstractString ? "\"$v\"" : string(v)) for (k, v) in pairs), ","), "}")

# A captured step (a GraphStep) replayed STEPS times with the next batch copied in first, then
# STEPS launches alone (inputs in place, for the target against PyTorch's replay); prints the
# mode's JSON line with the graph's shape and returns both medians (µs per step)
function time_replays(mode, g)
    us = time_steps(STEPS) do i
        copyto!(g.x, xs[mod1(i + 1, 8)])
        copyto!(g.y, ys[mod1(i + 1, 8)])
        CuMem.launch(g.exec)
    end
    us_launch = time_steps(i -> CuMem.launch(g.exec), STEPS)
    json("impl" => "cumem", "mode" => mode, "us" => round(us; digits = 2), "us_launch_only" => round(us_launch; digits = 2),
         "steps" => STEPS, (string(k) => v for (k, v) in pairs(g.info))..., pdl_fields()..., "device" => DEVICE)
    return us, us_launch
end

# eager: the step as the demo runs it without --graph (the loss stays on the device)
m_eager = MLP(MersenneTwister(42))
loss = CuMem.zeros(Float32, 1, 1)
train_step_loss!(m_eager, xs[1], ys[1], LR, loss)      # compile
CuMem.synchronize()
# the eager step's peak live memory
base = memory_stats().allocated_bytes
reset_memory_stats!()
train_step_loss!(m_eager, xs[2], ys[2], LR, loss)
CuMem.synchronize()
step_peak = memory_stats().peak_allocated_bytes - base
us_eager = time_steps(i -> train_step_loss!(m_eager, xs[mod1(i, 8)], ys[mod1(i, 8)], LR, loss), STEPS)
json("impl" => "cumem", "mode" => "eager", "us" => round(us_eager; digits = 2), "steps" => STEPS, pdl_fields()..., "device" => DEVICE)

# graph: one eager step (compiles), then the captured step replayed
m_graph = MLP(MersenneTwister(42))
m_ref = MLP(MersenneTwister(42))
train_step_loss!(m_graph, xs[1], ys[1], LR, loss)
train_step_loss!(m_ref, xs[1], ys[1], LR, loss)
gs = GraphStep(m_graph, xs[2], ys[2], LR)
pool = CuMem.graph_pools()[end]              # the step's pool (the newest)
copyto!(gs.x, xs[2]); copyto!(gs.y, ys[2])
us_graph, us_launch = time_replays("graph", gs)
# the same batches eagerly on the reference model
for i in 1:STEPS
    train_step_loss!(m_ref, xs[mod1(i + 1, 8)], ys[mod1(i + 1, 8)], LR, loss)
end
for i in 1:STEPS                     # the reference catches up with the launch-only replays
    train_step_loss!(m_ref, gs.x, gs.y, LR, loss)
end
diffs = [maximum(abs.(Array(getfield(m_graph, f)) .- Array(getfield(m_ref, f)))) for f in fieldnames(MLP)]
json("check" => "weights", "equal" => all(==(0), diffs), "max_abs_diff" => maximum(diffs), "steps" => 2 * STEPS + 1,
     "device" => DEVICE)

# the same step captured as one chain (the stream's order), on a model of its own
m_chain = MLP(MersenneTwister(42))
train_step_loss!(m_chain, xs[1], ys[1], LR, loss)
gc = GraphStep(m_chain, xs[2], ys[2], LR; edges = false)
us_chain, us_chain_launch = time_replays("graph_chain", gc)
diffs_chain = [maximum(abs.(Array(getfield(m_chain, f)) .- Array(getfield(m_graph, f)))) for f in fieldnames(MLP)]
json("check" => "weights_chain", "equal" => all(==(0), diffs_chain), "max_abs_diff" => maximum(diffs_chain),
     "steps" => 2 * STEPS + 1, "device" => DEVICE)
unsafe_free!(gc.exec)

# programmatic dependent launch off (CuMem.pdl!(false), as CUMEM_PDL=0): the eager step and
# the step captured with edges, on a model of its own, replayed as the graph's
old_pdl = CuMem.pdl!(false)
us_eager_nopdl = time_steps(i -> train_step_loss!(m_eager, xs[mod1(i, 8)], ys[mod1(i, 8)], LR, loss), STEPS)
json("impl" => "cumem", "mode" => "eager_nopdl", "us" => round(us_eager_nopdl; digits = 2), "steps" => STEPS,
     pdl_fields()..., "device" => DEVICE)
m_nopdl = MLP(MersenneTwister(42))
train_step_loss!(m_nopdl, xs[1], ys[1], LR, loss)
gn = GraphStep(m_nopdl, xs[2], ys[2], LR)
us_nopdl, _ = time_replays("graph_nopdl", gn)
diffs_nopdl = [maximum(abs.(Array(getfield(m_nopdl, f)) .- Array(getfield(m_graph, f)))) for f in fieldnames(MLP)]
json("check" => "weights_nopdl", "equal" => all(==(0), diffs_nopdl), "max_abs_diff" => maximum(diffs_nopdl),
     "steps" => 2 * STEPS + 1, "device" => DEVICE)
unsafe_free!(gn.exec)
CuMem.pdl!(old_pdl)

# the step's five products (shapes, transposes, α/β as sgd_step!) by the small-gemm kernel
# against cuBLAS: the largest difference relative to the largest |cuBLAS result|
function product_diffs()
    rngp = MersenneTwister(3)
    d(r...) = CuArray(randn(rngp, Float32, r...))
    W1, W2, x, h, dz2, dz1, C0 = d(128, 64), d(10, 128), d(64, 64), d(128, 64), d(10, 64), d(128, 64), d(10, 64)
    cases = ((C0, W2, h, 1f0, 1f0), (d(128, 64), W1, x, 1f0, 0f0), (d(128, 64), W2', dz2, 1f0, 0f0),
             (d(10, 128), dz2, h', -0.05f0, 1f0), (d(128, 64), dz1, x', -0.05f0, 1f0))
    worst = 0.0
    for (C, A, B, α, β) in cases
        outs = map((true, false)) do on
            old = CuMem.small_gemm!(on)
            c = copy(C)
            mul!(c, A, B, α, β)
            CuMem.small_gemm!(old)
            Array(c)
        end
        worst = max(worst, maximum(abs.(outs[1] .- outs[2])) / maximum(abs.(outs[2])))
    end
    return worst
end
rel = product_diffs()
json("check" => "small_gemm", "max_rel_diff" => rel, "within_tolerance" => rel <= 1e-5, "device" => DEVICE)

# the step's matrix products on cuBLAS instead of CuMem's small-gemm kernel
# (CuMem.small_gemm!(false)), eager and replayed, on a model of its own
old_small = CuMem.small_gemm!(false)
m_cublas = MLP(MersenneTwister(42))
train_step_loss!(m_cublas, xs[1], ys[1], LR, loss)
CuMem.synchronize()
us_eager_cublas = time_steps(i -> train_step_loss!(m_cublas, xs[mod1(i, 8)], ys[mod1(i, 8)], LR, loss), STEPS)
json("impl" => "cumem", "mode" => "eager_cublas", "us" => round(us_eager_cublas; digits = 2), "steps" => STEPS,
     "device" => DEVICE)
gb = GraphStep(m_cublas, xs[2], ys[2], LR)
time_replays("graph_cublas", gb)
unsafe_free!(gb.exec)
CuMem.small_gemm!(old_small)

# the pool: its memory against the eager step's peak, and no growth over REPLAYS replays
p0 = only(filter(p -> p.id == pool.id, CuMem.graph_pools()))
r0 = memory_stats().reserved_bytes
for _ in 1:REPLAYS
    CuMem.launch(gs.exec)
end
CuMem.synchronize()
p1 = only(filter(p -> p.id == pool.id, CuMem.graph_pools()))
growth = (p1.reserved_bytes - p0.reserved_bytes) + (memory_stats().reserved_bytes - r0)
json("check" => "memory", "graph_reserved_bytes" => p1.reserved_bytes, "graph_allocated_bytes" => p1.allocated_bytes,
     "step_peak_bytes" => step_peak, "growth_bytes" => growth, "replays" => REPLAYS, "device" => DEVICE)
@printf(stderr, "eager %.1f µs, graph %.1f µs (launch only %.1f µs; %d nodes, depth %d, %d programmatic edges), one chain %.1f µs (launch only %.1f µs) per step; PDL off: eager %.1f µs, graph %.1f µs; weights equal: %s; graph pool %d bytes, step peak %d bytes, growth %d\n",
        us_eager, us_graph, us_launch, gs.info.nodes, gs.info.depth, gs.info.programmatic, us_chain, us_chain_launch,
        us_eager_nopdl, us_nopdl, all(==(0), diffs) && all(==(0), diffs_nopdl), p1.reserved_bytes, step_peak, growth)

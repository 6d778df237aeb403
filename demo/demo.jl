# CuMem demo (`make demo`): trains a small neural network on real data with every
# operation on CuArrays, then shows what the memory manager did.
#
#   julia --project=. demo/demo.jl [--epochs N] [--batch B] [--lr η] [--graph] [--timeline FILE]...
#
# Data: the UCI optical-recognition handwritten digits (1797 8×8 images, 10 classes) as
# shipped in scikit-learn (data/digits.csv.gz; source and licence in data/README.md),
# split with a fixed seed into 1437 training and 360 held-out images.
# Model: 64 -> 128 (ReLU) -> 10, softmax cross-entropy, plain SGD, hand-written backward
# pass (demo/mlp.jl). Batches come through CuIterator (uploaded, freed after each step);
# matrix products go through `*` (cuBLAS), elementwise work through broadcasting,
# reductions through `sum`/`maximum`.
#
# With `--graph` every full batch after the first is trained by replaying one step
# captured as a CUDA graph (`CuMem.capture`; demo/mlp.jl's GraphStep): the same kernels,
# so the same weights and accuracy; the first step and a smaller last batch run eagerly.
# The last lines print a checksum of the final weights to compare the two modes.
#
# The last epoch runs under `profile_memory`, whose report is printed. With `--timeline
# FILE` (repeatable) the allocation history of the whole training run is recorded and
# drawn into each FILE (`save_memory_timeline`: .svg, .html, .json or .trace.json);
# docs/julia.md shows one.
#
# Exits with status 1 if the held-out accuracy ends below 95 %.
# The pool and device come from the environment, read when CuMem loads:
#   JULIA_CUDA_MEMORY_POOL=binned|split|expandable|simple|none   CUMEM_DEVICE=auto|cuda|host

using CuMem, Printf, Random

include(joinpath(@__DIR__, "mlp.jl"))

function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : parse(typeof(default), ARGS[i+1])
end

const EPOCHS = option("--epochs", 20)
const BATCH = option("--batch", 32)
const LR = option("--lr", 0.1f0)
const TARGET = 0.95
const TIMELINES = [ARGS[i+1] for i in findall(==("--timeline"), ARGS)]
const GRAPH = "--graph" in ARGS

CuMem.allowscalar(false)      # nothing below may read a CuArray element by element

println("CuMem demo: an MLP on the UCI handwritten digits; pool ", CuMem.pool_name(),
        " on ", CuMem.device_name(), " (Julia ", VERSION, ")")

X, labels = load_digits()
Xtrain, Ytrain, Xtest, Ytest = split_data(X, labels; held_out = 0.2, seed = 0)
@printf("data: %d training and %d held-out images of %d pixels; batch %d, lr %.3g, %d epochs\n",
        size(Xtrain, 2), size(Xtest, 2), size(X, 1), BATCH, LR, EPOCHS)

rng = MersenneTwister(42)
model = MLP(rng)
xtest, ytest = CuArray(Xtest), CuArray(Ytest)
@printf("epoch %2d                      held-out accuracy %5.1f %%\n", 0, 100 * accuracy(model, xtest, ytest))

# With --graph: the captured step (made at the second full batch, after an eager one).
const GSTEP = Ref{Any}(nothing)
const EAGER_FULL_STEPS = Ref(0)
function step!(model, x, y)
    (!GRAPH || size(x, 2) != BATCH) && return train_step!(model, x, y, LR)
    if GSTEP[] === nothing
        EAGER_FULL_STEPS[] += 1
        EAGER_FULL_STEPS[] == 1 && return train_step!(model, x, y, LR)   # compiles every kernel
        GSTEP[] = GraphStep(model, x, y, LR)
    end
    return graph_step!(GSTEP[], x, y)
end

# One pass over the training set; returns the losses of its steps.
function train_epoch!(model, rng, step_times)
    losses = Float32[]
    for (x, y) in CuIterator(batches(rng, Xtrain, Ytrain, BATCH))
        t = @elapsed push!(losses, step!(model, x, y))   # the loss download synchronizes
        push!(step_times, t)
    end
    return losses
end

reset_memory_stats!()
isempty(TIMELINES) || record_memory_history(true; max_entries = 1_000_000)
step_times = Float64[]
acc = 0.0
profile = nothing
t_train = @elapsed for epoch in 1:EPOCHS
    global acc, profile
    if epoch == EPOCHS
        # the last epoch (compiled, cache warm) under the memory profiler
        profile = profile_memory(() -> train_epoch!(model, rng, step_times))
        losses = profile.value
    else
        losses = train_epoch!(model, rng, step_times)
    end
    acc = accuracy(model, xtest, ytest)
    @printf("epoch %2d  loss %.4f  %6.3f ms/step  held-out accuracy %5.1f %%\n", epoch,
            mean_of(losses), 1e3 * median_of(step_times[end-length(losses)+1:end]), 100 * acc)
end
nsteps = length(step_times)
@printf("trained %d steps in %.2f s: median %.3f ms per step (first epoch %.1f ms/step, compiling)\n",
        nsteps, t_train, 1e3 * median_of(step_times), 1e3 * mean_of(step_times[1:cld(nsteps, EPOCHS)]))
println()

println("memory profile of the last epoch (profile_memory):")
show(stdout, MIME"text/plain"(), profile)
println("\n")
if !isempty(TIMELINES)
    record_memory_history(false)
    for f in TIMELINES
        save_memory_timeline(f)
        println("memory timeline of the training run (", length(memory_events()), " events): ", f)
    end
    println()
end

println("memory_status():")
memory_status()
println()
st = memory_stats()
@printf("allocations %d, cache hit rate %.1f %%, device allocations %d, peak allocated %s\n",
        st.num_allocations, 100 * st.cache_hit_rate, st.num_device_allocations,
        Base.format_bytes(st.peak_allocated_bytes))
memory_summary()
weights = [Array(getfield(model, f)) for f in fieldnames(MLP)]
@printf("final weights (%s): checksum %.9e\n", GRAPH ? "graph replay" : "eager",
        sum(sum(abs.(Float64.(vec(w))) .* (1:length(w))) for w in weights))

if acc >= TARGET
    @printf("\nOK: held-out accuracy %.1f %% (target ≥ %.0f %%)\n", 100 * acc, 100 * TARGET)
else
    @printf("\nFAILED: held-out accuracy %.1f %% is below the target of %.0f %%\n", 100 * acc, 100 * TARGET)
    exit(1)
end

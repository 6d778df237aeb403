# A multilayer perceptron written directly on CuArrays: the model, its hand-written
# backward pass, and the digits data set (data/digits.csv.gz). Included by demo/demo.jl
# (`make demo`) and bench/julia/compute_bench.jl (the training-step benchmark).
#
# Model: 64 -> 128 (ReLU) -> 10, softmax cross-entropy, plain SGD. Columns are examples
# (Julia is column-major): x is 64×B, y the one-hot labels 10×B.

using CuMem, LinearAlgebra, Random

const DIGITS_CSV = joinpath(@__DIR__, "..", "data", "digits.csv.gz")

"""
    load_digits(path) -> (X::Matrix{Float32}, labels::Vector{Int})

The UCI optical-recognition digits as shipped in scikit-learn: 1797 rows of 64 pixel
counts (0..16) and a label (0..9). `X` is 64×1797, scaled to [0, 1].
"""
function load_digits(path::AbstractString = DIGITS_CSV)
    isfile(path) || error("$path is missing (see data/README.md)")
    text = try
        read(pipeline(`gzip -dc $path`), String)
    catch e
        error("cannot decompress $path with `gzip -dc` (is gzip installed?): $e")
    end
    rows = [parse.(Int, split(l, ',')) for l in split(strip(text), '\n')]
    all(r -> length(r) == 65, rows) || error("$path: expected 65 comma-separated integers per line")
    X = Float32[r[i] for i in 1:64, r in rows] ./ 16f0
    labels = [r[65] for r in rows]
    return X, labels
end

# (Statistics is not among the package's test dependencies: these two suffice here)
mean_of(v) = sum(v) / length(v)
median_of(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

onehot(labels::AbstractVector{Int}) = Float32[l == c for c in 0:9, l in labels]

"""
    split_data(X, labels; held_out = 0.2, seed = 0)

A fixed-seed shuffle into training and held-out sets: `(Xtrain, ytrain, Xtest, ytest)`
with one-hot `y`.
"""
function split_data(X, labels; held_out = 0.2, seed = 0)
    n = size(X, 2)
    perm = randperm(MersenneTwister(seed), n)
    ntest = round(Int, held_out * n)
    test, train = perm[1:ntest], perm[ntest+1:end]
    return X[:, train], onehot(labels[train]), X[:, test], onehot(labels[test])
end

mutable struct MLP
    W1::CuMatrix{Float32}   # 128×64
    b1::CuMatrix{Float32}   # 128×1
    W2::CuMatrix{Float32}   # 10×128
    b2::CuMatrix{Float32}   # 10×1
end

"""
    MLP(rng; nin = 64, nhidden = 128, nout = 10)

He-initialised weights (drawn on the host with `rng`, uploaded), zero biases.
"""
function MLP(rng::AbstractRNG; nin = 64, nhidden = 128, nout = 10)
    W1 = randn(rng, Float32, nhidden, nin) .* Float32(sqrt(2 / nin))
    W2 = randn(rng, Float32, nout, nhidden) .* Float32(sqrt(1 / nhidden))
    return MLP(CuArray(W1), CuMem.zeros(Float32, nhidden, 1), CuArray(W2), CuMem.zeros(Float32, nout, 1))
end

# The logits, 10×B, and the hidden activation (128×B) for the backward pass. Bias and
# ReLU are one broadcast (ReLU's mask is `h > 0`, the same as `z1 > 0`); the second
# layer's bias is copied into the logits first and the product added to it by `mul!`
# (`mul!(z2, W2, h, 1, 1)`), so the copy does not wait for the first layer.
function forward(m::MLP, x)
    a1 = m.W1 * x
    h = max.(a1 .+ m.b1, 0f0)
    z2 = similar(h, size(m.W2, 1), size(x, 2))
    z2 .= m.b2
    mul!(z2, m.W2, h, true, true)
    unsafe_free!(a1)
    return h, z2
end

"""
    train_step!(m, x, y, lr) -> loss

One SGD step on the batch (x 64×B, y one-hot 10×B): forward, mean softmax
cross-entropy, hand-written backward pass, `W .-= lr .* dW`. Every intermediate is freed
with `unsafe_free!` as soon as it is dead, so the pool serves the next step from its
cache. Returns the batch's mean loss (a host Float32: one device-to-host copy).
"""
function train_step!(m::MLP, x, y, lr::Float32)
    terms = sgd_step!(m, x, y, lr)
    loss = sum(terms) / Float32(size(x, 2))
    unsafe_free!(terms)
    return loss
end

"""
    train_step_loss!(m, x, y, lr, loss) -> loss

[`train_step!`](@ref) with the batch's mean loss written into the 1×1 device array `loss`
instead of read back: the same kernels update the weights, and nothing waits for the
device, so the step can be captured as a CUDA graph ([`GraphStep`](@ref)).
"""
function train_step_loss!(m::MLP, x, y, lr::Float32, loss)
    sgd_step!(m, x, y, lr, loss)
    return loss
end

# The step's device work: forward, loss terms, backward, SGD update. Returns the loss
# terms (10×B), or with `loss` (a 1×1 array) writes their mean there first (one reduction
# and one broadcast, queued before the backward pass so that in a captured graph they run
# beside it) and returns nothing. The weight updates are matrix products added into the
# weights (`mul!(W, dz, a', -lr, 1)`: `W .-= lr .* (dz * a')` without the gradient
# array), so the step is 17 kernels (19 with the loss).
function sgd_step!(m::MLP, x, y, lr::Float32, loss = nothing)
    B = Float32(size(x, 2))
    h, z2 = forward(m, x)
    # softmax cross-entropy, stable: loss = logsumexp(z) - z[label]
    zmax = maximum(z2; dims = 1)
    e = exp.(z2 .- zmax)
    s = sum(e; dims = 1)
    terms = y .* (log.(s) .+ zmax .- z2)
    t = nothing
    if loss !== nothing
        t = sum(terms; dims = (1, 2))
        loss .= t ./ B
    end
    # backward: dz2 = (softmax(z2) - y) / B
    dz2 = (e ./ s .- y) ./ B
    db2 = sum(dz2; dims = 2)
    dh = m.W2' * dz2                     # before W2 changes
    mul!(m.W2, dz2, h', -lr, true)       # W2 .-= lr .* (dz2 * h')
    dz1 = ifelse.(h .> 0f0, dh, 0f0)
    db1 = sum(dz1; dims = 2)
    mul!(m.W1, dz1, x', -lr, true)       # W1 .-= lr .* (dz1 * x')
    m.b1 .-= lr .* db1
    m.b2 .-= lr .* db2
    foreach(unsafe_free!, (h, z2, zmax, e, s, dz2, db2, dh, dz1, db1))
    # (the loss's arrays freed last: memory freed in a capture goes to the next allocation,
    # which would then wait for the loss kernels)
    loss === nothing && return terms
    foreach(unsafe_free!, (terms, t))
    return nothing
end

"""
    GraphStep(m, x, y, lr; edges = true)

The SGD step of `m` on batches of the shape of `x` (64×B) and `y` (10×B), captured once
as a CUDA graph (`CuMem.capture`) over input arrays of its own: [`graph_step!`](@ref)
copies a batch in and replays the whole step with one launch. Its temporaries live in the
graph's private pool. Run one eager [`train_step!`](@ref) first (kernels compiled).
`edges = false` captures the step as one chain of kernels (the stream's order) instead of
edges that follow the data; `gs.info` is the graph's `CuMem.graph_info`.
"""
mutable struct GraphStep
    x::CuMatrix{Float32}
    y::CuMatrix{Float32}
    loss::CuMatrix{Float32}
    exec::CuMem.CuGraphExec
    info::NamedTuple                 # CuMem.graph_info of the captured graph
end

function GraphStep(m::MLP, x, y, lr::Float32; edges::Bool = true)
    xb, yb, loss = copy(x), copy(y), CuMem.zeros(Float32, 1, 1)
    g = CuMem.capture(() -> train_step_loss!(m, xb, yb, lr, loss); edges = edges)
    exec = CuMem.instantiate(g)
    info = CuMem.graph_info(g)
    unsafe_free!(g)                  # the executable keeps the graph's pool
    return GraphStep(xb, yb, loss, exec, info)
end

"""
    graph_step!(gs::GraphStep, x, y) -> loss

Copies the batch into `gs`'s inputs, replays the captured step and returns the batch's
mean loss (one read-back, which waits for the step).
"""
function graph_step!(gs::GraphStep, x, y)
    copyto!(gs.x, x)
    copyto!(gs.y, y)
    CuMem.launch(gs.exec)
    return Array(gs.loss)[1]
end

"""
    accuracy(m, x, y) -> Float64

The fraction of columns whose largest logit is the labelled class (computed on the
device; one scalar comes back).
"""
function accuracy(m::MLP, x, y)
    h, z2 = forward(m, x)
    zmax = maximum(z2; dims = 1)
    hits = y .* (z2 .== zmax)
    correct = sum(hits)
    foreach(unsafe_free!, (h, z2, zmax, hits))
    return correct / size(x, 2)
end

"""
    batches(rng, X, Y, batchsize) -> Vector{Tuple{Matrix,Matrix}}

The training set in a fresh random order, cut into host batches (the last one may be
smaller), ready for `CuIterator`.
"""
function batches(rng::AbstractRNG, X, Y, batchsize::Int)
    perm = randperm(rng, size(X, 2))
    return [(X[:, perm[i:min(i + batchsize - 1, end)]], Y[:, perm[i:min(i + batchsize - 1, end)]])
            for i in 1:batchsize:length(perm)]
end

# Edges of a captured graph from the data its operations read and write. A stream
# capture chains every operation after the previous one; a training step's gradient
# products, bias sums and weight updates do not depend on one another, and chained they
# make a replay as long as the sum of its kernels. Here each operation CuMem knows the
# memory of (broadcasts, reductions with `dims`, matrix products) is queued with, as its
# dependencies, only the operations that wrote what it reads or touched what it writes
# (`cuStreamUpdateCaptureDependencies` before it, `cuStreamGetCaptureInfo` after it for
# its last nodes); every other operation (`@cuda` kernels, copies, fills, library calls)
# keeps the stream's order with all that came before and after it (a barrier). The host
# device records the same edges and replays the operations in another order they allow.

# A byte range [lo, hi) of device memory an operation uses besides its arrays.
struct MemRange
    lo::UInt64
    hi::UInt64
end

# cuBLAS's default workspace is one buffer per handle: products share it, so they
# keep their order among themselves (a range no array has).
const CUBLAS_WORKSPACE = MemRange(typemax(UInt64) - UInt64(1), typemax(UInt64))

# The byte ranges of device memory that `x` (an operand: a CuArray, a wrapper of one, a
# lazy broadcast, a Ref or tuple of those, a number or a singleton) refers to, appended to
# `v`; false when `x` may refer to memory that cannot be seen from here (a closure's or
# struct's fields): the operation is then a barrier.
access_ranges!(v, x::CuArray) = (x.freed || sizeof(x) == 0 || push!(v, (x.ptr, x.ptr + UInt64(sizeof(x)))); true)
access_ranges!(v, x::Union{SubArray,Base.ReshapedArray,LinearAlgebra.Adjoint,LinearAlgebra.Transpose,PermutedDimsArray}) =
    access_ranges!(v, parent(x))
access_ranges!(v, x::MemRange) = (push!(v, (x.lo, x.hi)); true)
access_ranges!(v, x::Base.RefValue) = access_ranges!(v, x[])
access_ranges!(v, x::Tuple) = all(a -> access_ranges!(v, a), x)
access_ranges!(v, x::Broadcast.Broadcasted) = access_ranges!(v, x.f) && access_ranges!(v, x.args)
access_ranges!(v, ::Union{Number,Symbol,Nothing,Type,AbstractRange,CartesianIndices}) = true
access_ranges!(v, x) = sizeof(typeof(x)) == 0 && isbitstype(typeof(x))   # functions without fields, Val(2)

overlaps(a::Vector{NTuple{2,UInt64}}, b::Vector{NTuple{2,UInt64}}) =
    any(r -> any(q -> r[1] < q[2] && q[1] < r[2], b), a)

# The operations a new one that reads `reads` and writes `writes` must follow: those that
# wrote what it reads or writes, and those that read what it writes.
# Those another of them follows already are left out (an edge to them would add nothing).
function dependencies(st::CaptureState, reads, writes)
    deps = CapturedOp[]
    for r in st.recs
        (overlaps(r.writes, reads) || overlaps(r.writes, writes) || overlaps(r.reads, writes)) && push!(deps, r)
    end
    return filter(d -> !any(o -> d.id in o.anc, deps), deps)
end

# The operations one with dependencies `deps` follows.
ancestors(deps) = (a = BitSet(); for d in deps; push!(a, d.id); union!(a, d.anc); end; a)

tails(ops) = sort!(unique!(UInt64[n for o in ops for n in o.tail]))

# GPU: the nodes the next operation will follow now (the driver's answer).
function capture_tail(st::CaptureState)
    n = Ref{UInt64}(0)
    buf = Vector{UInt64}(undef, 8)
    while true
        check(c_capture_dependencies(st.stream.handle, buf, n))
        n[] <= length(buf) && break
        buf = Vector{UInt64}(undef, n[])
    end
    return sort!(buf[1:n[]])
end

# Work queued since the last operation of known access (host closures outside an
# operation; GPU nodes the stream gained) becomes a barrier: every operation before it is
# its dependency (the stream ordered it after them) and every later one follows it.
function close_unknown!(st::CaptureState)
    if on_host()
        length(st.ops) > st.seen || return nothing
        st.nops += 1
        push!(st.groups, (st.seen+1:length(st.ops), Int[o.id for o in st.leaves]))
        st.seen = length(st.ops)
        tail = UInt64[st.nops]
    else
        tail = capture_tail(st)
        tail == st.frontier && return nothing
        st.nops += 1
    end
    b = CapturedOp(st.nops, NTuple{2,UInt64}[], [(UInt64(0), typemax(UInt64))], tail, ancestors(st.leaves))
    empty!(st.recs); push!(st.recs, b)
    empty!(st.leaves); push!(st.leaves, b)
    st.frontier = tail
    return nothing
end

# At the end of a capture: host closures after the last operation form a barrier, and the
# host's replay order is fixed (`st.ops` rearranged in place).
function finish_edges!(st::CaptureState)
    on_host() || return nothing
    close_unknown!(st)
    order = host_order(st.groups)
    ops = Any[]
    for g in order
        append!(ops, st.ops[st.groups[g][1]])
    end
    length(ops) == length(st.ops) || error("internal: host replay order lost operations")
    copyto!(st.ops, ops)
    return nothing
end

# A topological order of the host's operations that, among those ready, runs the latest
# captured first: a replay of the host device then differs from the capture's order
# wherever the edges allow, so a missing edge shows as a wrong result in CI.
function host_order(groups)
    n = length(groups)
    indeg = Base.zeros(Int, n)
    outs = [Int[] for _ in 1:n]
    for (i, g) in enumerate(groups), d in unique(g[2])
        push!(outs[d], i)
        indeg[i] += 1
    end
    ready = [i for i in 1:n if indeg[i] == 0]
    order = Int[]
    while !isempty(ready)
        i = pop!(sort!(ready))
        push!(order, i)
        for j in outs[i]
            indeg[j] -= 1
            indeg[j] == 0 && push!(ready, j)
        end
    end
    return order
end

# The host device's graph shape from its operations: closures count as nodes (an
# operation's closures run one after another), edges between operations, longest chain.
function host_graph_info(groups)
    n = length(groups)
    isempty(groups) && return (nodes = 0, edges = 0, depth = 0)
    depth = Base.zeros(Int, n)
    edges = 0
    for (i, g) in enumerate(groups)      # groups are in capture order, so deps come first
        ds = unique(g[2])
        edges += length(ds)
        depth[i] = length(g[1]) + (isempty(ds) ? 0 : maximum(depth[d] for d in ds))
    end
    return (nodes = sum(length(g[1]) for g in groups), edges = edges, depth = maximum(depth))
end

"""
    CuMem.captured_op(f, reads, writes)

Runs `f()`, which queues one operation that reads the device memory of `reads` and
writes that of `writes` (operands as a broadcast takes them: CuArrays, wrappers of them,
lazy broadcasts, `Ref`s and tuples of those, numbers), and nothing else. Outside a
capture it only calls `f`. Inside [`CuMem.capture`](@ref) the operation's graph nodes
depend only on the earlier operations that wrote what it reads or touched what it writes
(`cuStreamUpdateCaptureDependencies`), so independent operations of the capture run side
by side when the graph is replayed; memory allocated while `f` runs counts as written.
Operands whose memory cannot be seen (closures or structs with fields) make it a barrier,
ordered after and before everything, as is all work queued outside `captured_op`.
Returns `f()`'s value.
"""
function captured_op(f, reads, writes)
    CAPTURES[] == 0 && return f()
    st = capture_state()
    (st === nothing || st.open != 0) && return f()    # inside an operation, or edges off
    r, w = NTuple{2,UInt64}[], NTuple{2,UInt64}[]
    (access_ranges!(r, reads) && access_ranges!(w, writes)) || return f()
    length(st.recs) > 512 && return f()     # a barrier (the next operation closes it)
    close_unknown!(st)
    deps = dependencies(st, r, w)
    on_host() || check(c_capture_set_dependencies(st.stream.handle, tails(deps)))
    st.open += 1
    empty!(st.writes)
    first = length(st.ops) + 1
    v = try
        f()
    finally
        st.open -= 1
    end
    append!(w, st.writes)
    empty!(st.writes)
    st.nops += 1
    if on_host()
        push!(st.groups, (first:length(st.ops), Int[d.id for d in deps]))
        st.seen = length(st.ops)
        tail = UInt64[st.nops]
    else
        tail = capture_tail(st)
    end
    op = CapturedOp(st.nops, r, w, tail, ancestors(deps))
    push!(st.recs, op)
    filter!(l -> !any(d -> d === l, deps), st.leaves)
    push!(st.leaves, op)
    st.frontier = tails(st.leaves)
    on_host() || check(c_capture_set_dependencies(st.stream.handle, st.frontier))
    return v
end

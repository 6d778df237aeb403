# CUDA graphs (CUDA.jl's `capture`/`instantiate`/`launch`/`update!`/`@captured`) with
# graph-private memory pools (PyTorch's `torch.cuda.graph` and `graph_pool_handle`).
# The engine keeps the pools (src/engine/graphs.rs): allocations made during a capture
# come from the capture's pool and never go to other code while the pool lives. On the
# host device, host compute runs in Julia, so the operations are recorded here
# (`host_run`, state.jl) and a launch runs them in order.

"""
    CuMem.GraphPool

A graph-private memory pool (PyTorch's `graph_pool_handle()`), made by
[`CuMem.graph_pool`](@ref): pass it to [`CuMem.capture`](@ref) (`pool = p`) so several
graphs share one pool. The pool lives while this handle, a capture into it, or a graph or
executable of it does; its memory then returns to the device pool. `unsafe_free!(p)`
gives the handle's reference back at once (the finalizer does it otherwise).
"""
mutable struct GraphPool
    id::UInt64
    function GraphPool(id::UInt64)
        p = new(id)
        finalizer(p -> p.id == 0 || (c_graph_pool_release(p.id); p.id = 0), p)
        return p
    end
end

Base.show(io::IO, p::GraphPool) = print(io, "CuMem.GraphPool(", p.id == 0 ? "released" : p.id, ")")

"""
    CuMem.graph_pool() -> GraphPool

A new graph-private memory pool of the task's device, for captures that should share
memory (PyTorch's `torch.cuda.graph_pool_handle()`): blocks freed by one graph's capture
are reused by the next capture into the same pool. Graphs sharing a pool must not be
replayed concurrently (on different streams), as in PyTorch.
"""
function graph_pool()
    out = Ref{UInt64}(0)
    check(c_graph_pool_create(out))
    return GraphPool(out[])
end

"""
    CuMem.CuGraph

A captured graph ([`CuMem.capture`](@ref)): the device's graph (on the host device, the
recorded operations) and its memory pool (`pool`, the id shown by
[`CuMem.graph_pools`](@ref)). Instantiate it to run it. Freed by its finalizer or
`unsafe_free!`; executables made from it stay valid.
"""
mutable struct CuGraph
    handle::UInt64
    pool::UInt64
    ops::Vector{Any}
    host_shape::NamedTuple{(:nodes, :edges, :depth),NTuple{3,Int}}   # the host device's graph_info
    function CuGraph(handle::UInt64, pool::UInt64, ops::Vector{Any}, shape = (nodes = 0, edges = 0, depth = 0))
        g = new(handle, pool, ops, shape)
        finalizer(g -> g.handle == 0 || (c_graph_destroy(g.handle); g.handle = 0), g)
        return g
    end
end

"""
    CuMem.CuGraphExec

An executable graph ([`CuMem.instantiate`](@ref)); [`CuMem.launch`](@ref) replays it. It
keeps its graph's memory pool alive. Freed by its finalizer or `unsafe_free!`.
"""
mutable struct CuGraphExec
    handle::UInt64
    pool::UInt64
    ops::Vector{Any}
    function CuGraphExec(handle::UInt64, pool::UInt64, ops::Vector{Any})
        e = new(handle, pool, ops)
        finalizer(e -> e.handle == 0 || (c_graph_exec_destroy(e.handle); e.handle = 0), e)
        return e
    end
end

Base.show(io::IO, g::CuGraph) =
    print(io, "CuMem.CuGraph(", g.handle == 0 ? "freed" : "pool $(g.pool)", on_host() ? ", $(length(g.ops)) host operations" : "", ")")
Base.show(io::IO, e::CuGraphExec) = print(io, "CuMem.CuGraphExec(", e.handle == 0 ? "freed" : "pool $(e.pool)", ")")

live_graph(g::Union{CuGraph,CuGraphExec}) =
    (g.handle == 0 && throw(ArgumentError("this $(nameof(typeof(g))) was freed (unsafe_free! or its finalizer)")); g.handle)

"""
    CuMem.capture(f; pool = nothing, stream = nothing, edges = true) -> CuGraph

Runs `f()` under stream capture and returns the graph of what it queued, as CUDA.jl's
`capture`: every kernel, broadcast, reduction with `dims`, matrix product, cuSOLVER call,
`fill!`, device-to-device copy and `@cuda` kernel that `f` queues is recorded, not run.
The work runs when the instantiated graph is launched ([`CuMem.instantiate`](@ref),
[`CuMem.launch`](@ref)).

Memory allocated inside `f` comes from a graph-private pool (PyTorch's model): a block
freed inside `f` is reused later in the same capture, and none is given to other code
while the graph or an executable of it lives, so the addresses the graph was recorded
with stay valid for every replay. Arrays that `f` returns live in that pool; arrays made
before the capture must be kept alive by the caller while the graph is replayed.
`pool`: a [`GraphPool`](@ref) to share with other graphs (default: a pool of the graph's
own).

`stream`: the stream to capture (default: a new private stream, made current while `f`
runs). Run `f` once outside the capture first (as PyTorch asks), so kernels are compiled
and libraries initialised.

`edges`: with `true` (the default) the graph's edges follow the data: a broadcast, a
reduction with `dims` or a matrix product depends only on the earlier operations that
wrote what it reads or touched what it writes ([`CuMem.captured_op`](@ref)), so
independent ones (a step's gradient products, bias sums and weight updates) run side by
side at each replay; everything else (`@cuda` kernels, copies, fills, library calls)
keeps the stream's order with all before and after it. With `false` the graph is the
stream's order, one chain. [`CuMem.graph_info`](@ref) shows the result.

Throws [`CuMem.CaptureError`](@ref), with nothing recorded, for a synchronization, a scalar
read-back, a copy to or from pageable host memory, a `CuIterator` upload or a nested
capture inside `f`, for work queued on the capturing stream by another task, and
`ArgumentError` for the default stream. An exception in `f` ends the capture and is
rethrown. On the host device the operations are recorded in Julia and replayed in order.
"""
function capture(f; pool::Union{Nothing,GraphPool} = nothing, stream::Union{Nothing,CuStream} = nothing,
                 edges::Bool = true)
    capture_state() === nothing || throw(CaptureError("captures cannot be nested"))
    s = stream === nothing ? CuStream() : stream
    s === DEFAULT_STREAM && throw(ArgumentError("the default stream cannot be captured; capture on a stream of your own"))
    s.capturer === nothing || throw(CaptureError("$s is already being captured by another task"))
    check_stream_device(s)
    pid = pool === nothing ? UInt64(0) : (pool.id == 0 ? throw(ArgumentError("$pool was released")) : pool.id)
    out = Ref{UInt64}(0)
    check(c_stream_begin_capture(live_handle(s), pid, out))
    st = CaptureState(s, out[], Any[])
    edges || (st.open = -1)                  # captured_op passes everything through
    s.capturer = current_task()
    task_local_storage(:CuMemCapture, st)
    Threads.atomic_add!(CAPTURES, 1)
    failure = nothing
    try
        stream!(f, s)
        finish_edges!(st)                    # the host device's replay order
    catch err
        failure = err
    finally
        Threads.atomic_sub!(CAPTURES, 1)
        delete!(task_local_storage(), :CuMemCapture)
        s.capturer = nothing
    end
    g = Ref{UInt64}(0)
    code = c_stream_end_capture(s.handle, g)
    if failure !== nothing
        code == CUMEM_SUCCESS && c_graph_destroy(g[])
        throw(failure)
    end
    check(code)
    return CuGraph(g[], st.pool, st.ops, on_host() ? host_graph_info(st.groups) : (nodes = 0, edges = 0, depth = 0))
end

"""
    CuMem.instantiate(g::CuGraph) -> CuGraphExec

An executable of `g` (`cuGraphInstantiate`), as CUDA.jl's `instantiate`. It holds `g`'s
memory pool. Throws `ArgumentError` for a freed graph, `CuMemError` when the driver
refuses.
"""
function instantiate(g::CuGraph)
    out = Ref{UInt64}(0)
    check(c_graph_instantiate(live_graph(g), out))
    return CuGraphExec(out[], g.pool, g.ops)
end

"""
    CuMem.launch(exec::CuGraphExec, s::CuStream = stream())

Replays `exec` on `s` (`cuGraphLaunch`) and returns without waiting, as CUDA.jl's
`launch(exec)`: one launch for the whole graph. On the host device the recorded operations
run now, in order. Throws `CaptureError` inside a capture of `s`, `ArgumentError` for a
freed executable.
"""
function launch(e::CuGraphExec, s::CuStream = stream())
    h = live_graph(e)
    if on_host()
        st = capture_state()
        st === nothing || st.stream !== s || throw(CaptureError("a graph cannot be launched on the stream being captured"))
        check(c_graph_launch_async(h, live_handle(s)))
        s.handle == 0 || synchronize(s)          # ordered after the stream's queued work
        for op in e.ops
            op()
        end
        return nothing
    end
    check(c_graph_launch_async(h, live_handle(s)))
    return nothing
end

"""
    CuMem.update!(exec::CuGraphExec, g::CuGraph) -> exec

Makes `exec` run `g`'s kernels with `g`'s parameters (`cuGraphExecUpdate`), as CUDA.jl's
`update!`; `g` must have the topology of `exec`'s graph and its memory pool (capture it
with `pool = ` a [`GraphPool`](@ref) shared with the first capture). Throws `CuMemError`
(`CUMEM_ERROR_INVALID_VALUE`) for another topology or pool, leaving `exec` as it was. On
the host device the topology is the number of recorded operations.
"""
function update!(e::CuGraphExec, g::CuGraph)
    h, gh = live_graph(e), live_graph(g)
    if on_host() && length(e.ops) != length(g.ops)
        throw(CuMemError(CUMEM_ERROR_INVALID_VALUE,
                         "the graph cannot update the executable: its topology differs ($(length(g.ops)) operations, " *
                         "the executable has $(length(e.ops)))"))
    end
    check(c_graph_exec_update(h, gh))
    e.ops = g.ops
    return e
end

"""
    unsafe_free!(g::CuGraph)
    unsafe_free!(e::CuGraphExec)
    unsafe_free!(p::GraphPool)

Frees a graph, an executable, or a pool handle's reference now instead of at garbage
collection. When the last of a pool's handle, graphs and executables is gone, its memory
returns to the device pool. A second call does nothing.
"""
function unsafe_free!(g::Union{CuGraph,CuGraphExec})
    g.handle == 0 && return nothing
    h = g.handle
    g.handle = 0
    check(g isa CuGraph ? c_graph_destroy(h) : c_graph_exec_destroy(h))
    return nothing
end
function unsafe_free!(p::GraphPool)
    p.id == 0 && return nothing
    id = p.id
    p.id = 0
    check(c_graph_pool_release(id))
    return nothing
end

"""
    CuMem.@captured expr

Evaluates `expr` as a graph: the first time this line runs, `expr` is captured
([`CuMem.capture`](@ref)) and instantiated; every time (the first included) the
executable is launched on the task's stream. For a training step of fixed shapes and
fixed arrays (CUDA.jl's `@captured`; here captured once, not re-captured). Returns
`nothing`: results must be written into arrays made before.
"""
macro captured(ex)
    slot = Ref{Any}(nothing)
    quote
        local exec = $slot[]
        if exec === nothing
            exec = instantiate(capture(() -> $(esc(ex))))
            $slot[] = exec
        end
        launch(exec::CuGraphExec)
        nothing
    end
end

"""
    CuMem.graph_pools() -> Vector{NamedTuple}

The task's device's graph pools alive, oldest first: `(id, reserved_bytes,
allocated_bytes, active_blocks, references, capturing)`: bytes of device memory the pool
holds (live blocks and its own cache), bytes and number of its live blocks, references
(the pool handle, captures, graphs, executables), whether a capture fills it. Their
memory is counted in `memory_stats()` too; `memory_status` lists them apart, and the
segments of `memory_snapshot()` whose `stream` is a pool's `id` are that pool's.
"""
function graph_pools()
    n = Ref{UInt64}(0)
    buf = CGraphPool[]
    while true
        check(c_graph_pools(buf, n))
        n[] <= length(buf) && break
        buf = Vector{CGraphPool}(undef, n[])
    end
    return [(id = p.id, reserved_bytes = Int(p.reserved_bytes), allocated_bytes = Int(p.allocated_bytes),
             active_blocks = Int(p.active_blocks), references = Int(p.references), capturing = p.capturing != 0)
            for p in buf[1:n[]]]
end

"""
    CuMem.graph_info(g::CuGraph) -> NamedTuple

What a replay of `g` runs: `(nodes, kernels, memcpys, memsets, others, edges, depth,
programmatic)`, the graph's nodes in all and by kind (kernels include the libraries', e.g.
cuBLAS's), its dependency edges, `depth`, the nodes on its longest chain of dependencies,
which a replay runs one after another (`nodes` for a graph that is one chain; fewer when
independent operations run side by side), and `programmatic`, the edges into kernels
launched with programmatic dependent launch (see [`CuMem.uses_pdl`](@ref)), whose launch
overlaps the end of the kernel they wait for. On a GPU from the driver (`cuGraphGetNodes`,
`cuGraphNodeGetType`, `cuGraphGetEdges_v2`); on the host device from the recorded
operations (each counts as one node of kind `others`; an operation's closures are a
chain; no programmatic edges). Throws `ArgumentError` for a freed graph.
"""
function graph_info(g::CuGraph)
    h = live_graph(g)
    if on_host()
        s = g.host_shape
        return (nodes = s.nodes, kernels = 0, memcpys = 0, memsets = 0, others = s.nodes, edges = s.edges, depth = s.depth,
                programmatic = 0)
    end
    out = Ref{CGraphInfo}()
    check(c_graph_info(h, out))
    i = out[]
    return (nodes = Int(i.nodes), kernels = Int(i.kernels), memcpys = Int(i.memcpys), memsets = Int(i.memsets),
            others = Int(i.others), edges = Int(i.edges), depth = Int(i.depth), programmatic = Int(i.programmatic))
end

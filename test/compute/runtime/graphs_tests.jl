# CUDA graphs with graph-private pools (julia/compute/runtime/graphs.jl, src/engine/graphs.rs):
# capture and replay of each operation family, every refusal, the pools' lifetime under GC
# and unsafe_free!, memory_snapshot and memory_status with graph pools. Runs on the host
# device in CI (operations recorded in Julia, replayed in order) and on a GPU with
# CUMEM_DEVICE=cuda (the driver's stream capture).
#
#   CUMEM_DEVICE=host julia --project test/compute/runtime/graphs_tests.jl

using CuMem, Test, LinearAlgebra, Random
using CuMem: capture, instantiate, launch, update!, graph_pool, graph_pools, CaptureError

Random.seed!(35)

include(joinpath(@__DIR__, "..", "..", "..", "demo", "mlp.jl"))   # the demo's MLP step, GraphStep

pool_ids() = [p.id for p in graph_pools()]

function saxpy_kernel!(y, a, x)
    i = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    if i <= length(y)
        @inbounds y[i] = a * x[i] + y[i]
    end
    return nothing
end

@testset "graphs" begin
    @testset "capture records, launch replays: broadcasts" begin
        x = CuArray(Float32[1, 2, 3, 4])
        y = CuMem.zeros(Float32, 4)
        y .= y .+ x                          # eager once: the fast path's slot is filled
        fill!(y, 0)
        g = capture() do
            y .= y .+ 2 .* x                 # the fast path
            y .= sin.(y) .* 0 .+ y           # a new broadcast: the general path
        end
        @test Array(y) == zeros(Float32, 4)  # nothing ran at capture
        e = instantiate(g)
        launch(e)
        @test Array(y) == Float32[2, 4, 6, 8]
        launch(e)
        @test Array(y) == Float32[4, 8, 12, 16]
        unsafe_free!(e)
        unsafe_free!(g)
        @test_throws ArgumentError launch(e)
    end

    @testset "reductions with dims, matrix products, fill!, device copies" begin
        A = CuArray(rand(Float32, 8, 5))
        B = CuArray(rand(Float32, 5, 3))
        C = CuMem.zeros(Float32, 8, 3)
        s = CuMem.zeros(Float32, 1, 3)
        z = CuArray(rand(Float32, 6))
        w = CuMem.zeros(Float32, 6)
        hA, hB = Array(A), Array(B)
        mul!(C, A, B)                        # warm-up outside the capture
        fill!(C, 0)
        g = capture() do
            T = A * B                        # allocated in the graph's pool
            C .= T
            unsafe_free!(T)
            sum!(s, C)
            r = sum(C; dims = 1)
            s .+= r
            unsafe_free!(r)
            fill!(w, 1)
            copyto!(z, w)
        end
        @test Array(C) == zeros(Float32, 8, 3) && Array(z) != ones(Float32, 6)
        e = instantiate(g)
        launch(e)
        @test Array(C) ≈ hA * hB
        @test Array(s) ≈ 2 .* sum(hA * hB; dims = 1)
        @test Array(z) == ones(Float32, 6)
        # replays read the arrays' current contents
        copyto!(A, 2 .* hA)
        launch(e)
        @test Array(C) ≈ 2 .* (hA * hB)
    end

    @testset "cuSOLVER (Cholesky) and user kernels" begin
        n = 4
        M = rand(n, n)
        S = M * M' + n * I
        A = CuArray(S)
        b = CuArray(rand(n, 1))
        hb = Array(b)
        x = CuMem.zeros(Float64, n, 1)
        g = capture() do
            copyto!(x, b)
            CuMem.potrf!('U', A)
            CuMem.potrs!('U', A, x)
        end
        @test Array(x) == zeros(n, 1)
        launch(instantiate(g))
        @test Array(x) ≈ S \ hb

        y = CuArray(Float32[1, 1, 1])
        xs = CuArray(Float32[1, 2, 3])
        @cuda threads = 3 saxpy_kernel!(y, 2f0, xs)       # compiled outside the capture
        g2 = capture() do
            @cuda threads = 3 saxpy_kernel!(y, 2f0, xs)
        end
        @test Array(y) == Float32[3, 5, 7]
        e2 = instantiate(g2)
        launch(e2)
        launch(e2)
        @test Array(y) == Float32[7, 13, 19]
    end

    @testset "refusals: clear, before anything is recorded" begin
        x = CuArray(Float32[1, 2, 3])
        h = zeros(Float32, 3)
        msg(f) = try capture(f); "" catch err; err isa CaptureError ? sprint(showerror, err) : rethrow() end
        @test occursin("synchronize()", msg(() -> CuMem.synchronize()))
        @test occursin("synchronize(stream)", msg(() -> CuMem.synchronize(CuMem.stream())))
        @test occursin("read-back", msg(() -> sum(x)))
        @test occursin("read-back", msg(() -> CuMem.@allowscalar x[1]))
        @test occursin("host memory", msg(() -> copyto!(h, x)))
        @test occursin("host memory", msg(() -> Array(x)))
        @test occursin("host memory", msg(() -> copyto!(x, h)))
        @test occursin("CuIterator", msg(() -> for b in CuIterator([h]) end))
        @test occursin("nested", msg(() -> capture(() -> nothing)))
        @test_throws ArgumentError capture(() -> nothing; stream = CuMem.default_stream())
        @test isempty(pool_ids()) || all(p -> !p.capturing, graph_pools())
        @test !CuMem.is_capturing()
        # another task's work on the stream under capture
        other = Ref{Any}(nothing)
        g = capture() do
            s = CuMem.stream()
            t = @async try
                CuMem.stream!(() -> (x .+= 1), s)
            catch err
                other[] = err
            end
            wait(t)
        end
        @test other[] isa CaptureError && occursin("another task", sprint(showerror, other[]))
        # a changed topology cannot update an executable
        y = CuMem.zeros(Float32, 3)
        p = graph_pool()
        g1 = capture(() -> (y .+= x); pool = p)
        g2 = capture(() -> (y .+= 2 .* x); pool = p)
        g3 = capture(() -> (y .+= x; y .*= 2); pool = p)
        e = instantiate(g1)
        update!(e, g2)
        launch(e)
        @test Array(y) == Float32[2, 4, 6]
        @test_throws CuMemError update!(e, g3)
        g4 = capture(() -> (y .+= x))        # another pool
        @test_throws CuMemError update!(e, g4)
        launch(e)                            # unchanged by the refused updates
        @test Array(y) == Float32[4, 8, 12]
    end

    @testset "graph-private pools: reuse inside, nothing outside, lifetime" begin
        x = CuArray(rand(Float32, 1024))
        y = CuMem.zeros(Float32, 1024)
        addrs = UInt64[]
        local tmp_kept
        g = capture() do
            a = x .* 2
            push!(addrs, UInt64(pointer(a)))
            unsafe_free!(a)
            b = x .* 3                       # reuses a's block, freed in the capture
            push!(addrs, UInt64(pointer(b)))
            y .= b
            tmp_kept = b                     # lives on after the capture, in the pool
        end
        @test addrs[1] == addrs[2]
        p = only(filter(q -> q.id == g.pool, graph_pools()))
        @test p.active_blocks == 1 && p.allocated_bytes >= 4096 && !p.capturing
        owner = Ref{UInt64}(0)
        @test CuMem.c_block_stream(UInt64(pointer(tmp_kept)), owner) == 0 && owner[] == g.pool
        # the snapshot and memory_status show the pool apart
        segs = filter(s -> s.stream == g.pool, memory_snapshot())
        @test !isempty(segs) && all(s -> s.pool === :graph, segs)
        @test sum(s -> s.size, segs) == p.reserved_bytes
        @test occursin("Graph pool $(g.pool)", sprint(memory_status))
        # a block freed after the capture stays in the pool: nothing outside gets it
        unsafe_free!(tmp_kept)
        outside = [CuArray{Float32}(undef, 1024) for _ in 1:4]
        @test all(o -> UInt64(pointer(o)) != addrs[1], outside)
        e = instantiate(g)
        launch(e)
        @test Array(y) ≈ 3 .* Array(x)
        reserved = memory_stats().reserved_bytes
        unsafe_free!(g)
        @test g.pool in pool_ids()           # the executable holds the pool
        unsafe_free!(e)
        @test !(g.pool in pool_ids())
        @test isempty(filter(s -> s.stream == g.pool, memory_snapshot()))
        @test memory_stats().reserved_bytes < reserved
        foreach(unsafe_free!, outside)

        # under GC: the finalizers of graph and executable give the memory back
        function make_graph(x)
            local gg = capture(() -> (t = x .+ 1; t .*= 2; nothing))
            local ee = instantiate(gg)
            launch(ee)
            return gg.pool
        end
        id = make_graph(x)
        for _ in 1:4
            GC.gc(true)
            id in pool_ids() || break
        end
        @test !(id in pool_ids())

        # a shared pool lives while a handle, graph or executable of it does
        sp = graph_pool()
        ga = capture(() -> (t = x .+ 1; unsafe_free!(t)); pool = sp)
        gb = capture(() -> (t = x .+ 1; y .= t; unsafe_free!(t)); pool = sp)
        @test ga.pool == gb.pool == sp.id
        @test only(filter(q -> q.id == sp.id, graph_pools())).references == 3
        unsafe_free!(sp)
        unsafe_free!(ga)
        @test gb.pool in pool_ids()
        unsafe_free!(gb)
        @test !(gb.pool in pool_ids())
    end

    @testset "timelines draw graph pools apart" begin
        x = CuArray(rand(Float32, 4096))
        record_memory_history(true)
        try
            outside = x .+ 1
            local kept
            g = capture(() -> (kept = x .* 2; nothing))
            events = memory_events()
            dir = mktempdir()
            json = read(save_memory_timeline(joinpath(dir, "t.json"), events), String)
            @test occursin("\"graph_pool\":$(g.pool),", json)          # the block made in the capture
            @test occursin("\"addr\":\"0x$(string(UInt64(pointer(outside)), base = 16))\"", json)
            @test occursin("\"graph_pool\":null", json)                # and the others
            svg = read(save_memory_timeline(joinpath(dir, "t.svg"), events), String)
            @test occursin("class=\"graph-pool\" data-pool=\"$(g.pool)\"", svg)
            @test occursin("in a graph pool", svg)
            unsafe_free!(kept); unsafe_free!(g); unsafe_free!(outside)
            # after the pool has gone its blocks are still drawn as its
            @test occursin("\"graph_pool\":$(g.pool),", read(save_memory_timeline(joinpath(dir, "u.json"), events), String))
        finally
            record_memory_history(false)
        end
    end

    @testset "@captured and no growth over replays" begin
        x = CuArray(rand(Float32, 256))
        y = CuMem.zeros(Float32, 256)
        step() = CuMem.@captured (t = x .* 0.5f0; y .+= t; unsafe_free!(t))
        step()
        p = graph_pools()[end]               # the newest pool: the step's
        for _ in 1:200
            step()
        end
        @test Array(y) ≈ 201 .* 0.5f0 .* Array(x)
        q = only(filter(r -> r.id == p.id, graph_pools()))
        @test q.reserved_bytes == p.reserved_bytes && q.allocated_bytes == p.allocated_bytes
    end
    @testset "edges follow the data; graph_info" begin
        a0, b0 = rand(Float32, 64), rand(Float32, 64)
        a, b = CuArray(a0), CuArray(b0)
        c, d, e = CuMem.zeros(Float32, 64), CuMem.zeros(Float32, 64), CuMem.zeros(Float32, 64)
        c .= a .+ 1f0; d .= b .* 2f0; c .= c .* d; a .= b .* 0f0; e .= b .* 3f0   # eager once
        copyto!(a, a0); fill!(c, 0); fill!(d, 0); fill!(e, 0)
        step() = (c .= a .+ 1f0;          # 1: reads a, writes c
                  d .= b .* 2f0;          # 2: independent of 1
                  c .= c .* d;            # 3: after 1 and 2
                  a .= b .* 0f0)          # 4: overwrites what 1 reads: after 1 only
        g = capture(step)
        i = CuMem.graph_info(g)
        @test (i.edges, i.depth) == (3, 2)
        @test i.nodes == 4 && i.nodes == i.kernels + i.memcpys + i.memsets + i.others
        CuMem.on_host() || @test i.kernels == 4
        chain = capture(step; edges = false)
        j = CuMem.graph_info(chain)
        @test j.nodes == i.nodes && j.depth == j.nodes      # one chain
        @test (i.nodes, i.edges, i.depth) != (j.nodes, j.edges, j.depth)
        # programmatic dependent launch (sm_90+, docs/graphs.md): edges between CuMem's kernels
        # are programmatic (their launch overlaps the kernel they wait for); none on the host
        # device, below sm_90, or with CuMem.pdl!(false) (as CUMEM_PDL=0)
        pdl = !CuMem.on_host() && CuMem.capability() >= v"9.0" && get(ENV, "CUMEM_PDL", "1") != "0"
        # (the chain's edges are the stream's order, which a PDL launch makes programmatic; edges
        # from the data are set as capture dependencies, made programmatic at the capture's end)
        @test (i.programmatic, j.programmatic) == (pdl ? (i.edges, j.edges) : (0, 0))
        pdl && @info "programmatic edges: $(i.programmatic) of $(i.edges) (edges from the data), $(j.programmatic) of $(j.edges) (one chain)"
        was = CuMem.pdl!(false)
        off = capture(step)
        @test CuMem.graph_info(off).programmatic == 0
        @test (CuMem.graph_info(off).edges, CuMem.graph_info(off).depth) == (3, 2)
        CuMem.pdl!(was)
        launch(instantiate(off))
        @test Array(c) == (a0 .+ 1f0) .* (b0 .* 2f0) && Array(d) == b0 .* 2f0 && Array(a) == zeros(Float32, 64)
        copyto!(a, a0)
        # the host device replays in another order the edges allow: results as in order
        launch(instantiate(g))
        @test Array(c) == (a0 .+ 1f0) .* (b0 .* 2f0) && Array(d) == b0 .* 2f0 && Array(a) == zeros(Float32, 64)
        copyto!(a, a0)
        launch(instantiate(chain))
        @test Array(c) == (a0 .+ 1f0) .* (b0 .* 2f0) && Array(a) == zeros(Float32, 64)
        # work of unknown access (a @cuda kernel) keeps the stream's order both ways
        copyto!(a, a0)
        k = capture() do
            c .= a .+ 1f0
            @cuda threads = 64 saxpy_kernel!(d, 2f0, a)   # d = 2a + d
            e .= b .* 3f0                                 # independent of both, yet after the kernel
        end
        ik = CuMem.graph_info(k)
        @test ik.depth == ik.nodes
        d0 = Array(d)
        launch(instantiate(k))
        @test Array(d) == 2f0 .* a0 .+ d0 && Array(e) == b0 .* 3f0
        # a product and a reduction with dims are operations of known access too
        A, B, C = CuArray(rand(Float32, 8, 8)), CuArray(rand(Float32, 8, 8)), CuMem.zeros(Float32, 8, 8)
        r = CuMem.zeros(Float32, 1, 8)
        mul!(C, A, B); sum!(r, A)
        p = capture() do
            mul!(C, A, B)                 # 1
            t = sum(B; dims = 1)          # 2: independent of 1
            r .= t .* 2f0                 # 3: after 2
        end
        ip = CuMem.graph_info(p)
        @test ip.depth < ip.nodes
        launch(instantiate(p))
        @test Array(C) ≈ Array(A) * Array(B) && Array(r) ≈ 2 .* sum(Array(B); dims = 1)
        # allocating broadcasts on the fast path (operands of the result's size, the types
        # run before) are operations of known access too, not barriers
        # (defined before the eager runs: a method defined after them starts a new world,
        # where the fast path is looked up again)
        uv = Ref{Any}(nothing)
        fq = () -> (uv[] = (a .* b, b .- 1f0); nothing)
        for _ in 1:2
            fq()
            foreach(unsafe_free!, uv[])
        end
        q = capture(fq)
        iq = CuMem.graph_info(q)
        @test (iq.nodes, iq.edges, iq.depth) == (2, 0, 1)
        launch(instantiate(q))
        @test Array(uv[][1]) == Array(a) .* b0 && Array(uv[][2]) == b0 .- 1f0
        @test_throws ArgumentError (unsafe_free!(g); CuMem.graph_info(g))
        # the leak check names the graph pool of an array a capture returned
        CuMem.memory_checkpoint()
        res = Ref{Any}(nothing)
        g2 = capture(() -> (res[] = a .+ 1f0; nothing))
        ls = CuMem.check_memory_leaks()
        @test any(l -> l.graph_pool == g2.pool && l.addr == UInt64(pointer(res[])), ls)
        @test occursin("in graph pool $(g2.pool)", sprint(showerror, CuMem.MemoryLeakError(ls)))
        @test all(l -> l.graph_pool == 0 || l.graph_pool == g2.pool, ls)
    end
    @testset "the demo's MLP step: replays train the weights eager training does" begin
        rng = MersenneTwister(3)
        xs = [CuArray(rand(rng, Float32, 64, 16)) for _ in 1:3]
        ys = [CuArray(onehot(rand(rng, 0:9, 16))) for _ in 1:3]
        eager, graphed = MLP(MersenneTwister(42)), MLP(MersenneTwister(42))
        l1 = train_step!(eager, xs[1], ys[1], 0.1f0)
        l2 = train_step!(graphed, xs[1], ys[1], 0.1f0)      # the eager warm-up step
        @test l1 == l2
        gs = GraphStep(graphed, xs[2], ys[2], 0.1f0)
        @test gs.info.depth < gs.info.nodes          # the gradients and updates run side by side
        ps, st = graph_pools(), memory_stats()       # memory_stats counts the graph pools apart
        @test st.num_graph_pools == length(ps) >= 1
        @test st.graph_pool_reserved_bytes == sum(p -> p.reserved_bytes, ps) > 0
        @test st.graph_pool_allocated_bytes == sum(p -> p.allocated_bytes, ps)
        @test st.graph_pool_reserved_bytes <= st.reserved_bytes
        before = only(filter(p -> p.id == gs.exec.pool, graph_pools())).reserved_bytes
        for i in 1:6
            le = train_step!(eager, xs[mod1(i, 3)], ys[mod1(i, 3)], 0.1f0)
            lg = graph_step!(gs, xs[mod1(i, 3)], ys[mod1(i, 3)])
            @test lg ≈ le
        end
        for f in fieldnames(MLP)
            @test Array(getfield(eager, f)) == Array(getfield(graphed, f))
        end
        @test only(filter(p -> p.id == gs.exec.pool, graph_pools())).reserved_bytes == before
    end
end

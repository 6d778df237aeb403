# Issue 22 (reliability, round 3): the Julia package's defects, one testset each, every
# one failing before its fix. Included by pooltests.jl (every pool, 2 threads); alone:
#
#   CUMEM_DEVICE=host JULIA_NUM_THREADS=2 JULIA_CUDA_MEMORY_POOL=split \
#       julia --project -e 'using CuMem, Test; include("test/reliability_tests.jl")'

# Item 3: `unsafe_free!` from two threads at once on one array releases once. Both
# threads free the same array after a barrier, round after round; a second
# release was a double free (the engine refuses it: CuMemError) for an array alone, and
# for a `reshape` sibling it dropped the shared count to 0 while the sibling was live.
@testset "unsafe_free! from two threads at once releases once" begin
    if Threads.nthreads() < 2
        @info "unsafe_free! race: needs JULIA_NUM_THREADS >= 2; skipped"
    else
        GC.gc(true)
        GC.gc(true)
        errs0 = CuMem.free_errors()[1]
        s0 = memory_stats()
        n = 20_000
        alone = [CuArray{UInt8}(undef, 512) for _ in 1:n]
        shared = [CuArray{UInt8}(undef, 512) for _ in 1:n]
        siblings = [reshape(a, 16, 32) for a in shared]
        thrown = Threads.Atomic{Int}(0)
        arrived = Threads.Atomic{Int}(0)
        Threads.@threads for t in 1:2
            for i in 1:n
                # a barrier per round: both threads free array i at the same moment
                Threads.atomic_add!(arrived, 1)
                while arrived[] < 2i
                    GC.safepoint()
                end
                try
                    unsafe_free!(alone[i])
                    unsafe_free!(shared[i])
                catch
                    Threads.atomic_add!(thrown, 1)
                end
            end
        end
        @test thrown[] == 0
        @test count(b -> b.shared.refs[] != 1, siblings) == 0     # each sibling's hold intact
        @test all(CuMem.isfreed, alone) && all(CuMem.isfreed, shared)
        s1 = memory_stats()
        @test s1.num_frees - s0.num_frees == n                     # the alone arrays, once each
        @test s1.requested_bytes - s0.requested_bytes == 512n      # the siblings' memory is live
        # the siblings' memory is theirs: write, read back, then free them
        for (k, b) in enumerate(siblings)
            k % 97 == 0 && (fill!(b, UInt8(k % 251)); @test all(==(UInt8(k % 251)), Array(b)))
        end
        foreach(unsafe_free!, siblings)
        s2 = memory_stats()
        @test s2.requested_bytes == s0.requested_bytes
        @test s2.num_frees - s0.num_frees == 2n
        @test CuMem.free_errors()[1] == errs0
    end
end

# Item 11: the smaller ones of the Julia package.
@testset "destroyed streams and events say so" begin
    s = CuStream()
    e = CuEvent()
    @test sprint(show, CuMem.default_stream()) == "CuStream(default)"
    @test startswith(sprint(show, s), "CuStream(") && sprint(show, s) != "CuStream(default)"
    CuMem.unsafe_destroy!(s)
    CuMem.unsafe_destroy!(e)
    @test sprint(show, s) == "CuStream(destroyed)"
    @test sprint(show, e) == "CuEvent(destroyed)"
    err = try synchronize(s); nothing catch x; x end
    @test err isa ArgumentError && occursin("destroyed", err.msg) && !occursin("default", err.msg)
end

@testset "sleep_on refuses times it cannot queue" begin
    s = CuStream()
    for t in (Inf, -Inf, NaN, -1, 1e12)
        err = try CuMem.sleep_on(s, t); nothing catch x; x end
        @test err isa ArgumentError && occursin("sleep", err.msg)
    end
    CuMem.sleep_on(s, 0.001)
    synchronize(s)
    CuMem.unsafe_destroy!(s)
end

@testset "free_errors counts only the frees that could not throw" begin
    GC.gc(true)
    before = CuMem.free_errors()
    a = CuArray{Float32}(undef, 64)
    b = unsafe_wrap(CuArray, pointer(a), 64; own = true)   # a second owner of a's memory
    unsafe_free!(a)
    @test_throws CuMemError unsafe_free!(b)                  # the engine refuses the second free
    @test CuMem.free_errors() == before                      # the caller saw it; not counted
end

@testset "save_memory_timeline with a path that is not UTF-8" begin
    path = joinpath(mktempdir(), "timeline-\xff.svg")
    err = try save_memory_timeline(path, CuMem.MemoryEvent[]); nothing catch x; x end
    @test err isa ArgumentError && occursin("UTF-8", err.msg)
end

# Item 4: an asynchronous upload keeps its host buffer until the copy has run, though
# the buffer's array is collected at once: a pinned block is neither handed to the next
# pinned array (whose data the upload would read) nor released by reclaim(:host) (the
# upload would read unmapped memory: SIGSEGV on the host device), and a registered Array
# (CuMem.pin) stays reachable. The copies wait behind a 0.3 s sleep of their stream.
@testset "async uploads keep their host buffer until the copy has run" begin
    # pinned memory that outlives this test set, e.g. the page-locked buffer through which
    # scalar results come back (julia/compute/runtime/readback.jl, made by an earlier sum on a GPU)
    host_base = memory_stats(:host).allocated_bytes
    n = 4 << 20
    d = CuArray{Float32}(undef, n)
    s = CuStream()
    # the block is freed at once, as the array's finalizer may do at any time after the call
    up(d) = (h = CuMem.pinned(Float32, n); fill!(h, 1f0); copyto!(d, h; async = true); unsafe_free!(h); nothing)
    for reuse in (true, false)
        fill!(d, 0f0)
        stream!(s) do
            CuMem.sleep_on(s, 0.3)
            up(d)
        end
        if reuse
            h2 = CuMem.pinned(Float32, n)      # the same size class: the freed block if free
            fill!(h2, 2f0)
            unsafe_free!(h2)
        else
            reclaim(:host)
        end
        synchronize(s)
        @test all(==(1f0), Array(d))
    end
    fill!(d, 0f0)
    stream!(s) do
        CuMem.sleep_on(s, 0.3)
        copyto!(d, CuMem.pin(fill(3f0, n)); async = true)
        nothing
    end
    GC.gc(true)
    GC.gc(true)
    junk = [fill(4f0, n) for _ in 1:4]         # memory the collector may hand out again
    synchronize(s)
    @test all(==(3f0), Array(d))
    reclaim(:host)
    @test memory_stats(:host).allocated_bytes == host_base
    unsafe_free!(d)
    CuMem.unsafe_destroy!(s)
end

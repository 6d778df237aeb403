# The memory tools (issue 8): record_memory_history/memory_events, memory_snapshot
# against memory_stats after random operations, check_memory_leaks/@check_leaks,
# memory_checkpoint, set_memory_limit!/set_memory_fraction!/set_cache_limit!,
# memory_pressure, compact! and the ladder's retry counts. Included by pooltests.jl, so
# it runs under every pool.

# The snapshot's sums against the statistics, and its structure.
function check_snapshot(live)
    snap = memory_snapshot()
    s = memory_stats()
    @test mapreduce(seg -> seg.size, +, snap; init = 0) == s.reserved_bytes
    blocks = [b for seg in snap for b in seg.blocks]
    bytes(st) = mapreduce(b -> b.size, +, filter(b -> b.state === st, blocks); init = 0)
    @test bytes(:active) == s.allocated_bytes
    @test mapreduce(b -> b.requested, +, blocks; init = 0) == s.requested_bytes
    @test bytes(:inactive_split) == s.inactive_split_bytes
    @test bytes(:cached) + bytes(:inactive_split) == s.cached_bytes
    @test all(seg -> seg.pool === Symbol(POOL) && seg.stream == 0 && seg.device == 0, snap)
    @test all(seg -> seg.blocks[1].addr == seg.addr &&
                     sum(b -> b.size, seg.blocks) == seg.size, snap)
    @test issorted([seg.addr for seg in snap])
    active = sort!([b.addr for b in blocks if b.state === :active])
    @test active == sort!([UInt64(pointer(a)) for a in live if length(a) > 0])
end

@testset "memory_snapshot sums equal memory_stats after random operations" begin
    clean!()
    rng = MersenneTwister(8)
    live = CuArray{UInt8,1}[]
    GC.enable(false)     # only the test's own frees, so the live set is known exactly
    try
        for step in 1:300
            r = rand(rng)
            if r < 0.55 || isempty(live)
                n = rand(rng) < 0.8 ? rand(rng, 1:100_000) : rand(rng, 1:12_000_000)
                push!(live, CuArray{UInt8}(undef, n))
            elseif r < 0.9
                unsafe_free!(popat!(live, rand(rng, 1:length(live))))
            elseif r < 0.95
                reclaim(rand(rng, 0:(64 << 20)))
            else
                compact!()
            end
            step % 25 == 0 && check_snapshot(live)
        end
        check_snapshot(live)
        foreach(unsafe_free!, live)
        empty!(live)
        check_snapshot(live)
    finally
        GC.enable(true)
    end
    reclaim()
    @test isempty(memory_snapshot())
end

@testset "record_memory_history and memory_events" begin
    clean!()
    @test_throws ArgumentError record_memory_history(true; max_entries = 0)
    record_memory_history(true; max_entries = 1000)
    x = CuArray{Float32}(undef, 10_000_000)     # 40 MB: a miss in every pool
    px = UInt64(pointer(x))
    unsafe_free!(x)
    y = CuArray{Float32}(undef, 10_000_000)
    unsafe_free!(y)
    record_memory_history(false)
    z = CuArray{Float32}(undef, 10)              # not recorded
    ev = memory_events()
    @test ev isa Vector{MemoryEvent}
    @test issorted([e.time_ns for e in ev])
    mine = filter(e -> e.kind in (:alloc, :free), ev)
    @test [e.kind for e in mine] == [:alloc, :free, :alloc, :free]
    a, f = mine[1], mine[2]
    @test (a.addr, a.requested_bytes) == (px, 40_000_000)
    @test a.size_bytes >= 40_000_000 && !a.hit
    @test mine[3].hit == (POOL != "none")
    @test (f.addr, f.requested_bytes, f.size_bytes) == (px, 40_000_000, a.size_bytes)
    @test 0 < f.lifetime_ns <= f.time_ns - a.time_ns + 1
    @test any(e -> e.kind === :device_alloc, ev)
    @test all(e -> e.stream == 0 && e.device == 0 && e.duration_ns >= 0, ev)
    @test all(e -> e.origin === nothing, ev) == !CuMem.tracking()
    @test !any(e -> e.addr == UInt64(pointer(z)) && e.requested_bytes == 40, ev)
    raw = CuMem.raw_memory_events()
    @test raw isa Vector{CuMem.CEvent} && length(raw) == length(ev)
    @test occursin("MemoryEvent(alloc", sprint(show, a))
    unsafe_free!(z)
    # Starting again drops the old events.
    record_memory_history(true; max_entries = 5)
    for _ in 1:10
        unsafe_free!(CuArray{UInt8}(undef, 100))
    end
    @test length(memory_events()) == 5
    record_memory_history(false)
end

# Allocates and drops arrays: nothing stays live once garbage is collected. (`t` is written
# before the broadcast reads it: compute-sanitizer's initcheck reports a kernel's read of
# memory never written.)
@noinline function temporaries()
    t = fill!(CuArray{Float32}(undef, 100), 1f0)
    u = t .+ 1f0
    return length(u)
end

@testset "check_memory_leaks, @check_leaks, memory_checkpoint" begin
    clean!()
    io = IOBuffer()
    memory_checkpoint("start"; io = io)
    @test isempty(check_memory_leaks())
    a = CuArray{Float32}(undef, 1000)
    b = CuArray{Float32}(undef, 2000)
    unsafe_free!(b)
    leaks = check_memory_leaks()
    @test [(l.addr, l.bytes) for l in leaks] == [(UInt64(pointer(a)), 4000)]
    @test leaks[1].size >= 4000
    @test (leaks[1].origin !== nothing) == CuMem.tracking()
    d = memory_checkpoint("after a"; io = io)
    @test d.allocated >= 4000
    @test occursin("memory checkpoint after a: allocated +", String(take!(io)))
    @test isempty(check_memory_leaks())
    unsafe_free!(a)
    d = memory_checkpoint(; io = io)
    @test d.allocated <= -4000
    # @check_leaks: garbage is collected first; what stays live is reported.
    @test CuMem.@check_leaks(temporaries()) === nothing
    kept = CuArray{Float32}[]
    err = try
        CuMem.@check_leaks push!(kept, CuArray{Float32}(undef, 333))
        nothing
    catch e
        e
    end
    @test err isa MemoryLeakError
    @test length(err.leaks) == 1 && err.leaks[1].bytes == 1332
    @test occursin("1 allocation", sprint(showerror, err))
    foreach(unsafe_free!, kept)
end

@testset "set_memory_limit!, set_memory_fraction!, memory_pressure" begin
    clean!()
    total = CuMem.total_memory()
    x = CuArray{UInt8}(undef, 3 << 20)
    p0 = memory_pressure()
    @test p0 ≈ memory_stats().reserved_bytes / total
    @test_throws CuMemError set_memory_limit!(1 << 20)        # below what is live
    @test memory_stats().limit_bytes == 0
    @test_throws ArgumentError set_memory_limit!(0)
    @test_throws CuMemError set_memory_limit!("lots")
    set_memory_limit!("64MiB")
    @test memory_stats().limit_bytes == 64 << 20
    @test memory_pressure() ≈ memory_stats().reserved_bytes / (64 << 20)
    @test_throws OutOfGPUMemoryError CuArray{UInt8}(undef, 100 << 20)
    set_memory_limit!(256 << 20)     # room for 100 MiB in any pool's rounding
    y = CuArray{UInt8}(undef, 100 << 20)
    unsafe_free!(y)
    set_memory_limit!(nothing)
    @test memory_stats().limit_bytes == 0
    set_memory_fraction!(0.5)
    @test memory_stats().limit_bytes == total ÷ 2
    @test_throws ArgumentError set_memory_fraction!(1.5)
    set_memory_limit!("100%")
    @test memory_stats().limit_bytes == total
    set_memory_limit!(nothing)
    unsafe_free!(x)
end

@testset "set_cache_limit! and compact!" begin
    clean!()
    @test CuMem.cache_limit() === nothing
    xs = [CuArray{UInt8}(undef, 4 << 20) for _ in 1:6]
    foreach(unsafe_free!, xs)
    s = memory_stats()
    @test s.cached_bytes == s.reserved_bytes
    set_cache_limit!(0)
    @test CuMem.cache_limit() == 0
    @test memory_stats().reserved_bytes == 0
    y = CuArray{UInt8}(undef, 4 << 20)
    unsafe_free!(y)
    @test memory_stats().cached_bytes == 0       # frees beyond the cap go back at once
    set_cache_limit!(nothing)
    @test CuMem.cache_limit() === nothing
    keep = CuArray{UInt8}(undef, 1000)
    zs = [CuArray{UInt8}(undef, n << 20) for n in 1:5]
    foreach(unsafe_free!, zs)
    before = memory_stats()
    c = compact!()
    after = memory_stats()
    @test c.released_bytes == before.reserved_bytes - after.reserved_bytes
    @test c.fragmentation_before ≈ before.fragmentation_ratio
    @test c.fragmentation_after ≈ after.fragmentation_ratio
    @test after.cached_bytes == after.inactive_split_bytes
    unsafe_free!(keep)
end

@testset "the ladder's retries are counted" begin
    clean!()
    s = memory_stats()
    @test s.num_gc_retries isa Int && s.num_reclaim_retries isa Int
    # A request that fails at every rung: two GC retries and at least one reclaim retry.
    set_memory_limit!(16 << 20)
    try
        @test_throws OutOfGPUMemoryError CuArray{UInt8}(undef, 64 << 20)
    finally
        set_memory_limit!(nothing)
    end
    t = memory_stats()
    @test t.num_gc_retries >= s.num_gc_retries + 2
    @test t.num_reclaim_retries >= s.num_reclaim_retries + 1
    @test occursin("GC / reclaim retries", sprint(memory_summary))
end

@testset "the tools' records and constants match include/cumem.h" begin
    header = read(joinpath(@__DIR__, "..", "..", "include", "cumem.h"), String)
    ctypes = Dict("uint64_t" => UInt64, "double" => Float64, "int64_t" => Int64, "uint32_t" => UInt32)
    for (cname, T) in (("cumem_event_t", CuMem.CEvent), ("cumem_segment_t", CuMem.CSegment),
                       ("cumem_block_t", CuMem.CBlock), ("cumem_leak_t", CuMem.CLeak),
                       ("cumem_compact_t", CuMem.CCompact))
        m = match(Regex("typedef struct \\{([^}]*)\\} $cname;", "s"), header)
        @test m !== nothing
        fields = [(Symbol(f[2]), ctypes[f[1]]) for f in (match(r"^\s*(\w+)\s+(\w+);", l) for l in split(m[1], '\n'))
                  if f !== nothing]
        @test [f[1] for f in fields] == collect(fieldnames(T))
        @test [f[2] for f in fields] == collect(fieldtypes(T))
    end
    for (name, v) in (("CUMEM_ALLOC_GC_RETRY", CuMem.CUMEM_ALLOC_GC_RETRY),
                      ("CUMEM_ALLOC_RECLAIM_RETRY", CuMem.CUMEM_ALLOC_RECLAIM_RETRY),
                      ("CUMEM_ORIGIN_CALLER", CuMem.CUMEM_ORIGIN_CALLER))
        m = match(Regex("#define $name (\\d+)"), header)
        @test m !== nothing && parse(UInt64, m[1]) == v
    end
    for (i, k) in enumerate(CuMem.EVENT_KINDS)
        @test occursin("#define CUMEM_EVENT_$(uppercase(string(k))) $(i - 1)", header)
    end
    for (i, k) in enumerate(CuMem.BLOCK_STATES)
        @test occursin("#define CUMEM_BLOCK_$(uppercase(string(k))) $(i - 1)", header)
    end
end

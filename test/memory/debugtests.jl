# The leak report: runtests.jl runs this under `julia -g2` and, separately, with
# CUMEM_DEBUG=2. memory_status then lists each outstanding allocation with the Julia stack
# trace of the place that made it; the first frame must be this file, not CuMem.

using CuMem, Test

status() = sprint(memory_status)

# The trace printed under "Outstanding memory allocation of `n` bytes at `ptr`".
function entry(text, n, ptr = nothing)
    addr = ptr === nothing ? "0x[0-9a-f]+" : "0x" * string(UInt64(ptr), base = 16, pad = 12)
    m = match(Regex("Outstanding memory allocation of $n bytes at $addr\\n((?: \\[\\d+\\] [^\\n]*\\n)+)"), text)
    return m === nothing ? nothing : split(chomp(m[1]), '\n')
end

make_vector() = CuMem.zeros(Float64, 3)       # 24 bytes
const LINE_MAKE = @__LINE__() - 1
const KEEP = CuArray{Float64,1}[]

@testset "leak report (debug level $(Base.JLOptions().debug_level), CUMEM_DEBUG=$(get(ENV, "CUMEM_DEBUG", "")))" begin
    @test CuMem.tracking()
    GC.gc(true)

    x = CuArray{Float32}(undef, 2); line_x = @__LINE__       # 8 bytes
    y = make_vector()
    z = similar(CuArray{Int8}(undef, 3), Int8, 5); line_z = @__LINE__   # through Base's similar
    text = status()
    lines = split(text, '\n')
    @test startswith(lines[1], "Effective GPU memory usage: ")
    @test occursin(r"^(Host memory \(no GPU\)|CUDA GPU memory) usage: ", lines[2])

    fx = entry(text, 8, pointer(x))
    @test fx !== nothing
    @test occursin("debugtests.jl:$line_x", fx[1])          # the first frame is the caller
    @test !any(l -> occursin("julia/array/array.jl", l) || occursin("allocator.jl", l), fx)

    fy = entry(text, 24, pointer(y))
    @test fy !== nothing
    @test occursin("make_vector()", fy[1]) && occursin("debugtests.jl:$LINE_MAKE", fy[1])
    @test occursin("debugtests.jl", fy[2])

    fz = entry(text, 5, pointer(z))
    @test fz !== nothing
    @test occursin("debugtests.jl:$line_z", fz[1])

    # views share one allocation: one entry
    v = reshape(x, 1, 2)
    @test length(collect(eachmatch(r"Outstanding memory allocation of 8 bytes", status()))) == 1

    # freed: gone from the report
    unsafe_free!(x)
    @test entry(status(), 8) !== nothing                    # v still holds it
    unsafe_free!(v)
    @test entry(status(), 8) === nothing
    unsafe_free!(y)
    @test entry(status(), 24) === nothing
    @test entry(status(), 5) !== nothing
    unsafe_free!(z)
    # collected by the GC (the finalizer only marks the entry; memory_status drops it).
    # In a function: a variable of top-level code can stay rooted after reassignment.
    function make_garbage()
        g = CuArray{UInt8}(undef, 33)
        return entry(status(), 33) !== nothing
    end
    @test make_garbage()
    GC.gc(true)
    @test entry(status(), 33) === nothing

    # the structured form
    w = CuArray{UInt8}(undef, 77)
    outs = CuMem.outstanding_allocations()
    mine = filter(a -> a.bytes == 77, outs)
    @test length(mine) == 1
    @test mine[1].ptr == UInt64(pointer(w))
    @test mine[1].frames[1] isa Base.StackFrame
    @test occursin("debugtests.jl", string(mine[1].frames[1].file))
    unsafe_free!(w)

    # each frame is symbolized once per process: arrays made at one site add no new
    # lookups to the report, and the report stays the same
    function many_at_one_site(n)
        return [CuArray{UInt8}(undef, 99) for _ in 1:n]
    end
    batches, texts, cached = [], String[], Int[]
    for n in (2, 200)                                 # (one call site for both batches)
        push!(batches, many_at_one_site(n))
        push!(texts, status())
        push!(cached, length(CuMem.FRAME_CACHE))
    end
    @test cached[2] == cached[1]
    @test length(collect(eachmatch(r"Outstanding memory allocation of 99 bytes", texts[2]))) == 202
    @test entry(texts[2], 99, pointer(batches[2][end])) == entry(texts[1], 99, pointer(batches[1][1]))
    foreach(b -> foreach(unsafe_free!, b), batches)

    # many allocations from several threads, with finalizers running: the table stays
    # consistent and empties once everything is gone
    Threads.@threads for t in 1:Threads.nthreads()
        for i in 1:2000
            a = CuArray{UInt8}(undef, 100 + i)
            iseven(i) && unsafe_free!(a)
            i % 500 == 0 && GC.gc(false)
        end
    end
    GC.gc(true)
    GC.gc(true)
    @test isempty(CuMem.outstanding_allocations())
    @test !occursin("Outstanding", status())
    @test length(CuMem.TRACKED) < 64 + 10
    @test memory_stats().requested_bytes == 0
end

# The memory tools under tracking: events, snapshot blocks and leaks carry the Julia stack
# of the allocation (the first frame this file's `make_vector`).
@testset "origins in memory_events, memory_snapshot and check_memory_leaks" begin
    GC.gc(true)
    record_memory_history(true; max_entries = 1000)
    memory_checkpoint("origins"; io = devnull)
    v = make_vector()
    w = make_vector()
    unsafe_free!(w)
    record_memory_history(false)
    ev = filter(e -> e.kind in (:alloc, :free), memory_events())
    @test length(ev) == 3
    for e in ev
        @test e.origin !== nothing
        @test occursin("make_vector", e.origin) && occursin("debugtests.jl:$LINE_MAKE", e.origin)
    end
    @test ev[3].origin == ev[2].origin             # a free carries its allocation's stack
    blk = [b for s in memory_snapshot() for b in s.blocks if b.addr == UInt64(pointer(v))]
    @test length(blk) == 1 && blk[1].state === :active
    @test blk[1].origin !== nothing && occursin("make_vector", blk[1].origin)
    leaks = check_memory_leaks()
    @test [l.addr for l in leaks] == [UInt64(pointer(v))]
    @test occursin("debugtests.jl:$LINE_MAKE", leaks[1].origin)
    err = try
        CuMem.@check_leaks push!(KEEP, make_vector())
        nothing
    catch e
        e
    end
    @test err isa MemoryLeakError && occursin("make_vector", sprint(showerror, err))
    unsafe_free!(v)
    foreach(unsafe_free!, KEEP)
end

# A memory profile names each allocation's origin (the Julia stack under -g2; the
# engine's native stack under CUMEM_DEBUG=2), in its report and in the timeline page.
make_profiled() = CuArray{Float32}(undef, 7777)
@testset "profile origins" begin
    p = @profile_memory (x = make_profiled(); unsafe_free!(x))
    allocs = [e for e in memory_events(p) if e.kind === :alloc]
    @test length(allocs) == 1 && allocs[1].origin !== nothing
    r = sprint(show, MIME"text/plain"(), p)
    @test !occursin("origin unknown", r)
    html = joinpath(mktempdir(), "t.html")
    save_memory_timeline(html, p)
    if Base.JLOptions().debug_level >= 2
        @test occursin("make_profiled", allocs[1].origin)
        @test occursin(r"largest allocations:\n\s+\d+\.\d+ KiB × 1\s+make_profiled", r)
        page = read(html, String)
        @test occursin("make_profiled", page) && occursin("debugtests.jl", page)
    end
end

# memory_status, memory_stats, memory_summary, reclaim, reset_memory_stats!.

const SIZE_RE = raw"(?:0 bytes|1 byte|\d{1,4} bytes|\d+\.\d{3} [KMGTP]iB)"

function check_invariants(s = memory_stats())
    @test s.requested_bytes <= s.allocated_bytes <= s.reserved_bytes
    @test s.cached_bytes == s.reserved_bytes - s.allocated_bytes
    @test s.peak_reserved_bytes >= s.reserved_bytes
    @test s.peak_allocated_bytes >= s.allocated_bytes
    @test s.peak_requested_bytes >= s.requested_bytes
    @test 0 <= s.cache_hit_rate <= 1
    @test 0 <= s.fragmentation_ratio <= 1
end

@testset "memory_stats" begin
    s = memory_stats()
    @test s isa NamedTuple
    @test keys(s) == (:requested_bytes, :allocated_bytes, :cached_bytes, :reserved_bytes,
                      :inactive_split_bytes, :peak_requested_bytes, :peak_allocated_bytes,
                      :peak_cached_bytes, :peak_reserved_bytes, :num_allocations, :num_frees,
                      :num_cache_hits, :num_cache_misses, :num_device_allocations,
                      :num_device_frees, :device_alloc_ns, :device_free_ns,
                      :num_alloc_retries, :num_ooms, :limit_bytes, :cache_hit_rate,
                      :fragmentation_ratio, :num_device_free_errors, :num_gc_retries,
                      :num_reclaim_retries, :num_graph_pools, :graph_pool_reserved_bytes,
                      :graph_pool_allocated_bytes)
    @test all(v -> v isa Int, values(s)[1:20]) && s.num_device_free_errors isa Int
    @test s.num_gc_retries isa Int && s.num_reclaim_retries isa Int
    @test s.cache_hit_rate isa Float64 && s.fragmentation_ratio isa Float64
    @test s.num_device_free_errors == 0
    check_invariants(s)
    @test s.limit_bytes == 0
    clean!()
    s0 = memory_stats()
    x = CuArray{UInt8}(undef, 1000)
    s1 = memory_stats()
    @test s1.num_allocations == s0.num_allocations + 1
    @test s1.requested_bytes == s0.requested_bytes + 1000
    @test s1.allocated_bytes >= s0.allocated_bytes + 1000
    @test s1.num_cache_hits + s1.num_cache_misses == s0.num_cache_hits + s0.num_cache_misses + 1
    check_invariants(s1)
    unsafe_free!(x)
    s2 = memory_stats()
    @test s2.num_frees == s1.num_frees + 1
    @test s2.requested_bytes == s0.requested_bytes
    check_invariants(s2)
    if POOL == "none"
        @test s2.cached_bytes == 0
    end
    # a second allocation of the same size is a cache hit for the caching pools
    y = CuArray{UInt8}(undef, 1000)
    s3 = memory_stats()
    if POOL == "none"
        @test s3.num_cache_hits == s2.num_cache_hits
    else
        @test s3.num_cache_hits == s2.num_cache_hits + 1
    end
    unsafe_free!(y)
    # zero-byte arrays use no memory
    e = CuArray{Float64}(undef, 0, 5)
    @test memory_stats().num_allocations == s3.num_allocations
    unsafe_free!(e)
end

@testset "reset_memory_stats!" begin
    x = CuArray{UInt8}(undef, 1 << 20)
    unsafe_free!(x)
    @test reset_memory_stats!() === nothing
    s = memory_stats()
    @test s.num_allocations == 0 && s.num_frees == 0
    @test s.num_cache_hits == 0 && s.num_cache_misses == 0
    @test s.peak_reserved_bytes == s.reserved_bytes
    @test s.peak_allocated_bytes == s.allocated_bytes
    y = CuArray{UInt8}(undef, 2 << 20)
    @test memory_stats().num_allocations == 1
    @test memory_stats().peak_requested_bytes >= 2 << 20
    unsafe_free!(y)
end

@testset "reclaim" begin
    clean!()
    s = memory_stats()
    @test s.allocated_bytes == 0            # nothing live: every test frees what it made
    @test s.reserved_bytes == 0             # ... and clean! reclaimed it all
    xs = [CuArray{UInt8}(undef, n) for n in (1, 100, 4096, 1 << 16, 3 << 20, 30 << 20)]
    foreach(unsafe_free!, xs)
    s = memory_stats()
    check_invariants(s)
    if POOL == "none"
        @test s.cached_bytes == 0
    else
        @test s.cached_bytes > 0
    end
    @test reclaim() == s.cached_bytes
    @test reclaim() == 0
    s = memory_stats()
    @test s.reserved_bytes == 0 && s.cached_bytes == 0
    # partial reclaim: at least the bytes asked for, unless less is cached
    xs = [CuArray{UInt8}(undef, 1 << 20) for _ in 1:4]
    foreach(unsafe_free!, xs)
    cached = memory_stats().cached_bytes
    r1 = reclaim(1)
    @test (cached == 0 && r1 == 0) || r1 >= 1
    @test reclaim() == cached - r1
    @test reclaim(0) == 0
    @test_throws ArgumentError reclaim(-1)
    # memory in use is never released
    live = CuArray{UInt8}(undef, 1 << 20)
    reclaim()
    @test memory_stats().allocated_bytes >= 1 << 20
    fill!(live, 0x05)
    @test all(==(0x05), Array(live))
    unsafe_free!(live)
    reclaim()
    @test memory_stats().reserved_bytes == 0
end

@testset "memory_status" begin
    clean!()
    keep = CuArray{UInt8}(undef, 8192)
    io = IOBuffer()
    @test memory_status(io) === nothing
    text = String(take!(io))
    lines = split(chomp(text), '\n')
    # three lines, then (documented) the pinned host pool's once it is in use: on a GPU the
    # engine's own pinned buffers (the kernel-error record, scalar read-backs) put it in use
    @test length(lines) >= 3
    @test all(l -> occursin(r"^(Pinned host memory (usage|limit)|Registered host memory): ", l), lines[4:end])
    if get(ENV, "CUMEM_DEVICE", "host") == "host"
        @test length(lines) == 3
    end
    @test occursin(Regex("^Effective GPU memory usage: \\d+\\.\\d\\d% \\($SIZE_RE/$SIZE_RE\\)\$"), lines[1])
    @test occursin(Regex("^(Host memory \\(no GPU\\)|CUDA GPU memory) usage: $SIZE_RE\$"), lines[2])
    @test occursin(Regex("^$POOL_TYPE usage: $SIZE_RE \\($SIZE_RE allocated, $SIZE_RE cached\\)\$"), lines[3])
    if get(ENV, "CUMEM_DEVICE", "host") == "host"
        @test startswith(lines[2], "Host memory (no GPU) usage: ")
    end
    s = memory_stats()
    fb = Base.format_bytes
    @test lines[2] == (startswith(lines[2], "Host") ? "Host memory (no GPU)" : "CUDA GPU memory") *
                      " usage: " * fb(s.reserved_bytes)
    @test lines[3] == "$POOL_TYPE usage: $(fb(s.reserved_bytes)) ($(fb(s.allocated_bytes)) allocated, $(fb(s.cached_bytes)) cached)"
    # the engine writes the text (Julia adds only its own lines, none here); on a GPU the
    # first line (cuMemGetInfo) may change between two calls
    same(a, b) = is_host ? a == b : split(a, '\n')[2:end] == split(b, '\n')[2:end]
    is_host = startswith(lines[2], "Host")
    @test same(CuMem.engine_memory_status(), text)
    # the engine's byte counts read as Base.format_bytes writes them, for several sizes
    for n in (1, 1023, 1025, 5 << 20, (3 << 30) ÷ 1000)
        x = CuArray{UInt8}(undef, n)
        t = memory_stats()
        l3 = split(sprint(memory_status), '\n')[3]
        @test l3 == "$POOL_TYPE usage: $(fb(t.reserved_bytes)) ($(fb(t.allocated_bytes)) allocated, $(fb(t.cached_bytes)) cached)"
        unsafe_free!(x)
    end
    # stdout form
    out = mktemp() do path, f
        redirect_stdout(f) do
            memory_status()
        end
        close(f)
        read(path, String)
    end
    @test startswith(out, "Effective GPU memory usage: ")
    unsafe_free!(keep)
    # changing the environment after loading has no effect
    old = get(ENV, "JULIA_CUDA_MEMORY_POOL", nothing)
    ENV["JULIA_CUDA_MEMORY_POOL"] = POOL == "none" ? "binned" : "none"
    @test CuMem.pool_name() == POOL
    old === nothing ? delete!(ENV, "JULIA_CUDA_MEMORY_POOL") : (ENV["JULIA_CUDA_MEMORY_POOL"] = old)
end

@testset "memory_summary" begin
    x = CuArray{UInt8}(undef, 12345)
    text = sprint(memory_summary)
    lines = split(chomp(text), '\n')
    @test all(l -> length(l) == length(lines[1]), lines)     # a rectangular table
    @test occursin("CuMem memory summary", text)
    @test occursin(POOL_TYPE, text)
    for label in ("Requested memory", "Allocated memory", "Cached memory", "Reserved memory",
                  "Inactive split memory", "Allocations / frees", "Cache hits / misses",
                  "Device allocations / frees", "Alloc retries / OOMs", "Fragmentation",
                  "Memory limit")
        @test occursin(label, text)
    end
    @test occursin(Base.format_bytes(memory_stats().requested_bytes), text)
    unsafe_free!(x)
end

@testset "errors" begin
    e = CuMemError(CuMem.CUMEM_ERROR_INVALID_VALUE, "free of 0x10, which is not a live allocation")
    @test sprint(showerror, e) == "CuMemError: free of 0x10, which is not a live allocation (CUMEM_ERROR_INVALID_VALUE)"
    o = OutOfGPUMemoryError(3 << 20, "Effective GPU memory usage: 1.00% (1 byte/2 bytes)\n")
    @test sprint(showerror, o) == "Out of GPU memory trying to allocate 3.000 MiB\nEffective GPU memory usage: 1.00% (1 byte/2 bytes)"
    o = OutOfGPUMemoryError(3 << 20, "Effective GPU memory usage: 1.00% (1 byte/2 bytes)\n", "limit reached")
    @test sprint(showerror, o) == "Out of GPU memory trying to allocate 3.000 MiB\nlimit reached\nEffective GPU memory usage: 1.00% (1 byte/2 bytes)"
    # an engine error surfaces as CuMemError with the engine's message
    err = try CuMem.check(CuMem.c_free(UInt64(0x10))); nothing catch e; e end
    @test err isa CuMemError
    @test err.code == CuMem.CUMEM_ERROR_INVALID_VALUE
    @test occursin("not a live allocation", err.msg)
    # a double free through an internal path is refused by the engine, never a crash
    b = CuMem.alloc_buffer(64)
    CuMem.release(b, true)
    @test_throws CuMemError CuMem.check(CuMem.c_free(b.ptr))
    # more than any device holds is out of memory (as in CUDA.jl), which callers catch
    for n in (1 << 60, typemax(Int))
        err = try CuArray{UInt8}(undef, n); nothing catch e; e end
        @test err isa OutOfGPUMemoryError
        @test err.sz == n
    end
end

@testset "cumem_stats_t and the status codes match include/cumem.h" begin
    # CStats is written by hand after the header's struct: every field's name, type and
    # offset (C's natural alignment) must agree with it, not only the total size.
    header = read(joinpath(@__DIR__, "..", "..", "include", "cumem.h"), String)
    m = match(r"typedef struct \{(.*?)\} cumem_stats_t;"s, header)
    @test m !== nothing
    ctypes = Dict("uint64_t" => UInt64, "double" => Float64, "int64_t" => Int64, "uint32_t" => UInt32)
    fields = Tuple{Symbol,DataType}[]
    for line in split(m[1], '\n')
        f = match(r"^\s*(\w+)\s+(\w+);", line)     # comment lines do not match
        f === nothing && continue
        push!(fields, (Symbol(f[2]), ctypes[f[1]]))
    end
    @test length(fields) == fieldcount(CuMem.CStats)
    offset = 0
    for (i, (name, T)) in enumerate(fields)
        offset = cld(offset, sizeof(T)) * sizeof(T)          # natural alignment
        @test fieldname(CuMem.CStats, i) == name
        @test fieldtype(CuMem.CStats, i) == T
        @test fieldoffset(CuMem.CStats, i) == offset
        offset += sizeof(T)
    end
    @test sizeof(CuMem.CStats) == offset
    # the status codes and flags
    for (name, v) in (("CUMEM_SUCCESS", CuMem.CUMEM_SUCCESS),
                      ("CUMEM_ERROR_OUT_OF_MEMORY", CuMem.CUMEM_ERROR_OUT_OF_MEMORY),
                      ("CUMEM_ERROR_INVALID_VALUE", CuMem.CUMEM_ERROR_INVALID_VALUE),
                      ("CUMEM_ERROR_CONFIG", CuMem.CUMEM_ERROR_CONFIG),
                      ("CUMEM_ERROR_DEVICE", CuMem.CUMEM_ERROR_DEVICE),
                      ("CUMEM_ERROR_INTERNAL", CuMem.CUMEM_ERROR_INTERNAL),
                      ("CUMEM_ERROR_NOT_SUPPORTED", CuMem.CUMEM_ERROR_NOT_SUPPORTED),
                      ("CUMEM_ERROR_COMPILE", CuMem.CUMEM_ERROR_COMPILE),
                      ("CUMEM_ALLOC_NO_RECLAIM", CuMem.CUMEM_ALLOC_NO_RECLAIM),
                      ("CUMEM_STATUS_NO_ALLOCATIONS", CuMem.CUMEM_STATUS_NO_ALLOCATIONS))
        d = match(Regex("#define $name (\\d+)\n"), header)
        @test d !== nothing && parse(Int, d[1]) == v
    end
end

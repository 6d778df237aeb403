# Pinned host memory: CuMem.pinned, unsafe_free!(::Array), CuMem.pin, CuMem.is_pinned,
# memory_stats(:host), reset_memory_stats!(:host), reclaim(:host) and the pinned lines of
# memory_status / memory_summary. runtests.jl starts it with CUMEM_PINNED_LIMIT=64MiB
# and 2 threads:
#
#   CUMEM_PINNED_LIMIT=64MiB JULIA_NUM_THREADS=2 CUMEM_DEVICE=host julia --project test/memory/pinned_tests.jl

using CuMem, Test

const LIMIT = 64 << 20

function clean_host!()
    GC.gc(true)
    GC.gc(true)
    reclaim(:host)
    return nothing
end

# Registered ranges, as memory_status shows them.
function nranges()
    m = match(r"Registered host memory: .* in (\d+) ranges?\n", sprint(memory_status))
    return m === nothing ? 0 : parse(Int, m[1])
end

@testset "pinned host memory" begin
    @testset "nothing shown before first use" begin
        @test !occursin("Pinned host memory", sprint(memory_status))
    end

    @testset "pinned arrays" begin
        s0 = memory_stats(:host)
        @test s0.limit_bytes == LIMIT
        @test s0.num_allocations == 0
        a = CuMem.pinned(Float32, 100, 3)
        @test a isa Matrix{Float32} && size(a) == (100, 3)
        @test CuMem.is_pinned(a)
        @test UInt(pointer(a)) % 512 == 0
        s1 = memory_stats(:host)
        @test s1.num_allocations == 1
        @test s1.requested_bytes == 1200
        @test s1.allocated_bytes == 2048         # the power-of-two class
        # the device's statistics do not count it
        @test memory_stats().requested_bytes == memory_stats(:device).requested_bytes
        a .= reshape(1:300, 100, 3)
        @test sum(a) == sum(1:300)
        # uploads and downloads through pinned memory
        x = CuArray(a)
        @test Array(x) == a
        b = CuMem.pinned(Float32, (100, 3))
        copyto!(b, x)
        @test b == a
        fill!(b, 0)
        copyto!(b, 1, x, 101, 200)
        @test b[1:200] == a[101:300]
        unsafe_free!(x)
        # memory_status has the pinned lines now
        st = sprint(memory_status)
        @test occursin("\nPinned host memory usage: 4.000 KiB (4.000 KiB allocated, 0 bytes cached)\n", st)
        @test occursin("\nPinned host memory limit: 64.000 MiB\n", st)
        # unsafe_free! returns the block; a second call does nothing
        unsafe_free!(a)
        @test memory_stats(:host).num_frees == 1
        @test memory_stats(:host).cached_bytes == 2048
        unsafe_free!(a)
        @test memory_stats(:host).num_frees == 1
        # the same size class is a cache hit, the same block
        c = CuMem.pinned(UInt8, 2000)
        @test memory_stats(:host).num_cache_hits == 1
        @test memory_stats(:host).num_device_allocations == 2
        unsafe_free!(c)
        unsafe_free!(b)
        # empty arrays: ordinary, and free is a no-op
        e = CuMem.pinned(Float64, 0, 4)
        @test size(e) == (0, 4) && !CuMem.is_pinned(e)
        unsafe_free!(e)
        # a second free after the memory went to another pinned array is refused, and
        # leaves that array alone
        f1 = CuMem.pinned(UInt8, 100)
        unsafe_free!(f1)
        f2 = CuMem.pinned(UInt8, 100)
        @test pointer(f2) == pointer(f1)
        @test_throws ArgumentError unsafe_free!(f1)
        @test CuMem.is_pinned(f2)
        unsafe_free!(f2)
        # a cached block is no array's; on a GPU the driver still knows it as page-locked
        @test CuMem.is_pinned(f2) == !CuMem.is_host_device()
        # zero-dimensional
        z = CuMem.pinned(Int, ())
        @test z isa Array{Int,0} && CuMem.is_pinned(z)
        unsafe_free!(z)
    end

    @testset "the GC returns pinned arrays" begin
        clean_host!()
        n0 = memory_stats(:host).num_frees
        let
            for i in 1:5
                CuMem.pinned(UInt8, 1 << 16)
            end
        end
        clean_host!()
        s = memory_stats(:host)
        @test s.num_frees == n0 + 5
        @test s.allocated_bytes == 0 && s.reserved_bytes == 0
        @test CuMem.free_errors() == (0, 0, 0)
    end

    @testset "bad input" begin
        @test_throws ArgumentError CuMem.pinned(Any, 3)
        @test_throws ArgumentError CuMem.pinned(Vector{Int}, 3)
        @test_throws ArgumentError CuMem.pinned(Float32, -1)
        @test_throws OverflowError CuMem.pinned(Float64, typemax(Int), 2)
        before = memory_stats(:host)
        h = zeros(Float32, 10)
        err = try unsafe_free!(h); nothing; catch e; e; end
        @test err isa ArgumentError && occursin("not an array made by CuMem.pinned", err.msg)
        a = CuMem.pinned(Float32, 16)
        r = reshape(a, 4, 4)
        @test_throws ArgumentError unsafe_free!(r)
        @test CuMem.is_pinned(r)          # same memory
        unsafe_free!(a)
        @test memory_stats(:host).num_frees == before.num_frees + 1
        @test_throws ArgumentError memory_stats(:gpu)
        @test_throws ArgumentError reset_memory_stats!(:gpu)
        @test_throws ArgumentError reclaim(:gpu)
        @test_throws ArgumentError reclaim(:host, -1)
    end

    @testset "the limit" begin
        clean_host!()
        # (in a function of its own, so that `big` is unreachable once it returns)
        @noinline function fail_beside_big()
            big = CuMem.pinned(UInt8, 48 << 20)  # a 64 MiB block: the whole limit
            err = try CuMem.pinned(UInt8, 32 << 20); nothing; catch e; e; end
            @test length(big) == 48 << 20          # (keeps `big` alive until here)
            return err
        end
        err = fail_beside_big()
        @test err isa CuMemError && err.code == CuMem.CUMEM_ERROR_OUT_OF_MEMORY
        @test occursin("CUMEM_PINNED_LIMIT", err.msg) && occursin("pinned host memory", err.msg)
        @test memory_stats(:host).num_ooms >= 1
        # garbage is collected before giving up
        x = CuMem.pinned(UInt8, 32 << 20)
        @test CuMem.is_pinned(x)
        unsafe_free!(x)
        clean_host!()
        @test memory_stats(:host).reserved_bytes == 0
    end

    @testset "pin: registering Arrays" begin
        h = rand(Float64, 1000)
        @test !CuMem.is_pinned(h)
        @test CuMem.pin(h) === h
        @test CuMem.is_pinned(h)
        @test CuMem.is_pinned(pointer(h, 1000))
        @test !CuMem.is_pinned(pointer(h, 1000) + 8)
        st = sprint(memory_status)
        @test occursin("Registered host memory: 7.812 KiB in 1 range\n", st)
        @test CuMem.pin(h) === h                         # again: nothing to do
        @test occursin("in 1 range\n", sprint(memory_status))
        x = CuArray(h)
        @test Array(x) == h
        unsafe_free!(x)
        # a pinned-pool array is page-locked already
        p = CuMem.pinned(Int32, 8)
        @test CuMem.pin(p) === p
        @test nranges() == 1
        unsafe_free!(p)
        @test CuMem.pin(Float32[]) isa Vector{Float32}
        # the registration goes when the array does (made in a function of its own, so
        # that no stack slot of this one keeps it)
        h = nothing
        @noinline pin_and_drop() = (CuMem.pin(rand(UInt8, 5000)); nothing)
        n = nranges()
        pin_and_drop()
        @test nranges() == n + 1
        GC.gc(true); GC.gc(true)
        @test nranges() <= n
        @test CuMem.free_errors() == (0, 0, 0)
        # a partial overlap is refused by the engine, clearly, and changes nothing
        v = zeros(UInt8, 8192)
        CuMem.pin(v)
        w = unsafe_wrap(Array, pointer(v, 4097), 8192; own = false)   # half outside
        err = try CuMem.pin(w); nothing; catch e; e; end
        @test err isa CuMemError && occursin("overlaps the registered range", err.msg)
        @test !CuMem.is_pinned(pointer(w, 8192))
    end

    @testset "statistics reset, reclaim and summary" begin
        clean_host!()
        a = CuMem.pinned(UInt8, 5000)
        unsafe_free!(a)
        @test memory_stats(:host).cached_bytes == 8192
        reset_memory_stats!(:host)
        s = memory_stats(:host)
        @test s.num_allocations == 0 && s.num_frees == 0 && s.cached_bytes == 8192
        @test reclaim(:host) == 8192
        @test memory_stats(:host).reserved_bytes == 0
        text = sprint(memory_summary)
        lines = split(chomp(text), '\n')
        @test all(l -> length(l) == length(lines[1]), lines)
        for label in ("Pinned host memory (BinnedPool)", "Allocated pinned memory",
                      "Reserved pinned memory", "Pinned allocations / frees",
                      "Pinned cache hits / misses", "Pinned memory limit")
            @test occursin(label, text)
        end
        @test occursin("64.000 MiB", text)
    end

    @testset "threads and finalizers" begin
        clean_host!()
        ok = fill(true, 4)                   # (@test is not thread-safe on Julia 1.5)
        Threads.@threads for t in 1:4
            for i in 1:50
                a = CuMem.pinned(Float32, 64 * t)
                a .= t
                ok[t] &= all(==(t), a) && CuMem.is_pinned(a)
                isodd(i) && unsafe_free!(a)
            end
        end
        @test all(ok)
        clean_host!()
        s = memory_stats(:host)
        @test s.allocated_bytes == 0 && s.reserved_bytes == 0
        @test CuMem.free_errors() == (0, 0, 0)
    end
end

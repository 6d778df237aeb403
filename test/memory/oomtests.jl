# Out of memory under a small limit: runtests.jl runs this with JULIA_CUDA_MEMORY_LIMIT=64MiB.

using CuMem, Test

const LIMIT = 64 << 20

@testset "out of GPU memory ($(CuMem.pool_name()) pool, limit 64 MiB)" begin
    @test memory_stats().limit_bytes == LIMIT
    @test occursin("\nMemory limit: 64.000 MiB\n", sprint(memory_status))
    @test occursin("Memory limit", sprint(memory_summary))

    # a request larger than the limit
    err = try
        CuArray{UInt8}(undef, 100 << 20)
        nothing
    catch e
        e
    end
    @test err isa OutOfGPUMemoryError
    @test err.sz == 100 << 20
    msg = sprint(showerror, err)
    @test startswith(msg, "Out of GPU memory trying to allocate 100.000 MiB\n")
    @test occursin("Effective GPU memory usage: ", msg)
    @test occursin("Memory limit: 64.000 MiB", msg)
    # the engine's reason, in the error and in its message
    @test occursin("cannot allocate 100.000 MiB", err.reason)
    @test occursin("JULIA_CUDA_MEMORY_LIMIT of 64.000 MiB", err.reason)
    @test occursin(err.reason, msg)
    @test memory_stats().num_ooms >= 1

    # the package works afterwards
    a = CuArray(Float32[1, 2, 3])
    @test Array(a) == Float32[1, 2, 3]
    unsafe_free!(a)

    # held memory: allocations fail while it is referenced ... (in a function: a variable
    # of top-level code can stay rooted after it is reassigned)
    function hold_until_oom()
        held = CuVector{UInt8}[]
        err = try
            for i in 1:10
                push!(held, CuArray{UInt8}(undef, 16 << 20))
            end
            nothing
        catch e
            e
        end
        return err, length(held), memory_stats().requested_bytes
    end
    err, nheld, requested = hold_until_oom()
    @test err isa OutOfGPUMemoryError
    @test 1 <= nheld < 5
    @test requested == nheld * (16 << 20)
    # ... and succeed once it is unreachable: the ladder's GC.gc runs the finalizers
    big = CuArray{UInt8}(undef, 40 << 20)
    @test length(big) == 40 << 20
    unsafe_free!(big)

    # garbage is collected on demand: never more than the limit, never an error
    function churn(n)
        for i in 1:n
            x = CuArray{UInt8}(undef, 24 << 20)
            fill!(x, UInt8(i % 256))
        end
    end
    churn(40)                                       # 960 MiB through a 64 MiB limit
    @test memory_stats().reserved_bytes <= LIMIT
    @test memory_stats().peak_reserved_bytes <= LIMIT
    GC.gc(true)
    @test memory_stats().requested_bytes == 0
    @test CuMem.free_errors()[1] == 0

    # the last rung of the ladder is the engine's: a request that fits only once the cache
    # is released succeeds, and the engine counts the release-and-retry
    reclaim()
    a = CuArray{UInt8}(undef, 20 << 20)
    unsafe_free!(a)                                   # cached (binned: a 32 MiB block)
    r0 = memory_stats().num_alloc_retries
    b = CuArray{UInt8}(undef, 48 << 20)               # binned: 64 MiB, the whole limit
    @test length(b) == 48 << 20
    if CuMem.pool_name() == "binned"
        @test memory_stats().num_alloc_retries == r0 + 1
    end
    unsafe_free!(b)
end

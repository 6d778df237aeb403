# Two threads allocating and dropping arrays under a small limit (runtests.jl runs this
# with JULIA_NUM_THREADS=2 and JULIA_CUDA_MEMORY_LIMIT=8MiB). Live memory always fits:
# each thread holds at most two arrays of at most 2 MiB (the binned pool's largest class
# here), so 4 live arrays take at most 8 MiB, and the garbage is left to the GC. No
# allocation may fail: when one thread's ladder runs out of rungs, the other thread may
# still be running the finalizers of a collection, and the ladder must wait for them.

using CuMem, Test, Random

const LIMIT = 8 << 20

function churn(seed, n)
    rng = MersenneTwister(seed)
    errors = Any[]
    for i in 1:n
        bytes = rand(rng, 4:23) << 16          # 256 KiB … 1.44 MiB
        try
            x = CuArray{UInt8}(undef, bytes)
            fill!(x, UInt8(i % 256))
        catch e
            e isa OutOfGPUMemoryError || rethrow()
            push!(errors, e)
        end
    end
    return errors
end

@testset "no spurious out of memory with $(Threads.nthreads()) threads ($(CuMem.pool_name()))" begin
    @test Threads.nthreads() >= 2
    @test memory_stats().limit_bytes == LIMIT
    n = parse(Int, get(ENV, "CUMEM_TEST_CHURN", "150"))
    errors = [Any[] for _ in 1:Threads.nthreads()]
    Threads.@threads for t in 1:Threads.nthreads()
        errors[t] = churn(t, n)
    end
    errs = reduce(vcat, errors)
    isempty(errs) || println(sprint(showerror, first(errs)))
    @test isempty(errs)
    @test memory_stats().peak_reserved_bytes <= LIMIT
    GC.gc(true)
    GC.gc(true)
    @test memory_stats().requested_bytes == 0
    @test CuMem.free_errors()[1] == 0

    # a request that can never fit still fails, and promptly
    t = @elapsed err = try
        CuArray{UInt8}(undef, 2 * LIMIT)
        nothing
    catch e
        e
    end
    @test err isa OutOfGPUMemoryError
    @test occursin("JULIA_CUDA_MEMORY_LIMIT", err.reason)
    @test t < 30
end

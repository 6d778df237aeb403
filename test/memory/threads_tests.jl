# Allocations, frees and finalizers from several threads at once (runtests.jl starts the
# pool tests with JULIA_NUM_THREADS=2).

@testset "threads ($(Threads.nthreads()))" begin
    clean!()
    s0 = memory_stats()
    sums = zeros(Int, Threads.nthreads())
    Threads.@threads for t in 1:Threads.nthreads()
        acc = 0
        for i in 1:300
            x = CuArray{Int32}(undef, 64 + 16i)
            fill!(x, Int32(i))
            y = reshape(x, 4, :)
            acc += Int(sum(Array(y)) ÷ length(x))
            if iseven(i)
                unsafe_free!(x)                # the view keeps it until y is collected
            end
            i % 100 == 0 && GC.gc(false)       # finalizers run while others allocate
        end
        sums[Threads.threadid()] += acc
    end
    @test sum(sums) == Threads.nthreads() * sum(1:300)
    GC.gc(true)
    GC.gc(true)
    s1 = memory_stats()
    @test s1.requested_bytes == s0.requested_bytes
    @test s1.num_allocations - s0.num_allocations == s1.num_frees - s0.num_frees
    @test CuMem.free_errors()[1] == 0
    check_invariants(s1)
end

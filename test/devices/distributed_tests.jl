# Distributed.jl with one device per worker (examples/julia/distributed.jl): 2 workers on
# 2 host devices standing in for GPUs (CUMEM_DEVICE=host:2), or on 2 GPUs
# (CUMEM_DEVICE=cuda). Each computes with the compute kernels and reports its own
# memory_stats() to the driver.
#
#   CUMEM_DEVICE=host:2 julia --project test/devices/distributed_tests.jl

using Test

include(joinpath(@__DIR__, "..", "..", "examples", "julia", "distributed.jl"))

@testset "Distributed: one device per worker" begin
    results = run_workers()
    @test length(results) == 2
    @test sort([r.worker for r in results]) == sort(workers_added)
    @test sort([r.device for r in results]) == (ndevices_on(first(workers_added)) >= 2 ? [0, 1] : [0, 0])
    for r in results
        @test r.sum == sum(2f0 .* (1:4096) .+ 1)
        @test r.gemm_sum == 2 * 64 * 64
        s = r.stats
        # each worker's own engine: its allocations (x, y, A, B, C and the reductions'
        # temporaries), all on the device it took
        @test s.num_allocations >= 5
        # A, B and C were live together during the GEMM (x and y may be collected by then)
        @test s.peak_requested_bytes >= 4 * 3 * 64 * 64
        @test s.peak_allocated_bytes >= s.allocated_bytes
    end
    # a worker that took device 1 allocated nothing on device 0
    if results[end].device == 1
        @test remotecall_fetch(() -> memory_stats(CuDevice(0)).num_allocations, results[end].worker) == 0
    end
end
rmprocs(workers_added)

# The package under injected device failures: runtests.jl runs this with
# CUMEM_FAULT=alloc:0.3,free:0.2,copy:0.05,seed=11. Failed allocations surface as
# OutOfGPUMemoryError (only once the whole allocation ladder failed), failed copies as
# CuMemError with CUMEM_ERROR_DEVICE; failed device frees are counted, never thrown, and
# nothing leaks once everything is collected and the cache reclaimed. runtests.jl runs it
# with the split, expandable (mappings fail as allocations, unmappings as frees) and none pools.

using CuMem, Test

@testset "CUMEM_FAULT ($(CuMem.pool_name()) pool)" begin
    @test endswith(CuMem.device_name(), "(with CUMEM_FAULT)")
    ooms, device_errors, checked = 0, 0, 0
    held = CuVector{UInt8}[]
    for i in 1:2000
        try
            n = 1 + (i * 7919) % (1 << 20)
            a = CuArray{UInt8}(undef, n)
            fill!(a, i % UInt8)
            host = Array(a)
            @test all(==(i % UInt8), host)
            checked += 1
            i % 3 == 0 ? push!(held, a) : unsafe_free!(a)
        catch e
            if e isa OutOfGPUMemoryError
                ooms += 1
            elseif e isa CuMemError && e.code == CuMem.CUMEM_ERROR_DEVICE
                @test occursin("CUMEM_FAULT", e.msg)
                device_errors += 1
            else
                rethrow()
            end
        end
        length(held) > 50 && (foreach(unsafe_free!, held); empty!(held))
        i % 100 == 0 && GC.gc(false)
        # The expandable pool unmaps (its device frees) only when memory is short or the
        # cache is reclaimed: reclaim now and then, so its failed unmappings are exercised.
        i % 250 == 0 && reclaim()
    end
    @info "CUMEM_FAULT: $checked checked arrays, $ooms out-of-memory errors, $device_errors device errors"
    @test checked > 1000
    @test device_errors > 0
    empty!(held)
    GC.gc(true); GC.gc(true)
    reclaim()
    s = memory_stats()
    @test (s.requested_bytes, s.allocated_bytes, s.reserved_bytes) == (0, 0, 0)
    @test s.num_frees <= s.num_allocations
    @test s.num_device_free_errors > 0
    @test CuMem.free_errors()[1] == 0          # a failed device free is not a failed free
end

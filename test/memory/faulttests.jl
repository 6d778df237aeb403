# The package under injected device failures: runtests.jl runs this with
# CUMEM_FAULT=alloc:0.3,free:0.2,copy:0.05,stream:0.02,seed=11. Failed allocations surface as
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

# Issue 22, item 8: the faults reach pinned host memory (its device allocations fail as
# the GPU's), asynchronous copies (as synchronous ones: CuMemError, nothing written) and
# so CuIterator's uploads; nothing leaks on either pool afterwards.
is_fault(e) = (e isa CuMemError && (e.code == CuMem.CUMEM_ERROR_DEVICE || e.code == CuMem.CUMEM_ERROR_OUT_OF_MEMORY) &&
               occursin("CUMEM_FAULT", e.msg)) || e isa OutOfGPUMemoryError
@noinline function run_epochs()
    iter_errors, batches_seen = 0, 0
    batches = [(fill(Float32(k), 64), fill(Int32(k), 8)) for k in 1:40]
    for epoch in 1:10
        try
            for (x, y) in CuIterator(batches)
                batches_seen += 1
                hx, hy = Array(x), Array(y)    # downloads that may fail too
                @test hx[1] == hy[1]
            end
        catch e
            is_fault(e) || rethrow()
            iter_errors += 1
        end
    end
    return iter_errors, batches_seen
end
@testset "CUMEM_FAULT in pinned memory, async copies and CuIterator ($(CuMem.pool_name()) pool)" begin
    pinned_errors, async_errors, checked = 0, 0, 0
    d = CuArray{Float32}(undef, 1024)
    for i in 1:1000
        reclaim(:host)                         # so that every pinned array is a device allocation
        h = try
            CuMem.pinned(Float32, 1024)
        catch e
            is_fault(e) || rethrow()
            pinned_errors += 1
            continue
        end
        fill!(h, Float32(i))
        try
            fill!(d, 0f0)
            copyto!(d, h; async = true)
            synchronize(stream())
            got = Array(d)                     # a download that may fail too
            @test all(==(Float32(i)), got)
            checked += 1
        catch e
            is_fault(e) || rethrow()
            async_errors += 1
        end
        unsafe_free!(h)
    end
    @info "CUMEM_FAULT: $pinned_errors pinned allocations and $async_errors asynchronous copies failed, $checked checked"
    @test pinned_errors > 0
    @test async_errors > 0
    @test checked > 500
    unsafe_free!(d)
    # the epochs in a function of their own: its frame, which may still hold the last
    # iterator and batch, is gone before the leak check below
    iter_errors, batches_seen = run_epochs()
    @info "CUMEM_FAULT: CuIterator failed in $iter_errors of 10 epochs, $batches_seen batches seen"
    @test iter_errors > 0
    GC.gc(true); GC.gc(true)
    reclaim(); reclaim(:host)
    @test memory_stats().requested_bytes == 0
    @test memory_stats(:host).requested_bytes == 0
    @test CuMem.free_errors()[1] == 0
end

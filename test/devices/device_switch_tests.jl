# Calls that act on "the current device" use the calling task's device even when another
# task on the same thread made a different device the engine's current one: the bindings
# (julia/lib/libcumem.jl) switch inside every such wrapper. Before, the memory tools' C
# functions and CuEvent() acted on whatever device the thread had last been switched to.
# Included by multidevice_tests.jl (needs two devices: CUMEM_DEVICE=host:2 or 2 GPUs).

@testset "the task's device, whatever the thread's" begin
    before = memory_stats(CuDevice(0)).limit_bytes
    before1 = memory_stats(CuDevice(1)).limit_bytes
    limit = 96 << 20
    ready = Channel{Nothing}(1)
    done = Channel{Nothing}(1)
    # task A works on device 1; task B, on the same thread, makes device 0 the engine's
    # current device between A's switch and A's calls
    a = @async begin
        device!(1)
        put!(ready, nothing)
        take!(done)                       # B has run on device 0 meanwhile
        set_memory_limit!(limit)          # a memory tool: must act on device 1
        e = CuEvent()                     # must be made on device 1
        record(e, CuMem.default_stream()); synchronize(e)
        history_ok = (record_memory_history(true); x = CuArray{UInt8}(undef, 1000);
                      ev = memory_events(); record_memory_history(false); unsafe_free!(x);
                      any(e -> e.kind === :alloc && e.device == 1, ev))
        (CuMem.deviceid(), history_ok)
    end
    b = @async begin
        take!(ready)
        x = CuArray{Float32}(undef, 4)    # device 0's allocation: the thread's device is 0 now
        unsafe_free!(x)
        put!(done, nothing)
    end
    wait(b)
    dev, history_ok = fetch(a)
    @test dev == 1
    @test history_ok
    @test memory_stats(CuDevice(1)).limit_bytes == limit
    @test memory_stats(CuDevice(0)).limit_bytes == before
    device!(1) do
        set_memory_limit!(before1 == 0 ? nothing : before1)
    end
    @test memory_stats(CuDevice(1)).limit_bytes == before1
end

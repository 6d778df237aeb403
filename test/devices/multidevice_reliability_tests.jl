# Issue 22 on several devices (included by multidevice_tests.jl: two host devices
# standing in for GPUs, or two GPUs).

# Item 5: the calls that act on "the current device" act on the task's device, also when
# another task on the same thread last used another device (each task has its device;
# the engine has one current device per thread, which the other task left on device 0).
@testset "memory tools and CuEvent act on the task's device" begin
    t0 = @async nothing                     # a task on this thread that will use device 0
    device!(1) do
        a = CuArray{Float32}(undef, 4096)   # on device 1
        addr = UInt64(pointer(a))
        other = @async begin                # same thread, device 0: moves the thread's device
            b = CuArray{Float32}(undef, 16)
            unsafe_free!(b)
            nothing
        end
        wait(other)
        @test device() == CuDevice(1)
        # the snapshot lists device 1's segments, which hold `a`
        segs = memory_snapshot()
        @test any(s -> s.addr <= addr < s.addr + s.size, segs)
        # the limit is set on device 1
        old = memory_stats(CuDevice(1)).limit_bytes
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        set_memory_limit!("900MiB")
        @test memory_stats(CuDevice(1)).limit_bytes == 900 << 20
        @test memory_stats(CuDevice(0)).limit_bytes != 900 << 20
        set_memory_limit!(old == 0 ? nothing : old)            # as it was (runtests sets one)
        # the history records device 1's allocations
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        record_memory_history(true)
        c = CuArray{Float32}(undef, 8)
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        evs = memory_events()
        record_memory_history(false)
        @test any(e -> e.kind == :alloc && e.addr == UInt64(pointer(c)), evs)
        # leak checks and the cache limit on device 1
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        @test any(l -> l.addr == addr, check_memory_leaks())
        # an event made here belongs to device 1: recorded on a stream of device 1
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        s = CuStream()
        wait(@async (CuArray{Float32}(undef, 16); nothing))
        e = CuEvent()
        @test record(e, s) === e
        synchronize(s)
        CuMem.unsafe_destroy!(s)
        unsafe_free!(a); unsafe_free!(c)
    end
    wait(t0)
end

# Item 11: cross-device misuse names the device of each array and the task's.
@testset "cross-device errors name the devices" begin
    a1, b1 = device!(() -> (CuArray(Float32[1, 2, 3]), CuArray(Float32[4, 5, 6])), 1)
    a0 = CuArray(Float32[7, 8, 9])
    msg(f) = try f(); "" catch e; e isa ArgumentError ? e.msg : sprint(showerror, e) end
    m = msg(() -> a1 .+ b1)                     # both on device 1, the task on device 0
    @test occursin("device 1", m) && occursin("task's device is 0", m) && !occursin("device 0 and", m)
    m = msg(() -> a0 .+ a1)
    @test occursin("device 0", m) && occursin("device 1", m) && occursin("task's device is 0", m)
    for f in (() -> copyto!(a1, Float32[1, 2, 3]), () -> Array(a1), () -> fill!(a1, 1f0), () -> sum(a1))
        m = msg(f)
        @test m == "" || (occursin("device 1", m) && occursin("task's device is 0", m))
        @test !occursin("is not inside any allocation", m)
    end
    # an index vector on another device is refused, as any operand
    i1 = device!(() -> CuArray([1, 2]), 1)
    m = msg(() -> a0[i1])
    @test occursin("device 1", m) && occursin("task's device is 0", m)
    device!(1) do
        @test Array(a1[i1]) == Float32[1, 2]
    end
end

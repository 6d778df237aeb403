# Several devices (julia/devices/devices.jl): device!/devices/ndevices, task-local devices,
# per-device pools and statistics, arrays remembering their device, the mixed-device
# errors, and copies between devices (peer or staged through the host).
# Runs on two host devices standing in for GPUs, or on two GPUs:
#
#   CUMEM_DEVICE=host:2 julia --project test/devices/multidevice_tests.jl
#   CUMEM_DEVICE=cuda   julia --project test/devices/multidevice_tests.jl     (2 GPUs or more)

using CuMem, Test, LinearAlgebra

if ndevices() < 2
    @info "multidevice_tests.jl: $(ndevices()) device; run with CUMEM_DEVICE=host:2 or on 2 GPUs"
    exit(get(ENV, "CUMEM_DEVICE", "") == "cuda" ? 0 : 1)
end

const GPU = !CuMem.on_host()

@testset "several devices" begin
    @testset "devices, device!, task-local" begin
        @test length(devices()) == ndevices()
        @test devices()[2] == CuDevice(1)
        @test device() == CuDevice(0)
        @test CuMem.deviceid() == 0
        @test_throws ArgumentError device!(ndevices())
        @test_throws ArgumentError device!(-1)
        @test device() == CuDevice(0)
        @test device!(1) do
            @test device() == CuDevice(1)
            # a new task starts on device 0, as in CUDA.jl
            @test fetch(@async device()) == CuDevice(0)
            CuMem.deviceid()
        end == 1
        @test device() == CuDevice(0)
        # restored after an error too
        @test_throws ErrorException device!(() -> error("boom"), 1)
        @test device() == CuDevice(0)
        t = @async (device!(1); device())
        @test fetch(t) == CuDevice(1)
        @test device() == CuDevice(0)          # the other task's switch stays there
        @test occursin("CuDevice(1): ", sprint(show, MIME"text/plain"(), CuDevice(1)))
    end

    @testset "arrays remember their device; pools and statistics per device" begin
        c = device!(() -> CuMem.zeros(Float32, 5), 1)
        @test device(c) == CuDevice(1)
        @test device(reshape(c, 5, 1)) == CuDevice(1)
        @test device(view(c, 2:3)) == CuDevice(1)
        reset_memory_stats!(); device!(reset_memory_stats!, 1)
        r0, r1 = memory_stats(CuDevice(0)).requested_bytes, memory_stats(CuDevice(1)).requested_bytes
        a = CuArray(Float32[1, 2, 3, 4])
        b = device!(1) do
            CuArray(Float32[10, 20, 30, 40, 50])
        end
        @test device(a) == CuDevice(0)
        @test device(b) == CuDevice(1)
        s0, s1 = memory_stats(CuDevice(0)), memory_stats(CuDevice(1))
        @test s0.requested_bytes - r0 == 16 && s0.num_allocations == 1
        @test s1.requested_bytes - r1 == 20 && s1.num_allocations == 1
        @test memory_stats() == memory_stats(CuDevice(0))
        # unsafe_free! on device 0 frees b on device 1 (the engine finds it by address)
        unsafe_free!(b)
        @test memory_stats(CuDevice(1)).requested_bytes == r1
        @test memory_stats(CuDevice(1)).num_frees == 1
        @test memory_stats(CuDevice(0)).requested_bytes - r0 == 16
        # finalizers too
        device!(1) do
            for _ in 1:10
                CuArray{UInt8}(undef, 1000)
            end
        end
        GC.gc(true)
        @test memory_stats(CuDevice(1)).requested_bytes == r1
        @test memory_stats(CuDevice(1)).num_frees == 11
        @test CuMem.free_errors()[1] == 0
        # memory_status: one section per open device
        txt = sprint(memory_status)
        @test occursin("Device 0 (", txt) && occursin("Device 1 (", txt)
        @test length(collect(eachmatch(r"Pool usage", txt))) == 2
        @test !occursin("Device", sprint(memory_status, CuDevice(1)))
        c = nothing; GC.gc(true)
        @test device!(reclaim, 1) > 0
        @test memory_stats(CuDevice(1)).cached_bytes == 0
    end

    @testset "copies between devices" begin
        x = CuArray(collect(Float64, 1:1000))
        y = device!(() -> CuArray{Float64}(undef, 1000), 1)
        path = CuMem.peer_access(CuDevice(1), CuDevice(0))
        @test path in (:peer, :host)
        GPU || @test path == :peer
        @test copyto!(y, x) === y
        @test Array(y) == 1:1000
        fill!(x, 0)
        @test CuMem.copy_peer!(x, y; staged = true) == :host
        @test Array(x) == 1:1000
        @test CuMem.copy_peer!(x, y) == path
        @test CuMem.copy_peer!(x, x) == :same
        z = device!(() -> CuMem.zeros(Float64, 10), 1)
        copyto!(z, 3, x, 100, 5)
        @test Array(z) == [0, 0, 100, 101, 102, 103, 104, 0, 0, 0]
        @test_throws BoundsError copyto!(z, 8, x, 1, 5)
        @test Array(z)[8:10] == [0, 0, 0]
        # copy keeps the device rule: another device's array is an error, as for broadcasts
        @test_throws ArgumentError copy(y)
        @test device!(() -> device(copy(y)), 1) == CuDevice(1)
        @test device!(() -> Array(copy(y)), 1) == 1:1000
    end

    @testset "mixing devices is an error that names both" begin
        a = CuMem.ones(Float32, 8)
        b = device!(() -> CuMem.ones(Float32, 8), 1)
        e = try; a .+ b; nothing; catch err; err; end
        @test e isa ArgumentError
        @test occursin("device 0", e.msg) && occursin("device 1", e.msg) && occursin("broadcast", e.msg)
        @test_throws ArgumentError sum(b)                 # device 1's array, task on device 0
        @test_throws ArgumentError dot(a, b)
        @test_throws ArgumentError axpy!(2f0, a, b)
        @test_throws ArgumentError fill!(b, 3)
        @test_throws ArgumentError a * transpose(b)
        @test Array(b) == ones(Float32, 8)                # nothing was written
        # copies and gathers keep the rule too (they made their result on device 0)
        @test_throws ArgumentError b[2:3]
        @test_throws ArgumentError b[:]
        @test_throws ArgumentError copy(b)
        @test_throws ArgumentError sort(b)
        @test_throws ArgumentError getindex.(Ref(b), 1:8)
        @test device!(() -> Array(b[2:3]), 1) == ones(Float32, 2)
        @test device!(() -> Array(getindex.(Ref(b), 1:2)), 1) == ones(Float32, 2)
        # on its own device everything works
        @test device!(() -> sum(b .* 2), 1) == 16
        m = device!(() -> CuArray(Float32[1 2; 3 4]), 1)
        @test device!(() -> Array(m * m), 1) == Float32[7 10; 15 22]
        @test device!(() -> (fill!(b, 3); Array(b)), 1) == fill(3f0, 8)
        # compute kernels: per device (on a GPU, one compiled module per device)
        c = device!(() -> Array(cumsum(CuArray(collect(1:5)))), 1)
        @test c == cumsum(1:5)
        @test Array(a .+ 1) == fill(2f0, 8)
    end

    @testset "streams belong to their device" begin
        s0 = device!(() -> CuStream(), 0)
        s1 = device!(() -> CuStream(), 1)
        @test s0.dev == 0 && s1.dev == 1
        @test s0.handle != s1.handle                      # unique across devices
        t = @async begin
            device!(0)
            stream!(s0)
            a = CuArray{Float32}(undef, 64)               # on s0's pool
            r0 = (stream() === s0, CuMem.array_stream(a) == s0.handle)
            device!(1)                                    # the task's stream there: the default one
            b = CuArray{Float32}(undef, 64)
            r1 = (stream() === CuMem.default_stream(), CuMem.array_stream(b) == 0, CuMem.device(b))
            err = try stream!(s0); nothing catch e; e end
            still = stream() === CuMem.default_stream()   # the refused stream! changed nothing
            stream!(s1)
            r2 = stream() === s1
            device!(0)
            r3 = stream() === s0                          # back on device 0: its stream again
            unsafe_free!(b); unsafe_free!(a)
            (r0, r1, err, still, r2, r3)
        end
        r0, r1, err, still, r2, r3 = fetch(t)
        @test r0 == (true, true)
        @test r1 == (true, true, CuDevice(1))
        @test err isa ArgumentError && occursin("device 0", err.msg)
        @test still && r2 && r3
        # a stream is synchronised and destroyed on its own device from any device
        device!(1) do
            @test synchronize(s0) === nothing
            CuMem.unsafe_destroy!(s0)
            @test_throws ArgumentError synchronize(s0)    # destroyed
            @test synchronize(s1) === nothing              # device 1's stream untouched
        end
        CuMem.unsafe_destroy!(s1)
        # CuIterator keeps one copy stream per device
        for d in (0, 1)
            got = device!(d) do
                [Array(x) for x in CuIterator([Float32[1, 2], Float32[3, 4]]; prefetch = 1)]
            end
            @test got == [Float32[1, 2], Float32[3, 4]]
        end
    end

    include("multidevice_reliability_tests.jl")

    @testset "per-device limits" begin
        lim = get(ENV, "JULIA_CUDA_MEMORY_LIMIT", "")
        if !isempty(lim)
            @test memory_stats(CuDevice(0)).limit_bytes == memory_stats(CuDevice(1)).limit_bytes > 0
        end
    end
end

include("device_switch_tests.jl")

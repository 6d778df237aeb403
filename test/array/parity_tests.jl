# CUDA.jl 2.x behaviour that its own tests check (bench/julia/cudajl_suite.jl): CuPtr
# arithmetic and conversions, CU_NULL, a freed array's `state`, `cu` of ranges and
# `cu[...]`, `CuMem.@allocated` / `@timed`, the message for a host pointer to a CuArray,
# contiguous views as CuArrays, and the driver API (devices, versions, streams, events).
# Included by pooltests.jl.

@testset "CUDA.jl parity: pointers, state, cu, @allocated" begin
    @testset "CuPtr" begin
        p = CuPtr{Int}(0xDEADBEEF)
        v = CuPtr{Cvoid}(0xDEADBEEF)
        @test eltype(p) == Int && eltype(v) == Cvoid
        @test 2 + p == p + 2 && (2 + p) - p == 2 && (p + 16) - 16 == p
        @test Int(p) == Int(0xDEADBEEF) && UInt(p) == 0xDEADBEEF
        @test convert(CuPtr{Int}, v) == p
        @test convert(CuPtr{Int}, Int(0xDEADBEEF)) == p
        @test convert(UInt, p) == 0xDEADBEEF
        @test reinterpret(Ptr{Cvoid}, v) == Ptr{Cvoid}(Int(0xDEADBEEF))
        @test reinterpret(CuPtr{Int}, Ptr{Cvoid}(Int(0xDEADBEEF))) == p
        @test_throws ArgumentError convert(Ptr{Cvoid}, v)
        @test isless(p, p + 1)
        @test CU_NULL === CuPtr{Cvoid}(0) && Base.isexported(CuMem, :CU_NULL)
    end

    @testset "host pointer to a CuArray: a clear error" begin
        x = CuArray([1, 2])
        err = try
            Base.unsafe_convert(Ptr{Int}, x); nothing
        catch e
            e
        end
        @test err isa ArgumentError && occursin("CPU address", err.msg) && occursin("pointer(a)", err.msg)
        @test_throws ArgumentError ccall(:strlen, Csize_t, (Ptr{Int},), x)
    end

    @testset "state: ARRAY_MANAGED, then ARRAY_FREED" begin
        x = CuArray{Float32}(undef, 4)
        @test x.state == CuMem.ARRAY_MANAGED
        unsafe_free!(x)
        @test x.state == CuMem.ARRAY_FREED
        @test :state in propertynames(x)
        batches = [rand(Float32, 3) for _ in 1:3]
        prev = nothing
        for b in CuIterator(batches)
            prev === nothing || @test prev.state == CuMem.ARRAY_FREED
            @test b.state == CuMem.ARRAY_MANAGED
            prev = b
        end
        @test prev.state == CuMem.ARRAY_FREED
    end

    @testset "cu of ranges, cu[...]" begin
        @test cu(1:3) === 1:3
        @test cu(0.5:1.0:3.5) === 0.5:1.0:3.5
        c = cu[1, 2, 3]
        @test c isa CuVector{Int} && Array(c) == [1, 2, 3]
        @test cu[1.5, 2] isa CuVector{Float64}
        @test cu([1.0, 2.0]) isa CuVector{Float32}          # unchanged: arrays still convert
    end

    @testset "@allocated, @timed" begin
        @test (CuMem.@allocated CuArray{Int32}(undef, 1)) == 4
        @test (CuMem.@allocated CuArray{Float64}(undef, 3, 5)) == 120
        @test (CuMem.@allocated 1 + 1) == 0
        @test (CuMem.@allocated (CuArray{UInt8}(undef, 7); CuArray{UInt8}(undef, 9))) == 16
        out = CuMem.@timed CuArray{Int32}(undef, 1)
        @test out.value isa CuArray{Int32}
        @test out.gpu_bytes == 4 && out.gpu_allocations == 1
        @test out.time >= 0 && out.cpu_bytes >= 0
        @test_throws DivideError CuMem.@allocated div(1, 0)
        @test CuMem.ALLOC_MEASURING[] == 0                  # an exception ends the measurement
        s = mktemp() do path, f
            redirect_stdout(() -> (CuMem.@time CuArray{Int32}(undef, 1)), f)
            close(f)
            read(path, String)
        end
        @test occursin("1 GPU allocation: 4 bytes", s)
    end

    @testset "contiguous views are CuArrays sharing the memory" begin
        a = CuArray(rand(Int64, 5, 4, 3)); h = Array(a)
        for (I, T) in (((:, 1, 2), CuVector{Int64}), ((1:4, 1, 2), CuVector{Int64}),
                       ((:, 1:4, 3), CuMatrix{Int64}), ((:, :, 1), CuMatrix{Int64}),
                       ((:, :, :), CuArray{Int64,3}), ((:,), CuVector{Int64}),
                       ((3:7,), CuVector{Int64}), ((2, 3, 2), CuArray{Int64,0}))
            v = view(a, I...)
            @test v isa T
            @test Array(v) == (v isa CuArray{Int64,0} ? fill(h[I...]) : h[I...])
        end
        @test view(a, 1:3, 1:3, 3) isa SubArray && view(a, 1, :, 3) isa SubArray
        @test view(a, [1, 2], 1, 1) isa SubArray
        @test_throws BoundsError view(a, :, 5, 1)
        @test_throws BoundsError view(a, 0:2)
        v = @view a[:, 2, 3]
        v .= 7
        @test all(Array(a)[:, 2, 3] .== 7) && Array(a)[:, 1, 3] == h[:, 1, 3]
        @test Array(reshape(view(a, :, :, 2), 20)) == vec(Array(a)[:, :, 2])
        # aliasing by byte ranges, as CUDA.jl
        x2 = CuArray([1, 2]); y2 = view(x2, 2:2); z2 = view(x2, 1:1)
        @test Base.mightalias(x2, x2) && Base.mightalias(x2, y2) && Base.mightalias(x2, z2)
        @test !Base.mightalias(y2, z2) && !Base.mightalias(x2, copy(y2))
        @test Base.dataids(y2) == Base.dataids(x2)
        # the memory lives while a view holds it
        b = CuArray(collect(1:10)); vb = view(b, 3:6)
        unsafe_free!(b)
        @test Array(vb) == 3:6
        @test_throws AssertionError view(b, 1:2)
        @test length(view(CuArray([1, 2]), 2:1)) == 0
        # deepcopy keeps a view aliased with its parent's copy
        x = CuArray(collect(1:10)); y = view(x, 2:4)
        dc = deepcopy((x, y))
        dc[1] .= 0
        @test Array(dc[2]) == [0, 0, 0] && Array(y) == 2:4
        @test Array(deepcopy(y)) == 2:4
        # resize! refuses a vector that a view shares, and memory it does not own
        @test_throws ArgumentError resize!(x, 3)
        c = CuArray([1, 2])
        GC.@preserve c begin
            w = unsafe_wrap(CuArray{Int}, pointer(c), 2)
            @test_throws ArgumentError resize!(w, 3)
        end
    end

    @testset "@retry_reclaim" begin
        n = Ref(0)
        @test CuMem.@retry_reclaim(isequal(42), 42) == 42
        @test CuMem.@retry_reclaim(isequal(42), (n[] += 1; 41)) == 41 && n[] == 1
        n[] = 0
        @test CuMem.@retry_reclaim(x -> x < 3, (n[] += 1)) == 3      # retried until it succeeds
        n[] = 0
        @test CuMem.@retry_reclaim(x -> true, (n[] += 1)) == 4       # three retries, then gives up
    end

    @testset "driver API: devices, versions" begin
        d = device()
        @test CuMem.name(d) isa String
        @test CuMem.attribute(d, CuMem.DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) == CuMem.device_info().max_threads
        @test CuMem.attribute(d, CuMem.DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) == CuMem.device_info().sm_count
        @test warpsize(d) == 32
        @test VersionNumber(CuMem.attribute(d, CuMem.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            CuMem.attribute(d, CuMem.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)) == capability(d)
        @test CuMem.totalmem(d) == CuMem.total_memory() > 0
        @test_throws ArgumentError CuMem.attribute(CuMem.DEVICE_CPU, 1)
        @test sprint(show, MIME"text/plain"(), CuMem.DEVICE_CPU) == "CuDevice(-1): CPU"
        @test sprint(show, MIME"text/plain"(), CuMem.DEVICE_INVALID) == "CuDevice(-2): INVALID"
        @test eval(Meta.parse(repr(d))) == d
        if CuMem.is_host_device()
            @test_throws ArgumentError CuMem.attribute(d, 12345)
            @test_throws ArgumentError CuMem.uuid(d)
        else
            @test CuMem.uuid(d) isa Base.UUID
        end
        if CuMem.has_cuda()
            @test CuMem.version() isa VersionNumber
            @test CuMem.release() == VersionNumber(CuMem.version().major, CuMem.version().minor)
        else
            @test_throws CuMemError CuMem.version()
        end
    end

    @testset "CuDim3, CuDim" begin
        @test CuMem.CuDim3((Cuint(4), Cuint(3), Cuint(2))) == CuMem.CuDim3(Cuint(4), Cuint(3), Cuint(2))
        @test CuMem.CuDim3((3, 2)) == CuMem.CuDim3(Cuint(3), Cuint(2), Cuint(1))
        @test CuMem.CuDim3(2) == CuMem.CuDim3(Cuint(2), Cuint(1), Cuint(1))
        @test_throws InexactError CuMem.CuDim3(typemax(Int64))
        @test all(d -> d isa CuMem.CuDim, (2, (2,), (2, 2), (2, 2, 2), Cuint(2)))
        @test !((1, 2, 3, 4) isa CuMem.CuDim)
    end

    @testset "driver API: streams, events, @elapsed, Profile" begin
        s = CuStream(; flags = CuMem.STREAM_NON_BLOCKING)
        @test !s.blocking && CuStream(; flags = CuMem.STREAM_DEFAULT).blocking
        @test_throws ArgumentError CuStream(; flags = 7)
        @test CuMem.priority_range() == 0:0
        @test CuMem.priority(CuStream(; priority = 0)) == 0
        @test_throws ArgumentError CuStream(; priority = -1)
        @test CuMem.CuDefaultStream() === CuMem.default_stream()
        synchronize(s)
        @test CuMem.query(s)
        e = CuEvent(CuMem.EVENT_BLOCKING_SYNC | CuMem.EVENT_DISABLE_TIMING)
        @test !e.timing && CuEvent(CuMem.EVENT_BLOCKING_SYNC).timing
        @test_throws ArgumentError CuEvent(8)
        record(e); synchronize(e)
        @test CuMem.query(e)
        t = CuMem.@elapsed CuMem.sleep_on(CuMem.default_stream(), 0.02)
        @test 0.015 < t < 5
        @test (CuMem.@elapsed s begin end) >= 0
        @test_logs (:warn, r"only informs an external profiler to start") CuMem.Profile.start()
        CuMem.Profile.stop()
        @test (CuMem.@profile 1 + 1) == 2
    end
end

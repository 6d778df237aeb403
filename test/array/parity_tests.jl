# CUDA.jl 2.x behaviour that its own tests check (bench/julia/cudajl_suite.jl): CuPtr
# arithmetic and conversions, CU_NULL, a freed array's `state`, `cu` of ranges and
# `cu[...]`, `CuMem.@allocated` / `@timed`, and the message for a host pointer to a CuArray.
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
end

# What a CUDA.jl user meets early: deepcopy, serialization, the errors of bad
# constructor calls, `functional`, `versioninfo`, `unsafe_wrap` and `CuMem.@time`.

using Serialization

struct Model
    w::CuMatrix{Float32}
    flat::CuVector{Float32}
    again::CuMatrix{Float32}
end

@testset "deepcopy copies device memory" begin
    clean!()
    a = CuArray(Float32[1, 2, 3, 4])
    b = deepcopy(a)
    @test b isa CuVector{Float32}
    @test Array(b) == Array(a)
    @test pointer(b) != pointer(a)
    # the copy survives the original: after a is freed and its block reused, b is intact
    unsafe_free!(a)
    c = CuArray{Float32}(undef, 4)
    fill!(c, 9f0)
    @test Array(b) == Float32[1, 2, 3, 4]
    unsafe_free!(c)

    # inside a struct (deepcopy(model)), an array reached twice is copied once, and
    # arrays sharing memory (reshape) share one copy
    w = CuArray(Float32[1 2; 3 4])
    m = Model(w, vec(w), w)
    m2 = deepcopy(m)
    @test m2.w === m2.again
    @test m2.w !== m.w
    @test pointer(m2.flat) == pointer(m2.w)
    @test pointer(m2.w) != pointer(m.w)
    @test Array(m2.w) == Float32[1 2; 3 4]
    fill!(m2.flat, 0f0)
    @test Array(m2.w) == zeros(Float32, 2, 2)      # shared in the copy ...
    @test Array(m.w) == Float32[1 2; 3 4]          # ... and not with the original
    # memory accounting: the copy's memory is returned when its arrays are freed
    s0 = memory_stats().requested_bytes
    unsafe_free!(m2.w)
    @test memory_stats().requested_bytes == s0     # vec(w)'s copy still holds it
    unsafe_free!(m2.flat)
    @test memory_stats().requested_bytes == s0 - 16
    unsafe_free!(w)
    @test isfreed_error(() -> deepcopy(w))
    @test deepcopy(CuArray{Int}(undef, 0)) isa CuVector{Int}
end

@testset "serialize / deserialize" begin
    a = CuArray(reshape(collect(Int32, 1:6), 2, 3))
    io = IOBuffer()
    serialize(io, (a, [1, 2], a))
    seekstart(io)
    t = deserialize(io)
    @test t[1] isa CuMatrix{Int32}
    @test Array(t[1]) == Array(a)
    @test pointer(t[1]) != pointer(a)
    @test t[2] == [1, 2]
    @test Array(t[3]) == Array(a)
    unsafe_free!(a)
    @test isfreed_error(() -> serialize(IOBuffer(), a))
end

@testset "constructor errors" begin
    @test_throws MethodError CuVector{Float32}(undef, 2, 2)
    @test_throws MethodError CuMatrix{Float32}(undef, 3)
    @test_throws MethodError CuArray{Float32,1}(undef, 3, 4)
    @test_throws MethodError CuArray{Float32,1}(undef, (3, 4))
    @test_throws ArgumentError CuArray{Float32}(undef, 2, -1)
    n0 = memory_stats().num_allocations
    @test_throws OverflowError CuArray{UInt8}(undef, 1 << 32, 1 << 32)
    @test_throws OverflowError CuArray{Int64}(undef, 1 << 61)
    @test memory_stats().num_allocations == n0
    @test size(CuArray{Int,2}(undef, Int32(2), 3)) == (2, 3)
    # missing values cannot be uploaded (CuArrays hold isbits elements only)
    err = try cu([1.0, missing]); nothing catch e; e end
    @test err isa ArgumentError
    @test occursin("Union{Missing, Float64}", sprint(showerror, err))
    @test_throws ArgumentError CuArray([1, missing])
    @test_throws ArgumentError CuMem.adapt(CuArray, [missing, 2f0])
    @test cu([[1.0], [2.0]]) isa Vector{<:CuVector{Float32}}     # arrays of arrays still work
end

@testset "functional, versioninfo" begin
    @test CuMem.functional() == !CuMem.is_host_device()
    @test CuMem.functional() isa Bool
    text = sprint(CuMem.versioninfo)
    @test occursin("CuMem engine " * CuMem.engine_version(), text)
    @test occursin(CuMem.library_path(), text)
    @test occursin("Device: " * CuMem.device_name(), text)
    @test occursin("CUDA driver: ", text)
    @test occursin("Pool: $POOL ($POOL_TYPE)", text)
    @test occursin("Memory limit: none", text)
    @test occursin("threads", text) || occursin("1 thread", text)
    @test occursin(r"^\d+\.\d+\.\d+", CuMem.engine_version())
end

@testset "unsafe_wrap" begin
    x = CuArray(collect(1:10))
    # own = false: a view of x's memory, never freed through the wrapper
    w = unsafe_wrap(CuArray, pointer(x, 3), (2, 2))
    @test w isa CuMatrix{Int}
    @test Array(w) == [3 5; 4 6]
    fill!(w, 0)
    @test Array(x) == [1, 2, 0, 0, 0, 0, 7, 8, 9, 10]
    n = memory_stats().num_frees
    unsafe_free!(w)
    finalize(w)
    @test memory_stats().num_frees == n
    @test Array(x)[1] == 1
    @test Array(unsafe_wrap(CuArray, pointer(x), 10)) == Array(x)
    @test Array(unsafe_wrap(CuArray{Int}, pointer(x), 4)) == Array(x)[1:4]
    # a range outside a live allocation is refused
    @test_throws ArgumentError unsafe_wrap(CuArray, pointer(x), 11)
    @test_throws ArgumentError unsafe_wrap(CuArray, CuPtr{Int}(0x10), 1)
    # own = true: the wrapper takes the allocation over and returns it
    p = Ref{UInt64}(0)
    @test CuMem.c_alloc(UInt64(64), p) == CuMem.CUMEM_SUCCESS
    GC.gc(true)
    r0 = memory_stats().requested_bytes
    o = unsafe_wrap(CuArray, CuPtr{Float64}(p[]), 8; own = true)
    @test memory_stats().requested_bytes == r0     # taken over, not requested again
    fill!(o, 1.5)
    @test Array(o) == fill(1.5, 8)
    # (finalizers of earlier temporaries may free between two readings: collect them first)
    GC.gc(true)
    r1 = memory_stats().requested_bytes
    unsafe_free!(o)
    @test memory_stats().requested_bytes == r1 - 64
    @test CuMem.free_errors()[1] == 0
    unsafe_free!(x)
end

@testset "CuMem.@time" begin
    out = mktemp() do path, f
        v = redirect_stdout(f) do
            CuMem.@time begin
                x = CuArray{UInt8}(undef, 100)
                unsafe_free!(x)
                42
            end
        end
        @test v == 42
        close(f)
        read(path, String)
    end
    @test occursin(r"^  \d+\.\d{6} seconds \(\d+ CPU allocations?: [^,]+, \d+\.\d\d% gc time\) \(1 GPU allocation: 100 bytes, 1 free, [01] cache hits?, [01] device allocations?; [^)]+ live\)\n$", out)
end

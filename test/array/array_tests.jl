# CuArray: construction, round trips, copies, fill!, reshape sharing, freed arrays.

@testset "round trips" begin
    for T in (Float32, Float64, Int8, Int64, ComplexF32, Point3, Bool)
        for dims in ((), (0,), (1,), (7,), (3, 4), (2, 3, 4), (0, 3), (4, 0, 2))
            A = dims == () ? fill(rand(T)) : rand(T, dims...)
            d = CuArray(A)
            @test d isa CuArray{T,length(dims)}
            @test size(d) == dims
            @test length(d) == prod(dims)
            @test sizeof(d) == prod(dims) * sizeof(T)
            @test ndims(d) == length(dims)
            @test eltype(d) == T
            @test Array(d) == A
            @test collect(d) == A
            @test collect(d) isa Array{T,length(dims)}
            @test CuArray{T}(A) == A
            @test CuArray{T,length(dims)}(A) == A
            @test convert(Array, d) == A
            d2 = copy(d)
            @test d2 == d && d2 !== d
            isempty(A) || @test pointer(d2) != pointer(d)
            unsafe_free!(d)
            @test Array(d2) == A
        end
    end
    # element type conversions on upload and download
    A = rand(1:100, 5)
    @test CuArray{Float32}(A) isa CuVector{Float32}
    @test Array(CuArray{Float32}(A)) == Float32.(A)
    @test Array{Float64}(CuArray(A)) == Float64.(A)
    @test Array(CuArray(1:5)) == collect(1:5)
    @test Array(CuArray(view(collect(1:10), 2:2:10))) == collect(2:2:10)
    # undef constructors
    @test size(CuArray{Int}(undef, 2, 3)) == (2, 3)
    @test size(CuArray{Int}(undef, (2, 3))) == (2, 3)
    @test size(CuArray{Int,2}(undef, 2, 3)) == (2, 3)
    @test size(CuArray{Int,2}(undef, (2, 3))) == (2, 3)
    @test size(CuVector{Int}(undef, 4)) == (4,)
    @test size(CuMatrix{Int}(undef, 4, 1)) == (4, 1)
    @test size(CuArray{Int}(undef, UInt8(3))) == (3,)
    @test size(CuArray{Float64,0}(undef)) == ()
    @test_throws ArgumentError CuArray{Int}(undef, -1)
    @test_throws ArgumentError CuArray{Vector{Int}}(undef, 2)
    @test_throws ArgumentError CuArray([[1], [2]])
    @test convert(CuArray, [1, 2]) isa CuVector{Int}
    let x = CuArray([1, 2])
        @test convert(CuArray, x) === x
        @test CuArray(x) !== x && CuArray(x) == x          # CuArray(x) copies, like Array
        @test CuArray{Float64}(x) == [1.0, 2.0]
    end
    # pointers
    let x = CuArray{Float64}(undef, 4)
        p = pointer(x)
        @test p isa CuPtr{Float64}
        @test UInt64(p) % 256 == 0
        @test pointer(x, 3) == p + 16
        @test pointer(x, 3) - p == 16
        @test occursin("CuPtr{Float64}(0x", sprint(show, p))
        @test UInt64(pointer(CuArray{Int}(undef, 0))) == 0
        # passing a CuArray to C for a device-pointer argument
        y = CuArray{UInt8}(undef, 8)
        @test ccall((:cumem_memset, CuMem.libcumem), Int32, (CuPtr{UInt8}, UInt8, UInt64), y, 0x05, 8) == 0
        @test Array(y) == fill(0x05, 8)
        @test ccall((:cumem_memset, CuMem.libcumem), Int32, (CuPtr{Cvoid}, UInt8, UInt64), y, 0x06, 8) == 0
        @test Array(y) == fill(0x06, 8)
        unsafe_free!(y)
        @test isfreed_error(() -> ccall((:cumem_memset, CuMem.libcumem), Int32, (CuPtr{UInt8}, UInt8, UInt64), y, 0x05, 8))
    end
    # contiguous ranges without scalar indexing
    let x = CuArray(collect(1:10))
        allowscalar(false)
        @test x[3:6] isa CuVector{Int} && Array(x[3:6]) == 3:6
        @test Array(x[:]) == 1:10
        @test Array(CuArray([1 2; 3 4])[:]) == [1, 3, 2, 4]
        allowscalar(true)
    end
end

@testset "copyto! with offsets" begin
    for T in (Float32, Int8, ComplexF32, Point3)
        h = rand(T, 20)
        d = CuArray{T}(undef, 20)
        # host → device
        @test copyto!(d, h) === d
        @test Array(d) == h
        h2 = rand(T, 10)
        copyto!(d, 5, h2, 3, 6)
        ref = copy(h); ref[5:10] = h2[3:8]
        @test Array(d) == ref
        # device → host
        out = rand(T, 12)
        outref = copy(out)
        @test copyto!(out, 2, d, 4, 9) === out
        outref[2:10] = ref[4:12]
        @test out == outref
        # device → device, other array and same array (overlap)
        e = CuArray(rand(T, 15))
        eref = Array(e)
        copyto!(e, 1, d, 11, 10)
        eref[1:10] = ref[11:20]
        @test Array(e) == eref
        copyto!(e, 3, e, 1, 10)            # overlapping forward copy
        eref[3:12] = eref[1:10]
        @test Array(e) == eref
        # whole-array forms
        f = CuArray{T}(undef, 20)
        copyto!(f, d)
        @test Array(f) == Array(d)
        g = Vector{T}(undef, 20)
        copyto!(g, d)
        @test g == Array(d)
        # n = 0 is a no-op, bounds are checked
        @test copyto!(d, 1, h, 1, 0) === d
        @test_throws BoundsError copyto!(d, 15, h, 1, 10)
        @test_throws BoundsError copyto!(d, 1, h, 15, 10)
        @test_throws BoundsError copyto!(out, 1, d, 0, 2)
        @test_throws BoundsError copyto!(e, 10, d, 1, 10)
        @test_throws ArgumentError copyto!(d, 1, h, 1, -1)
        @test_throws ArgumentError copyto!(CuArray{T}(undef, 2), h)
        foreach(unsafe_free!, (d, e, f))
    end
    # conversions between element types in every direction
    d = CuArray{Float32}(undef, 4)
    copyto!(d, [1, 2, 3, 4])
    @test Array(d) == Float32[1, 2, 3, 4]
    h = zeros(Float64, 4)
    copyto!(h, d)
    @test h == [1.0, 2.0, 3.0, 4.0]
    di = CuArray{Int}(undef, 4)
    copyto!(di, 1, d, 1, 4)
    @test Array(di) == [1, 2, 3, 4]
    sub = zeros(Float32, 6)
    copyto!(view(sub, 2:5), d)
    @test sub == Float32[0, 1, 2, 3, 4, 0]
    copyto!(d, 2, view(Float32[9, 8, 7], 2:3), 1, 2)
    @test Array(d) == Float32[1, 8, 7, 4]
    # multidimensional arrays copy in linear (column-major) order
    m = CuArray{Int}(undef, 2, 3)
    copyto!(m, 1:6)
    @test Array(m) == [1 3 5; 2 4 6]
end

@testset "fill!, zeros, ones, fill" begin
    # memset patterns (1, 2, 4 bytes), 8- and 16-byte values (a kernel), isbits structs
    for (T, v) in ((Float32, 0), (Float32, 1.5), (Int32, -1), (UInt8, 0x07), (Int64, 3),
                   (ComplexF32, 1 + 2im), (Point3, Point3(1.0, 2, 3)), (Bool, true),
                   (Int16, 0x0102), (Float16, 2), (ComplexF32, 1 + 1im), (Float64, 0.5), (Int64, -1))
        for n in (0, 1, 5, 4096, 4097, 10_000, 100_003)
            d = CuArray{T}(undef, n)
            @test fill!(d, v) === d
            @test Array(d) == fill(convert(T, v), n)
            unsafe_free!(d)
        end
    end
    @test Array(fill!(CuArray{Float64}(undef, 3, 4), 2)) == fill(2.0, 3, 4)
    @test CuMem.zeros(3) isa CuVector{Float32}
    @test Array(CuMem.zeros(3)) == zeros(Float32, 3)
    @test Array(CuMem.zeros(Int, 2, 3)) == zeros(Int, 2, 3)
    @test Array(CuMem.zeros(Int, (2, 3))) == zeros(Int, 2, 3)
    @test Array(CuMem.ones(2, 2)) == ones(Float32, 2, 2)
    @test Array(CuMem.ones(Float64, 5)) == ones(5)
    @test Array(CuMem.fill(7, 3)) == [7, 7, 7]
    @test CuMem.fill(7.0, (2, 2)) isa CuMatrix{Float64}
    @test Array(CuMem.fill(Point3(1, 2, 3), 2)) == [Point3(1, 2, 3), Point3(1, 2, 3)]
    @test size(CuMem.zeros(Float32)) == ()
    # the memset a value is: (pattern, element size), or none (0) when its bytes do not
    # repeat with a period of 1, 2 or 4
    @test CuMem.memset_pattern(1f0) == (0x3f800000, 4)
    @test CuMem.memset_pattern(0.0) == (0x00, 1)
    @test CuMem.memset_pattern(1.0)[2] == 0
    @test CuMem.memset_pattern(ComplexF32(1, 1)) == (0x3f800000, 4)
    @test CuMem.memset_pattern(ComplexF64(1, 2))[2] == 0
    @test CuMem.memset_pattern(Int16(0x0102)) == (0x0102, 2)
    @test CuMem.memset_pattern(Int16(0x0101)) == (0x01, 1)
    @test CuMem.memset_pattern(Int64(-1)) == (0xff, 1)
    @test CuMem.memset_pattern(Float16(2)) == (0x4000, 2)
    @test CuMem.memset_pattern(UInt32(0x00050005)) == (0x0005, 2)
    @test CuMem.memset_pattern((Int8(1), Int8(2), Int8(3)))[2] == 0   # 3 bytes
    @test @allocated(CuMem.memset_pattern(1f0)) == 0
    let s = memory_stats().num_allocations    # fills of memset patterns need no upload
        d = CuArray{Int32}(undef, 1000)
        fill!(d, -1)
        @test memory_stats().num_allocations == s + 1
    end
end

@testset "similar" begin
    x = CuArray(rand(Float32, 3, 4))
    @test similar(x) isa CuMatrix{Float32} && size(similar(x)) == (3, 4)
    @test similar(x, Int8) isa CuMatrix{Int8}
    @test similar(x, 5) isa CuVector{Float32} && length(similar(x, 5)) == 5
    @test similar(x, Float64, 2, 2, 2) isa CuArray{Float64,3}
    @test similar(x, (7,)) isa CuVector{Float32}
    @test pointer(similar(x)) != pointer(x)
end

@testset "reshape and vec share memory" begin
    clean!()
    before = memory_stats()
    x = CuArray(collect(1:12))
    y = reshape(x, 3, 4)
    z = vec(y)
    w = reshape(x, 2, :)
    @test y isa CuMatrix{Int} && size(y) == (3, 4)
    @test size(w) == (2, 6)
    @test z isa CuVector{Int}
    @test pointer(y) == pointer(x) == pointer(z) == pointer(w)
    @test Array(y) == reshape(1:12, 3, 4)
    @test vec(x) === x                     # a vector's vec is itself
    @test_throws DimensionMismatch reshape(x, 5, 2)
    # writes through one are seen through the others
    copyto!(y, 4, [100, 200], 1, 2)
    @test Array(x)[4:5] == [100, 200]
    @test Array(w)[4:5] == [100, 200]
    one_alloc = memory_stats()
    @test one_alloc.num_allocations == before.num_allocations + 1
    # freeing some views keeps the memory for the others
    unsafe_free!(x)
    unsafe_free!(y)
    @test memory_stats().num_frees == before.num_frees
    @test Array(z)[4] == 100
    @test isfreed_error(() -> Array(x))
    @test isfreed_error(() -> Array(y))
    unsafe_free!(z)
    @test memory_stats().num_frees == before.num_frees
    unsafe_free!(w)                          # the last one returns it
    @test memory_stats().num_frees == before.num_frees + 1
    @test memory_stats().requested_bytes == before.requested_bytes
    unsafe_free!(w)                          # idempotent
    @test memory_stats().num_frees == before.num_frees + 1
    # a view of a freed array cannot be made
    @test isfreed_error(() -> reshape(x, 12))
    # finalizers of views: memory returns when the last one is collected
    function views_garbage()
        a = CuArray{UInt8}(undef, 1 << 20)
        b = reshape(a, 1024, 1024)
        unsafe_free!(a)
        return nothing
    end
    clean!()
    s0 = memory_stats()
    views_garbage()
    @test memory_stats().requested_bytes == s0.requested_bytes + (1 << 20)
    GC.gc(true)
    @test memory_stats().requested_bytes == s0.requested_bytes
end

@testset "freed arrays" begin
    x = CuArray([1.0, 2.0, 3.0])
    s = memory_stats()
    @test unsafe_free!(x) === nothing
    @test memory_stats().num_frees == s.num_frees + 1
    @test unsafe_free!(x) === nothing          # idempotent
    @test memory_stats().num_frees == s.num_frees + 1
    @test CuMem.isfreed(x)
    @test size(x) == (3,) && length(x) == 3 && eltype(x) == Float64   # metadata stays
    for f in (() -> Array(x), () -> collect(x), () -> copy(x), () -> pointer(x),
              () -> fill!(x, 0), () -> copyto!(x, [1.0, 2.0, 3.0]),
              () -> copyto!(zeros(3), x), () -> copyto!(CuArray{Float64}(undef, 3), x),
              () -> copyto!(x, 1, [1.0], 1, 1), () -> x[1], () -> (x[1] = 2.0),
              () -> reshape(x, 3, 1), () -> vec(reshape(x, 1, 3)), () -> x == x,
              () -> sprint(show, x), () -> sprint(show, MIME"text/plain"(), x),
              () -> cu(x), () -> x[1:2])
        @test isfreed_error(f)
    end
    @test unsafe_free!(42) === nothing          # other values: nothing to do
end

@testset "finalizers return memory" begin
    clean!()
    base = memory_stats()
    function churn(n, sz)
        for i in 1:n
            x = CuArray{UInt8}(undef, sz)
            i == n && fill!(x, 0x01)
        end
        return nothing
    end
    churn(300, 1 << 20)                       # 300 MiB, never freed explicitly
    GC.gc(true)
    after = memory_stats()
    @test after.allocated_bytes == base.allocated_bytes
    @test after.requested_bytes == base.requested_bytes
    @test after.num_frees - base.num_frees == 300
    @test CuMem.free_errors()[1] == 0
    # bounded under a long loop with periodic collections
    peak = 0
    for round in 1:5
        churn(100, 1 << 20)
        GC.gc(false)
        peak = max(peak, memory_stats().allocated_bytes)
    end
    GC.gc(true)
    @test memory_stats().allocated_bytes == base.allocated_bytes
    @test peak <= base.allocated_bytes + 2 * 100 * (1 << 20)
end

@testset "equality and display" begin
    x = CuArray([1, 2, 3])
    @test x == CuArray([1, 2, 3])
    @test x == [1, 2, 3]
    @test [1, 2, 3] == x
    @test x != CuArray([1, 2, 4])
    @test x != CuArray([1 2 3])
    @test isequal(CuArray([NaN]), CuArray([NaN]))
    allowscalar(false)                           # display must not index element-wise
    s = sprint(show, MIME"text/plain"(), CuArray(Float32[1, 2, 3]))
    @test occursin(r"^3-element CuArray{Float32, ?1}:\n 1.0\n 2.0\n 3.0$", s)
    s = sprint(show, MIME"text/plain"(), CuArray([1 2; 3 4]))
    @test occursin(r"^2×2 CuArray{Int64, ?2}:\n 1  2\n 3  4$", s)
    @test sprint(show, CuArray([1, 2])) == "[1, 2]"
    @test occursin(r"^0-element CuArray{Int64, ?1}", sprint(show, MIME"text/plain"(), CuArray(Int[])))
    @test occursin(r"^0-dimensional CuArray{Float64, ?0}:\n2.0$", sprint(show, MIME"text/plain"(), CuArray(fill(2.0))))
    allowscalar(true)
    # wrappers print through their own show, which indexes element-wise
    @test occursin("2.0", @allowscalar sprint(show, MIME"text/plain"(), cu(Diagonal([1.0, 2.0]))))
end

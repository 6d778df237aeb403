# CuIterator.

@testset "CuIterator" begin
    batches = [(Float32.(rand(4, 3)), rand(1:9, 3)) for _ in 1:4]
    it = CuIterator(batches; prefetch = 0)
    @test length(it) == 4
    @test size(it) == (4,)
    @test Base.IteratorSize(typeof(it)) == Base.HasShape{1}()
    @test eltype(it) == Tuple{CuMatrix{Float32},CuVector{Int}}
    clean!()
    s0 = memory_stats()
    seen = Any[]
    for (i, (x, y)) in enumerate(it)
        @test x isa CuMatrix{Float32} && y isa CuVector{Int}
        @test Array(x) == batches[i][1] && Array(y) == batches[i][2]
        push!(seen, (x, y))
        if i > 1                                    # the previous batch was freed
            @test CuMem.isfreed(seen[i-1][1]) && CuMem.isfreed(seen[i-1][2])
            @test_throws AssertionError Array(seen[i-1][1])
        end
        @test memory_stats().requested_bytes == s0.requested_bytes + sizeof(x) + sizeof(y)
    end
    @test all(b -> CuMem.isfreed(b[1]) && CuMem.isfreed(b[2]), seen)   # the last one too
    @test memory_stats().requested_bytes == s0.requested_bytes
    # a single array per batch, named tuples, vectors of arrays, pass-through values
    for (i, x) in enumerate(CuIterator([rand(Int8, 5) for _ in 1:3]))
        @test x isa CuVector{Int8}
    end
    nts = [(data = rand(Float64, 2), label = "b$i", k = i) for i in 1:3]
    it2 = CuIterator(nts)
    @test eltype(it2) == NamedTuple{(:data, :label, :k),Tuple{CuVector{Float64},String,Int}}
    prev = nothing
    for (i, b) in enumerate(it2)
        @test b.data isa CuVector{Float64} && b.label == "b$i" && b.k == i
        prev === nothing || @test CuMem.isfreed(prev)
        prev = b.data
    end
    @test CuMem.isfreed(prev)
    vecs = [[rand(3), rand(2)] for _ in 1:2]
    got = Any[]
    for b in CuIterator(vecs)
        @test b isa Vector && all(a -> a isa CuVector{Float64}, b)
        push!(got, b)
    end
    @test all(CuMem.isfreed, got[1]) && all(CuMem.isfreed, got[2])
    # iterators without a length: generators, zip; breaking out early
    gen = (rand(Float32, 2) for _ in 1:5)
    n = 0
    for x in CuIterator(gen)
        n += 1
        n == 2 && break
    end
    @test n == 2
    @test Base.IteratorSize(typeof(CuIterator(Iterators.repeated([1.0])))) == Base.IsInfinite()
    zs = collect(zip([rand(2) for _ in 1:3], [rand(Int, 2) for _ in 1:3]))
    @test count(_ -> true, CuIterator(zs)) == 3
    # CuArrays already in the input pass through and are not freed
    mine = CuArray([1.0, 2.0])
    for b in CuIterator([(mine, [1.0])])
        @test b[1] === mine
    end
    @test !CuMem.isfreed(mine) && Array(mine) == [1.0, 2.0]
    # wrappers in batches are freed through their fields
    wrapped = Any[]
    for b in CuIterator([(adjoint(rand(2, 2)), Diagonal(rand(2))) for _ in 1:2])
        @test b[1] isa Adjoint{Float64,<:CuMatrix{Float64}} && b[2] isa Diagonal{Float64,<:CuVector{Float64}}
        push!(wrapped, b)
    end
    @test all(b -> CuMem.isfreed(parent(b[1])) && CuMem.isfreed(b[2].diag), wrapped)
    # an empty iterator
    @test isempty(collect(CuIterator(Vector{Float64}[])))
    @test isempty(collect(CuIterator(Vector{Float64}[]; prefetch = 0)))
    @test_throws ArgumentError CuIterator(batches; prefetch = -1)
end

@testset "CuIterator prefetching" begin
    batches = [(rand(Float32, 64, 32), rand(1:9, 32)) for _ in 1:6]
    bytes = sizeof(batches[1][1]) + sizeof(batches[1][2])
    for k in (1, 2)
        clean!()
        s0 = memory_stats().requested_bytes
        h0 = memory_stats(:host).allocated_bytes
        seen = Any[]
        for (i, (x, y)) in enumerate(CuIterator(batches; prefetch = k))
            @test x isa CuMatrix{Float32} && y isa CuVector{Int}
            # the uploads are staged in pinned host buffers of the iterator
            @test memory_stats(:host).allocated_bytes - h0 >= bytes
            @test CuMem.array_stream(x) != 0                 # uploaded on the copy stream
            @test Array(x) == batches[i][1] && Array(y) == batches[i][2]
            i > 1 && @test CuMem.isfreed(seen[end][1]) && CuMem.isfreed(seen[end][2])
            push!(seen, (x, y))
            # this batch and at most k staged ahead
            r = memory_stats().requested_bytes - s0
            @test bytes <= r <= (1 + min(k, length(batches) - i)) * bytes
        end
        @test length(seen) == length(batches)
        @test all(b -> CuMem.isfreed(b[1]) && CuMem.isfreed(b[2]), seen)
        @test memory_stats().requested_bytes == s0
        # ... which go back to the pinned pool when the iteration ends
        @test memory_stats(:host).allocated_bytes == h0
    end
    # the same data as without prefetching, for the shapes CuIterator takes
    mixed = [(data = rand(Float64, 3), m = adjoint(rand(2, 2)), v = [rand(2), rand(3)], k = i, r = 1:3) for i in 1:3]
    a = [map(Array ∘ (z -> z isa AbstractArray{<:AbstractArray} ? z[1] : z),
             (b.data, b.m, b.v, b.r)) for b in CuIterator(mixed; prefetch = 0)]
    b = [map(Array ∘ (z -> z isa AbstractArray{<:AbstractArray} ? z[1] : z),
             (b.data, b.m, b.v, b.r)) for b in CuIterator(mixed)]
    @test a == b
    # iterating again starts over
    it = CuIterator(batches)
    @test [Array(x) for (x, _) in it] == [Array(x) for (x, _) in it] == [b[1] for b in batches]
    # CuArrays in the input pass through, are not freed, and are not recorded
    mine = CuArray([1.0, 2.0])
    for b in CuIterator([(mine, [1.0]), (mine, [2.0])])
        @test b[1] === mine
    end
    @test !CuMem.isfreed(mine)
    # leaving early: close(it) frees the current and the prefetched batches
    clean!()
    s0 = memory_stats().requested_bytes
    it = CuIterator(batches; prefetch = 2)
    held = nothing
    for (i, b) in enumerate(it)
        held = b
        i == 2 && break
    end
    @test memory_stats().requested_bytes > s0
    h0 = memory_stats(:host).allocated_bytes
    close(it)
    @test CuMem.isfreed(held[1]) && memory_stats().requested_bytes == s0
    @test memory_stats(:host).allocated_bytes < h0    # the staging buffers returned
    # the do-block form frees everything however the block ends
    got = CuIterator(batches) do it
        for (i, (x, y)) in enumerate(it)
            i == 3 && return sum(Array(x))
        end
    end
    @test got ≈ sum(batches[3][1])
    @test memory_stats().requested_bytes == s0
    @test_throws ErrorException CuIterator(batches) do it
        for (x, y) in it
            error("stop")
        end
    end
    @test memory_stats().requested_bytes == s0
    # uploads overlap the caller's work: with the default stream busy on the host device
    # (the caller sleeping), the next batch is already on the device when it is taken
    n = 0
    for (x, y) in CuIterator(batches)
        n += 1
        sleep(0.02)
        @test Array(y) isa Vector{Int}
    end
    @test n == length(batches)
end

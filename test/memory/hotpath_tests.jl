# The Julia hot path (docs/design.md, "The Julia hot path"): `CuArray{T}(undef, dims)`,
# `unsafe_free!` and the finalizer allocate nothing on the Julia heap but the array
# object, are type-stable and make no dynamic calls; arrays left to the GC are collected
# before the pool has to grow (the GC pressure of julia/memory/allocator.jl). pooltests.jl runs
# this file under every pool.

# Statements of the optimized code of `f(types...)` that call a generic function
# dynamically (`:call` of something that is not a builtin or an intrinsic; static calls
# are `:invoke`, ccalls `:foreigncall`).
function dynamic_calls(f, types)
    ci = first(Base.code_typed(f, types; optimize = true)).first
    bad = Any[]
    for st in ci.code
        ex = st isa Expr && st.head === :(=) ? st.args[2] : st
        (ex isa Expr && ex.head === :call) || continue
        callee = ex.args[1]
        fv = callee isa GlobalRef ? getfield(callee.mod, callee.name) :
             callee isa QuoteNode ? callee.value : callee
        (fv isa Core.Builtin || fv isa Core.IntrinsicFunction) || push!(bad, ex)
    end
    return bad
end

# A plain mutable object of the same size as an array of type A: what the GC charges for
# the array object alone (Julia rounds every object up to its size class).
same_size_object(::Type{A}) where {A} = Ref(ntuple(_ -> UInt64(0), Val(sizeof(A) ÷ 8)))

hot_new(::Type{T}, dims...) where {T} = CuArray{T}(undef, dims...)
function measure_new(::Type{T}, dims::Dims) where {T}
    local x
    a = @allocated(x = CuArray{T}(undef, dims))
    return a, x
end
const OBJECT_SINK = Ref{Any}(nothing)      # so that the object is really allocated
measure_object(::Type{A}) where {A} = @allocated(OBJECT_SINK[] = same_size_object(A))
measure_pair(::Type{T}, dims::Dims) where {T} = @allocated hot_pair(T, dims...)
measure_free(x) = @allocated unsafe_free!(x)
measure_finalizer(x) = @allocated CuMem.finalize_array(x)
hot_pair(::Type{T}, dims...) where {T} = (x = CuArray{T}(undef, dims...); unsafe_free!(x); nothing)
function hot_gc_loop(n, bytes)
    for _ in 1:n
        x = CuArray{UInt8}(undef, bytes)
        x = nothing
    end
end
function hot_explicit_loop(n, bytes)
    for _ in 1:n
        unsafe_free!(CuArray{UInt8}(undef, bytes))
    end
end

# Runs `f()` with `CuMem.STREAMS_SET` (whether any task ever called `stream!`) set to
# `set`, restoring it after. Only for tests: clearing it is right only while no task has
# a stream of its own (checked: this task's, and the test suite's other tasks are done).
function with_streams_set(f, set::Bool)
    @assert CuMem.task_stream() === CuMem.default_stream()
    old = CuMem.STREAMS_SET[]
    CuMem.STREAMS_SET[] = set
    try
        return f()
    finally
        CuMem.STREAMS_SET[] = old
    end
end

@testset "hot path" begin
    # Both states of the stream flag: before any `stream!` (the allocation skips the task's
    # storage) and after (it looks the task's stream up).
    @testset "allocations: the array object alone (streams set: $set)" for set in (false, true)
        with_streams_set(set) do
        for (T, dims) in ((UInt8, (4096,)), (Float32, (64, 64)), (Int16, (2, 3, 4)))
            A = CuArray{T,length(dims)}
            @test sizeof(A) % 8 == 0
            measure_object(A); measure_new(T, dims); measure_pair(T, dims)   # compile
            unsafe_free!(measure_new(T, dims)[2])
            measure_free(CuArray{T}(undef, dims)); measure_finalizer(CuArray{T}(undef, dims))
            object = measure_object(A)
            a, x = measure_new(T, dims)
            @test x.shared === nothing                               # no Buffer of its own
            @test a == object
            @test measure_free(x) == 0
            @test measure_free(x) == 0                               # idempotent
            @test measure_pair(T, dims) <= object
            # the finalizer: release without allocating
            y = CuArray{T}(undef, dims)
            @test measure_finalizer(y) == 0
            @test CuMem.isfreed(y)
        end
        end
    end

    @testset "the current stream: the flag skips nothing that was set" begin
        with_streams_set(false) do
            @test stream() === CuMem.default_stream() && CuMem.current_handle() == 0
            x = CuArray{UInt8}(undef, 4096)
            @test CuMem.array_stream(x) == 0
            unsafe_free!(x)
            s = CuStream()
            # a task that sets a stream allocates on it, from its first allocation
            @test fetch(@async begin
                stream!(s)
                y = CuArray{UInt8}(undef, 4096)
                h = CuMem.array_stream(y)
                unsafe_free!(y)
                (h, measure_new(UInt8, (4096,))[1], CuMem.current_handle())
            end) == (s.handle, measure_object(CuVector{UInt8}), s.handle)
            @test CuMem.STREAMS_SET[]
            # ... and other tasks, this one included, still on the default stream
            @test stream() === CuMem.default_stream() && CuMem.current_handle() == 0
            @test fetch(@async CuMem.array_stream(CuArray{UInt8}(undef, 4096))) == 0
            @test stream!(() -> CuMem.array_stream(CuArray{UInt8}(undef, 16)), s) == s.handle
            # a destroyed stream is still refused
            CuMem.unsafe_destroy!(s)
            @test_throws ArgumentError stream!(() -> CuArray{UInt8}(undef, 16), s)
            @test CuMem.current_handle() == 0
        end
    end

    @testset "type stability, no dynamic dispatch" begin
        @test @inferred(CuArray{UInt8}(undef, 4096)) isa CuVector{UInt8}
        @test @inferred(CuArray{Float32,2}(undef, (3, 4))) isa CuMatrix{Float32}
        @test @inferred(CuArray{Float64}(undef, 2, 3)) isa CuMatrix{Float64}
        @test Base.return_types(unsafe_free!, (CuVector{UInt8},)) == [Nothing]
        @test Base.return_types(CuMem.finalize_array, (CuMatrix{Float32},)) == [Nothing]
        for (f, types) in ((hot_pair, (Type{UInt8}, Int)), (hot_pair, (Type{Float32}, Int, Int)),
                           (hot_new, (Type{UInt8}, Int)), (unsafe_free!, (CuVector{UInt8},)),
                           (CuMem.finalize_array, (CuMatrix{Float32},)),
                           (CuMem.current_handle, ()), (CuMem.stream, ()))
            @test dynamic_calls(f, types) == []
        end
    end

    @testset "GC pressure: dropped arrays are collected before the pool grows" begin
        clean!()
        p0 = CuMem.gc_pressure()
        s0 = memory_stats()
        @test p0.min_growth > 0 && p0.max_growth >= p0.min_growth
        bytes = 4096
        n = 3 * (p0.min_growth ÷ bytes)      # three times what one collection lets grow
        hot_gc_loop(n, bytes)
        p1 = CuMem.gc_pressure()
        s1 = memory_stats()
        @test p1.collections >= p0.collections + 2
        # without the pressure nothing would return the arrays before the loop ends: the
        # pool would have grown by all n of them (the GC counts 48 bytes for each)
        @test s1.reserved_bytes - s0.reserved_bytes <= 2 * p0.min_growth
        # (the `none` pool has no cache: every allocation calls the device)
        CuMem.pool_name() == "none" || @test s1.num_cache_hits - s0.num_cache_hits >= n ÷ 3
        # arrays freed at once are never counted as garbage: no collection
        GC.gc(true)
        p1 = CuMem.gc_pressure()
        hot_explicit_loop(n, bytes)
        @test CuMem.gc_pressure().collections == p1.collections
        GC.gc(true)
        @test CuMem.gc_pressure().outstanding == p0.outstanding
    end

    @testset "outstanding bytes follow sharing, wrapping and frees" begin
        clean!()
        o0 = CuMem.gc_pressure().outstanding
        x = CuArray{UInt8}(undef, 1000)
        @test CuMem.gc_pressure().outstanding == o0 + 1024   # rounded up to 512
        y = reshape(x, 10, 100)
        z = vec(y)
        @test x.shared !== nothing && x.shared === y.shared === z.shared
        other = CuArray{UInt8}(undef, 1000)
        @test CuMem.same_memory(x, y) && !CuMem.same_memory(x, other)
        unsafe_free!(other)
        unsafe_free!(x); unsafe_free!(y)
        @test CuMem.gc_pressure().outstanding == o0 + 1024   # z still holds it
        unsafe_free!(z)
        @test CuMem.gc_pressure().outstanding == o0
        # unsafe_wrap: own = true takes the allocation over (and its charge)
        p = Ref{UInt64}(0)
        @test CuMem.c_alloc(UInt64(2048), p) == CuMem.CUMEM_SUCCESS
        w = unsafe_wrap(CuArray, CuPtr{Float32}(p[]), 512; own = true)
        @test CuMem.gc_pressure().outstanding == o0 + 2048
        v = unsafe_wrap(CuArray, CuPtr{Float32}(p[]), 512)        # own = false: not counted
        @test CuMem.gc_pressure().outstanding == o0 + 2048
        unsafe_free!(v)
        unsafe_free!(w)
        @test CuMem.gc_pressure().outstanding == o0
        # deepcopy keeps sharing within the copy
        a = CuArray(collect(1:12))
        b = reshape(a, 3, 4)
        c, d = deepcopy((a, b))
        @test c.shared !== nothing && c.shared === d.shared && !CuMem.same_memory(a, c)
        @test Array(d) == reshape(1:12, 3, 4)
        foreach(unsafe_free!, (a, b, c, d))
        GC.gc(true)
        @test CuMem.gc_pressure().outstanding == o0
    end

    # issue 26: a broadcast or a whole-array reduction of a type seen before takes its typed
    # slot (julia/compute/broadcast/fastpath.jl, reduce_full.jl): the in-place broadcast allocates
    # nothing, the slots' look-ups allocate nothing
    @testset "typed fast paths: in-place broadcast, reduction slot" begin
        s1, s2 = CuArray(Float32[1]), CuArray(Float32[2])
        r = similar(s1)
        inplace!(r, s1, s2) = (r .= s1 .+ s2; nothing)
        inplace!(r, s1, s2); inplace!(r, s1, s2)
        @test @allocated(inplace!(r, s1, s2)) == 0
        @test Array(r) == Float32[3]
        @test sum(s1) === 1f0 && sum(s2) === 2f0
        K = Tuple{typeof(identity),typeof(Base.add_sum),Float32}
        slot_allocs(K) = @allocated CuMem.full_slot_get(K)
        @test CuMem.full_slot_get(K) !== nothing
        slot_allocs(K)
        @test slot_allocs(K) == 0
        foreach(unsafe_free!, (s1, s2, r))
    end
end

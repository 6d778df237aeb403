# Streams, events, stream-ordered reuse and asynchronous copies. On the host device the
# streams are worker threads, so the orderings tested here are real; the slow operation
# (CuMem.sleep_on) is a sleep on the stream's thread (on a GPU, a spinning kernel).

const SLOW = 0.3   # seconds: long enough that each test's other work is done before it ends

@testset "streams and events" begin
    @test stream() === CuMem.default_stream()
    s1, s2 = CuStream(), CuStream()
    @test s1.handle != 0 && s2.handle != s1.handle && !s1.blocking
    @test stream!(() -> stream(), s1) === s1
    @test stream() === CuMem.default_stream()
    @test stream!(s1) do
        fetch(@async stream())          # task-local: a new task starts on the default stream
    end === CuMem.default_stream()
    @test sprint(show, CuMem.default_stream()) == "CuStream(default)"

    # events order work across streams, and time it
    n = 1 << 18
    p = rand(Float32, n)
    x = CuArray(zeros(Float32, n))
    e0, e1 = CuEvent(), CuEvent()
    record(e0, s1)
    CuMem.sleep_on(s1, SLOW)
    GC.@preserve p CuMem.upload_async!(x, p, s1)
    record(e1, s1)
    @test !CuMem.isdone(e1) && !CuMem.isdone(s1)
    wait(e1, s2)                                  # s2 waits for the upload, the host does not
    h = zeros(Float32, n)
    GC.@preserve h CuMem.download_async!(h, x, s2)
    synchronize(s2)
    @test h == p
    @test CuMem.isdone(e1) && CuMem.isdone(s1)
    @test elapsed(e0, e1) >= 0.99 * SLOW
    quiet = CuEvent(timing = false)
    @test CuMem.isdone(quiet)                     # never recorded
    record(quiet)                                 # on the current (default) stream
    synchronize(quiet)
    @test_throws CuMemError elapsed(e0, quiet)

    # the host compute of a stream waits for the stream's work
    stream!(s1) do
        CuMem.sleep_on(s1, SLOW)
        GC.@preserve p CuMem.upload_async!(x, 2 .* p, s1)
        y = x .+ 0f0                               # host_view synchronises s1 first
        @test Array(y) == 2 .* p
    end

    # copyto!(...; async = true) from pageable memory: PyTorch's fallback, synchronous
    z = CuArray{Float32}(undef, n)
    stream!(s2) do
        CuMem.sleep_on(s2, 0.05)
        copyto!(z, p; async = true)
        @test CuMem.isdone(s2)
        @test copyto!(similar(p), z; async = true) == p
    end

    # destroyed handles are refused clearly
    s3 = CuStream(blocking = true)
    @test s3.blocking
    CuMem.unsafe_destroy!(s3)
    @test_throws ArgumentError synchronize(s3)
    @test_throws ArgumentError stream!(() -> CuArray{Float32}(undef, 4), s3)
    @test_throws ArgumentError CuMem.unsafe_destroy!(CuMem.default_stream())
    CuMem.unsafe_destroy!(quiet)
    @test_throws ArgumentError record(quiet)
    foreach(unsafe_free!, (x, z))
    synchronize()
end

@testset "stream-ordered reuse" begin
    clean!()
    s1, s2 = CuStream(), CuStream()
    n = 1 << 18
    orig = rand(Float32, n)
    # memory allocated while a stream is current belongs to it
    a = stream!(() -> CuArray{Float32}(undef, n), s1)
    @test CuMem.array_stream(a) == s1.handle
    @test CuMem.array_stream(CuArray{Float32}(undef, 4)) == 0
    pa = pointer(a)
    CuMem.sleep_on(s1, SLOW)                      # s1 busy: reuse on s1 is still ordered
    unsafe_free!(a)
    b = stream!(() -> CuArray{Float32}(undef, n), s1)
    POOL == "none" || @test pointer(b) == pa      # reused at once on its own stream
    c = stream!(() -> CuArray{Float32}(undef, n), s2)
    d = CuArray{Float32}(undef, n)
    @test pointer(c) != pa && pointer(d) != pa    # by no other stream
    foreach(unsafe_free!, (b, c, d))
    synchronize()

    # a block of s1 read by a queued copy on s2, freed meanwhile: not reused until s2 is done
    x = stream!(() -> CuArray(orig), s1)
    CuMem.sleep_on(s2, SLOW)
    h = zeros(Float32, n)
    GC.@preserve h CuMem.download_async!(h, x, s2)   # records the use of x on s2
    px = pointer(x)
    unsafe_free!(x)
    y = stream!(() -> CuArray{Float32}(undef, n), s1)
    @test pointer(y) != px
    copyto!(y, fill(7f0, n))
    synchronize(s2)
    @test h == orig
    unsafe_free!(y)

    # a default-stream array used on s2, declared with record_stream
    x = CuArray(orig)
    CuMem.sleep_on(s2, SLOW)
    GC.@preserve h CuMem.download_async!(h, x, s2)
    record_stream(x, s2)
    px = pointer(x)
    unsafe_free!(x)
    y = CuArray(fill(3f0, n))
    @test pointer(y) != px
    synchronize(s2)
    @test h == orig
    unsafe_free!(y)
    @test_throws AssertionError record_stream(x, s2)   # freed
    # a pending free is waited for by reclaim
    clean!()
    r0 = memory_stats().reserved_bytes
    w = CuArray(orig)
    CuMem.sleep_on(s2, SLOW)
    record_stream(w, s2)
    unsafe_free!(w)
    clean!()
    @test memory_stats().reserved_bytes <= r0
    foreach(CuMem.unsafe_destroy!, (s1, s2))
end

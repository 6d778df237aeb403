# Streams, events, stream-ordered reuse and asynchronous copies. On the host device the
# streams are worker threads, so the orderings tested here are real; the slow operation
# (CuMem.sleep_on) is a sleep on the stream's thread (on a GPU, a spinning kernel).

const SLOW = 0.3   # seconds: long enough that each test's other work is done before it ends

# A kernel that waits `ns` nanoseconds on the GPU's timer, then copies `src` to `dst`.
const SLOW_COPY = """
extern "C" __global__ void slow_copy(const float* src, float* dst, long long n, unsigned long long ns) {
    if (threadIdx.x == 0) {
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    }
    __syncthreads();
    for (long long i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}
"""

# Queues on `s` a read of `src` that starts after SLOW seconds; returns a function that
# waits for it and returns what it read. On the host device a sleep and an asynchronous
# download (which records its use of `src` on `s`); on a GPU a kernel, whose use must be
# declared with record_stream (PyTorch's contract): pageable downloads would block.
function slow_read(src::CuArray{Float32}, s::CuStream)
    n = length(src)
    if CuMem.on_host()
        h = zeros(Float32, n)
        CuMem.sleep_on(s, SLOW)
        CuMem.download_async!(h, src, s)
        return () -> (synchronize(s); h)
    end
    out = stream!(() -> CuArray{Float32}(undef, n), s)
    k = CuMem.load_kernel(SLOW_COPY, "slow_copy")
    stream!(() -> CuMem.launch(k, src, out, Int64(n), round(UInt64, SLOW * 1e9); blocks = 1, threads = 256), s)
    record_stream(src, s)
    return () -> (synchronize(s); a = Array(out); unsafe_free!(out); a)
end

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
    e0, e1, e2 = CuEvent(), CuEvent(), CuEvent()
    record(e0, s1)
    CuMem.sleep_on(s1, SLOW)
    record(e1, s1)
    @test !CuMem.isdone(e1) && !CuMem.isdone(s1)
    GC.@preserve p CuMem.upload_async!(x, p, s1)
    record(e2, s1)
    wait(e2, s2)                                  # s2 waits for the upload, the host does not
    h = zeros(Float32, n)
    GC.@preserve h CuMem.download_async!(h, x, s2)
    synchronize(s2)
    @test h == p
    @test CuMem.isdone(e2) && CuMem.isdone(s1)
    @test elapsed(e0, e1) >= 0.99 * SLOW
    quiet = CuEvent(timing = false)
    @test CuMem.isdone(quiet)                     # never recorded
    record(quiet)                                 # on the current (default) stream
    synchronize(quiet)
    @test_throws CuMemError elapsed(e0, quiet)

    # the host compute of a stream waits for the stream's work
    stream!(s1) do
        CuMem.sleep_on(s1, SLOW)
        q = 2 .* p
        GC.@preserve q CuMem.upload_async!(x, q, s1)
        y = x .+ 0f0              # after the upload: a kernel on s1 / host_view waits for s1
        @test Array(y) == q       # the synchronous download waits for s1
        synchronize(s1)
    end

    # copyto!(...; async = true) from pageable memory: PyTorch's fallback, synchronous
    z = CuArray{Float32}(undef, n)
    stream!(s2) do
        CuMem.sleep_on(s2, 0.05)
        copyto!(z, p; async = true)
        @test CuMem.isdone(s2)
        @test copyto!(similar(p), z; async = true) == p
    end

    # copyto!(...; async = true) with page-locked memory: queued on the current stream
    hp = CuMem.pinned(Float32, n)
    hp .= p
    @test CuMem.is_pinned(hp)
    stream!(s2) do
        CuMem.sleep_on(s2, SLOW)
        copyto!(z, hp; async = true)
        @test !CuMem.isdone(s2)                   # behind the slow operation
        hd = CuMem.pinned(Float32, n)
        copyto!(hd, z; async = true)
        synchronize(s2)
        @test hd == p
        unsafe_free!(hd)
    end
    unsafe_free!(hp)

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

    # a block of s1 read by work queued on s2, freed meanwhile: not reused until s2 is done
    x = stream!(() -> CuArray(orig), s1)
    result = slow_read(x, s2)
    px = pointer(x)
    unsafe_free!(x)
    y = stream!(() -> CuArray{Float32}(undef, n), s1)
    @test pointer(y) != px
    copyto!(y, fill(7f0, n))
    @test result() == orig
    unsafe_free!(y)

    # a default-stream array read on s2 (recorded by slow_read)
    x = CuArray(orig)
    result = slow_read(x, s2)
    px = pointer(x)
    unsafe_free!(x)
    y = CuArray(fill(3f0, n))
    @test pointer(y) != px
    @test result() == orig
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

@testset "fill!, copyto! and scalar results on the task's stream" begin
    # fill! (a memset) and copyto! between CuArrays are queued on the current stream and
    # return at once, in the stream's order; a scalar result waits for the stream.
    s = CuStream()
    n = 1000
    x, y = CuArray(zeros(Float32, n)), CuArray(ones(Float32, n))
    stream!(s) do
        CuMem.sleep_on(s, SLOW)
        fill!(x, 3f0)
        copyto!(y, x)
        @test !CuMem.isdone(s)          # neither waited for the sleep before them
        fill!(x, 2f0)
        @test sum(x) == 2f0 * n         # read back after the stream's work
    end
    synchronize(s)
    @test Array(y) == fill(3f0, n)
    # an overlapping copy within one array, on the default stream
    z = CuArray(Float32.(1:8))
    copyto!(z, 3, z, 1, 4)
    @test Array(z) == Float32[1, 2, 1, 2, 3, 4, 7, 8]
    @test CuMem.read_scalar(CuArray([7.5, 1.0])) == 7.5
    @test_throws ArgumentError CuMem.read_scalar(CuArray{Float32}(undef, 0))
    foreach(unsafe_free!, (x, y, z))
end

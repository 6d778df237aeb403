# The onesweep radix sort (julia/cuda/sort.cuh) and the one-pass scan (julia/cuda/scan.cuh)
# run on the CPU through test/compute/emulation_threads.jl (g++, a fiber per GPU thread;
# blocks one after another, which decoupled look-back allows: a tile waits only on
# tiles before it), against Base: every key width, NaN and -0.0 order, rev, by, stability of
# sortperm, sizes around the tile (4096 keys; scans: 4096 / 2048 / 1024 elements by width),
# n = 0, 1, 2^k ± 1, dims, init, integer scans exactly. lookback_emulation.cpp walks the
# look-back through aggregates (what overlapping GPU blocks see).
using CuMem, Libdl, Test, Random
CuMem.allowscalar(false)

include(joinpath(@__DIR__, "..", "emulation_threads.jl"))

same(a, b) = (a = a isa CuArray ? Array(a) : a; isequal(a, b) || (println(a[1:min(end, 20)], "\n !=\n", b[1:min(end, 20)]); false))

# keys with many ties and the special values of each type
function keys_of(T, n)
    T === Bool && return rand(Bool, n)
    T === Char && return rand(['a', 'b', 'é', '∀', '\0', '😀'], n)
    if T <: AbstractFloat
        h = T.(round.(randn(n) .* 4) ./ 2)           # ties
        sp = T[NaN, -0.0, 0.0, -Inf, Inf, -NaN, floatmin(T), -floatmax(T)]
        for k in 1:min(n, 3 * length(sp))
            h[rand(1:n)] = sp[mod1(k, length(sp))]
        end
        return h
    end
    return rand(T, n) .>> (rand(Bool) ? 0 : 4)        # sometimes constant high digits
end

Random.seed!(33)
const TYPES = (Bool, Char, Int8, UInt8, Int16, UInt16, Float16, Int32, UInt32, Float32, Int64, UInt64, Float64)
@testset "onesweep radix sort, emulated" begin
    @testset "$T" for T in TYPES
        for n in (0, 1, 2, 3, 4095, 4097, 9000)
            h = keys_of(T, n)
            @test same(sort(CuArray(h)), sort(h))
            @test same(sort(CuArray(h); rev = true), sort(h; rev = true))
            @test same(sortperm(CuArray(h)), sortperm(h))                  # stable: ties in input order
            @test same(sortperm(CuArray(h); rev = true), sortperm(h; rev = true))
        end
    end
    @testset "equal keys, constant digits" begin
        @test same(sort(CuArray(fill(7, 5000))), fill(7, 5000))             # every pass skipped
        @test same(sortperm(CuArray(fill(7f0, 5000))), collect(1:5000))
        h = rand(UInt32(0):UInt32(255), 10_000) .| 0x12340000          # one active pass (odd: copied back)
        @test same(sort(CuArray(h)), sort(h))
        @test same(sortperm(CuArray(h)), sortperm(h))
        h = Float32[NaN, -NaN, 1, NaN, -0.0, 0.0, -0.0]
        @test same(sortperm(CuArray(h)), sortperm(h))
        @test same(sortperm(CuArray(h); rev = true), sortperm(h; rev = true))
    end
    @testset "by, order, dims, partialsort" begin
        h = rand(-50:50, 6000)
        @test same(sort(CuArray(h); by = abs), sort(h; by = abs, alg = MergeSort))   # stable, as the device sort
        @test same(sortperm(CuArray(h); by = x -> x % 7), sortperm(h; by = x -> x % 7))
        @test same(sort(CuArray(h); order = Base.Order.Reverse), sort(h; rev = true))
        @test same(sort(CuArray(Float32.(h)); by = x -> -x, rev = true), sort(Float32.(h); by = x -> -x, rev = true))
        A = rand(Float32, 300, 17)
        @test same(sort(CuArray(A); dims = 1), sort(A; dims = 1))
        @test same(sort(CuArray(A); dims = 2, rev = true), sort(A; dims = 2, rev = true))
        B = rand(Int16, 5, 4, 3)
        @test same(sort(CuArray(B); dims = 3), sort(B; dims = 3))
        v = rand(Float64, 5000)
        @test partialsort(CuArray(v), 17) == partialsort(v, 17)
        @test same(partialsort(CuArray(v), 10:20; rev = true), partialsort(v, 10:20; rev = true))
        @test same(unique(CuArray(h)), unique(h))
    end
end

@testset "one-pass scan, emulated" begin
    l0 = LAUNCHES[]
    for n in (0, 1, 2, 33, 2047, 2049, 4095, 4096, 4097, 3 * 4096 + 5)
        h = rand(-9:9, n)                               # Int64: tiles of 2048
        @test same(cumsum(CuArray(h)), cumsum(h))
        h32 = rand(Int32(-9):Int32(9), n)               # Int32 accumulates as Int (add_sum)
        @test same(cumsum(CuArray(h32)), cumsum(h32))
        @test same(accumulate(+, CuArray(h32)), accumulate(+, h32))   # Int32 accumulator: tiles of 4096
        f = rand(Float32, n)
        r = Array(cumsum(CuArray(f)))
        @test length(r) == n && (n == 0 || isapprox(r, cumsum(f); rtol = 1e-5))
    end
    h = rand(-5:5, 9000)
    @test same(accumulate(max, CuArray(h); init = 3), accumulate(max, h; init = 3))
    @test same(accumulate(+, CuArray(h); init = 100), accumulate(+, h; init = 100))
    M = rand(-5:5, 5000, 3)
    @test same(cumsum(CuArray(M); dims = 1), cumsum(M; dims = 1))
    @test same(cumsum(CuArray(M); dims = 2), cumsum(M; dims = 2))
    @test same(cumprod(CuArray(M .% 2 .+ 1); dims = 1), cumprod(M .% 2 .+ 1; dims = 1))
    @test same(cumsum(view(CuArray(M), 5000:-3:1, 2)), cumsum(M[5000:-3:1, 2]))
    @test same(cumsum(CuArray(Int8[100, 100, 100])), cumsum(Int8[100, 100, 100]))
    c = rand(-3:3, 3000) .+ im .* rand(-3:3, 3000)
    @test same(cumsum(CuArray(c)), cumsum(c))                                    # 16-byte accumulators
    @test same(cumsum(CuArray(Float16[1, 2, 3, 4])), cumsum(Float16[1, 2, 3, 4]))
    @test LAUNCHES[] - l0 > 30   # the GPU path ran
end

# Other tunings (CuMem.sort_tuning / scan_tuning, as bench/julia/sort_bench.jl's variants and
# the CUMEM_SORT_* / CUMEM_SCAN_* variables select): other tiles (sort: 256 x 5 = 1280 keys,
# look-back windows of 3; scan: 64 x 3 = 192 Float32s, look-back windows of 64 tiles), full
# tiles and a partial last one, and sizes at the tile's boundary.
@testset "other tunings, emulated" begin
    st0, sc0 = CuMem.sort_tuning(), CuMem.scan_tuning()
    try
        for T in (Float32, Int64, UInt8), n in (1279, 1280, 1281, 2 * 1280, 9 * 1280 + 7)
            # (keys of one byte: by ballots; Float32 (ties: skewed digits): each pass its own; Int64: atomicOr)
            CuMem.sort_tuning(CuMem.RadixTuning(5, 0, 3, 50, T === UInt8 ? 0 : T === Float32 ? 2 : 1))
            @test CuMem.radix_tile(CuMem.sort_tuning()) == 1280
            h = keys_of(T, n)
            @test same(sort(CuArray(h)), sort(h))
            @test same(sort(CuArray(h); rev = true), sort(h; rev = true))
            @test same(sortperm(CuArray(h)), sortperm(h))
        end
        # the partial last tile is ranked whole, its keys past n as the largest key (every
        # digit 255): keys equal to it (typemax, NaN; typemin with rev) must keep their places
        # and order before those, by atomicOr (1) and by ballots (2: the skewed digits here)
        for match in (1, 2), n in (1281, 3 * 1280 + 641)
            CuMem.sort_tuning(CuMem.RadixTuning(5, 0, 3, 50, match))
            u = rand([0x00000000, 0x000000ff, 0xffffffff, 0xff00ff00], n)
            @test same(sortperm(CuArray(u)), sortperm(u))
            @test same(sortperm(CuArray(u); rev = true), sortperm(u; rev = true))
            f = rand(Float32[NaN, -NaN, Inf, 1, -Inf, -0.0], n)
            @test same(sortperm(CuArray(f)), sortperm(f))
            @test same(sort(CuArray(f)), sort(f))
            i = rand([typemin(Int64), typemax(Int64), 0, -1], n)
            @test same(sortperm(CuArray(i); rev = true), sortperm(i; rev = true))
            @test same(sort(CuArray(i); rev = true), sort(i; rev = true))
        end
        # early counts (1: the tile's digit counts published before its ranking; 2: and its
        # look-back before the ranking), with the warp match by __match_any_sync on skewed passes (3)
        for early in (1, 2), T in (Float32, Int64, UInt8), n in (1281, 9 * 1280 + 7)
            CuMem.sort_tuning(CuMem.RadixTuning(5, 0, 3, 50, T === Int64 ? 1 : 3, early))
            h = keys_of(T, n)
            @test same(sort(CuArray(h)), sort(h))
            @test same(sort(CuArray(h); rev = true), sort(h; rev = true))
            @test same(sortperm(CuArray(h)), sortperm(h))
            hs = Float32.(rand(n))                    # (skewed top digits)
            @test same(sortperm(CuArray(hs)), sortperm(hs))
        end
        for spin in (1, 0), n in (191, 192, 193, 64 * 192 + 5, 70 * 192)       # (more than 64 tiles: a second look-back window)
            CuMem.scan_tuning(CuMem.ScanTuning(64, 3, 0, 50, spin, 0, 8))          # (kernel 0; both look-back waits)
            @test CuMem.scan_tile(Float32) == 192 && CuMem.scan_tile(Int64) == 64
            f = rand(-9:9, n)
            @test same(cumsum(CuArray(f)), cumsum(f))
            M = reshape(f[1:2 * (n ÷ 2)], 2, :)                 # strided lines (the general path's loads)
            @test same(cumsum(CuArray(M); dims = 2), cumsum(M; dims = 2))
            @test same(accumulate(+, CuArray(Int32.(f)); init = Int32(3)), accumulate(+, Int32.(f); init = Int32(3)))
        end
        # the vector kernel (kernel 1; look-back windows of 32 and 64 tiles): 64 threads x 8
        # Float32s in chunks of 4 (tiles of 512), Int64 in chunks of 2 (4 a thread: 256), Int32
        # summed into Int64 (chunks of 2), Int8 (into Int64), Float16 (Float32 accumulators,
        # chunks of 8); full tiles by vector loads and stores, the partial last one, a view's
        # misaligned start and strided lines by scalar ones; 16-byte elements take kernel 0
        for window in (1, 2), n in (1, 7, 511, 512, 513, 70 * 512 + 9)
            CuMem.scan_tuning(CuMem.ScanTuning(64, 8, 0, 50, 0, 1, window))
            @test CuMem.scan_tile(Float32, Float32, Float32) == 512 && CuMem.scan_tile(Int64, Int64, Int64) == 256
            @test CuMem.scan_vec(Int32, Int64, Int64) == 2 && CuMem.scan_vec(Float16, Float16, Float32) == 8 && CuMem.scan_vec(ComplexF64, ComplexF64, ComplexF64) == 0
            f = rand(-9:9, n)
            @test same(cumsum(CuArray(f)), cumsum(f))
            f32 = Float32.(f)
            @test same(cumsum(CuArray(f32)), cumsum(f32))
            @test same(accumulate(+, CuArray(Int32.(f)); init = Int32(3)), accumulate(+, Int32.(f); init = Int32(3)))
            @test same(cumsum(CuArray(Int32.(f))), cumsum(Int32.(f)))
            @test same(cumsum(CuArray(Int8.(f))), cumsum(Int8.(f)))
            @test same(accumulate(max, CuArray(f); init = 2), accumulate(max, f; init = 2))
            n > 1 && @test same(cumsum(view(CuArray(f32), 2:n)), cumsum(f32[2:n]))
            M = reshape(f[1:2 * (n ÷ 2)], 2, :)
            @test same(cumsum(CuArray(M); dims = 2), cumsum(M; dims = 2))
            h16 = Float16.(f .% 3)
            @test same(cumsum(CuArray(h16)), cumsum(h16))
            c = f .+ im .* reverse(f)
            @test same(cumsum(CuArray(c)), cumsum(c))
        end
    finally
        CuMem.sort_tuning(st0); CuMem.scan_tuning(sc0)
    end
    # 24 keys per thread: Float32 sorts with 24 (a tile of 6144), 8-byte keys with 22 (5632),
    # the most whose 48 KiB of static shared memory fit (24: 51240 bytes)
    try
        CuMem.sort_tuning(CuMem.RadixTuning(24, 3, 8, 100, 2))
        @test CuMem.radix_fit(Float32, 4).items == 24 && CuMem.radix_fit(Int64, 0).items == 22 && CuMem.radix_fit(UInt32, 8).items == 22
        for T in (Float32, Int64), n in (6143, 5632 * 2 + 3)
            h = keys_of(T, n)
            @test same(sort(CuArray(h)), sort(h))
            @test same(sortperm(CuArray(h)), sortperm(h))
        end
        used = [k[2][5].items for (k, e) in CuMem.KERNEL_TABLE if k[2] isa Tuple && k[2][1] === :onesweep && k[2][5].lookback == 8 && k[2][5].sleep_ns == 100 && k[2][5].blocks_per_sm == 3]
        @test sort(unique(used)) == [22, 24]          # (the kernels compiled: 22 for Int64, 24 for Float32)
    finally
        CuMem.sort_tuning(st0)
    end
    # blocks of 384 and 512 threads (CUB's onesweep shape; threads 256 and up rank and move keys,
    # 0-255 own the digits' counts and look-back), histogram batches of 8 and 3 keys: tiles of
    # 384 x 3 = 1152 and 512 x 2 = 1024 keys, a partial last one, the one-block sort; early
    # counts, the atomicOr, ballot and by-pass matches, and both look-back walks
    try
        for (threads, items, hist) in ((384, 3, 8), (512, 2, 3)), T in (Float32, Int64, UInt16), early in (0, 1)
            tile = threads * items
            # (the look-back's window by bit masks on every other case)
            CuMem.sort_tuning(CuMem.RadixTuning(items, 0, 3, 50, T === Int64 ? 1 : T === UInt16 ? 0 : 2, early, threads, hist, (early + (T === Int64)) % 2))
            @test CuMem.radix_tile(CuMem.sort_tuning()) == tile
            for n in (tile - 1, tile + 1, 5 * tile + 7)
                h = keys_of(T, n)
                @test same(sort(CuArray(h); rev = n == tile + 1), sort(h; rev = n == tile + 1))
                @test same(sortperm(CuArray(h)), sortperm(h))
            end
        end
        @test_throws ArgumentError CuMem.sort_tuning(CuMem.RadixTuning(16, 4, 8, 100, 2, 0, 300))       # (not a multiple of 32)
        @test_throws ArgumentError CuMem.sort_tuning(CuMem.RadixTuning(16, 4, 8, 100, 2, 0, 256, 0))
        @test_throws ArgumentError CuMem.sort_tuning(CuMem.RadixTuning(16, 4, 8, 100, 2, 0, 256, 4, 2))
        @test_throws ArgumentError CuMem.sort_tuning(CuMem.RadixTuning(24, 2, 8, 100, 2, 0, 512))      # (over 48 KiB)
        @test CuMem.radix_fit(Int64, 0, CuMem.RadixTuning(20, 2, 8, 100, 2, 0, 384)).items == 15
    finally
        CuMem.sort_tuning(st0)
    end
    err = try CuMem.check_static_smem("the test kernels would", 49153) catch e e end
    @test err isa ArgumentError && occursin("49153 bytes", err.msg) && occursin("48 KiB", err.msg)
    @test CuMem.check_static_smem("fits", 49152) == 49152
    err = try CuMem.sort_tuning(CuMem.RadixTuning(33, 3, 8, 0, 1)) catch e e end
    @test err isa ArgumentError &&
          occursin("(items 1-32, blocks_per_sm 0-8, lookback 1-32, sleep_ns 0-10000, match 0-3, early 0-2, " *
                   "threads 256-1024 in steps of 32, hist 1-32, walk 0-1)", err.msg)
    err = try CuMem.scan_tuning(CuMem.ScanTuning(100, 16, 0, 0)) catch e e end
    @test err isa ArgumentError && occursin("(threads 64-256 in steps of 32, items 1-32, blocks_per_sm 0-16, " *
                                            "sleep_ns 0-10000, spin 0-1, kernel 0-1, window 1-16)", err.msg)
    # kernels 2 and 3 (pipelined, cp.async) were removed: a tuning or variable naming them is refused
    for k in (2, 3)
        err = try CuMem.scan_tuning(CuMem.ScanTuning(256, 16, 0, 0, 0, k, 8)) catch e e end
        @test err isa ArgumentError && occursin("kernel $k (the pipelined and cp.async scan kernels 2 and 3) was removed", err.msg)
    end
    @test CuMem.sort_tuning() == st0 && CuMem.scan_tuning() == sc0               # unchanged by the errors
    withenv("CUMEM_SORT_ITEMS" => "lots", "CUMEM_SCAN_THREADS" => "96",
            (v => nothing for v in ("CUMEM_SCAN_ITEMS", "CUMEM_SCAN_BLOCKS_PER_SM", "CUMEM_SCAN_SLEEP_NS", "CUMEM_SCAN_SPIN",
                                    "CUMEM_SCAN_KERNEL", "CUMEM_SCAN_WINDOW"))...) do
        CuMem.SORT_TUNING[] = CuMem.RadixTuning(0, 0, 0, 0, 0); CuMem.SCAN_TUNING[] = CuMem.ScanTuning(0, 0, 0, 0)   # (read again)
        err = try CuMem.sort_tuning() catch e e end
        @test err isa ArgumentError && err.msg == "CUMEM_SORT_ITEMS=\"lots\": expected an integer from 1 to 32"
        @test CuMem.scan_tuning() == CuMem.ScanTuning(96, CuMem.SCAN_DEFAULT.items, CuMem.SCAN_DEFAULT.blocks_per_sm, CuMem.SCAN_DEFAULT.sleep_ns)
    end
    # (a variable within its ends but off the step: the tuning's check)
    withenv("CUMEM_SCAN_THREADS" => "100", "CUMEM_SCAN_KERNEL" => "1", "CUMEM_SORT_EARLY" => "3") do
        CuMem.SORT_TUNING[] = CuMem.RadixTuning(0, 0, 0, 0, 0); CuMem.SCAN_TUNING[] = CuMem.ScanTuning(0, 0, 0, 0)
        @test_throws ArgumentError CuMem.scan_tuning()
        err = try CuMem.sort_tuning() catch e e end
        @test err isa ArgumentError && err.msg == "CUMEM_SORT_EARLY=\"3\": expected an integer from 0 to 2"
        @test CuMem.SCAN_TUNING[].threads == 0 && CuMem.SORT_TUNING[].items == 0      # (nothing set)
    end
    withenv("CUMEM_SCAN_KERNEL" => "3") do
        CuMem.SCAN_TUNING[] = CuMem.ScanTuning(0, 0, 0, 0)
        err = try CuMem.scan_tuning() catch e e end
        @test err isa ArgumentError && err.msg == "CUMEM_SCAN_KERNEL=\"3\": expected an integer from 0 to 1"
        @test CuMem.SCAN_TUNING[].threads == 0
    end
    withenv("CUMEM_SORT_THREADS" => "384", "CUMEM_SORT_HIST" => "16", "CUMEM_SORT_WALK" => "1") do
        CuMem.SORT_TUNING[] = CuMem.RadixTuning(0, 0, 0, 0, 0)       # (read again)
        d = CuMem.RADIX_DEFAULT
        @test CuMem.sort_tuning() == CuMem.RadixTuning(d.items, d.blocks_per_sm, d.lookback, d.sleep_ns, d.match, d.early, 384, 16, 1)
    end
    CuMem.sort_tuning(st0); CuMem.scan_tuning(sc0)
end

# The onesweep ranks keys with a shared-memory atomicOr per key or with cumem_sort_match's
# ballots (CUMEM_SORT_MATCH; by default each pass its own, and the one-block sort's ballots);
# the emulated sorts above use __match_any_sync in place of the ballots (CUMEM_EMU_MATCH_ANY):
# here the ballots' masks on two warps of
# labels 0..256 (256: a key past the end) against the lanes with an equal label.
@testset "sort.cuh's warp match by ballots" begin
    cuh = read(joinpath(@__DIR__, "..", "..", "..", "julia", "cuda", "sort.cuh"), String)
    fn = match(r"static __device__ __forceinline__ unsigned cumem_sort_match\(unsigned label, int bits\) \{\n.*?\n\}\n"s, cuh).match
    src = "#undef CUMEM_EMU_MATCH_ANY\n" * fn *
          "extern \"C\" __global__ void match_test(const unsigned* labels, unsigned* masks) " *
          "{ masks[threadIdx.x] = cumem_sort_match(labels[threadIdx.x], 9); }\n"
    labels = UInt32.(vcat(rand(0:7, 32), rand(0:256, 32)))
    labels[40] = 256; labels[41] = 256
    masks = zeros(UInt32, 64)
    f = Libdl.dlsym(emu_lib(src), "emu_match_test")
    GC.@preserve labels masks ccall(f, Cvoid, (UInt32, UInt32, UInt32, UInt32, Ptr{UInt32}, Ptr{UInt32}),
                                    1, 1, 1, 64, pointer(labels), pointer(masks))
    want = [UInt32(sum(UInt32(1) << (l - 1) for l in 1:32 if labels[32 * ((i - 1) ÷ 32) + l] == labels[i])) for i in 1:64]
    @test masks == want
end

@testset "look-back through aggregates (lookback_emulation.cpp)" begin
    dir = mktempdir()
    write(joinpath(dir, "emu_hdr.h"), HDR)
    cuda = joinpath(@__DIR__, "..", "..", "..", "julia", "cuda")
    exe = joinpath(dir, "lb")
    src = joinpath(@__DIR__, "lookback_emulation.cpp")   # (not inside the backticks: there @__DIR__ is the working directory)
    run(`g++ -O1 -std=c++20 -pthread -w -I$dir -I$cuda -o $exe $src`)
    # wrong elements: sort 9000, sort of 21 tiles (windows of 8), scan of 301 tiles (64-bit status words), of 301 tiles (Int64: flags apart),
    # the vector scan kernel's two
    @test split(read(`$exe`, String)) == ["0", "0", "0", "0", "0", "0"]
    # the sort's look-back window by bit masks (CUMEM_SORT_WALK=1) through the same aggregates
    run(`g++ -O1 -std=c++20 -pthread -w -DCUMEM_SORT_WALK=1 -I$dir -I$cuda -o $exe-walk $src`)
    @test split(read(`$exe-walk`, String))[1:2] == ["0", "0"]
end

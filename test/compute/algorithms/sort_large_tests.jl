# Sorts and scans of millions of elements against Base: on a GPU (CUMEM_DEVICE=cuda) the
# onesweep sort and the one-pass scan run with thousands of tiles in flight, so the
# decoupled look-back meets tiles that have published only their aggregates (the emulation
# runs blocks in order). On the host device Base computes and the test checks the API.
#   CUMEM_DEVICE=cuda julia --project=. test/compute/algorithms/sort_large_tests.jl
using CuMem, Test, Random
CuMem.allowscalar(false)

Random.seed!(3301)
const N = 3_000_017            # 733 tiles of 4096 keys, not a multiple of the tile
@testset "large sorts and scans against Base (n = $N)" begin
    @testset "sort $T" for T in (Float32, Float64, Float16, Int64, UInt32, Int16, UInt8, Bool, Char)
        h = T <: AbstractFloat ? T.(randn(N)) : T === Char ? rand('a':'z', N) : rand(T, N)
        if T <: AbstractFloat
            h[1:1000:end] .= T(NaN); h[2:1000:end] .= -zero(T); h[3:1000:end] .= zero(T)
        end
        d = CuArray(h)
        @test isequal(Array(sort(d)), sort(h))
        @test isequal(Array(sort(d; rev = true)), sort(h; rev = true))
        @test Array(sortperm(d)) == sortperm(h)                       # stable
        T === Float32 && @test Array(sortperm(d; rev = true)) == sortperm(h; rev = true)
        CuMem.unsafe_free!(d)
    end
    h = rand(Int32(-1000):Int32(1000), N)
    @test Array(sort(CuArray(h); by = abs)) == sort(h; by = abs, alg = MergeSort)     # stable, as the device sort
    A = rand(Float32, 2000, 1500)
    @test Array(sort(CuArray(A); dims = 1)) == sort(A; dims = 1)
    @test Array(sort(CuArray(A); dims = 2)) == sort(A; dims = 2)
    @testset "scans" begin
        x = rand(-100:100, 10 * N)
        @test Array(cumsum(CuArray(x))) == cumsum(x)                  # exact: Int64
        x32 = rand(Int32(-100):Int32(100), 10 * N)
        @test Array(accumulate(+, CuArray(x32))) == accumulate(+, x32)   # wraps exactly as Base
        @test Array(accumulate(max, CuArray(x32); init = Int32(50))) == accumulate(max, x32; init = Int32(50))
        f = rand(Float32, 10 * N)
        r = Array(cumsum(CuArray(f)))
        @test isapprox(r, cumsum(Float64.(f)); rtol = 1e-4)          # (the exact sums: Float32 rounding only)
        M = rand(-9:9, 300_000, 7)
        @test Array(cumsum(CuArray(M); dims = 1)) == cumsum(M; dims = 1)
        @test Array(cumprod(CuArray(M .% 2 .+ 1); dims = 2)) == cumprod(M .% 2 .+ 1; dims = 2)
    end
    # other tunings (bench/julia/sort_bench.jl's variants): tiles of 256 x 24 keys ranked by
    # ballots without a look-back pause, and of 384 x 20; scans of 128 threads x 24 elements with a pause
    @testset "other tunings" begin
        st0, sc0 = CuMem.sort_tuning(), CuMem.scan_tuning()
        try
            CuMem.sort_tuning(CuMem.RadixTuning(24, 3, 4, 0, 0))
            for T in (Float32, Int64)
                h = T === Float32 ? Float32.(randn(N)) : rand(Int64, N)
                T === Float32 && (h[1:1000:end] .= NaN32; h[2:1000:end] .= -0f0)
                @test isequal(Array(sort(CuArray(h))), sort(h))
                @test Array(sortperm(CuArray(h))) == sortperm(h)
            end
            # CUB's shape: blocks of 384 threads (threads 256 and up rank and move keys only) of 20
            # keys (Int64: 15), early counts, the look-back window by bit masks, 16 histogram keys in flight
            CuMem.sort_tuning(CuMem.RadixTuning(20, 2, 8, 100, 2, 1, 384, 16, 1))
            for T in (Float32, Int64)
                h = T === Float32 ? Float32.(randn(N)) : rand(Int64, N)
                T === Float32 && (h[1:1000:end] .= NaN32; h[2:1000:end] .= -0f0)
                @test isequal(Array(sort(CuArray(h))), sort(h))
                @test Array(sortperm(CuArray(h); rev = true)) == sortperm(h; rev = true)
            end
            CuMem.scan_tuning(CuMem.ScanTuning(128, 24, 0, 200, 0, 0, 8))     # (kernel 0)
            x = rand(-100:100, 10 * N)
            @test Array(cumsum(CuArray(x))) == cumsum(x)
            x32 = rand(Int32(-100):Int32(100), 10 * N)
            @test Array(accumulate(+, CuArray(x32); init = Int32(7))) == accumulate(+, x32; init = Int32(7))
            # the vector kernel (kernel 1, the default, at another shape: 256 threads of 16, a window of 8): Int64
            # (8-byte statuses apart), Int32 with init, Float32 sums of small integers (exact),
            # lines of a matrix (tiles of several lines from one counter), a view's misaligned
            # start (scalar loads)
            f = Float32.(x32)
            M = rand(-9:9, 300_000, 7)
            let tune = CuMem.ScanTuning(256, 16, 0, 0, 0, 1, 8)
                CuMem.scan_tuning(tune)
                @test Array(cumsum(CuArray(x))) == cumsum(x)
                @test Array(accumulate(+, CuArray(x32); init = Int32(7))) == accumulate(+, x32; init = Int32(7))
                @test Array(cumsum(CuArray(f))) == cumsum(f)
                @test Array(cumsum(view(CuArray(f), 2:length(f)))) == cumsum(f[2:end])
                @test Array(cumsum(CuArray(M); dims = 1)) == cumsum(M; dims = 1)
                @test Array(accumulate(max, CuArray(x32); init = Int32(50))) == accumulate(max, x32; init = Int32(50))
            end
        finally
            CuMem.sort_tuning(st0); CuMem.scan_tuning(sc0)
        end
    end
end

# The onesweep sort (julia/cuda/sort.cuh) for every key type, payload and look-back width,
# and the one-pass scans (julia/cuda/scan.cuh) of cumsum/cumprod/accumulate with and without
# init and dims, compiled to PTX by NVRTC for sm_90 (the H100) without a GPU. Skipped
# without libnvrtc (CUMEM_NVRTC_LIBRARY).
using CuMem, Test

@testset "sort.cuh and scan.cuh through NVRTC" begin
    if !CuMem.nvrtc_available()
        @test_skip "libnvrtc not found"
    else
        for T in CuMem.RADIX_TYPES, vbytes in (0, 4, 8), wide in (false, true)
            ptx = CuMem.compile_ptx(CuMem.radix_source(T, vbytes, wide); arch = "compute_90")
            @test all(k -> occursin(k, ptx), CuMem.RADIX_KERNELS)
        end
        # other tunings (bench/julia/sort_bench.jl's variants): the launch bounds reach the PTX
        for T in (Float32, Int64), tune in (CuMem.RadixTuning(24, 2, 16, 0, 1), CuMem.RadixTuning(12, 4, 4, 200, 0), CuMem.RadixTuning(16, 0, 8, 0, 2))
            ptx = CuMem.compile_ptx(CuMem.radix_source(T, 4, false, tune); arch = "compute_90")
            @test occursin("cumem_sort_onesweep", ptx)
            @test occursin(".minnctapersm", ptx) == (tune.blocks_per_sm > 0)
            @test occursin("nanosleep", ptx) == (tune.sleep_ns > 0)
            @test occursin("atom.shared.or", ptx) == (tune.match != 0)      # (the one-block sort: ballots)
        end
        # the scans: kernel_entry compiles each generated source to PTX on the host device;
        # here again for sm_90, taken from the kernel table
        x = CuArray(rand(Float32, 10))
        cumsum(x); cumprod(x); accumulate(max, x; init = 0.5f0)
        cumsum(CuArray(rand(Int8, 4, 5)); dims = 2); cumsum(CuArray(rand(Float16, 7)))
        accumulate(+, CuArray([1 + 2im, 3im]))
        n = 0
        for (k, e) in CuMem.KERNEL_TABLE
            k[2] isa Tuple && k[2][1] === :scan1 || continue
            ptx = CuMem.compile_ptx(e.source; arch = "compute_90")
            @test occursin("cumem_scan_onepass", ptx) && occursin("cumem_scan_lines", ptx)
            n += 1
        end
        @test n >= 6
        # a scan of another tuning (128 threads, 24 Float32s each, launch bounds of 4 blocks per SM)
        t0 = CuMem.scan_tuning()
        try
            CuMem.scan_tuning(CuMem.ScanTuning(128, 24, 4, 100))
            cumsum(x)
            srcs = [e.source for (k, e) in CuMem.KERNEL_TABLE if k[2] isa Tuple && k[2][1] === :scan1 && k[2][end] == CuMem.scan_tuning()]
            @test length(srcs) == 1
            ptx = CuMem.compile_ptx(srcs[1]; arch = "compute_90")
            @test occursin(".maxntid 128", ptx) && occursin(".minnctapersm 4", ptx) && occursin("nanosleep", ptx)
        finally
            CuMem.scan_tuning(t0)
        end
    end
end

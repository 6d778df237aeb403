# The onesweep sort (julia/cuda/sort.cuh) for every key type, payload and look-back width,
# and the one-pass scans (julia/cuda/scan.cuh) of cumsum/cumprod/accumulate with and without
# init and dims, compiled to PTX by NVRTC for sm_90 (the H100) without a GPU. Skipped
# without libnvrtc (CUMEM_NVRTC_LIBRARY).
using CuMem, Test

# Each kernel's static shared memory from the PTX: its `.shared` declarations (sizes and
# alignments) laid out in order, as ptxas does (ptxas' "uses too much shared data (0xe828
# bytes, 0xc000 max)" for Int64 keys with 24 keys per thread is this sum for cumem_sort_onesweep).
function ptx_smem(ptx)
    bytes, kernel = Dict{String,Vector{Tuple{Int,Int}}}(), ""
    for l in split(ptx, '\n')
        m = match(r"\.entry (\w+)\(", l)
        m === nothing || (kernel = m.captures[1]; bytes[kernel] = Tuple{Int,Int}[])
        m = match(r"^\s*\.shared \.align (\d+) \.(?:b8 \S+\[(\d+)\]|[usfb](\d+) \S+);", l)
        m === nothing && continue
        sz = m.captures[2] !== nothing ? parse(Int, m.captures[2]) : parse(Int, m.captures[3]) ÷ 8
        push!(bytes[kernel], (sz, parse(Int, m.captures[1])))
    end
    return Dict(k => CuMem.smem_layout(v) for (k, v) in bytes)
end

# Whether every kernel of a PTX text executes griddepcontrol.wait (CUMEM_PDL_ENTRY(),
# julia/cuda/common.cuh; sm_90 PTX): the text from each `.entry` to the next holds one.
every_entry_waits(ptx) = (cs = split(ptx, ".entry")[2:end]; !isempty(cs) && all(c -> occursin("griddepcontrol.wait", c), cs))
# The scans' kernel keys and entries of this process: generated (the kernel table) or, on a
# GPU, loaded from the kernel index that an earlier process filled (CuMem.INDEX_TRIED keeps them)
# (a scan generated in this process on a GPU is in both tables: the kernel table's entry is
# also kept in the index's per-process table, `index_keep!`; one pair per key)
function scan_entries()
    d = Dict{Any,Any}()
    for (k, e) in CuMem.KERNEL_TABLE
        k[2] isa Tuple && k[2][1] === :scan1 && (d[k[2]] = e)
    end
    for (k, e) in CuMem.INDEX_TRIED
        e isa CuMem.KernelEntry && (d[k[2]] = e)
    end
    return [(k, e) for (k, e) in d]
end

@testset "sort.cuh and scan.cuh through NVRTC" begin
    if !CuMem.nvrtc_available()
        @test_skip "libnvrtc not found"
    else
        for T in CuMem.RADIX_TYPES, vbytes in (0, 4, 8), wide in (false, true)
            ptx = CuMem.compile_ptx(CuMem.radix_source(T, vbytes, wide); arch = "compute_90")
            @test all(k -> occursin(k, ptx), CuMem.RADIX_KERNELS)
            @test every_entry_waits(ptx)
        end
        # other tunings (bench/julia/sort_bench.jl's variants): the launch bounds reach the PTX
        # (blocks of 384 and 512 threads, the look-back by bit masks with windows of 8 and 32: one key type each)
        for (T, tune) in vcat(vec([(T, tune) for T in (Float32, Int64),
                                          tune in (CuMem.RadixTuning(24, 2, 16, 0, 1), CuMem.RadixTuning(12, 4, 4, 200, 0), CuMem.RadixTuning(16, 0, 8, 0, 2),
                                                   CuMem.RadixTuning(16, 4, 8, 100, 3, 1), CuMem.RadixTuning(16, 4, 8, 100, 2, 2), CuMem.RadixTuning(16, 4, 8, 100, 1, 2))]),
                              [(Int64, CuMem.RadixTuning(20, 2, 8, 100, 2, 0, 384, 16)), (Float32, CuMem.RadixTuning(14, 2, 8, 100, 2, 1, 512, 8)),
                               (Float32, CuMem.RadixTuning(16, 4, 8, 100, 2, 0, 256, 4, 1)), (Int64, CuMem.RadixTuning(16, 2, 32, 0, 2, 0, 512, 16, 1))])
            ptx = CuMem.compile_ptx(CuMem.radix_source(T, 4, false, CuMem.radix_fit(T, 4, tune)); arch = "compute_90")
            @test occursin(".maxntid $(tune.threads), 1, 1", ptx) == (tune.blocks_per_sm > 0)
            @test occursin("cumem_sort_onesweep", ptx)
            @test occursin(".minnctapersm", ptx) == (tune.blocks_per_sm > 0)
            @test occursin("nanosleep", ptx) == (tune.sleep_ns > 0)
            @test occursin("atom.shared.or", ptx) == (tune.match != 0)      # (the one-block sort: ballots)
            # (__match_any_sync: the match 3's ranking of skewed passes, and the early counts' merging
            # on skewed passes, which match 1 (atomicOr on every pass) does not tell apart)
            @test occursin("match.any.sync", ptx) == (tune.match == 3 || (tune.early > 0 && tune.match != 1))
        end
        # the shared memory the sort's tunings are checked against (radix_smem) is the PTX's:
        # Int64 keys with 24 per thread need 51240 bytes (with the warps' counts beside the keys
        # 59432, ptxas' 0xe828, refused on the H200) and 22 is the most that fits
        for (T, vbytes, items, threads) in ((Int64, 0, 24, 256), (Int64, 4, 19, 256), (Int64, 8, 18, 256), (Float32, 4, 32, 256), (UInt8, 0, 5, 256),
                                            (Float16, 8, 16, 256), (Float32, 0, 20, 384), (Int64, 4, 15, 384), (UInt32, 4, 22, 512))
            sm = ptx_smem(CuMem.compile_ptx(CuMem.radix_source(T, vbytes, false, CuMem.RadixTuning(items, 4, 8, 0, 2, 0, threads)); arch = "compute_90"))
            want = CuMem.radix_smem(sizeof(T), vbytes, items, threads)
            @test sm["cumem_sort_hist"] == want.hist && sm["cumem_sort_offsets"] == want.offsets
            @test sm["cumem_sort_onesweep"] == want.onesweep && sm["cumem_sort_small"] == want.small
        end
        @test CuMem.radix_smem(8, 0, 24).onesweep == 51240
        @test CuMem.radix_fit(Int64, 0, CuMem.RadixTuning(24, 3, 8, 100, 2)) == CuMem.RadixTuning(22, 3, 8, 100, 2)
        @test maximum(CuMem.radix_smem(8, 0, 22)) <= CuMem.STATIC_SMEM_LIMIT < maximum(CuMem.radix_smem(8, 0, 23))
        # (CUB's onesweep for 8-byte keys on sm_90: 384 threads of 15; 4-byte keys and payload: 512 threads up to 22)
        @test CuMem.radix_fit(Int64, 0, CuMem.RadixTuning(20, 2, 8, 100, 2, 0, 384)).items == 15
        @test CuMem.radix_fit(Float32, 4, CuMem.RadixTuning(24, 2, 8, 100, 2, 0, 512)).items == 22
        # the scans: kernel_entry compiles each generated source to PTX on the host device;
        # here again for sm_90, taken from the kernel table
        x = CuArray(rand(Float32, 10))
        cumsum(x); cumprod(x); accumulate(max, x; init = 0.5f0)
        cumsum(CuArray(rand(Int8, 4, 5)); dims = 2); cumsum(CuArray(rand(Float16, 7)))
        accumulate(+, CuArray([1 + 2im, 3im]))
        n = 0
        for (k, e) in scan_entries()
            ptx = CuMem.compile_ptx(e.source; arch = "compute_90")
            @test occursin("cumem_scan_onepass", ptx) && occursin("cumem_scan_lines", ptx)
            @test every_entry_waits(ptx)
            T, Acc, Out, tune = k[3], k[4], k[5], k[end]    # (the element, accumulator, result types and the tuning: the key's)
            # (kernel 0's tile in shared memory; the vector kernel's few words)
            sm = ptx_smem(ptx)["cumem_scan_onepass"]
            if CuMem.scan_vec(T, Out, Acc, tune) == 0
                @test sm == CuMem.scan_smem(Acc, tune.threads, CuMem.scan_items(Acc, tune), tune.spin)
            else
                @test sm < 512
            end
            n += 1
        end
        # 64-byte accumulators under 32 items per thread: 2 per thread (a 32 KiB tile) would need
        # 52,464 bytes; scan_items takes 1, and the kernel compiles within 48 KiB
        t0 = CuMem.scan_tuning()
        try
            CuMem.scan_tuning(CuMem.ScanTuning(256, 32, 0, 0))
            A8 = NTuple{8,Float64}
            @test CuMem.scan_smem(A8, 256, 2) > CuMem.STATIC_SMEM_LIMIT && CuMem.scan_items(A8) == 1
            h = [ntuple(i -> Float64(i * k), 8) for k in 1:50]
            @test Array(accumulate((a, b) -> map(+, a, b), CuArray(h))) == accumulate((a, b) -> map(+, a, b), h)
            srcs = [(k[4], e.source) for (k, e) in scan_entries() if k[4] === A8]
            @test length(srcs) == 1
            @test ptx_smem(CuMem.compile_ptx(srcs[1][2]; arch = "compute_90"))["cumem_scan_onepass"] ==
                  CuMem.scan_smem(A8, 256, 1, CuMem.scan_tuning().spin) <= CuMem.STATIC_SMEM_LIMIT
        finally
            CuMem.scan_tuning(t0)
        end
        @test n >= 6
        # a scan of another tuning (kernel 0: 128 threads, 24 Float32s each, launch bounds of 4 blocks per SM)
        t0 = CuMem.scan_tuning()
        try
            CuMem.scan_tuning(CuMem.ScanTuning(128, 24, 4, 100, 0, 0, 8))
            cumsum(x)
            srcs = [e.source for (k, e) in scan_entries() if k[end] == CuMem.scan_tuning()]
            @test length(srcs) == 1
            ptx = CuMem.compile_ptx(srcs[1]; arch = "compute_90")
            @test occursin(".maxntid 128", ptx) && occursin(".minnctapersm 4", ptx) && occursin("nanosleep", ptx)
            @test ptx_smem(ptx)["cumem_scan_onepass"] == CuMem.scan_smem(Float32, 128, 24, 0)      # (spin 0: no s_lbm2)
        finally
            CuMem.scan_tuning(t0)
        end
        # the vector kernel (ScanTuning's kernel 1, cumem_scan_onepass_vec, with and without launch
        # bounds): Float32 in chunks of 4
        # (16-byte vector loads and stores), Int8 into Int64 sums (chunks of 2), Float16 (Float32
        # accumulators, chunks of 8); Complex{Int} (16-byte elements) takes kernel 0. No tile in
        # shared memory (a few words: the warps' totals, the tile's); the look-back's shuffles.
        try
            for tune in (CuMem.ScanTuning(256, 16, 0, 0, 0, 1, 8), CuMem.ScanTuning(128, 24, 4, 100, 0, 1, 1))
                CuMem.scan_tuning(tune)
                cumsum(x); accumulate(max, x; init = 0.5f0); cumsum(CuArray(rand(Int8, 4, 5)); dims = 2)
                cumsum(CuArray(rand(Float16, 7))); accumulate(+, CuArray([1 + 2im, 3im]))
                kinds = Set{Int}()
                for (k, e) in scan_entries()
                    k[end] == tune || continue
                    T, Acc, Out = k[3], k[4], k[5]
                    g = CuMem.scan_vec(T, Out, Acc, tune)
                    push!(kinds, g)
                    ptx = CuMem.compile_ptx(e.source; arch = "compute_90")
                    sm = ptx_smem(ptx)["cumem_scan_onepass"]
                    if g == 0
                        @test sm == CuMem.scan_smem(Acc, tune.threads, CuMem.scan_items(Acc, tune), tune.spin)
                    else
                        @test sm < 512
                        @test occursin("shfl.sync.idx", ptx) && occursin("shfl.sync.up", ptx)
                        @test occursin(".minnctapersm", ptx) == (tune.blocks_per_sm > 0) && occursin("nanosleep", ptx) == (tune.sleep_ns > 0)
                        T === Float32 && @test occursin("ld.global.v4", ptx) && occursin("st.global.v4", ptx)
                    end
                end
                @test kinds == Set([0, 2, 4, 8])             # (Complex, Int8 into Int64, Float32, Float16)
            end
            @test CuMem.scan_tile(Float32, Float32, Float32) == 128 * 24 && CuMem.scan_tile(Int8, Int64, Int64) == 128 * 12
        finally
            CuMem.scan_tuning(t0)
        end
    end
end

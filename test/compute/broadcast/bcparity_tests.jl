# Broadcasts CUDA.jl compiles that CuMem refused before: a Symbol argument, a Char (a
# 0-dimensional host array in Base's broadcasting), and writes through a Ref'd CuArray
# (the host device's one warning), and a BoundsError naming the CuArray.
using CuMem, Test
CuMem.allowscalar(false)

struct PG
    x::Float32
    y::Int32
end
inc_ref(b, h) = (h[b] += 1; 0)
peek_ref(i, a) = a[i]

@testset "broadcast parity" begin
    pg = CuArray([PG(1.5f0, 2), PG(-1f0, 7)])
    @test Array(getfield.(pg, :x)) == [1.5f0, -1f0]
    @test Array(getfield.(pg, :y)) == Int32[2, 7]
    c = CuArray(['a', 'b', 'c', 'b'])
    @test Array(c .== 'b') == [false, true, false, true]
    @test Array(CuArray([1.0, 2.0]) .+ fill(0.5)) == [1.5, 2.5]   # a 0-d host array is a scalar
    @test_throws ArgumentError CuArray([1.0, 2.0]) .+ [1.0, 2.0]  # a host vector is not

    @testset "BoundsError names the CuArray" begin
        v = CuArray(Float32[1, 2, 3])
        err = try
            peek_ref.(CuArray([1, 5]), Ref(v)); CuMem.synchronize(); nothing   # (on a GPU: raised here)
        catch e
            e
        end
        @test err isa BoundsError
        # the host device names the CuArray (not the Array viewing its memory); a kernel's
        # record on a GPU names the device array it indexed
        CuMem.on_host() && @test occursin(r"3-element (CuMem\.)?CuArray\{Float32", sprint(showerror, err))
    end

    @testset "writes through Ref(A): one warning on the host device" begin
        if CuMem.on_host()
            CuMem.REF_WRITE_WARNED[] = false
            hist = CuMem.zeros(Int, 3)
            bins = CuArray([1, 2, 2, 3, 3, 3])
            @test_logs (:warn, r"not synchronised") inc_ref.(bins, Ref(hist))
            @test Array(hist) == [1, 2, 3]                             # in order on the host
            @test_logs inc_ref.(bins, Ref(hist))                     # once only
            @test_logs peek_ref.(CuArray([1, 2]), Ref(hist))          # reads do not warn
        end
    end
end

# Regression tests of the defects the differential fuzzer found (issue text in
# docs/reliability.md, "The compiler under differential fuzzing"). Included by
# test/fuzz/fuzz_tests.jl on the host device (the kernels are generated and, with libnvrtc,
# compiled to PTX; Base runs the elements) and through the g++ emulation (the kernels run).
using CuMem, Test

# the message of what `f()` throws (or "no exception")
thrown(f) = try
    f()
    "no exception"
catch e
    string(typeof(e), ": ", sprint(showerror, e))
end

fz_at1(x) = throw(DomainError(x, "always"))
fz_at2(x::Float64) = Core.throw_inexacterror(:trunc, UInt8, x)
fz_ct1(k) = (1f0, 2f0, 3f0)[k]
fz_ct2(k) = (Int8(1), Int8(2))[k]
fz_ct3(k) = ((1, 2), (3, 4))[k][1]
fz_h9(x) = x > 5 ? x : throw(DomainError(x + x + x + x + x + x + x + x + x))
fz_h10(x) = x > 5 ? x : throw(DomainError(div(x + x + x + x + x + x + x + x + x, x - 1)))
fz_big(x) = x > 0 ? x : throw(DomainError((x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7, x + 8, x + 9), "ten values"))
fz_sd(x) = trailing_zeros(Base.checked_neg(ifelse(iszero(x), trunc(UInt64, x), UInt64(7)))) % UInt64
fz_order(x) = x < 0 ? throw(DomainError(x)) : x > 100 ? throw(InexactError(:fz_order, Int, x)) : x
# (the GPU fuzzer's seed 130007, function 13, cut down) ptxas of CUDA 13.0 dropped the zero
# extension before the byte swap of a sign-extended Int8 here: -1 for every negative x
fz_bswap(x::Int8) = (Int16(-x), Base.checked_add(ifelse(iszero(x), x % Int16, Int16(x)), bswap(Int16(x))))[(Int(abs(Int16(x)) & Int16(1)) + 1)]
fz_bswap2(x::Int8) = (bswap(Int16(x)), bswap(x % UInt16), bswap(Int32(x)), bswap(Int64(x)))

function fuzz_regressions()
    @testset "functions that always throw compile and throw Base's exception" begin
        x = [1, 2, 3]
        @test thrown(() -> Array(fz_at1.(CuArray(x)))) == thrown(() -> fz_at1.(x))
        @test thrown(() -> Array(map(fz_at1, CuArray(x)))) == thrown(() -> map(fz_at1, x))
        y = [7.5, 300.0]
        @test occursin("InexactError", thrown(() -> Array(fz_at2.(CuArray(y)))))
        @test thrown(() -> Array(fz_at2.(CuArray(y)))) == thrown(() -> fz_at2.(y))
        @test !occursin("KernelCompileError", thrown(() -> CuMem.synchronize()))
    end
    @testset "a constant tuple indexed at run time" begin
        @test Array(fz_ct1.(CuArray([1, 2, 3]))) == [1f0, 2f0, 3f0]
        @test Array(fz_ct2.(CuArray([2, 1]))) == Int8[2, 1]
        @test Array(fz_ct3.(CuArray([2, 1]))) == [3, 1]
        @test thrown(() -> Array(fz_ct1.(CuArray([1, 4])))) == thrown(() -> fz_ct1.([1, 4]))
    end
    @testset "exception values of any size; a throw while building one" begin
        @test thrown(() -> Array(fz_h9.(CuArray([7, 2])))) == thrown(() -> fz_h9.([7, 2]))
        @test occursin("DomainError with 18", thrown(() -> Array(fz_h9.(CuArray([7, 2])))))
        @test thrown(() -> Array(fz_h10.(CuArray([7, 1])))) == thrown(() -> fz_h10.([7, 1]))
        @test occursin("DivideError", thrown(() -> Array(fz_h10.(CuArray([7, 1])))))
        @test thrown(() -> Array(fz_big.(CuArray([3, -4])))) == thrown(() -> fz_big.([3, -4]))
        @test occursin("(-4, -3, -2", thrown(() -> Array(fz_big.(CuArray([3, -4])))))
    end
    @testset "the first exception by element order" begin
        x = Float32[-2.7; fill(3f0, 700); 0f0]
        @test thrown(() -> sum(fz_sd, CuArray(x))) == thrown(() -> sum(fz_sd, x))
        @test occursin("InexactError", thrown(() -> sum(fz_sd, CuArray(x))))
        v = fill(1, 600)
        v[450] = 500
        v[500:600] .= -1
        v[40] = 300
        @test thrown(() -> Array(fz_order.(CuArray(v)))) == thrown(() -> fz_order.(v))
        @test thrown(() -> Array(map(fz_order, CuArray(v)))) == thrown(() -> map(fz_order, v))
    end
    @testset "bswap of a sign-extended Int8" begin
        x = Int8[-2, 16, -97, -1, -7, -108, 126, 2, 3, -128, -127, -39, 15, -83, -65, -12, 0, 127]
        @test Array(fz_bswap.(CuArray(x))) == fz_bswap.(x)
        @test Array(fz_bswap2.(CuArray(x))) == fz_bswap2.(x)
        @test Array(map(x -> bswap(Int16(x)), CuArray(x))) == bswap.(Int16.(x))
    end
end

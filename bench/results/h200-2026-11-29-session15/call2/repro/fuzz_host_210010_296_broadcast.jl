# CuMem fuzzer reproducer: Base miscompiled in `broadcast` (mode host, seed 210010, function 296)
# Base: Complex{Float32}[-2.0f0 - 1.0f0im, 0.0f0 + 1.0f0im, -2.0f0 + 2.0f0im, -1.07370906f9 + 32768.0f0im, 0.0f0 + 1.0f0im, 0.0f0 + 1.0f0im, 0.0f0 + 1.0f0im, -2.0f0 - 1.0f0im, 0.0f0 + 1.0f0im, 0.0f0 + 1.0f0im, -0.0f0 - 0.0f0im, -2.0f0 - 1.0f0im, -1.0736435f9 + 32767.0f0im, -3.133785f8 - 17702.0f0im, -20.0f0 - 4.0f0im, -6.736361f8 + 25955.0f0im, -2.0f0 - 1.0f0im, -2.0f0 - 1.0f0im, 0.0f0 + 1.0f0im, -2.0f0 - 1.0f0im, -12.0f0 - 3.0f0im, -0.0f0 - 0.0f0im, -12.0f0 - 3.0f0im, 0.0f0 + 1.0f0im]
# CuMem: Complex{Float32}[-2.0f0 - 1.0f0im, -0.0f0 + 1.0f0im, -2.0f0 + 2.0f0im, -1.07370906f9 + 32768.0f0im, -0.0f0 + 1.0f0im, -0.0f0 + 1.0f0im, -0.0f0 + 1.0f0im, -2.0f0 - 1.0f0im, -0.0f0 + 1.0f0im, -0.0f0 + 1.0f0im, -0.0f0 - 0.0f0im, -2.0f0 - 1.0f0im, -1.0736435f9 + 32767.0f0im, -3.133785f8 - 17702.0f0im, -20.0f0 - 4.0f0im, -6.736361f8 + 25955.0f0im, -2.0f0 - 1.0f0im, -2.0f0 - 1.0f0im, -0.0f0 + 1.0f0im, -2.0f0 - 1.0f0im, -12.0f0 - 3.0f0im, -0.0f0 - 0.0f0im, -12.0f0 - 3.0f0im, -0.0f0 + 1.0f0im]
using CuMem
struct FuzzS; a::Int32; b::Float32; end
nsignbit(x) = !isnan(x) & signbit(x)
ncopysign(x, y) = copysign(x, isnan(y) ? one(y) : y)
nflipsign(x, y) = flipsign(x, isnan(y) ? one(y) : y)
function fz296(x1::Int16, x2::Int16)
    if !(Float64(x2) > Float64(x1))
        v1 = sign((iszero(x1) ? Float32(x2) : Float32(x2)))
    else
        v1 = ceil(FuzzS((x2 % Int32), Float32(x1)).b)
    end
    v2 = FuzzS((x2 % Int32), v1).a
    for i in 1:1
        v2 = v2
    end
    return -(ComplexF32(fma(v1, v1, v1), (signbit(x1) ? v1 : v1)))
end

x1 = Int16[30128, 7544, -2, -32768, 19239, 0, 3, 100, 32766, 2, 32767, 1, -32767, 17702, 4, -25955, 30135, 28585, -24067, 7, 3, 10, 3, 9]
x2 = Int16[1, -32768, 1824, 7, -2095, -32767, -1, 3, -2, -263, 0, 32767, -7, 20108, 10, -5920, 12, 10, -32590, 1, 8, 0, 13, -25032]
want = try; fz296.(x1, x2); catch e; e; end
got = try; Array(fz296.(CuArray(x1), CuArray(x2))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

# CuMem fuzzer reproducer: Base miscompiled in `broadcast` (mode host, seed 210008, function 199)
# Base: Complex{Float32}[-6535.0f0 + 45745.0f0im, 1.0f0 - 12.0f0im, -28354.0f0 + 56708.0f0im, -1.7601967f9 - 2.0418282f12im, 13.0f0 - 1400.0f0im, 0.0f0 - 0.0f0im, -2.1474836f9 - 4.2949673f9im, -2.1474836f9 + 3.0328912f13im, 3.0f0 - 39.0f0im, -1.0f0 + 0.0f0im, -7.0f0 + 42.0f0im, -1.0f0 + 3.0f0im, 6.0f0 - 1.2884902f10im, 0.0f0 - 7.0f0im, 8.0f0 - 171.0f0im, -18373.0f0 + 1.9766402f13im, 19.0f0 - 19440.0f0im, 2.0f0 - 30.0f0im, -1.3065028f9 + 2.4823552f10im, -23020.0f0 + 138120.0f0im, -1.3427114f9 + 3.0709152f13im, 16334.0f0 - 2.990076f13im, -4.1681366f8 + 4.1681367f9im, -28744.0f0 + 287440.0f0im]
# CuMem: Complex{Float32}[-6535.0f0 + 45745.0f0im, 1.0f0 - 12.0f0im, -28354.0f0 + 56708.0f0im, -1.7601967f9 - 2.0418282f12im, 13.0f0 - 1400.0f0im, 0.0f0 - 0.0f0im, -2.1474836f9 - 4.2949673f9im, -2.1474836f9 + 3.0328912f13im, 3.0f0 - 39.0f0im, -1.0f0 - 0.0f0im, -7.0f0 + 42.0f0im, -1.0f0 + 3.0f0im, 6.0f0 - 1.2884902f10im, 0.0f0 - 7.0f0im, 8.0f0 - 171.0f0im, -18373.0f0 + 1.9766402f13im, 19.0f0 - 19440.0f0im, 2.0f0 - 30.0f0im, -1.3065028f9 + 2.4823552f10im, -23020.0f0 + 138120.0f0im, -1.3427114f9 + 3.0709152f13im, 16334.0f0 - 2.990076f13im, -4.1681366f8 + 4.1681367f9im, -28744.0f0 + 287440.0f0im]
using CuMem
struct FuzzS; a::Int32; b::Float32; end
nsignbit(x) = !isnan(x) & signbit(x)
ncopysign(x, y) = copysign(x, isnan(y) ? one(y) : y)
nflipsign(x, y) = flipsign(x, isnan(y) ? one(y) : y)
function fz199(x1::Int16, x2::Int32)
    return conj(ComplexF32(min(Float32(x1), Float32(x2)), fma(Float32(x1), Float32(x2), Float32(x1))))
end

x1 = Int16[-6535, 6, -28354, -1160, 100, 0, -2, 14123, 3, 2, 7, -1, 6, 7, 19, -18373, 972, 10, 19, -23020, 22871, 16334, 10, -28744]
x2 = Int32[6, 1, 1, -1760196748, 13, 3, -2147483648, -2147483647, 12, -1, -7, 2, 2147483647, 0, 8, 1075839608, 19, 2, -1306502751, 5, -1342711476, 1830584057, -416813653, 9]
want = try; fz199.(x1, x2); catch e; e; end
got = try; Array(fz199.(CuArray(x1), CuArray(x2))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

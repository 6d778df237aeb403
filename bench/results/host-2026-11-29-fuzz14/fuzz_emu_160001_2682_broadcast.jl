# CuMem fuzzer reproducer: wrong value in `broadcast` (mode emu, seed 160001, function 2682)
# Base: Complex{Float32}[2502.0454f0 - 2452.0251f0im, 0.0f0 - 0.0f0im, Inf32 + NaN32*im, 0.0f0 + 0.0f0im, 30.89234f0 - 36.450428f0im, 77.750496f0 - 86.568115f0im, 4.9303807f-32 - 2.220446f-16im, Inf32 + NaN32*im, 1.0f0 - 2.0f0im, 0.0f0 + 0.0f0im, 0.0f0 - 0.0f0im, 9.0f0 - 12.0f0im, Inf32 - Inf32*im, 7.2900004f0 - 9.990001f0im, 1391.776f0 - 1354.4695f0im, 26.8682f0 - 21.684746f0im, 1.0f6 - 1.001f6im, 0.0f0 - 0.0f0im, 485.70917f0 - 507.748f0im, 0.00677657f0 - 0.089096494f0im, 22.652763f0 - 27.412254f0im, 29.2678f0 - 23.857826f0im, 498.22827f0 - 475.90726f0im, 6.4997544f0 - 3.9502928f0im]
# CuMem: Complex{Float32}[2502.0454f0 - 2452.0251f0im, 0.0f0 - 0.0f0im, Inf32 + NaN32*im, 0.0f0 - 0.0f0im, 30.89234f0 - 36.450428f0im, 77.750496f0 - 86.568115f0im, 4.9303807f-32 - 2.220446f-16im, Inf32 + NaN32*im, 1.0f0 - 2.0f0im, 0.0f0 - 0.0f0im, 0.0f0 - 0.0f0im, 9.0f0 - 12.0f0im, Inf32 - Inf32*im, 7.2900004f0 - 9.990001f0im, 1391.776f0 - 1354.4695f0im, 26.8682f0 - 21.684746f0im, 1.0f6 - 1.001f6im, 0.0f0 - 0.0f0im, 485.70917f0 - 507.748f0im, 0.00677657f0 - 0.089096494f0im, 22.652763f0 - 27.412254f0im, 29.2678f0 - 23.857826f0im, 498.22827f0 - 475.90726f0im, 6.4997544f0 - 3.9502928f0im]
using CuMem
struct FuzzS; a::Int32; b::Float32; end
nsignbit(x) = !isnan(x) & signbit(x)
ncopysign(x, y) = copysign(x, isnan(y) ? one(y) : y)
nflipsign(x, y) = flipsign(x, isnan(y) ? one(y) : y)
function fz2682(x1::Float64)
    return conj(ComplexF32(abs2(ComplexF32(Float32(x1), Float32(-0.0))), fma(Float32(x1), Float32(x1), Float32(x1))))
end

x1 = [-50.02044960614167, 0.0, -Inf, -5.0e-324, 5.558088050936473, 8.817624027235864, 2.220446049250313e-16, -1.7976931348623157e308, 1.0, -0.0, 5.0e-324, 3.0, 1.7976931348623157e308, 2.7, -37.30651381082441, -5.183454496005853, 1000.0, 2.2250738585072014e-308, 22.03881023285118, 0.0823199230364639, 4.759491753611951, -5.409971967247954, -22.321027219508895, -2.5494615566629797]
want = try; fz2682.(x1); catch e; e; end
got = try; Array(fz2682.(CuArray(x1))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

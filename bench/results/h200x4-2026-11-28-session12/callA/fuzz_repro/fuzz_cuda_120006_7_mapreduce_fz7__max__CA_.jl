# CuMem fuzzer reproducer: wrong value in `mapreduce(fz7, max, CA)` (mode host, seed 120006, function 7)
# Base: 0.0
# CuMem: -0.0
using CuMem
struct FuzzS; a::Int32; b::Float32; end
function fz7(x1::Float16)
    v1 = (isfinite(x1) && abs(x1) < Float16(100) ? trunc(Int8, x1) : Int8(1))
    return ((isnan(x1) || isnan(Float64(v1))) ? (isless((v1 % Int64), convert(Int64, v1)) ? fma(x1, x1, x1) : fma(x1, x1, x1)) : (Float16(-0.0), Float16(-0.0), Float16(-0.0),)[(Int((UInt8(100), UInt8(0), UInt8(1),)[(Int(((v1 % UInt8)) & UInt8(1)) + 1)] % 3) + 1)])
end

x1 = Float16[-9.83, 6.104e-5, -43.88, 0.0, -0.1447, -6.0e-8, 6.0e-8, -0.0, -1.0, -2.7, -2.836, Inf, 6.55e4, -6.55e4, 0.5, 2.7, 3.0, 27.88, -31.03, 37.56, -9.75, -143.9, 78.6, 12.22]
want = try; mapreduce(fz7, max, x1); catch e; e; end
got = try; mapreduce(fz7, max, CuArray(x1)); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

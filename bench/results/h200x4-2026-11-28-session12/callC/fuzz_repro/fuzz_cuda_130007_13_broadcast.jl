# CuMem fuzzer reproducer: wrong value in `broadcast` (mode host, seed 130007, function 13)
# Base: Int16[-2, -272, -24674, -2, -1544, -11556, -16006, -6, 771, -16256, -32384, -9768, -272, 3855, -156, -110, 257, -156, -21076, -16450, 3855, -342, -132, -42]
# CuMem: Int16[-2, -272, -98, -2, -8, -11556, -16006, -6, 771, -16256, -128, -40, -272, 3855, -156, -110, 257, -156, -84, -66, 3855, -342, -132, -42]
using CuMem
struct FuzzS; a::Int32; b::Float32; end
nsignbit(x) = !isnan(x) & signbit(x)
ncopysign(x, y) = copysign(x, isnan(y) ? one(y) : y)
nflipsign(x, y) = flipsign(x, isnan(y) ? one(y) : y)
function fz13(x1::Int8)
    if iszero(x1)
        v1 = ((Float16(-0.0), Float16(10),)[(Int((x1 % UInt8) % 2) + 1)] ^ -1)
    else
        v1 = (float(Float16(x1)) / (Float16(x1) ^ -1))
    end
    return ((-(convert(Int16, x1)) - (nsignbit(v1) ? round(Int16, v1) : trunc(Int16, v1))), Base.checked_add(ifelse(iszero(v1), (x1 % Int16), convert(Int16, x1)), bswap(Int16(x1))))[(Int((abs(Int16(x1))) & Int16(1)) + 1)]
end

x1 = Int8[-2, 16, -97, -1, -7, -108, 126, 2, 3, -128, -127, -39, 16, 15, 12, 10, 1, 12, -83, -65, 15, 18, -12, 6]
want = try; fz13.(x1); catch e; e; end
got = try; Array(fz13.(CuArray(x1))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

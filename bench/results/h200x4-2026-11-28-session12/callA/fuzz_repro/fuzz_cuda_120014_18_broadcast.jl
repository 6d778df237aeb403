# CuMem fuzzer reproducer: exception mismatch in `broadcast` (mode host, seed 120014, function 18)
# Base: throws InexactError: trunc(UInt16, -Inf)
# CuMem: throws InexactError: trunc(UInt16, NaN)
using CuMem
struct FuzzS; a::Int32; b::Float32; end
function fz18(x1::Float32, x2::UInt8)
    v1 = ceil(x1)
    for i in 1:4
        v1 = ((signbit(i) ? v1 : v1) + (v1 - x1))
    end
    return (signbit((Float64(x2) * Float64(v1))) ? ifelse(signbit(v1), (signbit(x1) ? (x2 % UInt16) : round(UInt16, v1)), Base.checked_mul((x2 % UInt16), round(UInt16, x1))) : ((trunc(UInt16, v1), (x2 % UInt16))[(Int(((isfinite(v1) && abs(v1) < Float32(100) ? trunc(UInt16, abs(v1)) : UInt16(1))) & UInt16(1)) + 1)] >> ((isfinite(v1) && abs(v1) < Float32(100) ? trunc(Int64, v1) : Int64(1)), (isfinite(x1) && abs(x1) < Float32(100) ? trunc(Int64, x1) : Int64(1)))[(Int((convert(Int64, x2)) & Int64(1)) + 1)]))
end

x1 = Float32[1.0f-45, 1000.0, -0.3144682, -0.92182606, -Inf, -7.0355573, 1.0, 0.7205646, -2.9245942, 1.939011, 128.89293, -210.65979, -1.0, 3.0, -1.0f-45, -3.4028235f38, 0.5, 2.7, -734.81476, 2.771617, 1.1759706, 0.34923488, -63.216488, 17.367075]
x2 = UInt8[0x01, 0xfe, 0x02, 0x12, 0x1a, 0x01, 0x07, 0x0b, 0xff, 0xc4, 0x0d, 0x0b, 0xd7, 0x11, 0x07, 0x0c, 0x06, 0x07, 0x0b, 0x2d, 0xef, 0x04, 0x05, 0x3c]
want = try; fz18.(x1, x2); catch e; e; end
got = try; Array(fz18.(CuArray(x1), CuArray(x2))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

# CuMem fuzzer reproducer: wrong value in `map` (mode host, seed 120024, function 1)
# Base: Bool[0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0]
# CuMem: Bool[0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
using CuMem
struct FuzzS; a::Int32; b::Float32; end
function fz1(x1::Int32)
    v1 = max(float(Float64(x1)), (Float64(x1) / Float64(x1)))
    return signbit((ifelse(signbit(v1), Float16(v1), Float16(x1)) - (Float16(v1) - Float16(v1))))
end

x1 = Int32[3, 2133098406, 19, -2147483648, 2147483647, -2147483647, 8, -802522112, 20, -2, 1, 2147483646, 100, 2, 1, 17, 453208624, 20, -1878305131, 0, 247065418, 9, 15, 11]
want = try; map(fz1, x1); catch e; e; end
got = try; Array(map(fz1, CuArray(x1))); catch e; e; end
println("Base:  ", want)
println("CuMem: ", got)

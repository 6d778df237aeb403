# Translation time of the typed-IR compiler (issue 23), without NVRTC: the first new
# function of a fresh process (inference of the function and JIT of the translator
# included), then new functions (a new closure type each, so no cache hit), then cache hits.
# One JSON line per row.
#   CUMEM_DEVICE=host julia --project=. bench/julia/compiler_translate.jl
using CuMem
newfun(k) = eval(:(v -> v > 0f0 ? sin(v) * $(Float32(k)) + v^2 : Float32(div(Int(floor(v)), 3)) - $(Float32(k))))
struct BenchP; m::Float32; x::Float32; end
f = newfun(0)
t0 = @elapsed Base.invokelatest(CuMem.device_function, f, (Float32,))
println("{\"row\":\"first function of the process\",\"ms\":", round(1000t0, digits = 2), "}")
ts = Float64[]
for k in 1:20
    g = newfun(k)
    push!(ts, @elapsed Base.invokelatest(CuMem.device_function, g, (Float32,)))
end
sort!(ts)
println("{\"row\":\"new function (median of 20)\",\"ms\":", round(1000ts[10], digits = 2), ",\"min_ms\":", round(1000ts[1], digits = 2), "}")
ps = Float64[]
for k in 1:10
    g = eval(:(p -> p.m > 0 ? p.m * p.x + $(Float32(k)) : exp(p.x)))
    push!(ps, @elapsed Base.invokelatest(CuMem.device_function, g, (BenchP,)))
end
sort!(ps)
println("{\"row\":\"new struct function (median of 10)\",\"ms\":", round(1000ps[5], digits = 2), "}")
h = @elapsed for k in 1:1000; CuMem.device_function(f, (Float32,)); end
println("{\"row\":\"cache hit\",\"us\":", round(1e6h / 1000, digits = 2), "}")

# The device sort against itself at 10^6 and 10^8 elements: sort! of Float32, Int64 and
# UInt32 keys, sortperm of Float32, and cumsum (the scan under the sort), as JSON lines
# {"op", "impl": "cumem", "n", "ms"} (median of 5 timed runs after one warm-up, each
# ending with a synchronize). Run on a GPU: CUMEM_DEVICE=cuda julia --project=. bench/julia/sort_bench.jl
using CuMem, Random, Printf, Statistics
CuMem.allowscalar(false)

function timed(f, setup)
    ts = Float64[]
    for k in 1:6
        x = setup()
        CuMem.synchronize()
        t = time_ns()
        f(x)
        CuMem.synchronize()
        k > 1 && push!(ts, (time_ns() - t) / 1e6)
        x isa CuArray && CuMem.unsafe_free!(x)
    end
    return median(ts)
end

sizes = isempty(ARGS) ? (10^6, 10^8) : map(s -> parse(Int, s), ARGS)
for n in sizes
    for (name, T) in (("sort_f32", Float32), ("sort_i64", Int64), ("sort_u32", UInt32))
        src = CuMem.rand(T, n)
        ms = timed(x -> sort!(x), () -> copy(src))
        println("{\"op\": \"$name\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
        CuMem.unsafe_free!(src)
    end
    src = CuMem.rand(Float32, n)
    ms = timed(x -> CuMem.unsafe_free!(sortperm(x)), () -> copy(src))
    println("{\"op\": \"sortperm_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
    ms = timed(x -> CuMem.unsafe_free!(cumsum(x)), () -> copy(src))
    println("{\"op\": \"cumsum_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
    CuMem.unsafe_free!(src)
    flush(stdout)
end

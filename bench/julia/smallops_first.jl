# A fresh process's first broadcast and first sum (issue 26): seconds from `using CuMem`
# to each result, one JSON line. With the kernel cache on disk warm (an earlier process
# compiled the same kernels) NVRTC does not run; `bench/gpu/run.sh smallops` runs this cold and
# warm.
#
#   CACHE=cold|warm BUILD=after julia --project=. bench/julia/smallops_first.jl
t0 = time_ns()
using CuMem
t_using = (time_ns() - t0) / 1e9
x, y = CuMem.fill(1f0, 4), CuMem.fill(2f0, 4)
t_bc = @elapsed (x .+ y; CuMem.synchronize())
t_sum = @elapsed sum(x)
stats = isdefined(CuMem, :disk_cache_stats) ? CuMem.disk_cache_stats() : nothing
println("{\"bench\":\"first\",\"impl\":\"CuMem\",\"build\":\"", get(ENV, "BUILD", "after"), "\",\"cache\":\"",
        get(ENV, "CACHE", "?"), "\",\"using_s\":", round(t_using; digits = 3), ",\"first_broadcast_s\":",
        round(t_bc; digits = 3), ",\"first_sum_s\":", round(t_sum; digits = 3),
        stats === nothing ? "" : ",\"disk_hits\":$(stats.hits),\"disk_misses\":$(stats.misses)",
        ",\"device\":\"", CuMem.device_name(), "\"}")

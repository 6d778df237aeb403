# Concurrent compilation: brand-new functions broadcast and mapped from two Julia threads at
# once (the same function from both, and different ones), with a redefinition in between;
# every result must be right and nothing may throw. Run with JULIA_NUM_THREADS=2
# (runtests.jl does); FUZZ_STRESS_ROUNDS rounds (default 20).
using CuMem, Test
CuMem.allowscalar(false)

const ROUNDS = parse(Int, get(ENV, "FUZZ_STRESS_ROUNDS", "20"))
@testset "concurrent compilation ($(Threads.nthreads()) threads)" begin
    @test Threads.nthreads() >= 2 || get(ENV, "FUZZ_STRESS_ANY", "0") == "1"
    x, y = Float32.(1:37), Float32.(37:-1:1)
    ca, cb = CuArray(x), CuArray(y)
    bad = Threads.Atomic{Int}(0)
    for r in 1:ROUNDS
        f = Core.eval(Main, :(function $(Symbol(:stress_f, r))(a, b) a * $(Float32(r)) + b end))
        g = Core.eval(Main, :(function $(Symbol(:stress_g, r))(a, b) a - $(Float32(r)) * b end))
        t1 = Threads.@spawn Base.invokelatest(() -> (Array(f.(ca, cb)), Array(g.(ca, cb))))
        t2 = Threads.@spawn Base.invokelatest(() -> (Array(map(f, cb, ca)), Array(g.(cb, ca))))
        r1, r2 = fetch(t1), fetch(t2)
        ok = r1[1] == x .* Float32(r) .+ y && r1[2] == x .- Float32(r) .* y &&
             r2[1] == y .* Float32(r) .+ x && r2[2] == y .- Float32(r) .* x
        ok || Threads.atomic_add!(bad, 1)
        # a redefinition between rounds: the next launch must use the new method
        Core.eval(Main, :(function $(Symbol(:stress_f, r))(a, b) a * $(Float32(r + 1)) + b end))
        t3 = Threads.@spawn Base.invokelatest(() -> Array(f.(ca, cb)))
        t4 = Threads.@spawn Base.invokelatest(() -> Array(map(f, ca, cb)))
        (fetch(t3) == x .* Float32(r + 1) .+ y && fetch(t4) == x .* Float32(r + 1) .+ y) || Threads.atomic_add!(bad, 1)
    end
    @test bad[] == 0
end

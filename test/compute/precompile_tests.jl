# What is precompiled for a fresh process's first operations (julia/compute/precompile.jl):
# every listed signature still names a method, and __init__ records its steps.
using Test, CuMem

@testset "precompiled first operations" begin
    sigs = filter(!isempty, strip.(readlines(CuMem.PRECOMPILE_OPS_FILE)))
    @test length(sigs) > 50
    @test isempty(CuMem.PRECOMPILE_STALE)     # else rerun scripts/gen_precompile.jl
    for s in sigs
        T = Core.eval(CuMem, Meta.parse(s))
        @test T <: Tuple
        f = T.parameters[1]
        @test isdefined(f, :instance) || f <: Type    # a function or a constructor
    end
end

@testset "__init__ steps" begin
    steps = first.(CuMem.INIT_TIMES)
    @test steps == [:init_engine_facts, :init_library, :init_kernel_cache, :init_pressure, :init_tracking,
                    :init_compiled_tables, :init_broadcast, :init_sysimage]
    @test all(t -> 0 <= t < 60, last.(CuMem.INIT_TIMES))
    # init_pressure's direct read of the engine's record agrees with memory_stats
    g = CuMem.gc_pressure()
    @test g.min_growth >= 1 << 20 && g.max_growth >= g.min_growth
end

# Tests of the whole package under one pool: runtests.jl starts this file once per pool,
# with JULIA_CUDA_MEMORY_POOL set (the engine reads it when the package initialises).
#
#   JULIA_CUDA_MEMORY_POOL=split CUMEM_DEVICE=host julia --project test/pooltests.jl

using CuMem, Test, LinearAlgebra, Random

const POOL = lowercase(strip(get(ENV, "JULIA_CUDA_MEMORY_POOL", "binned")))
const POOL_TYPE = Dict("binned" => "BinnedPool", "split" => "SplitPool",
                       "expandable" => "ExpandablePool",
                       "simple" => "SimplePool", "none" => "NoPool")[POOL]

Random.seed!(1)

# An isbits struct for round trips.
struct Point3
    x::Float32
    y::Int16
    z::UInt8
end
Base.rand(rng::AbstractRNG, ::Random.SamplerType{Point3}) =
    Point3(rand(rng, Float32), rand(rng, Int16), rand(rng, UInt8))

# Frees everything unreachable and returns the cache, so each test starts from a clean pool.
function clean!()
    GC.gc(true)
    GC.gc(true)
    reclaim()
    return nothing
end

isfreed_error(f) = try
    f()
    false
catch e
    e isa AssertionError && e.msg == "Use of freed memory"
end

@testset "CuMem, pool $POOL" begin
    @test CuMem.pool_name() == POOL
    @test CuMem.tracking() == false
    include(joinpath("array", "array_tests.jl"))
    include(joinpath("array", "wrappers_tests.jl"))
    include(joinpath("memory", "memory_tests.jl"))
    include(joinpath("tools", "memtools_tests.jl"))
    # What does not depend on the pool (the scalar indexing policy, cu and adapt's
    # conversions) runs under one pool only: runtests.jl sets CUMEM_TEST_POOL_FREE=0 for
    # the others.
    if get(ENV, "CUMEM_TEST_POOL_FREE", "1") == "1"
        include(joinpath("array", "scalar_tests.jl"))
        include(joinpath("array", "adapt_tests.jl"))
    end
    include(joinpath("array", "iterator_tests.jl"))
    include(joinpath("devices", "stream_tests.jl"))
    include(joinpath("memory", "threads_tests.jl"))
    include("reliability_tests.jl")
    include(joinpath("memory", "hotpath_tests.jl"))
    include(joinpath("array", "usability_tests.jl"))
    include(joinpath("array", "parity_tests.jl"))
    include(joinpath("tools", "profile_tests.jl"))
    @testset "no failed frees" begin
        clean!()
        @test CuMem.free_errors() == (0, 0, 0)
    end
end

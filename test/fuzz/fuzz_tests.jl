# The differential fuzzer in CI: the fuzzer's regression cases, then random functions from a
# fixed seed and from a seed that changes with every run (printed, so that a failure can be
# replayed with `make fuzz SEED=...`). `julia test/fuzz/fuzz_tests.jl [emu]`: on the
# device of CUMEM_DEVICE (host: kernels generated and checked by NVRTC, Base computes), or
# with `emu` every kernel run through the g++ emulation (test/compute/emulation_threads.jl).
# FUZZ_N (default 10 host / 3 emu: CI's time; `make fuzz` runs long campaigns) functions per seed; reproducers in FUZZ_OUT (default a
# temporary folder).
using Test
const FUZZ_EMU = "emu" in ARGS
FUZZ_EMU && !haskey(ENV, "CUMEM_EMU_OPT") && (ENV["CUMEM_EMU_OPT"] = "-O0")
empty!(ARGS)
append!(ARGS, ["--mode", FUZZ_EMU ? "emu" : "host", "--out", get(ENV, "FUZZ_OUT", mktempdir()), "--quiet"])
include(joinpath(@__DIR__, "fuzz.jl"))
include(joinpath(@__DIR__, "regression_cases.jl"))

const FUZZ_N_CI = parse(Int, get(ENV, "FUZZ_N", FUZZ_EMU ? "3" : "10"))
@testset "differential fuzzer ($(MODE))" begin
    fuzz_regressions()
    @test fuzz_main(seed = 20261128, n = FUZZ_N_CI) == 0
    s = Int(time_ns() % 1_000_000_000)
    println("fuzz: this run's seed is $s (replay: make fuzz SEED=$s N=$FUZZ_N_CI MODE=$MODE)")
    @test fuzz_main(seed = s, n = FUZZ_N_CI) == 0
end

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
# Base's reference through `Dyn` (fuzz.jl) is Base's own answer: the same values, result
# types and exceptions as calling the generated function directly, on the fuzzer's inputs
function reference_agrees(seed, n)
    rng = MersenneTwister(seed)
    for k in 1:n
        src, ats, R, _ = FuzzGen.gen_function(rng, "fzref$k")
        M = Module(:FuzzRef)
        include_string(M, FuzzGen.STRUCT_DEF)
        f = Core.eval(M, Meta.parse(src))
        xs = Any[FuzzGen.inputs(rng, T, LEN) for T in ats]
        g = reference_function(f, xs)
        g isa Dyn || return false
        same(a, b) = a isa Err ? (b isa Err && typeof(a.e) === typeof(b.e) && sprint(showerror, a.e) == sprint(showerror, b.e)) :
                                 (b isa Ok && typeof(a.v) === typeof(b.v) && isequal(a.v, b.v))
        Base.invokelatest() do
            same(run_(() -> f.(xs...)), run_(() -> g.(xs...))) || return false
            same(run_(() -> map(f, xs...)), run_(() -> map(g, xs...))) || return false
            if length(xs) == 1 && R !== ComplexF32
                for op in (R === Bool ? (|) : R <: Integer ? (+) : max,)
                    same(run_(() -> mapreduce(f, op, xs[1])), run_(() -> mapreduce(g, op, xs[1]))) || return false
                end
                R <: Integer && !same(run_(() -> sum(f, xs[1])), run_(() -> sum(g, xs[1]))) && return false
            end
            true
        end || (println("fuzz: Base's reference through Dyn differs for\n", src); return false)
    end
    return true
end

@testset "differential fuzzer ($(MODE))" begin
    @test reference_agrees(20261129, FUZZ_EMU ? 5 : 20)
    # the interpreter's reference for a wrong value (fuzz.jl's interpreted_reference): for
    # -fma(x, x, x) of -0.0f0 IEEE 754 and Julia's interpreter give -0.0 (Julia 1.5's compiled
    # code gave 0.0 at -O2: emulation seed 160001, function 2682)
    src = "function fzm(x::Float32)\n    return -fma(x, x, x)\nend"
    @test interpreted_reference(src, Any[Float32[-0.0, 1.0]], "broadcast") == "Float32[-0.0, -2.0]"
    @test interpreted_reference(src, Any[Float32[-0.0]], "mapreduce(fzm, max, CA)") == "-0.0f0"
    @test interpreted_reference("function fzm(x::Float32)\n    return undefined_name(x)\nend", Any[Float32[1]], "map") === nothing
    fuzz_regressions()
    @test fuzz_main(seed = 20261128, n = FUZZ_N_CI) == 0
    s = Int(time_ns() % 1_000_000_000)
    println("fuzz: this run's seed is $s (replay: make fuzz SEED=$s N=$FUZZ_N_CI MODE=$MODE)")
    @test fuzz_main(seed = s, n = FUZZ_N_CI) == 0
end

# A `CUDA` module over CuMem, for running CUDA.jl v2.6.3's own test files
# (bench/julia/cudajl_suite.jl), and the helpers CUDA.jl's test/setup.jl gives every test
# file (`testf`, `@not_if_memcheck`, `TestSuite.compare`, `@grab_output`, ...), written
# here from their documented behaviour.
#
# `CUDA` re-exports what CuMem exports, and `CUDA.name` reaches every name CuMem defines
# (exported or not), so whatever CuMem gains (the kernel language: `@cuda`, `threadIdx`, ...)
# is picked up without changing this file. CUDA.jl names CuMem lacks are defined below only
# while CuMem lacks them: a few map onto CuMem's counterpart, the rest throw a clear error
# when called, so that a check using them counts as an error and the others still run.
#
# Include it after `using CuMem` (it defines Main.CUDA, Main.Adapt, Main.DataStructures,
# Main.TestSuite and Main.CUDAJLSetup); a test module then does `using Test, Random, Main.CUDA, Main.CUDAJLSetup`.

module CUDA

using CuMem, LinearAlgebra, Random

# CuMem's internal names that mean something else in CUDA.jl (CuMem.release frees a buffer;
# CUDA.release() is the toolkit's version): not forwarded, CUDA.jl's meaning is defined below.
const CUDAJL_OTHER_MEANING = (:release,)

# Every name CuMem defines, as the same binding (methods added through CUDA.f extend CuMem.f).
const FORWARDED = Symbol[]
for n in names(CuMem; all = true)
    s = string(n)
    (startswith(s, "#") || n in (:eval, :include, :CuMem, :__init__)) && continue
    n in CUDAJL_OTHER_MEANING && continue
    isdefined(CuMem, n) || continue
    Core.eval(@__MODULE__, Expr(:import, Expr(:(:), Expr(:., :CuMem), Expr(:., n))))
    push!(FORWARDED, n)
end
for n in names(CuMem)               # CuMem's exports are CUDA's
    n === :CuMem || Core.eval(@__MODULE__, Expr(:export, n))
end

has(n::Symbol) = isdefined(CuMem, n)
"""The error every CUDA.jl name without a CuMem counterpart throws when called."""
missing_api(name) = error("CUDA.$name: CUDA.jl API without a CuMem counterpart")

# Names CUDA.jl has and CuMem (so far) does not. Each block runs only while CuMem lacks it.
if !has(:CuError)
    const CuError = CuMem.CuMemError
end
has(:has_nvml) || (has_nvml() = false)
has(:device_reset!) || (device_reset!(dev = nothing) = (synchronize(); reclaim(); nothing))
has(:functional) || (functional(show_reason = false) = true)
has(:seed!) || (seed!(args...) = Random.seed!(CuMem.default_rng(), args...))
has(:precompile_runtime) || (precompile_runtime() = nothing)
if !has(:CU_NULL)
    const CU_NULL = CuPtr{Cvoid}(0)
end
# the current context's device: CuMem has no contexts, the task's device stands for it
has(:CuCurrentDevice) || (CuCurrentDevice() = CuMem.device())
if !has(:ARRAY_FREED)   # CuArray's `state` in CUDA.jl 2.x
    const ARRAY_UNMANAGED = 0
    const ARRAY_MANAGED = 1
    const ARRAY_FREED = 2
end
for n in (:rand_logn, :rand_logn!, :rand_poisson, :rand_poisson!, :CuRef, :context,
          :context!, :CuContext, :CuCurrentContext, :attaskswitch,
          :atdeviceswitch, :atdevicereset, :enable_timings, :disable_timings, :alloc,
          :cudacall, :CuModule, :CuFunction, :CuLink, :launch_configuration,
          :total_memory, :name, :uuid, :toolkit_release, :cuda_compat)
    has(n) && continue
    @eval $n(args...; kwargs...) = missing_api($(QuoteNode(n)))
    @eval export $n
end

# The CUDA toolkit's release (CUDA.jl: the toolkit it uses; here NVRTC's version, v"0" without
# NVRTC) and the PTX ISA versions it can emit (those of PTX ISA 6.0 to 7.0 from CUDA 10 on,
# the ones CUDA.jl's tests ask about).
release() = CuMem.nvrtc_available() ? CuMem.nvrtc_version() : v"0"
has(:ptx_support) || (ptx_support() = release() >= v"10.0" ? [v"6.0", v"6.2", v"6.3", v"6.4", v"7.0"] : VersionNumber[])

# The kernel language (julia/compute/device/ once it lands); until then each throws.
const KERNEL_NAMES = (:threadIdx, :blockIdx, :blockDim, :gridDim, :warpsize, :laneid,
    :sync_threads, :sync_warp, :threadfence, :threadfence_block, :threadfence_system,
    :CuStaticSharedArray, :CuDynamicSharedArray, :atomic_add!, :atomic_sub!, :atomic_inc!,
    :atomic_dec!, :atomic_xchg!, :atomic_and!, :atomic_or!, :atomic_xor!, :atomic_cas!,
    :atomic_max!, :atomic_min!, :vote_all, :vote_any, :vote_ballot, :shfl_sync,
    :shfl_down_sync, :shfl_up_sync, :shfl_xor_sync, :clock, :nanosleep, :cufunction,
    :dynamic_cufunction, :cudaconvert, :cuprint, :CuDeviceVector, :CuDeviceMatrix)
for n in KERNEL_NAMES
    has(n) && continue
    @eval $n(args...; kwargs...) = missing_api($(QuoteNode(n)))
    @eval export $n
end
for m in (Symbol("@cuda"), Symbol("@cuprintln"), Symbol("@cuprintf"), Symbol("@cushow"),
          Symbol("@cuprint"), Symbol("@cuassert"), Symbol("@cuStaticSharedMem"),
          Symbol("@cuDynamicSharedMem"), Symbol("@atomic"), Symbol("@allocated"),
          Symbol("@timed"), Symbol("@retry_reclaim"))
    has(m) && continue
    name = string(m)[2:end]
    @eval macro $(Symbol(name))(args...)
        return Expr(:call, $(GlobalRef(@__MODULE__, :missing_api)), $(string(m)))
    end
    @eval export $m
end

# What CUDA.jl v2.6.3 exports (its src/ and lib/), exported here where CUDA has the name,
# so that a test file's unqualified use finds CuMem's or the stand-in above.
const CUDAJL_EXPORTS = split("""
    @atomic @cuDynamicSharedMem @cuStaticSharedMem @cuassert @cuda @cuprint @cuprintf
    @cuprintln @cushow CU_NULL CuArray CuDeviceArray CuDeviceMatrix CuDeviceVector CuError
    CuEvent CuIterator CuMatrix CuPtr CuRef CuVecOrMat CuVector DenseCuArray DenseCuMatrix
    DenseCuVecOrMat DenseCuVector OutOfGPUMemoryError PtrOrCuPtr RefOrCuRef capability
    clock context context! cu cudacall cudaconvert cufunction device device! device_reset!
    deviceid devices dynamic_cufunction elapsed has_cuda has_cuda_gpu has_nvml
    launch_configuration nanosleep ndevices rand_logn! rand_poisson! record sync_threads
    sync_warp synchronize threadfence threadfence_block threadfence_system vote_all vote_any
    vote_ballot warpsize threadIdx blockIdx blockDim gridDim
    name uuid totalmem attribute priority priority_range CuDefaultStream CuCurrentDevice
    Mem attribute! memory_type is_managed""")
for n in Symbol.(CUDAJL_EXPORTS)
    isdefined(@__MODULE__, n) && Core.eval(@__MODULE__, Expr(:export, n))
end

# Library submodules: the wrapper-level calls the suite skips (see cudajl_skips.jl), so
# these only need to exist for `using CUDA.CUBLAS` and the like.
module CUBLAS end
module CUSOLVER end
module CURAND end
module CUFFT end
module CUSPARSE end
module CUDNN end
module NVML end

end # module CUDA

# Adapt.jl, as far as the test files use it: CuMem's own adapt.
module Adapt
using CuMem: adapt, adapt_structure, adapt_storage
export adapt, adapt_structure, adapt_storage
end

# DataStructures.jl, as far as the test files use it (sorting.jl's `counter`).
module DataStructures
export counter
"""`counter(xs)`: how many times each value occurs in `xs` (a Dict), as DataStructures'."""
function counter(xs)
    d = Dict{eltype(xs),Int}()
    for x in xs
        d[x] = get(d, x, 0) + 1
    end
    return d
end
end

# GPUArrays.jl's test-suite comparison (GPUArrays v6.4.1 test/testsuite.jl, `compare`):
# `f` runs on copies of the host inputs and on their device versions, a `Ref` being
# unwrapped on both sides (its value passed as is), with the keyword arguments given to
# `f`; the results are compared with `collect(cpu) ≈ collect(gpu)` (element by element
# for tuples).
module TestSuite
using CuMem, Test
to_device(AT, x) = CuMem.adapt(AT, x)
"""`compare(f, AT, xs...; kw...)`: whether `f` gives the same on the host and through `AT`."""
function compare(f, AT::Type, xs...; kwargs...)
    cpu_in = map(x -> isa(x, Base.RefValue) ? x[] : deepcopy(x), xs)
    gpu_in = map(x -> isa(x, Base.RefValue) ? x[] : to_device(AT, x), xs)
    cpu_out = f(cpu_in...; kwargs...)
    gpu_out = f(gpu_in...; kwargs...)
    if cpu_out isa Tuple && gpu_out isa Tuple
        return all(zip(cpu_out, gpu_out)) do (cpu, gpu)
            collect(cpu) ≈ collect(gpu)
        end
    else
        return collect(cpu_out) ≈ collect(gpu_out)
    end
end
end # module TestSuite

# CUDA.jl's test/setup.jl helpers.
module CUDAJLSetup
using Test, CuMem, ..CUDA, ..TestSuite
export testf, @not_if_memcheck, @grab_output, @test_throws_cuerror, @test_throws_message,
       @test_throws_macro, @on_device, sink, julia_script, @test_broken_if, TestSuite

"""`testf(f, xs...)`: `f` on host arrays and on their CuArray versions agree (≈)."""
testf(f, xs...; kwargs...) = TestSuite.compare(f, CuMem.CuArray, xs...; kwargs...)

"""Runs the check: there is no cuda-memcheck here (CUDA.jl skips it under memcheck)."""
macro not_if_memcheck(ex)
    haskey(ENV, "CUDA_MEMCHECK") || return esc(ex)
    return :(@test_skip $(esc(ex)))
end

"""`@grab_output ex`: `(value, what ex printed to stdout)`."""
macro grab_output(ex)
    quote
        mktemp() do fname, fout
            ret = nothing
            open(fname, "w") do fout
                redirect_stdout(fout) do
                    ret = $(esc(ex))
                end
            end
            ret, read(fname, String)
        end
    end
end

"""`@test_throws_cuerror code ex`: `ex` throws a CuError (CuMemError) with this code."""
macro test_throws_cuerror(code, ex)
    quote
        @test_throws CUDA.CuError try
            $(esc(ex))
        catch err
            isa(err, CUDA.CuError) || rethrow()
            err.code == $(esc(code)) || error("Wrong CuError: ", err.code, " instead of ", $(esc(code)))
            rethrow()
        end
    end
end

"""`@test_throws_message f T ex`: `ex` throws a `T` whose message satisfies `f`."""
macro test_throws_message(f, typ, ex...)
    quote
        msg = ""
        @test_throws $(esc(typ)) try
            $(esc(ex...))
        catch err
            msg = sprint(showerror, err)
            rethrow()
        end
        @test $(esc(f))(msg)
    end
end

"""`@test_throws_macro T ex`: a macro in `ex` throws `T` at expansion."""
macro test_throws_macro(ty, ex)
    quote
        Test.@test_throws $(esc(ty)) try
            $(esc(ex))
        catch err
            @test err isa LoadError
            rethrow(err.error)
        end
    end
end

"""`@on_device ex`: runs `ex` in a one-thread kernel (needs the kernel language)."""
macro on_device(ex)
    kernel = gensym("kernel")
    esc(quote
        let
            function $kernel()
                $ex
                return
            end
            CUDA.@sync CUDA.@cuda $kernel()
        end
    end)
end

"""Keeps a value from being optimised away (setup.jl uses an LLVM volatile store; here a
call that is not inlined, which kernels can compile)."""
@noinline sink(i) = i

const SHIM = @__FILE__
"""`julia_script(code, args)`: runs `code` in a fresh Julia with CuMem and this shim
loaded (`using CUDA` is rewritten); returns `(exit code, stdout, stderr)`."""
function julia_script(code, args = ``)
    script = "using CuMem; include($(repr(SHIM))); using .CUDA\n" *
             replace(code, r"^using CUDA$"m => "")
    cmd = Base.julia_cmd()
    if Base.JLOptions().project != C_NULL
        cmd = `$cmd --project=$(unsafe_string(Base.JLOptions().project))`
    end
    out, err = Pipe(), Pipe()
    proc = run(pipeline(`$cmd --color=no --eval $script $args`, stdout = out, stderr = err); wait = false)
    close(out.in); close(err.in)
    wait(proc)
    return proc.exitcode, read(out, String), read(err, String)
end

"""`@test_broken_if cond ex`: `@test_broken` when `cond`, else `@test`."""
macro test_broken_if(cond, ex...)
    quote
        if $(esc(cond))
            @test_broken $(map(esc, ex)...)
        else
            @test $(map(esc, ex)...)
        end
    end
end
end # module CUDAJLSetup

# setup.jl's `@test_maybe_broken`, which it adds to Test itself.
isdefined(Test, Symbol("@test_maybe_broken")) || @eval Test begin
    export @test_maybe_broken
    macro test_maybe_broken(ex, kws...)
        test_expr!("@test_maybe_broken", ex, kws...)
        orig_ex = Expr(:inert, ex)
        result = get_test_result(ex, __source__)
        quote
            x = $result
            if x.value
                do_test(x, $orig_ex)
            else
                do_broken_test(x, $orig_ex)
            end
        end
    end
end

# Runs GPUArrays.jl's array test suite (the `test/testsuite/` of GPUArrays.jl v6.4.1, the
# release CUDA.jl 2.x tests against) on CuMem.CuArray with scalar indexing disallowed, and
# counts passes, failures and errors per testset.
#
# GPUArrays.jl is not part of this repository and not installable here: fetch its v6.4.1
# tree somewhere outside the checkout, e.g.
#
#   git clone https://github.com/JuliaGPU/GPUArrays.jl $SRC
#   mkdir -p $DIR && git -C $SRC archive v6.4.1 | tar -x -C $DIR
#
# then, from the repository root:
#
#   CUMEM_DEVICE=host julia --project=. bench/julia/gpuarrays_suite.jl $DIR/test [testset ...]
#
# With testset names (e.g. "reductions/sum prod") only those run. The suite's own modules
# (GPUArrays, Adapt, FillArrays) are stood in for by the small modules below: GPUArrays'
# names map onto CuMem's (`AbstractGPUArray` is `CuMem.CuArray`; `allowscalar`,
# `@allowscalar`, `@disallowscalar` and `default_rng` are CuMem's), Adapt onto CuMem's own
# adapt, FillArrays' `Fill` and `Eye` are small lazy arrays. Every testset starts under
# `allowscalar(false)`.
# `gpu_call` (kernels written as Julia functions over device arrays) runs on CuMem's `@cuda`
# (where CuMem has the kernel language; before it, it throws and its checks count as errors).
# Output: one line per testset (pass / fail / error / broken), then the totals and the share
# of checks that pass. Set GPUARRAYS_VERBOSE=1 to print each failure as Test does.

using CuMem, Test, LinearAlgebra, Random

length(ARGS) >= 1 || error("usage: gpuarrays_suite.jl <GPUArrays.jl test dir> [testset ...]")
const SUITE_DIR = abspath(ARGS[1])
const ONLY = ARGS[2:end]
isfile(joinpath(SUITE_DIR, "testsuite.jl")) || error("no testsuite.jl in $SUITE_DIR")

module Adapt
using CuMem: adapt, adapt_structure, adapt_storage
export adapt, adapt_structure, adapt_storage
end

module FillArrays
using LinearAlgebra
export Fill, Ones, Eye
"""A lazy array of one value (FillArrays.jl's `Fill`, as far as the suite uses it)."""
struct Fill{T,N} <: AbstractArray{T,N}
    value::T
    dims::NTuple{N,Int}
end
Fill(v, dims::Integer...) = Fill(v, Int.(dims))
Base.size(F::Fill) = F.dims
Base.getindex(F::Fill{T,N}, I::Vararg{Int,N}) where {T,N} = (checkbounds(F, I...); F.value)
"""A lazy vector of ones."""
struct Ones{T} <: AbstractVector{T}
    n::Int
end
Base.size(F::Ones) = (F.n,)
Base.getindex(F::Ones{T}, i::Int) where {T} = (checkbounds(F, i); one(T))
"""`Eye{T}(n)`: the n×n identity as a `Diagonal` of `Ones`, as FillArrays."""
const Eye{T} = Diagonal{T,Ones{T}}
(::Type{Diagonal{T,Ones{T}}})(n::Integer) where {T} = Diagonal(Ones{T}(n))
end

module GPUArrays
using CuMem, Random
export AbstractGPUArray, allowscalar, @allowscalar, @disallowscalar, gpu_call,
       linear_index, global_size, threadidx, blockidx, blockdim, griddim, default_rng
const AbstractGPUArray = CuMem.CuArray
default_rng(::Type{<:CuMem.CuArray}) = CuMem.default_rng()
const allowscalar = CuMem.allowscalar
const var"@allowscalar" = CuMem.var"@allowscalar"
if isdefined(CuMem, Symbol("@disallowscalar"))
    const var"@disallowscalar" = CuMem.var"@disallowscalar"
else    # older CuMem: the checks that use it fail at run time
    macro disallowscalar(ex)
        :(error("CuMem has no @disallowscalar"))
    end
end
if isdefined(CuMem, Symbol("@cuda"))
    # GPUArrays 6.4's gpu_call over CuMem's kernel language: `kernel(ctx, args...)` on
    # `total_threads` threads (default `length(target)`; at most 256 per block) or on the
    # `threads` and `blocks` given; the context answers GPUArrays' index queries.
    struct KernelContext end
    gpu_call_kernel(kernel, args...) = (kernel(KernelContext(), args...); nothing)
    function gpu_call(kernel, args...; target = first(args), total_threads = nothing,
                      threads = nothing, blocks = nothing, name = nothing)
        if threads === nothing || blocks === nothing
            n = total_threads === nothing ? length(target) : total_threads
            threads = max(1, min(n, 256))
            blocks = max(1, cld(n, threads))
        end
        CuMem.@cuda threads=threads blocks=blocks gpu_call_kernel(kernel, args...)
        return
    end
    @inline threadidx(::KernelContext) = CuMem.threadIdx().x
    @inline blockidx(::KernelContext) = CuMem.blockIdx().x
    @inline blockdim(::KernelContext) = CuMem.blockDim().x
    @inline griddim(::KernelContext) = CuMem.gridDim().x
    @inline global_size(ctx::KernelContext) = griddim(ctx) * blockdim(ctx)
    @inline linear_index(ctx::KernelContext) = (blockidx(ctx) - 1) * blockdim(ctx) + threadidx(ctx)
else    # older CuMem: no kernel language
    gpu_call(args...; kwargs...) =
        error("gpu_call: CuMem has no kernels written as Julia functions over device arrays")
    for f in (:linear_index, :global_size, :threadidx, :blockidx, :blockdim, :griddim)
        @eval $f(ctx) = error("no gpu_call kernel context in CuMem")
    end
end
end

# A testset that counts and never throws, so that every testset runs.
mutable struct CountingTestSet <: Test.AbstractTestSet
    description::String
    pass::Int
    fail::Int
    error::Int
    broken::Int
    firsts::Vector{String}
end
CountingTestSet(desc; kw...) = CountingTestSet(desc, 0, 0, 0, 0, String[])
const VERBOSE = get(ENV, "GPUARRAYS_VERBOSE", "") == "1"
const CAUSES = Dict{String,Int}()   # first line of each error / failed expression -> count
function note!(ts, r)
    VERBOSE && (print("  in ", ts.description, ": "); show(stdout, MIME("text/plain"), r); println())
    line = r isa Test.Fail ? "FAIL " * string(r.orig_expr) :
           "ERROR " * split(string(r.value), '\n')[1] * " in " * string(r.orig_expr)
    line = line[1:min(end, 240)]
    cause = r isa Test.Fail ? "FAIL " * string(r.orig_expr) : "ERROR " * split(string(r.value), '\n')[1]
    cause = cause[1:min(end, 160)]
    occursin("scalar", cause) && (cause *= " [" * ts.description * "]")
    CAUSES[cause] = get(CAUSES, cause, 0) + 1
    length(ts.firsts) < 3 && push!(ts.firsts, line * " [" * ts.description * "]")
end
Test.record(ts::CountingTestSet, ::Test.Pass) = (ts.pass += 1; ts)
Test.record(ts::CountingTestSet, r::Test.Fail) = (ts.fail += 1; note!(ts, r); ts)
Test.record(ts::CountingTestSet, r::Test.Error) = (ts.error += 1; note!(ts, r); ts)
Test.record(ts::CountingTestSet, ::Test.Broken) = (ts.broken += 1; ts)
function Test.record(ts::CountingTestSet, c::CountingTestSet)
    ts.pass += c.pass; ts.fail += c.fail; ts.error += c.error; ts.broken += c.broken
    for s in c.firsts
        length(ts.firsts) < 3 && push!(ts.firsts, s)
    end
    ts
end
function Test.finish(ts::CountingTestSet)
    Test.get_testset_depth() > 0 && Test.record(Test.get_testset(), ts)
    ts
end

# The suite's testsuite.jl with its three `using`s pointed at the stand-ins above.
src = read(joinpath(SUITE_DIR, "testsuite.jl"), String)
for m in ("GPUArrays", "Adapt", "FillArrays")
    global src = replace(src, Regex("^using $m\$", "m") => "using ..$m")
end
occursin("using ..GPUArrays", src) || error("unexpected testsuite.jl: no `using GPUArrays`")
src = replace(src, "include(\"testsuite/" => "include(\"" * escape_string(SUITE_DIR) * "/testsuite/")
include_string(Main, src, joinpath(SUITE_DIR, "testsuite.jl"))

CuMem.allowscalar(false)
names_ = sort!(collect(keys(TestSuite.tests)))
isempty(ONLY) || (names_ = filter(n -> n in ONLY, names_))
results = CountingTestSet[]
for name in names_
    fun = TestSuite.tests[name]
    CuMem.allowscalar(false)    # whatever the testset before left
    t = @elapsed ts = @testset CountingTestSet "$name" begin
        Base.invokelatest(fun, CuMem.CuArray)
    end
    push!(results, ts)
    total = ts.pass + ts.fail + ts.error
    println(rpad(name, 36), lpad(ts.pass, 5), " pass ", lpad(ts.fail, 4), " fail ",
            lpad(ts.error, 4), " error ", lpad(ts.broken, 3), " broken  ",
            total == 0 ? "   -  " : lpad(string(round(100 * ts.pass / total; digits = 1)), 5) * " %",
            "  ($(round(t; digits = 1)) s)")
    for s in ts.firsts
        println("    ", s)
    end
    flush(stdout)
end
P = sum(Int[r.pass for r in results]); F = sum(Int[r.fail for r in results])
E = sum(Int[r.error for r in results]); B = sum(Int[r.broken for r in results])
println("TOTAL $(length(results)) testsets: $P pass, $F fail, $E error, $B broken: ",
        round(100 * P / max(1, P + F + E); digits = 1), " % of $(P + F + E) checks pass")
println("\nMost common causes (count, first line):")
for (c, n) in sort!(collect(CAUSES); by = last, rev = true)[1:min(end, 40)]
    println(lpad(n, 5), "  ", c)
end

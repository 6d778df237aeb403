# The kernel language (julia/compute/device/): @cuda, the intrinsics, shared memory,
# atomics, warp shuffles and votes, output and exceptions. Runs on any device
# (CUMEM_DEVICE=host: the host runner; cuda: the GPU); with libnvrtc
# (CUMEM_NVRTC_LIBRARY) every kernel's generated CUDA C is also compiled to PTX, so the C
# the GPU runs is checked on machines without one.
#
#   CUMEM_DEVICE=host julia --project=. test/compute/device/kernel_tests.jl

using CuMem, Test

# one enclosing test set, so that every set below runs and the summary counts them all
const ALL = Test.DefaultTestSet("kernel language ($(CuMem.on_host() ? "host device" : "GPU"))")
Test.push_testset(ALL)

const PTX_CHECKED = Set{String}()
# Every kernel compiled so far (by source) through NVRTC, when it is there (on a GPU
# `@cuda` itself compiles and loads it).
function check_ptx(k)
    (CuMem.on_host() && CuMem.nvrtc_available()) || return true
    src = k.fun.source
    src in PTX_CHECKED && return true
    CuMem.compile_ptx(src; arch = "compute_90")
    push!(PTX_CHECKED, src)
    return true
end
# `@cuda` that also checks the kernel's PTX
macro ck(ex...)
    call = ex[end]
    f = esc(call.args[1])
    args = map(esc, call.args[2:end])
    kws = [Expr(:(=), k.args[1], esc(k.args[2])) for k in ex[1:end-1]]
    quote
        k = @cuda launch=false $f($(args...))
        @test check_ptx(k)
        @cuda $(kws...) $f($(args...))
    end
end

function gpu_add1!(y, x)
    for i = 1:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
function gpu_add2!(y, x)
    index = threadIdx().x
    stride = blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end
function gpu_add3!(y, x)
    index = (blockIdx().x - 1) * blockDim().x + threadIdx().x
    stride = gridDim().x * blockDim().x
    for i = index:stride:length(y)
        @inbounds y[i] += x[i]
    end
    return nothing
end

@testset "tutorial: gpu_add1!, gpu_add2!, gpu_add3!" begin
    N = 1000
    x = CuArray(fill(1.0f0, N))
    y = CuArray(fill(2.0f0, N))
    @ck gpu_add1!(y, x)
    @test Array(y) == fill(3.0f0, N)
    @ck threads=256 gpu_add2!(y, x)
    @test Array(y) == fill(4.0f0, N)
    @ck threads=64 blocks=cld(N, 64) gpu_add3!(y, x)
    @test Array(y) == fill(5.0f0, N)
    k = @cuda launch=false gpu_add3!(y, x)
    @test k isa HostKernel
    cfg = launch_configuration(k.fun)
    @test cfg.threads >= 1 && cfg.blocks >= 1
    k(y, x; threads = min(N, cfg.threads), blocks = cld(N, min(N, cfg.threads)))
    @test Array(y) == fill(6.0f0, N)
end

# A step range per thread: its length, sum and last element (the compiler's fast path for
# one-element Int ranges, Base.steprange_last otherwise, and its throw for step 0).
function ranges!(len, tot, lst, a, s, b)
    t = threadIdx().x
    r = a[t]:s[t]:b[t]
    n = 0
    acc = zero(eltype(a))
    for i in r
        n += 1
        acc += i
    end
    @inbounds len[t] = n
    @inbounds tot[t] = acc
    @inbounds lst[t] = isempty(r) ? zero(eltype(a)) : last(r)
    return nothing
end

@testset "step ranges (start:step:stop) of $T" for T in (Int64, Int32)
    lo, hi = typemin(T), typemax(T)
    cases = T[1 1 1; 5 3 7; 5 3 8; 5 3 4; 7 -2 1; 7 -2 8; 1 10 10; 1 9 10; -3 5 1; hi-1 5 hi; lo hi hi;
              lo 2 lo+3; hi -1 hi-2; lo+2 -5 lo; 0 1 0; 4 1 3]
    m = size(cases, 1)
    a, s, b = CuArray(cases[:, 1]), CuArray(cases[:, 2]), CuArray(cases[:, 3])
    len, tot, lst = CuArray(zeros(Int, m)), CuArray(zeros(T, m)), CuArray(zeros(T, m))
    @ck threads=m ranges!(len, tot, lst, a, s, b)
    rs = [cases[k, 1]:cases[k, 2]:cases[k, 3] for k in 1:m]
    @test Array(len) == length.(rs)
    @test Array(tot) == [foldl(+, r; init = zero(T)) for r in rs]
    @test Array(lst) == [isempty(r) ? zero(T) : last(r) for r in rs]
    @ck threads=1 ranges!(len, tot, lst, CuArray(T[1]), CuArray(T[0]), CuArray(T[5]))
    @test_throws ArgumentError synchronize()
end

function indices!(out)
    i = threadIdx().x + (threadIdx().y - 1) * blockDim().x + (threadIdx().z - 1) * blockDim().x * blockDim().y
    b = blockIdx().x + (blockIdx().y - 1) * gridDim().x
    n = blockDim().x * blockDim().y * blockDim().z
    g = i + (b - 1) * n
    out[1, g] = threadIdx().x; out[2, g] = threadIdx().y; out[3, g] = threadIdx().z
    out[4, g] = blockIdx().x; out[5, g] = blockIdx().y; out[6, g] = warpsize(); out[7, g] = laneid()
    return nothing
end

@testset "indices in 3-d blocks and 2-d grids" begin
    out = CuArray(zeros(Int, 7, 2 * 3 * 4 * 2 * 2))
    @ck threads=(2, 3, 4) blocks=(2, 2) indices!(out)
    o = Array(out)
    g = 0
    for by in 1:2, bx in 1:2, tz in 1:4, ty in 1:3, tx in 1:2
        g += 1
        lin = tx - 1 + 2 * (ty - 1) + 6 * (tz - 1)
        @test o[:, g] == [tx, ty, tz, bx, by, 32, lin % 32 + 1]
    end
end

# a shared-memory block reduction (tree), as the tutorials write it
function reduce_block!(out, x)
    sh = CuStaticSharedArray(Float32, 256)
    t = threadIdx().x
    i = (blockIdx().x - 1) * blockDim().x + t
    sh[t] = i <= length(x) ? x[i] : 0f0
    sync_threads()
    s = blockDim().x ÷ 2
    while s > 0
        if t <= s
            sh[t] += sh[t+s]
        end
        sync_threads()
        s ÷= 2
    end
    t == 1 && (out[blockIdx().x] = sh[1])
    return nothing
end

@testset "shared memory and barriers" begin
    xs = rand(Float32, 1000)
    x = CuArray(xs)
    out = CuArray(zeros(Float32, 4))
    @ck threads=256 blocks=4 reduce_block!(out, x)
    @test isapprox(sum(Array(out)), sum(xs); rtol = 1e-5)
    @test Array(out)[1] ≈ sum(xs[1:256]) rtol = 1e-5
end

function dyn_shmem!(out)
    a = CuDynamicSharedArray(Int32, blockDim().x)
    b = CuDynamicSharedArray(Float64, blockDim().x, blockDim().x * sizeof(Int32))
    t = threadIdx().x
    a[t] = t
    b[t] = 2.0 * t
    sync_threads()
    n = blockDim().x
    out[t] = a[n-t+1] + b[n-t+1]
    return nothing
end

@testset "dynamic shared memory, two arrays" begin
    out = CuArray(zeros(Float64, 32))
    @ck threads=32 shmem=32 * (4 + 8) dyn_shmem!(out)
    @test Array(out) == [3.0 * (33 - t) for t in 1:32]
end

function counts!(out)
    t = threadIdx().x
    c = sync_threads_count(isodd(t))
    a = sync_threads_and(t > 0)
    o = sync_threads_or(t == 3)
    n = sync_threads_and(t > 1)
    out[t] = c + 100 * a + 1000 * o + 10000 * n
    return nothing
end

@testset "sync_threads_count/and/or" begin
    out = CuArray(zeros(Int, 40))
    @ck threads=40 counts!(out)
    @test all(==(20 + 100 + 1000), Array(out))
end

function atomics!(c, f, m)
    i = threadIdx().x + (blockIdx().x - 1) * blockDim().x
    CuMem.atomic_add!(pointer(c, 1), Int32(1))
    CuMem.atomic_max!(pointer(c, 2), Int32(i))
    CuMem.@atomic f[1] += 0.5f0
    CuMem.@atomic m[1] = max(m[1], Float64(i))
    CuMem.@atomic c[3] |= Int32(1) << (i % 8)
    CuMem.atomic_sub!(pointer(c, 4), Int32(2))
    return nothing
end

@testset "atomics" begin
    c = CuArray(Int32[0, 0, 0, 0])
    f = CuArray([0f0])
    m = CuArray([-1.0])
    @ck threads=64 blocks=4 atomics!(c, f, m)
    @test Array(c) == Int32[256, 256, 255, -512]
    @test Array(f) == [128f0]
    @test Array(m) == [256.0]
end

function shuffles!(out, v)
    t = threadIdx().x
    x = v[t]
    out[1, t] = shfl_sync(FULL_MASK, x, 1)
    out[2, t] = shfl_down_sync(FULL_MASK, x, 1)
    out[3, t] = shfl_up_sync(FULL_MASK, x, 2)
    out[4, t] = shfl_xor_sync(FULL_MASK, x, 1)
    out[5, t] = vote_ballot_sync(FULL_MASK, isodd(t))
    out[6, t] = vote_any_sync(FULL_MASK, t == 5)
    out[7, t] = vote_all_sync(FULL_MASK, t < 100)
    return nothing
end

struct Pair3
    a::Int64
    b::Float32
    c::Int16
end
function shfl_struct!(out, v)
    t = threadIdx().x
    p = shfl_down_sync(FULL_MASK, Pair3(v[t], Float32(v[t]), Int16(t)), 16)
    out[t] = p.a + p.b + p.c
    return nothing
end
function warp_sum!(out, v)
    t = threadIdx().x
    x = v[t]
    o = 16
    while o > 0
        x += shfl_down_sync(FULL_MASK, x, o)
        o ÷= 2
    end
    t % 32 == 1 && (out[(t - 1) ÷ 32 + 1] = x)
    return nothing
end

@testset "warp shuffles and votes" begin
    v = CuArray(collect(1:64) .* 10)
    out = CuArray(zeros(Int, 7, 64))
    @ck threads=64 shuffles!(out, v)
    o = Array(out)
    for t in 1:64
        w = (t - 1) ÷ 32
        l = (t - 1) % 32
        @test o[1, t] == (32w + 1) * 10
        @test o[2, t] == (l == 31 ? t : t + 1) * 10
        @test o[3, t] == (l < 2 ? t : t - 2) * 10
        @test o[4, t] == (32w + (l ⊻ 1) + 1) * 10
        @test o[5, t] == 0x55555555
        @test o[6, t] == (w == 0)
        @test o[7, t] == 1
    end
    out2 = CuArray(zeros(Float64, 32))
    @ck threads=32 shfl_struct!(out2, CuArray(collect(1:32)))
    @test Array(out2) == [(t < 17 ? 3.0 * (t + 16) : 3.0 * t) for t in 1:32]
    sums = CuArray(zeros(Int, 4))
    @ck threads=128 warp_sum!(sums, CuArray(collect(1:128)))
    @test Array(sums) == [sum(32w+1:32w+32) for w in 0:3]
end

struct Params
    a::Float32
    n::Int
end
function args_kernel!(out, p::Params, t::Tuple{Int,Float64}, nt, r, m)
    i = threadIdx().x
    out[i] = p.a * i + t[1] + t[2] + nt.c + r[] + m[i, 2]
    return nothing
end

@testset "arguments: structs, tuples, NamedTuples, Refs, matrices, views" begin
    out = CuArray(zeros(Float32, 4))
    m = CuArray(Float32[1 2; 3 4; 5 6; 7 8])
    @ck threads=4 args_kernel!(out, Params(2f0, 3), (1, 0.5), (c = 10,), Ref(100f0), m)
    @test Array(out) == [2f0 * i + 1 + 0.5f0 + 10 + 100 + Array(m)[i, 2] for i in 1:4]
    a = CuArray(collect(1f0:10f0))
    v = view(a, 3:6)
    ones_ = CuArray(ones(Float32, 4))
    @ck threads=4 gpu_add2!(v, ones_)
    @test Array(a) == Float32[1, 2, 4, 5, 6, 7, 7, 8, 9, 10]
    r = reshape(CuArray(zeros(Float32, 2, 3)), 6)
    @ck threads=6 gpu_add2!(r, CuArray(ones(Float32, 6)))
    @test Array(r) == ones(Float32, 6)
end

function cart!(out)
    for I in CartesianIndices(out)
        out[I] = I[1] + 10 * I[2]
    end
    for i in eachindex(out)
        out[i] += 0
    end
    return nothing
end

@testset "CartesianIndices and eachindex" begin
    out = CuArray(zeros(Int, 3, 4))
    @ck cart!(out)
    @test Array(out) == [i + 10j for i in 1:3, j in 1:4]
end

function oob!(a)
    a[threadIdx().x + 1] = 1f0
    return nothing
end
divk!(a, d) = (a[1] = div(a[1], d); nothing)
inexact!(a, x) = (a[1] = Int8(x); nothing)
asserting!(a) = (@cuassert a[1] > 0 "a[1] must be positive"; nothing)

@testset "exceptions surface at the next synchronization" begin
    a = CuArray(zeros(Float32, 4))
    @ck threads=4 oob!(a)
    @test_throws BoundsError synchronize()
    @test Array(a) == Float32[0, 1, 1, 1]       # the other threads ran
    b = CuArray([7])
    @ck divk!(b, 0)
    @test_throws DivideError synchronize()
    c = CuArray(Int8[0])
    @ck inexact!(c, 300)
    err = try synchronize(); nothing catch e; e end
    @test err isa InexactError
    @ck asserting!(CuArray([-1]))
    err = try synchronize(); nothing catch e; e end
    @test err isa AssertionError && occursin("must be positive", err.msg)
    # the context stays usable
    x = CuArray(fill(1.0f0, 8)); y = CuArray(fill(1.0f0, 8))
    @ck threads=8 gpu_add2!(y, x)
    @test Array(y) == fill(2.0f0, 8)
end

@testset "launch errors before anything runs" begin
    x = CuArray(ones(Float32, 4))
    @test_throws ArgumentError @cuda threads=1025 gpu_add2!(x, x)
    @test_throws ArgumentError @cuda threads=(32, 32, 2) gpu_add2!(x, x)
    @test_throws ArgumentError @cuda threads=32 shmem=300_000 gpu_add2!(x, x)
    @test_throws ArgumentError @cuda gpu_add2!(x, [1f0])
    @test Array(x) == ones(Float32, 4)
    bad(a) = (a[1] = 1; 1)
    @test_throws CuMem.KernelCompileError @cuda bad(x)
    @test_throws MethodError @cuda gpu_add2!(x)
end

many(out, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t) =
    (out[1] = a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + p + q + r + s + t; nothing)

@testset "20 arguments" begin
    out = CuArray([0])
    @ck many(out, 1:20...)
    @test Array(out) == [210]
end

function printer(a)
    i = threadIdx().x
    @cuprintln("thread $i value $(a[i])")
    @cuprintf("%ld|%f\n", i, 1.5f0)
    return nothing
end

@testset "@cuprintln, @cuprintf" begin
    a = CuArray([10, 20])
    k = @cuda launch=false printer(a)
    @test check_ptx(k)
    @test occursin("printf(\"thread %ld value %ld\\012\"", k.fun.source)
    if CuMem.on_host()
        out = mktemp() do path, io
            redirect_stdout(io) do
                @cuda threads=2 printer(a)
                synchronize()
            end
            close(io)
            read(path, String)
        end
        @test out == "thread 1 value 10\n1|1.500000\nthread 2 value 20\n2|1.500000\n"
    end
end

function ptr_kernel(input::Int32, output::Core.LLVMPtr{Int32}, yes::Bool = true)
    i = threadIdx().x
    temp = @cuStaticSharedMem(Cint, 1)
    i == 1 && (temp[1] = input)
    sync_threads()
    unsafe_store!(output, temp[1] + Int32(yes), i)
    sync_threads()
    i == 2 && CuMem.atomic_add!(output, Int32(100))
    return nothing
end

@testset "CuPtr arguments as LLVMPtr (CUDA.jl's tests)" begin
    output = CuArray(zeros(Int32, 3))
    @ck threads=2 ptr_kernel(Int32(41), pointer(output))
    @test Array(output) == Int32[142, 42, 0]
end

@testset "cufunction and the cache" begin
    x = CuArray(ones(Float32, 4))
    dx = cudaconvert(x)
    @test dx isa CuDeviceArray{Float32,1}
    k1 = cufunction(gpu_add2!, Tuple{typeof(dx),typeof(dx)})
    k2 = cufunction(gpu_add2!, Tuple{typeof(dx),typeof(dx)})
    @test k1.fun === k2.fun
    k1(x, x; threads = 4)
    @test Array(x) == fill(2f0, 4)
end

# the examples of docs/kernels.md
@testset "examples/julia/kernels/$f" for f in ("tutorial.jl", "reduce.jl")
    mktemp() do _, io       # (the examples print)
        redirect_stdout(io) do
            Base.include(Module(), joinpath(@__DIR__, "..", "..", "..", "examples", "julia", "kernels", f))
        end
    end
end

Test.pop_testset()
Test.finish(ALL)

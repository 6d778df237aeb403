# The kernel language's CUDA.jl names and behaviours beyond kernel_tests.jl: type arguments,
# closures capturing arrays, launch bounds, a kernel's resources, more than 48 KiB of dynamic
# shared memory, clock/nanosleep, `pow`, @cuprint of symbols and Cchar, @atomic's errors.
# Runs on any device; with libnvrtc (CUMEM_NVRTC_LIBRARY) on the host device every kernel's
# generated CUDA C is also compiled to PTX.
#
#   CUMEM_DEVICE=host julia --project=. test/compute/device/kernel_cudajl_tests.jl

using CuMem, Test

const ALL = Test.DefaultTestSet("kernel language, CUDA.jl names ($(CuMem.on_host() ? "host device" : "GPU"))")
Test.push_testset(ALL)

# the kernel's CUDA C compiles to PTX (on the host device, with NVRTC; a GPU compiles it itself)
function ptx_ok(k)
    (CuMem.on_host() && CuMem.nvrtc_available()) || return true
    CuMem.compile_ptx(k.fun.source; arch = "compute_90")
    return true
end

function and_kernel(a, T)
    i = threadIdx().x - 1
    k = 1
    for _ = 1:i
        k *= 2
    end
    CuMem.atomic_and!(pointer(a), T(1023 - k))
    return
end
fill_kernel(T, a) = (a[threadIdx().x] = T(threadIdx().x); nothing)

@testset "types as arguments (Type{T}, compiled per type)" begin
    for T in (Int32, Int64, UInt32, UInt64)
        a = CuArray([T(1023)])
        k = @cuda launch=false and_kernel(a, T)
        @test k isa HostKernel{typeof(and_kernel),Tuple{CuDeviceVector{T},Type{T}}}
        @test ptx_ok(k)
        @cuda threads=10 and_kernel(a, T)
        @test Array(a) == [zero(T)]
    end
    b = CuArray(zeros(Float32, 4))
    @cuda threads=4 fill_kernel(Float32, b)
    @test Array(b) == Float32[1, 2, 3, 4]
    @test (@cuda launch=false fill_kernel(Float32, b)).fun !== (@cuda launch=false fill_kernel(Int32, CuArray(zeros(Int32, 1)))).fun
end

call_closure(f) = (f(); nothing)

@testset "closures capturing CuArrays (as the kernel and as an argument)" begin
    a = CuArray([1.0])
    v = 2.0
    f() = (a[] = v; nothing)
    @test cudaconvert(f).a isa CuDeviceVector{Float64}
    @test cudaconvert(f).v === 2.0
    @cuda call_closure(f)
    @test Array(a) == [2.0]
    g() = (a[] = 3v; nothing)
    @cuda g()
    @test Array(a) == [6.0]
    # a callable struct without captures is passed as it is
    @test cudaconvert(sin) === sin
end

@testset "launch bounds: maxthreads, blocks_per_sm" begin
    a = CuArray(zeros(Float32, 64))
    k = @cuda launch=false maxthreads=32 fill_kernel(Float32, a)
    @test occursin("__launch_bounds__(32)", k.fun.source)
    @test ptx_ok(k)
    @test CuMem.maxthreads(k) <= 32
    k2 = @cuda launch=false maxthreads=(8, 8) blocks_per_sm=2 fill_kernel(Float32, a)
    @test occursin("__launch_bounds__(64, 2)", k2.fun.source)
    @test k2.fun !== k.fun
    @test_throws CuMemError @cuda threads=33 maxthreads=32 fill_kernel(Float32, a)
    @test Array(a) == zeros(Float32, 64)          # nothing ran
    @cuda threads=32 maxthreads=32 fill_kernel(Float32, a)
    @test Array(a)[1:33] == [1:32; 0]
    @test_throws ArgumentError @cuda maxthreads=0 fill_kernel(Float32, a)
    err = try macroexpand(@__MODULE__, :(@cuda bogus=1 fill_kernel(Float32, a))); nothing catch e; e end
    @test (err isa LoadError ? err.error : err) isa ArgumentError
end

@testset "a kernel's resources: version, memory, registers, maxthreads" begin
    a = CuArray(zeros(Float32, 4))
    k = @cuda launch=false fill_kernel(Float32, a)
    v = CuMem.version(k)
    @test v.ptx isa VersionNumber && v.binary isa VersionNumber
    m = CuMem.memory(k)
    @test m.shared == 0 && m.local >= 0 && m.constant >= 0
    @test CuMem.registers(k) >= 0
    @test CuMem.maxthreads(k) == (CuMem.on_host() ? 1024 : CuMem.maxthreads(k))
    @test 1 <= CuMem.maxthreads(k) <= 1024
    if !CuMem.on_host()
        @test v.binary >= v"7.0"                  # the GPU's architecture (sm_70 or later)
        @test CuMem.registers(k) >= 1
    end
end

function big_shmem(out, n)
    s = @cuDynamicSharedMem(Int32, n)
    i = threadIdx().x
    for j = i:blockDim().x:n
        s[j] = Int32(j)
    end
    sync_threads()
    if i == 1
        acc = Int32(0)
        for j = 1:n
            acc += s[j]
        end
        out[1] = acc
    end
    return
end

@testset "more than 48 KiB of dynamic shared memory" begin
    n = 25_000                                    # 100_000 bytes
    out = CuArray(zeros(Int32, 1))
    @cuda threads=256 shmem=4n big_shmem(out, n)
    @test Array(out)[1] == sum(1:n)
    @test_throws ArgumentError @cuda threads=256 shmem=300_000 big_shmem(out, n)
end

function clock_kernel(out)
    t0 = clock(UInt64)
    t32 = clock(UInt32)
    nanosleep(UInt32(1000))
    t1 = clock(UInt64)
    out[1] = t1 - t0
    out[2] = UInt64(t32)
    return
end

@testset "clock and nanosleep" begin
    out = CuArray(zeros(UInt64, 2))
    k = @cuda launch=false clock_kernel(out)
    @test occursin("clock64()", k.fun.source) && occursin("jl_nanosleep", k.fun.source)
    @test ptx_ok(k)
    @cuda clock_kernel(out)
    @test Array(out)[1] > 0
end

pow_kernel(a, x, y) = (a[] = CuMem.pow(x, y); nothing)

@testset "CuMem.pow" begin
    buf = CuArray(zeros(Float32))
    for (x, y) in ((0.5f0, 0.25f0), (0.5f0, -0.25f0), (0.7, 0.3), (0.5f0, Int32(7)), (0.5, Int32(-6)), (0.5f0, 5))
        @cuda pow_kernel(buf, x, y)
        @test Array(buf)[] ≈ Float32(x^y)
    end
    @test ptx_ok(@cuda launch=false pow_kernel(buf, 0.5f0, Int32(3)))
end

print_kernel(c) = (@cuprint(:foobar, " ", c); @cuprintln(); nothing)

@testset "@cuprint of symbols and Cchar" begin
    k = @cuda launch=false print_kernel(Cchar('c'))
    @test occursin("foobar %c", k.fun.source)
    @test ptx_ok(k)
    if CuMem.on_host()
        out = mktemp() do path, io
            redirect_stdout(() -> (@cuda print_kernel(Cchar('c')); synchronize()), io)
            close(io)
            read(path, String)
        end
        @test out == "foobar c\n"
    end
end

@testset "@atomic's errors (CUDA.jl's AtomicError)" begin
    err(ex) = try
        macroexpand(@__MODULE__, ex)
        nothing
    catch e
        e isa LoadError ? e.error : e
    end
    @test err(:(CuMem.@atomic a[1] = 1)) == CuMem.AtomicError("right-hand side of an @atomic assignment should be a call")
    @test err(:(CuMem.@atomic a[1] = a[2] + 1)) ==
          CuMem.AtomicError("right-hand side of a non-inplace @atomic assignment should reference the left-hand side")
    @test err(:(CuMem.@atomic wat(a[1]))) == CuMem.AtomicError("unknown @atomic expression")
    @test err(:(CuMem.@atomic a = a + 1)) == CuMem.AtomicError("@atomic should be applied to an array reference expression")
    @test sprint(showerror, CuMem.AtomicError("x")) == "AtomicError: x"
end

kwadd(x; k = 1, scale = 2) = scale * x + k
kw_kernel(out) = (out[1] = kwadd(out[1]; k = 5); out[2] = kwadd(out[2]); nothing)

@testset "calls with keyword arguments" begin
    out = CuArray([1, 10])
    k = @cuda launch=false kw_kernel(out)
    @test ptx_ok(k)
    @cuda kw_kernel(out)
    @test Array(out) == [7, 21]
    @cuda (() -> (kwadd(42; scale = 1, k = 2); nothing))()     # CUDA.jl's "keyword arguments"
    synchronize()
end

Test.pop_testset()
Test.finish(ALL)

# The compute layer (julia/compute/runtime/kernels.jl): host views, NVRTC, kernels, GEMM, synchronisation.
# Runs on the host device in CI (kernels then need a GPU and say so; NVRTC's PTX checks
# run when libnvrtc is found, `make test` installs one) and on a GPU with
# CUMEM_DEVICE=cuda, where kernels and GEMM run and are checked against Base.
#
#   CUMEM_DEVICE=host julia --project test/compute/runtime/compute_tests.jl

using CuMem, Test, LinearAlgebra, Random

Random.seed!(7)

const SAXPY = """
extern "C" __global__ void saxpy(float a, const float *x, float *y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# The engine's status code of what `f()` throws (nothing: -1).
thrown_code(f) = try f(); -1; catch e; e isa CuMemError ? Int(e.code) : error("unexpected $e"); end

CuMem.allowscalar(false)   # nothing here may take the scalar path

const COMPUTE_SCALE = Ref(2.0)

@testset "compute" begin
    @testset "device" begin
        @test CuMem.on_host() == (CuMem.c_device_is_host() == 1)
        info = CuMem.device_info()
        @test keys(info) == (:cc_major, :cc_minor, :sm_count, :max_threads)
        if CuMem.on_host()
            @test (info.cc_major, info.cc_minor, info.max_threads) == (0, 0, 1024)
            @test info.sm_count >= 1
        else
            @test info.cc_major >= 5 && info.sm_count >= 1 && info.max_threads >= 512
        end
        @test synchronize() === nothing
        @test (CuMem.@sync 1 + 2) == 3
        x = CuArray(Float32[1, 2, 3])
        @test (CuMem.@sync x) === x
    end

    @testset "host_view" begin
        a = CuArray(reshape(collect(1:12), 3, 4))
        if CuMem.on_host()
            GC.@preserve a begin
                v = CuMem.host_view(a)
                @test v isa Matrix{Int} && size(v) == (3, 4)
                @test v == reshape(collect(1:12), 3, 4)
                v[2, 3] = 100                       # writes reach the CuArray
                @test Array(a)[2, 3] == 100
                @test sum(v) == sum(1:12) - 8 + 100
            end
            e = CuArray{Float64}(undef, 0, 5)
            @test size(CuMem.host_view(e)) == (0, 5)
        else
            @test thrown_code(() -> CuMem.host_view(a)) == CuMem.CUMEM_ERROR_NOT_SUPPORTED
        end
        b = CuArray([1.0])
        unsafe_free!(b)
        @test_throws AssertionError CuMem.host_view(b)
    end

    @testset "kernel cache on disk" begin
        if CuMem.nvrtc_available() && isempty(get(ENV, "CUMEM_CACHE_DIR", "")) &&
           isempty(get(ENV, "CUMEM_KERNEL_CACHE", ""))
            @test CuMem.disk_cache_dir() == joinpath(DEPOT_PATH[1], "compiled", "cumem_kernels")
            dir = mktempdir()
            try
                CuMem.check(CuMem.c_kernel_cache_config(dir, UInt64(0), Int32(1)))
                src = SAXPY * "// $(time_ns())\n"        # a source no earlier run compiled
                s0 = CuMem.disk_cache_stats()
                ptx = CuMem.compile_ptx(src; arch = "compute_75")
                s1 = CuMem.disk_cache_stats()
                @test (s1.misses - s0.misses, s1.writes - s0.writes, s1.hits - s0.hits) == (1, 1, 0)
                files = filter(f -> endswith(f, ".kernel"), readdir(dir))
                @test length(files) == 1 && !any(f -> endswith(f, ".tmp"), readdir(dir))
                @test CuMem.compile_ptx(src; arch = "compute_75") == ptx     # from the file
                s2 = CuMem.disk_cache_stats()
                @test (s2.hits - s1.hits, s2.misses - s1.misses) == (1, 0)
                # another architecture is another key
                CuMem.compile_ptx(src; arch = "compute_80")
                @test count(f -> endswith(f, ".kernel"), readdir(dir)) == 2
                # a damaged file is a miss, compiled and written again
                path = joinpath(dir, files[1])
                bytes = read(path)
                bytes[end ÷ 2] ⊻= 0x01
                write(path, bytes)
                s3 = CuMem.disk_cache_stats()
                @test CuMem.compile_ptx(src; arch = "compute_75") == ptx
                s4 = CuMem.disk_cache_stats()
                @test (s4.misses - s3.misses, s4.writes - s3.writes) == (1, 1)
                # off: NVRTC every time, no file read or written
                CuMem.check(CuMem.c_kernel_cache_config(dir, UInt64(0), Int32(0)))
                CuMem.compile_ptx(src; arch = "compute_75")
                @test CuMem.disk_cache_stats() == s4
                @test thrown_code(() -> CuMem.c_kernel_cache_config("", UInt64(0), Int32(1)) |> CuMem.check) ==
                      CuMem.CUMEM_ERROR_INVALID_VALUE
            finally
                CuMem.init_kernel_cache()
                rm(dir; recursive = true, force = true)
            end
        end
    end

    # The kernel index (kernel_index.jl) read by the typed fast paths once per process, device
    # and key (index_entry_on): a key tried on device 0 is tried again on device 1 (each
    # device loads its own kernels), a record under another name is no hit, and `keep` (the
    # scans) returns the first call's value again.
    @testset "kernel index read once per device and key" begin
        withenv("CUMEM_CACHE_DIR" => mktempdir(), "CUMEM_KERNEL_CACHE" => nothing) do
            ik = "index_entry test $(time_ns())"
            CuMem.index_store(ik, "the name", "the text")
            @test CuMem.index_lookup(ik) == ("the name", "the text")
            builds = Any[]
            ikey(key, arg) = (arg, "the name")
            build(key, arg, text, kernels) = (push!(builds, (key, text)); (text, length(kernels)))
            key = (:test, time_ns())
            @test CuMem.index_entry_on(0, ikey, build, ik, key, nothing, false) == ("the text", 0)
            @test CuMem.index_entry_on(0, ikey, build, ik, key, nothing, false) === nothing   # tried: not read again
            @test CuMem.index_entry_on(1, ikey, build, ik, key, nothing, false) == ("the text", 0)
            @test CuMem.index_entry_on(1, ikey, build, ik, key, nothing, false) === nothing
            @test builds == [(key, "the text"), (key, "the text")]
            key2 = (:test, time_ns())
            @test CuMem.index_entry_on(0, ikey, build, ik, key2, nothing, true) == ("the text", 0)
            @test CuMem.index_entry_on(0, ikey, build, ik, key2, nothing, true) == ("the text", 0)  # kept
            @test length(builds) == 3
            @test CuMem.index_entry_on(0, (k, a) -> (a, "another name"), build, ik, (:test, time_ns()), nothing, true) === nothing
            @test CuMem.index_entry_on(0, (k, a) -> nothing, build, ik, (:test, time_ns()), nothing, true) === nothing   # not indexed
            @test length(builds) == 3
            # the families' keys hold the task's device: a dims reduction's try on this device
            # leaves another device's to come
            K = Tuple{typeof(identity),typeof(Base.add_sum),Float32}
            @test CuMem.index_dims_slot(K, 1, true, Base.add_sum, Float32, Float32) === nothing   # (no record here)
            dev = CuMem.task_device()
            @test haskey(CuMem.INDEX_TRIED, (dev, (:dims, K, 1, true))) && !haskey(CuMem.INDEX_TRIED, (dev + 1, (:dims, K, 1, true)))
            @test all(k -> k isa Tuple && k[1] isa Int, keys(CuMem.INDEX_TRIED))
        end
    end

    @testset "NVRTC" begin
        if CuMem.nvrtc_available()
            v = CuMem.nvrtc_version()
            @test v >= v"11.2"
            ptx = CuMem.compile_ptx(SAXPY)
            @test occursin(".visible .entry saxpy(", ptx)
            @test occursin(CuMem.on_host() ? ".target sm_75" : ".target sm_", ptx)
            @test occursin(".target sm_80", CuMem.compile_ptx(SAXPY; arch = "compute_80"))
            # larger than the first buffer: the size is asked for again
            big = "extern \"C\" __global__ void big(float *x) {\n" *
                  join(["    x[$i] = x[$(i + 1)] * 1.5f + $(i).0f;" for i in 0:3000], "\n") * "\n}\n"
            @test length(CuMem.compile_ptx(big; arch = "compute_75")) > 64 * 1024
            bad = "extern \"C\" __global__ void k(float *x) {\n    x[0] = not_declared;\n}\n"
            # a representative set of the typed-IR compiler's output (issue 23) through NVRTC
            # for the H100's architecture: control flow, structs, Complex, Float16, math with
            # domain checks, throw sites, a const Ref read at launch, varargs and tuples, Char case maps
            for (f, Ts) in ((v -> v > 0f0 ? v : 0f0, (Float32,)), ((p, q) -> div(p, q), (Int32, Int32)),
                            (x -> Int8(x), (Int64,)), (x -> (s = 0; while x > 1; x = iseven(x) ? x >> 1 : 3x + 1; s += 1; end; s), (Int,)),
                            (*, (ComplexF64, ComplexF64)), (exp, (ComplexF32,)), (+, (Float16, Float16)),
                            (x -> sin(x) + log(x) ^ 2.5f0 + hypot(x, 2f0) + atan(x, 1f0), (Float32,)),
                            (t -> t[1] + t[2], (Tuple{Int,Float64},)), (x -> (a = x, b = x + 1), (UInt8,)),
                            (v -> v * COMPUTE_SCALE[], (Float64,)), (x -> x > 0 ? x : nothing, (Int16,)),
                            # Base's Char functions: utf8proc's tables (compiler/unicode.jl)
                            (c -> (uppercase(c), lowercase(c), titlecase(c), isletter(c), textwidth(c), isuppercase(c)), (Char,)))
                df = CuMem.device_function(f, Ts)
                body = "extern \"C\" __global__ void k(jl_ctx_t ctx) { }\n"
                @test occursin(".target sm_90", CuMem.compile_ptx(CuMem.kernel_source(df; body = body); arch = "compute_90"))
            end
            err = try CuMem.compile_ptx(bad); nothing; catch e; e; end
            @test err isa CuMem.KernelCompileError
            msg = sprint(showerror, err)
            @test startswith(msg, "KernelCompileError: ")
            @test occursin("not_declared", msg) && occursin("error", msg)
            @test occursin("  2 |     x[0] = not_declared;", msg)
            @test thrown_code(() -> CuMem.compile_ptx(SAXPY; arch = "sm 80")) == CuMem.CUMEM_ERROR_INVALID_VALUE
            println("NVRTC $v compiled the test kernels to PTX")
        else
            @test thrown_code(() -> CuMem.compile_ptx(SAXPY)) == CuMem.CUMEM_ERROR_NOT_SUPPORTED
            @test occursin("libnvrtc", CuMem.last_error())
            @info "libnvrtc not found: the PTX checks of the compute tests were SKIPPED " *
                  "(set CUMEM_NVRTC_LIBRARY, or run `make test`, which installs NVRTC from PyPI)"
        end
        @test_throws ArgumentError CuMem.compile_ptx("a\0b")
    end

    @testset "kernels" begin
        if CuMem.on_host()
            @test thrown_code(() -> CuMem.load_kernel(SAXPY, "saxpy")) == CuMem.CUMEM_ERROR_NOT_SUPPORTED
            @test occursin("needs a CUDA GPU", CuMem.last_error())
        else
            n = 10_001
            x, y0 = rand(Float32, n), rand(Float32, n)
            dx, dy = CuArray(x), CuArray(y0)
            k = CuMem.load_kernel(SAXPY, "saxpy")
            k2 = CuMem.load_kernel(SAXPY, "saxpy")               # the engine's registry: the same module
            @test k2.handle == k.handle && k2.param_sizes == k.param_sizes
            t = CuMem.suggest_block(k)
            @test 32 <= t <= 1024
            CuMem.launch(k, 2f0, dx, dy, Int64(n); blocks = cld(n, t), threads = t)
            @test Array(dy) == 2f0 .* x .+ y0               # bit for bit: no FMA contraction
            CuMem.launch(k, 1f0, pointer(dx), pointer(dy), Int64(n); blocks = (cld(n, 256), 1), threads = (256, 1, 1))
            @test Array(dy) == x .+ (2f0 .* x .+ y0)
            @test thrown_code(() -> CuMem.load_kernel(SAXPY, "nope")) == CuMem.CUMEM_ERROR_INVALID_VALUE
            @test_throws CuMem.KernelCompileError CuMem.load_kernel("extern \"C\" __global__ void k() { oops; }", "k")
            @test thrown_code(() -> CuMem.launch(k, 2f0, dx, dy, Int64(n); blocks = 1, threads = 4096)) ==
                  CuMem.CUMEM_ERROR_INVALID_VALUE
            @test_throws ArgumentError CuMem.launch(k, 2f0, x, dy, Int64(n); blocks = 1, threads = 32)
            @test_throws ArgumentError CuMem.launch(k, 2f0, dx, dy, Int64(n); blocks = 0, threads = 32)
            # arguments checked against the parameters (CUDA 12.4+ drivers report them)
            if k.nparams >= 0
                @test k.param_sizes == [4, 8, 8, 8]
                @test_throws ArgumentError CuMem.launch(k, 2f0, dx, dy; blocks = 1, threads = 32)
                @test_throws ArgumentError CuMem.launch(k, 2.0, dx, dy, Int64(n); blocks = 1, threads = 32)
                @test_throws ArgumentError CuMem.launch(k, 2f0, dx, dy, Int32(n); blocks = 1, threads = 32)
                err = try CuMem.launch(k, 2.0, dx, dy, Int64(n); blocks = 1, threads = 32); catch e; e; end
                @test occursin("argument 1 of kernel saxpy is 8 bytes but the parameter is 4 bytes", err.msg)
            else
                @info "this driver does not report kernel parameters (before CUDA 12.4): not checked"
            end
            @test Array(dy) == x .+ (2f0 .* x .+ y0)        # the refused launches changed nothing
        end
    end

    @testset "stream order: memory freed under a running kernel" begin
        # A kernel that waits ~20 ms before reading `a`; meanwhile `a` is freed, the pool
        # hands the same block out again and it is overwritten. The overwrite is queued
        # behind the kernel on the one stream, so the kernel still reads the old values.
        if !CuMem.on_host()
            src = """
            extern "C" __global__ void late_copy(const float *a, float *b, long long n, long long cycles) {
                long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
                long long t0 = clock64();
                while (clock64() - t0 < cycles) { }
                if (i < n) b[i] = a[i];
            }
            """
            k = CuMem.load_kernel(src, "late_copy")
            n = 1 << 20
            for round in 1:3
                x = rand(Float32, n)
                a, b = CuArray(x), CuArray{Float32}(undef, n)
                addr = pointer(a)
                CuMem.launch(k, a, b, Int64(n), Int64(40_000_000); blocks = cld(n, 256), threads = 256)
                unsafe_free!(a)
                a2 = CuArray{Float32}(undef, n)
                @test pointer(a2) == addr                  # the pool reused the block
                copyto!(a2, fill(-1f0, n))
                fill!(a2, 0f0)
                @test Array(b) == x
                @test all(iszero, Array(a2))
            end
        end
        @test_throws ArgumentError CuMem.load_kernel(SAXPY, "sa\0xpy")
        # launch's argument checks come before the engine; the engine refuses a handle
        # it never gave out (on the host device it gives none)
        fake = CuMem.Kernel(0x7fff_ffff, "fake", 32, -1, Int[])   # sizes unknown: not checked
        x = CuArray(Float32[1, 2])
        @test_throws ArgumentError CuMem.launch(fake, [1f0]; blocks = 1, threads = 1)
        @test_throws ArgumentError CuMem.launch(fake, "s"; blocks = 1, threads = 1)
        @test_throws ArgumentError CuMem.launch(fake, x; blocks = (1, 1, 1, 1), threads = 1)
        @test_throws ArgumentError CuMem.launch(fake, x; blocks = 1, threads = -1)
        @test_throws ArgumentError CuMem.launch(fake, x; blocks = 1, threads = 1, shmem = -1)
        @test thrown_code(() -> CuMem.launch(fake, 1f0, x, pointer(x), Int64(2), true; blocks = 1, threads = 1)) ==
              CuMem.CUMEM_ERROR_INVALID_VALUE
        @test occursin("is not a kernel handle", CuMem.last_error())
        @test thrown_code(() -> CuMem.launch(fake; blocks = 1, threads = 1)) == CuMem.CUMEM_ERROR_INVALID_VALUE
        @test thrown_code(() -> CuMem.kernel_params(UInt64(0x7fff_ffff))) == CuMem.CUMEM_ERROR_INVALID_VALUE
        # with known parameters, launch checks count and sizes before the engine
        known = CuMem.Kernel(0x7fff_ffff, "known", 32, 2, [8, 4])
        @test_throws ArgumentError CuMem.launch(known, x; blocks = 1, threads = 1)
        @test_throws ArgumentError CuMem.launch(known, x, 1.0; blocks = 1, threads = 1)
        @test thrown_code(() -> CuMem.launch(known, x, 1f0; blocks = 1, threads = 1)) == CuMem.CUMEM_ERROR_INVALID_VALUE
    end

    @testset "gemm! $T" for T in (Float32, Float64, ComplexF32, ComplexF64)
        for (tA, tB) in (('N', 'N'), ('T', 'N'), ('N', 'T'), ('C', 'C'), ('T', 'C')), (m, n, k) in ((5, 7, 3), (1, 1, 1), (0, 3, 2), (4, 0, 2), (3, 2, 0))
            A = rand(T, tA == 'N' ? (m, k) : (k, m))
            B = rand(T, tB == 'N' ? (k, n) : (n, k))
            C = rand(T, m, n)
            alpha, beta = T(1.5), T(-0.5)
            want = BLAS.gemm!(tA, tB, alpha, copy(A), copy(B), beta, copy(C))
            dC = CuArray(C)
            @test CuMem.gemm!(tA, tB, alpha, CuArray(A), CuArray(B), beta, dC) === dC
            @test Array(dC) ≈ want
        end
        # matrix × vector
        A, x, y = rand(T, 6, 4), rand(T, 4), rand(T, 6)
        dy = CuArray(y)
        CuMem.gemm!('N', 'N', one(T), CuArray(A), CuArray(x), zero(T), dy)
        @test Array(dy) ≈ A * x
        @test_throws DimensionMismatch CuMem.gemm!('N', 'N', one(T), CuArray(A), CuArray(rand(T, 5)), zero(T), dy)
        @test_throws ArgumentError CuMem.gemm!('X', 'N', one(T), CuArray(A), CuArray(x), zero(T), dy)
    end
end

# Issue "What a CUDA.jl user still trips on", item by item: each call the issue lists, as a
# new user writes it, gives Base's (or CUDA.jl's) result or a documented clear error, under
# allowscalar(false). The detailed tests of each item live with its room (named in
# bench/results/host-2026-11-28-parity9/README.md); this file is the checklist. The device
# rule needs two devices (runtests.jl runs this file with CUMEM_DEVICE=host:2, or cuda).
using CuMem, Test, Random, LinearAlgebra, Statistics
CuMem.allowscalar(false)
errmsg(f) = try f(); "" catch e; sprint(showerror, e) end

struct ParityPG
    x::Float32
    y::Int32
end
parity_inc(b, h) = (h[b] += 1; 0)
parity_print(v) = (println(v); v)
parity_sqrt(v) = sqrt(v)
parity_peek(i, a) = a[i]
function parity_kref(r, a)
    threadIdx().x == 1 && (r[] = r[] + a[1])
    return nothing
end

@testset "CUDA.jl user parity checklist" begin
    @testset "1. the RNG is an AbstractRNG" begin
        rng = CuMem.default_rng()
        @test rng isa Random.AbstractRNG
        @test rand(rng, Float32, 4) isa CuVector{Float32}
        @test randn(rng, Float32, 4) isa CuVector{Float32}
        @test rand(rng, 4) isa CuVector{Float64}
        p = randperm(rng, 10)
        @test p isa CuVector{Int} && sort(Array(p)) == 1:10
        s = shuffle(rng, CuArray(1:10))
        @test s isa CuVector{Int} && sort(Array(s)) == 1:10
        y = CuArray(collect(1:10)); @test shuffle!(rng, y) === y && sort(Array(y)) == 1:10
        @test randexp(rng, Float32, 4) isa CuVector{Float32}
        lock(() -> (CuMem.RNG_STATE.seeded = false), CuMem.RNG_LOCK)
        Random.seed!(1); a = Array(CuMem.rand(8)); Random.seed!(1)
        @test Array(CuMem.rand(8)) == a                      # Random.seed! seeds CuMem.rand
        @test rand_logn!(CuArray{Float32}(undef, 8)) isa CuVector{Float32}
        @test rand_poisson!(CuArray{UInt32}(undef, 8)) isa CuVector{UInt32}
    end

    @testset "2. scalar fallbacks: device versions or clear errors" begin
        h = Float32[3, 1, 4, 1, 5, 9, 2, 6]; x = CuArray(h)
        A = rand(5, 5) + 5I; dA = CuArray(A); v = rand(5); dv = CuArray(v)
        @test Array(normalize(dv)) ≈ normalize(v)
        @test rank(dA) == rank(A)
        @test opnorm(dA, 1) ≈ opnorm(A, 1) && opnorm(dA) ≈ opnorm(A)
        a3, b3 = rand(3), rand(3)
        @test Array(cross(CuArray(a3), CuArray(b3))) ≈ cross(a3, b3)
        dl, d, du = rand(4), rand(5), rand(4)
        @test Array(Tridiagonal(CuArray(dl), CuArray(d), CuArray(du)) * dv) ≈ Tridiagonal(dl, d, du) * v
        @test (4f0 in x) == (4f0 in h) && (7f0 in x) == (7f0 in h)
        hs = sort(h); @test searchsortedfirst(CuArray(hs), 4f0) == searchsortedfirst(hs, 4f0)
        @test quantile(x, 0.3) ≈ quantile(h, 0.3)
        @test Array(replace(x, 1f0 => 0f0)) == replace(h, 1f0 => 0f0)
        @test hash(x) == hash(h)
        # x[end] is scalar indexing (as in CUDA.jl): the error names the ways out
        m = errmsg(() -> x[end])
        @test startswith(m, "scalar getindex is disallowed") && occursin("x[i:i]", m) && occursin("@allowscalar", m)
        @test CuMem.@allowscalar(x[end]) == h[end] && Array(x[end:end]) == h[end:end]
        @test Array(filter(t -> t > 2, x)) == filter(t -> t > 2, h)
        M = rand(Float32, 4, 3); dM = CuArray(M)
        @test reverse!(dM; dims = 1) === dM && Array(dM) == reverse(M; dims = 1)
        r = CuArray([1, 2, 3]); resize!(r, 5); @test length(r) == 5 && Array(r)[1:3] == [1, 2, 3]
        for W in (UpperTriangular, LowerTriangular, UnitUpperTriangular, UnitLowerTriangular)
            @test Array(parent(inv(W(dA)))) ≈ Array(inv(W(A)))
        end
        S = [2.0 1 0; 1 3 1; 0 1 4] ./ 4
        @test Array(pinv(CuArray(S))) ≈ pinv(S)
        @test Array(exp(CuArray(S))) ≈ exp(S)
        m = errmsg(() -> eigvals(CuArray([1.0 2; 3 4])))      # non-symmetric: a clear error
        @test occursin("Symmetric(A)", m) && occursin("eigvals(Array(A))", m)
        @test_throws ArgumentError qr(dA, Val(true))
        F = qr(CuArray(rand(6, 5)))
        Q = collect(F.Q); @test Q isa CuMatrix && Array(Q' * Q) ≈ Matrix(I, 6, 6)
        @test Array(F.Q[:, 1:5]) ≈ Array(Q)[:, 1:5]
        @test occursin("its data is on the host", errmsg(() -> dA * v))
        @test_throws ArgumentError dot(dv, v)
        @test_throws ArgumentError isapprox(dv, v)
    end

    @testset "3. the device rule: another device's array is refused" begin
        if ndevices() >= 2
            b = device!(() -> CuMem.ones(Float32, 8), 1)
            @test_throws ArgumentError b[2:3]
            @test_throws ArgumentError copy(b)
            @test_throws ArgumentError sort(b)
            @test_throws ArgumentError getindex.(Ref(b), 1:8)
            @test device!(() -> Array(b[2:3]), 1) == ones(Float32, 2)
        else
            @test_skip "one device: run with CUMEM_DEVICE=host:2"
        end
    end

    @testset "4. the three small refusals compile" begin
        pg = CuArray([ParityPG(1.5f0, 2), ParityPG(-1f0, 7)])
        @test Array(getfield.(pg, :x)) == [1.5f0, -1f0]
        chars = ['a', 'b', 'c', 'b', 'é', 'ß', 'ǅ', 'Σ', '1', ' ']
        c = CuArray(chars)
        @test Array(c .== 'b') == (chars .== 'b')
        for f in (uppercase, lowercase, titlecase, isletter, isuppercase, islowercase, isnumeric, textwidth)
            @test Array(f.(c)) == f.(chars)
        end
        # every code point (on a GPU the kernels' tables; on the host device Base itself)
        all_chars = Char.(vcat(UInt32(0):UInt32(0xd7ff), UInt32(0xe000):UInt32(0x10ffff)))
        dc = CuArray(all_chars)
        for f in (uppercase, lowercase, titlecase, isletter, isuppercase, islowercase)
            @test Array(f.(dc)) == f.(all_chars)
        end
    end

    @testset "5. writes through Ref(A): not synchronised, said once on the host device" begin
        hist = CuMem.zeros(Int, 3); bins = CuArray([1, 2, 2, 3, 3, 3])
        if CuMem.on_host()
            CuMem.REF_WRITE_WARNED[] = false
            @test_logs (:warn, r"not synchronised") parity_inc.(bins, Ref(hist))
            @test Array(hist) == [1, 2, 3]
        end
    end

    @testset "6. CuIterator holds one batch by default (make bench's replay demo)" begin
        batches = [rand(Float32, 4) for _ in 1:4]
        live = 0; prev = nothing
        for b in CuIterator(batches)
            prev === nothing || @test prev.state == CuMem.ARRAY_FREED
            prev = b
        end
        @test prev.state == CuMem.ARRAY_FREED
    end

    @testset "8. error noise: short frames, BoundsError names the CuArray, println" begin
        e, bt = try parity_sqrt.(CuArray([-1.0])); CuMem.synchronize(); nothing, nothing catch err; err, catch_backtrace() end  # (a GPU raises it at the synchronize)
        @test e isa DomainError
        trace = sprint(Base.show_backtrace, bt)
        @test !occursin("gpu_broadcast!(::Union", trace) && maximum(length, split(trace, '\n')) < 600
        v = CuArray(Float32[1, 2, 3])
        e = try parity_peek.(CuArray([1, 5]), Ref(v)); CuMem.synchronize(); nothing catch err; err end
        @test e isa BoundsError
        CuMem.on_host() && @test occursin(r"3-element (CuMem\.)?CuArray\{Float32", sprint(showerror, e))
        m = errmsg(() -> parity_print.(CuArray([1.0])))
        @test occursin("@cuprintln", m) && occursin("Array(x)", m) && !occursin("const stdout", m)
    end

    @testset "9. CUDA.jl's misses" begin
        a = CuArray(rand(Float32, 3, 4, 5))
        @test view(a, :, 1, 2) isa CuArray && view(a, :, :, 1) isa DenseCuArray
        @test cu(1:3) === 1:3 && cu[1, 2, 3] isa CuVector{Int}
        p = CuPtr{Int}(0x1000)
        @test p + 1 == CuPtr{Int}(0x1001) && Int(p) == 0x1000 && convert(CuPtr{Int}, 0x1000) == p
        @test CU_NULL === CuPtr{Cvoid}(0)
        # CuRef: a device element for ccall and kernels
        r = CuRef(41)
        @test r isa CuMem.CuRefArray{Int} && r[] == 41
        r[] = 42; @test r[] == 42
        @test typeof(Base.cconvert(CuRef{Int}, 1)) == typeof(CuRef(1))
        @test Base.unsafe_convert(CuRef{Int}, Base.cconvert(CuRef{Int}, 1)) isa CuRef{Int}
        cuarr = CuArray([1])
        @test Base.cconvert(CuRef{Int}, cuarr) isa CuMem.CuRefArray{Int,typeof(cuarr)}
        @test ccall(:labs, UInt64, (CuRef{Int},), r) == UInt64(pointer(r))   # the address reaches C
        @test ccall(:labs, UInt64, (CuRef{Int},), cuarr) == UInt64(pointer(cuarr))
        @test ccall(:labs, UInt64, (RefOrCuRef{Int},), cuarr) == UInt64(pointer(cuarr))
        hv = [1]
        @test ccall(:labs, UInt64, (RefOrCuRef{Int},), hv) == UInt64(pointer(hv))
        @test ccall(:labs, UInt64, (PtrOrCuPtr{Int},), cuarr) == UInt64(pointer(cuarr))
        @test ccall(:labs, UInt64, (PtrOrCuPtr{Int},), hv) == UInt64(pointer(hv))
        @test typeof(Base.cconvert(RefOrCuRef{Int}, 1)) == typeof(Ref(1))
        @cuda threads = 1 parity_kref(r, CuArray([8]))
        @test r[] == 50
        @test_throws ErrorException randn!(CuArray{Int}(undef, 4))
        CuMem.seed!()
        @test CuMem.@allocated(CuArray{Float32}(undef, 256)) >= 1024
        st = memory_status(); @test st isa NamedTuple || st === nothing
        @test occursin("pointer(a)", errmsg(() -> Base.unsafe_convert(Ptr{Int}, CuArray([1]))))
    end
end

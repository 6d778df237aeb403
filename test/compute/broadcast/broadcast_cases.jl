# The broadcast suite's cases: every result against Base on Array, under
# allowscalar(false). Included by broadcast_tests.jl (the current device: on the host
# device Base computes, on a GPU the kernels) and by kernel_emulation_tests.jl (the
# generated C compiled by g++ and run on the CPU, so CI checks what a GPU computes).
# Needs `same`, `testvals`, `NVRTC` and `EMULATED` from the including file.
@testset "broadcast" begin
    # Several operations fused per kernel keeps the number of generated kernels (and the
    # suite's time) small; each is compared with Base on the same expression.
    @testset "arithmetic, comparisons, min/max for $T" for T in (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16,
                                                                 UInt32, UInt64, Float16, Float32, Float64)
        x, y = testvals(T, 13), testvals(T, 13)
        a, b = CuArray(x), CuArray(y)
        f1(p, q) = ifelse(p < q, p + q, max(p, q) - min(p, q) * q)
        f2(p, q) = (p == q) | (p <= q) & (abs(p) != q)
        @test same(f1.(a, b), f1.(x, y))
        @test same(f2.(a, b), f2.(x, y))
        T === Bool || @test same(a ./ b, x ./ y)
        @test same(a .* 2 .+ 2f0 .* b .^ 2, x .* 2 .+ 2f0 .* y .^ 2)   # promotion with literals
        if T <: Integer && T !== Bool
            f3(p, q) = div(p, q) + rem(p, q) * mod(p, q) - fld(p, q) * cld(p, q) + (p % oftype(p, 3))
            f4(p, q) = ((p & q) | xor(p, q)) + sign(p) + (p << 3) + (q >> 1) - ~p
            @test same(f3.(a, b), f3.(x, y))
            @test same(f4.(a, b), f4.(x, y))
        end
        if T <: AbstractFloat
            g1(p) = sin(p) + cos(p) * tan(p) - exp(p) + tanh(p) * atan(p) + sinh(p)
            g2(p) = floor(p) + ceil(p) * round(p) - trunc(p) + sign(p) + log(abs(p) + 1) + sqrt(abs(p))
            g3(p, q) = clamp(p, oftype(p, -1), oftype(p, 1)) + muladd(p, q, p) * fma(p, q, q) + isnan(p / q)
            @test same(g1.(a), g1.(x))
            @test same(g2.(a), g2.(x))
            @test same(g3.(a, b), g3.(x, y))
            @test same(round.(Int, a), round.(Int, x))
        end
    end

    @testset "Julia semantics" begin
        i8 = Int8[100, -100, 127, -128]
        @test same(CuArray(i8) .+ CuArray(i8), i8 .+ i8)        # wraps
        @test same(abs.(CuArray(i8)), abs.(i8))                 # abs(typemin) == typemin
        @test same(CuArray([true, false]) .+ CuArray([true, true]), [true, false] .+ [true, true])   # Bool + Bool -> Int
        @test same(CuArray([1, 2]) ./ CuArray([2, 4]), [1, 2] ./ [2, 4])                            # Int / Int -> Float64
        f = Float32[NaN, 1, -0.0, 0.0]
        g = Float32[1, NaN, 0.0, -0.0]
        @test same(max.(CuArray(f), CuArray(g)), max.(f, g))     # NaN wins, -0.0 < 0.0
        @test same(min.(CuArray(f), CuArray(g)), min.(f, g))
        n, d = [-7, 7, -7, 7], [2, 2, -2, -2]
        for op in (div, rem, mod, fld, cld, %)
            @test same(op.(CuArray(n), CuArray(d)), op.(n, d))
        end
        @test same(CuArray(Int8[1, 2]) .<< CuArray([9, -1]), Int8[1, 2] .<< [9, -1])
        @test same(CuArray([-1, 2]) .< CuArray(UInt[1, 1]), [-1, 2] .< UInt[1, 1])   # exact signed/unsigned compare
        @test same(Float32.(CuArray([1, 2, 3])), Float32.([1, 2, 3]))
        @test same(Int16.(CuArray(Int8[-3, 4])), Int16.(Int8[-3, 4]))
        @test same(CuArray(Float16[1.5, 2.25]) .* Float16(3.1), Float16[1.5, 2.25] .* Float16(3.1))
        m = [true, false, true]
        @test same(ifelse.(CuArray(m), CuArray([1, 2, 3]), CuArray([4, 5, 6])), ifelse.(m, [1, 2, 3], [4, 5, 6]))
        @test same(ifelse.(CuArray(m), CuArray([1, 2, 3]), 0), ifelse.(m, [1, 2, 3], 0))
    end

    @testset "user functions and closures" begin
        x = testvals(Float32, 50)
        a = CuArray(x)
        relu(v) = max(v, zero(v))
        @test same(relu.(a), relu.(x))
        @test same(map(v -> 2v + 1, a), map(v -> 2v + 1, x))
        softplus(v) = log1p(exp(-abs(v))) + relu(v)
        @test same(softplus.(a), softplus.(x))
        leaky(v) = ifelse(v > 0, v, 0.01f0 * v)
        @test same(leaky.(a), leaky.(x))
        @test same(a .|> Float64, x .|> Float64)
        @test same((exp ∘ sin).(a), (exp ∘ sin).(x))
        # captured scalars are kernel parameters: a new value reuses the kernel
        scale(s) = v -> s * v + oftype(v, 1)
        @test same(map(scale(2f0), a), map(scale(2f0), x))
        s = CuMem.kernel_cache_stats()
        @test same(map(scale(3f0), a), map(scale(3f0), x))
        @test CuMem.kernel_cache_stats().misses == s.misses
        @test same(a .^ 3 .- 2 .* a, x .^ 3 .- 2 .* x)
        @test same(hypot.(a, 2), hypot.(x, 2))
        @test same(Base.Fix2(-, 1f0).(a), Base.Fix2(-, 1f0).(x))
    end

    @testset "shapes, singleton dimensions, scalars, Ref, 0-d, empty" begin
        for (sa, sb) in (((3, 4), (3, 4)), ((3, 4), (1, 4)), ((3, 4), (3,)), ((3, 1, 2), (1, 5, 1)),
                         ((0, 4), (1, 4)), ((2, 3), ()), ((), ()), ((0,), (0,)), ((5,), (1,)))
            x = sa == () ? fill(Base.rand(Float32)) : Base.rand(Float32, sa...)
            y = sb == () ? fill(Base.rand(Float32)) : Base.rand(Float32, sb...)
            a, b = CuArray(x), CuArray(y)
            @test same(a .- b, x .- y)
            @test same(a .* 3 .+ Ref(2f0) .* b, x .* 3 .+ Ref(2f0) .* y)
        end
        A = Base.rand(Float32, 4, 6)
        d = CuArray(A)
        mrow = sum(A; dims = 1) ./ 4
        @test same(d .- CuArray(mrow), A .- mrow)
        c = CuMem.zeros(Float32, 0, 3)
        @test size(c .+ 1) == (0, 3)
    end

    @testset "views and wrappers" begin
        A = Base.rand(Float32, 6, 5)
        B = Base.rand(Float32, 5, 6)
        v = Base.rand(Float32, 5)
        dA, dB, dv = CuArray(A), CuArray(B), CuArray(v)
        @test same(view(dA, 2:4, :) .+ 1, view(A, 2:4, :) .+ 1)
        @test same(view(dA, :, 3) .* view(dA, :, 1), view(A, :, 3) .* view(A, :, 1))
        @test same(view(dA, 6:-2:1, 2:2:5) .- 1, view(A, 6:-2:1, 2:2:5) .- 1)
        @test same(dA .+ dB', A .+ B')
        @test same(dA .+ transpose(dB), A .+ transpose(B))
        @test same(dv' .* dA, v' .* A)
        @test same(PermutedDimsArray(dA, (2, 1)) .- dB, PermutedDimsArray(A, (2, 1)) .- B)
        @test same(view(dB', 2:3, :) .+ 0, view(B', 2:3, :) .+ 0)
        # writing into views and wrappers
        dC, C = copy(dA), copy(A)
        view(dC, :, 2) .= 7f0
        view(C, :, 2) .= 7f0
        @test same(dC, C)
        view(dC, 1:2:5, :) .= view(dC, 2:2:6, :) .* 2
        view(C, 1:2:5, :) .= view(C, 2:2:6, :) .* 2
        @test same(dC, C)
        dD, D = CuArray(copy(B')), copy(B')
        dD' .= dB .+ 1
        D' .= B .+ 1
        @test same(dD, D)
        # aliasing: a transposed read of the destination itself
        S = Base.rand(Float32, 4, 4)
        dS = CuArray(S)
        dS .= dS .+ dS'
        S .= S .+ S'
        @test same(dS, S)
    end

    @testset "in-place: .=, broadcast!, map!, map, fill!" begin
        x, y = Base.rand(Float32, 100), Base.rand(Float32, 100)
        a, b = CuArray(x), CuArray(y)
        b .= a .* 2f0 .+ b
        y .= x .* 2f0 .+ y
        @test same(b, y)
        broadcast!(-, b, b, a)
        broadcast!(-, y, y, x)
        @test same(b, y)
        map!(*, b, a, b)
        map!(*, y, x, y)
        @test same(b, y)
        @test same(map(+, a, b), map(+, x, y))
        # map over arrays of different lengths stops at the shortest, as Base's map of vectors
        c3 = Base.rand(Float32, 3)
        @test Array(map(+, a, CuArray(c3))) == map(+, Array(a), c3)
        i = CuArray{Int32}(undef, 10)
        i .= 3
        @test same(i, fill(Int32(3), 10))
        for (T, v) in ((Float32, 1.5f0), (Int16, 0x0102), (Float64, 0.0), (Int8, -1), (UInt32, 7))
            @test same(fill!(CuArray{T}(undef, 9), v), fill(T(v), 9))
        end
        r = CuArray{Float64}(undef, 3)
        r .= CuArray([1, 2, 3])                  # converts on store
        @test same(r, [1.0, 2.0, 3.0])
    end

    @testset "ranges, CartesianIndices and irrationals by value" begin
        # passed into the kernel as their fields: each element is Base's getindex(r, k)
        x = Base.rand(Float32, 4, 3); v = Base.rand(Float32, 6)
        a, dv = CuArray(x), CuArray(v)
        for r in (1:6, Base.OneTo(6), 12:-2:2, range(0.1, 1.3; length = 6), LinRange(0f0, 1f0, 6), 0.5f0:0.25f0:1.75f0)
            @test same(dv .* r, v .* r)
            @test same(r .- dv, r .- v)
        end
        @test same(a .+ (1:4) .* (1:3)', x .+ (1:4) .* (1:3)')         # along both dimensions
        @test same(a .+ transpose(0.5:0.5:1.5), x .+ transpose(0.5:0.5:1.5))
        @test same((1:4) .== CuArray([2, 1, 4])', (1:4) .== [2, 1, 4]')
        @test same(dv .* eachindex(dv), v .* eachindex(v))
        @test_throws DimensionMismatch a .* eachindex(a)             # (linear indices: 12 of them, as Base)
        C = CartesianIndices(x)
        @test same(getindex.(C, 1) .* 10 .+ getindex.(C, 2) .+ a, getindex.(C, 1) .* 10 .+ getindex.(C, 2) .+ x)
        C2 = CartesianIndices((2:5, 3))
        @test same(a .+ first.(Tuple.(C2)), x .+ first.(Tuple.(C2)))
        @test same(a .* π .+ ℯ, x .* π .+ ℯ)
        out = CuArray(zeros(Float32, 4, 3))
        out .= (1:4) .+ 0f0 .* (1:3)'        # no array argument but the destination
        @test same(out, (1:4) .+ 0f0 .* (1:3)')
        @test_throws DimensionMismatch dv .* (1:5)
    end

    @testset "CuArrays indexed inside element functions (Ref, tuples)" begin
        # the array is a CuDeviceArray in the kernel: loads and stores of its memory
        twice(i, A::AbstractArray{T}) where {T} = A[i] * T(2)
        hidx = [3, 1, 4, 1, 5, 9, 2, 6]; hy = Base.rand(Float32, 9)
        idx, y = CuArray(hidx), CuArray(hy)
        @test same(twice.(idx, Ref(y)), twice.(hidx, Ref(hy)))
        @test same(getindex.(Ref(y), idx), getindex.(Ref(hy), hidx))
        M = Base.rand(Float32, 3, 4); dM = CuArray(M)
        @test same(getindex.(Ref(dM), idx[1:3] .% 3 .+ 1, 2), getindex.(Ref(M), hidx[1:3] .% 3 .+ 1, 2))
        r = getindex.(Ref(y), 2)                          # 0 dimensions: a 0-d CuArray
        @test r isa CuArray{Float32,0} && Array(r)[] == hy[2]
        a, b = CuArray(zeros(Float32, 9)), CuArray(hy)
        cpy(i, a, b) = (a[i] = b[i]; nothing)
        cpy.(1:9, Ref(a), Ref(b))                         # stores, a range by value
        @test same(a, hy)
        x = Base.rand(Float32, 3, 5); v = [Base.rand(Float32, 4) for _ in 1:3]
        out = CuArray(zeros(Float32, 3, 5))
        broadcast!((p, q) -> p + first(q) * last(q), out, CuArray(x), Tuple(CuArray.(v)))   # a tuple of CuArrays
        @test same(out, x .+ first.(v) .* last.(v))
        # (a kernel's exception surfaces at the next wait for the stream: the download)
        err = try Array(getindex.(Ref(y), CuArray([1, 10]))); nothing; catch e; e; end
        @test err isa BoundsError
    end

    @testset "errors" begin
        a = CuArray(Float32[1, 2, 3])
        positive_part(v) = v > 0 ? v : zero(v)
        @test same(positive_part.(a .- 2f0), positive_part.(Float32[1, 2, 3] .- 2f0))   # branches compile
        g(v) = gcd(v, v)
        @test same(g.(CuArray([4, -6])), g.([4, -6]))
        err = try (v -> string(v)).(a); nothing; catch e; e; end
        @test err isa CuMem.KernelCompileError && occursin("call chain", err.msg)
        # a non-constant global of the module this file runs in (runtests.jl runs it in a bare
        # Module(), where `Main` itself is a non-constant binding of Core)
        @eval nonconst_global = 2f0
        err = try (v -> v * nonconst_global).(a); nothing; catch e; e; end
        @test err isa CuMem.KernelCompileError && occursin("const nonconst_global = Ref(x)", err.msg)
        err = try a .+ [1f0, 2f0, 3f0]; nothing; catch e; e; end
        @test err isa ArgumentError && occursin("host", err.msg)
        @test_throws ArgumentError copyto!(zeros(Float32, 3), Broadcast.broadcasted(+, a, 1))
        @test_throws DimensionMismatch a .+ CuArray(Float32[1, 2])
        @test (x -> 1).(a) == [1, 1, 1]                  # a constant result
        @test Array(CuArray([1 + 2im]) .+ 1) == [2 + 2im]        # Complex elements
        @test_throws ArgumentError a .+ Ref([1])                 # a captured host array
        unsafe_free!(a)
        @test_throws AssertionError a .+ 1
        # a download after a kernel that threw waits and throws before it copies: the
        # destination is left as it was (julia/memory/kernel_errors.jl, check_thrown_before_read)
        over2(v) = v > 2 ? throw(DomainError(v, "over 2")) : v
        x4 = CuArray([1, 2, 3, 4])
        if CuMem.on_host() && !EMULATED
            @test_throws DomainError over2.(x4)               # Base computes at once
        else
            for path in ("general", "typed fast path")        # (the second call takes the slot)
                r = over2.(x4)
                @test CuMem.DC_UNCHECKED[]
                dest = fill(-7, 4)
                @test_throws DomainError copyto!(dest, r)
                @test dest == fill(-7, 4)
                @test !CuMem.DC_UNCHECKED[]
                @test Array(over2.(CuArray([1, 2]))) == [1, 2]   # nothing left to throw
            end
            ok = x4 .+ 1                                      # cannot throw: no wait first
            @test !CuMem.DC_UNCHECKED[] && Array(ok) == [2, 3, 4, 5]
        end
    end

    EMULATED || @testset "kernel cache" begin
        CuMem.KERNEL_INDEX[] = false   # counts of the general path (the index on disk skips it)
        a = CuArray(Base.rand(Float32, 7))
        a .* 5f0 .+ a
        s1 = CuMem.kernel_cache_stats()
        a .* 6f0 .+ a              # same types: no new kernel, and the typed fast path
        s2 = CuMem.kernel_cache_stats()                # (compute/broadcast/fastpath.jl) looks nothing up
        @test s2.misses == s1.misses && s2.hits == s1.hits
        CuMem.FAST_BROADCAST[] = false
        a .* 7f0 .+ a              # the slow path: a hit of the kernel cache
        CuMem.FAST_BROADCAST[] = true
        s2 = CuMem.kernel_cache_stats()
        @test s2.misses == s1.misses && s2.hits == s1.hits + 1
        CuArray(Base.rand(Float32, 5, 5)) .* 5f0 .+ CuArray(Base.rand(Float32, 5, 5))   # other ndims: new kernel
        @test CuMem.kernel_cache_stats().misses == s2.misses + 1
        if NVRTC && CuMem.on_host()     # on a GPU each kernel is compiled and loaded instead
            @test CuMem.kernel_cache_stats().nvrtc_checks == CuMem.kernel_cache_stats().misses
        end
        CuMem.KERNEL_INDEX[] = true
    end
end

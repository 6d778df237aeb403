# Kernel-semantics cases of the reduction-like families (mapreduce with and without dims,
# count/any/all, findmax/findmin, accumulate, sorts with `by`/`lt`) whose element functions
# and operators are compiled from Julia's typed IR: branches, structs, tuples, Complex,
# Float16, user operators, captured values, `const` Refs read at launch, redefined methods
# and Julia's exceptions. Included by test/compute/reduce/mapreduce_tests.jl (the host device's
# path) and test/compute/reduce/reduce_emulation_tests.jl (the generated C on g++ threads), so that
# both paths answer the same questions against Base.

struct RedPoint
    m::Float32
    x::Float32
end
red_absb(v) = v > 0 ? v : -v                       # a branch on the element
red_bigger(a, b) = a > b ? a : b                   # a user operator with a branch (associative)
red_capped(a, b) = (s = a + b; s > 1000 ? 1000 : s) # associative on non-negative integers
function red_steps(v)                              # a loop with an element-dependent trip count
    n = 0
    while v > 1
        v = v % 2 == 0 ? v ÷ 2 : 3v + 1
        n += 1
    end
    return n
end
red_addpoint(p::RedPoint, q::RedPoint) = RedPoint(p.m + q.m, p.x + q.x)
const RED_SCALE = Ref(2f0)
red_scaled(v) = v * RED_SCALE[]

# Compares a result with Base's: same type, shape, and values (floats and complex numbers to
# a relative tolerance, as GPU reductions regroup; tuples and structs field by field).
red_close(a::CuArray, b) = red_close(Array(a), b)
function red_close(a, b)
    typeof(a) === typeof(b) || (println("type ", typeof(a), " vs ", typeof(b)); return false)
    if a isa AbstractArray
        size(a) == size(b) || return false
        ok = all(red_close(x, y) for (x, y) in zip(a, b))
        ok || println(a[1:min(end, 12)], "\n  !=\n", b[1:min(end, 12)])
        return ok
    elseif a isa Union{AbstractFloat,Complex{<:AbstractFloat}}
        tol = real(typeof(a)) === Float16 ? 1e-2 : sqrt(eps(real(typeof(a))))
        return isapprox(a, b; rtol = tol, atol = tol, nans = true) || (println(a, " != ", b); false)
    elseif a isa Tuple || (isstructtype(typeof(a)) && fieldcount(typeof(a)) > 0 && !(a isa Number))
        return all(red_close(getfield(a, i), getfield(b, i)) for i in 1:nfields(a))
    end
    return isequal(a, b) || (println(a, " != ", b); false)
end

# The exception `f()` throws (nothing when it returns).
red_error(f) = try f(); nothing catch e; e end
# Whether `f` (on the GPU array) throws Base's exception for `g` (on the host array):
# same type and fields.
function red_same_error(f, g)
    e, b = red_error(f), red_error(g)
    b === nothing && return false
    ok = typeof(e) === typeof(b) && all(isequal(getfield(e, i), getfield(b, i)) for i in 1:nfields(b))
    ok || println("got ", repr(e), ", Base throws ", repr(b))
    return ok
end

function reduce_cases()
    Random.seed!(23)
    @testset "reductions of compiled element functions" begin
        x = Float32.(Base.rand(Float32, 301) .* 4 .- 2)
        a = CuArray(x)
        M = reshape(x[1:300], 20, 15)
        dM = CuArray(M)
        @testset "branches and loops" begin
            @test red_close(sum(v -> v > 0 ? v : -v, a), sum(v -> v > 0 ? v : -v, x))
            @test red_close(sum(red_absb, dM; dims = 1), sum(red_absb, M; dims = 1))
            @test red_close(sum(red_absb, dM; dims = 2), sum(red_absb, M; dims = 2))
            @test red_close(maximum(v -> v < -1 ? -v : v / 2, a), maximum(v -> v < -1 ? -v : v / 2, x))
            @test red_close(count(v -> v > 0 && v < 0.5f0, a), count(v -> v > 0 && v < 0.5f0, x))
            @test red_close(count(v -> v > 1 || v < -1, dM; dims = 2), count(v -> v > 1 || v < -1, M; dims = 2))
            @test red_close(any(v -> v > 1.9f0 || v < -1.99f0, a), any(v -> v > 1.9f0 || v < -1.99f0, x))
            @test red_close(all(v -> abs(v) <= 2 && !isnan(v), dM; dims = 1), all(v -> abs(v) <= 2 && !isnan(v), M; dims = 1))
            n = Int32.(Base.rand(1:200, 100))
            @test red_close(sum(red_steps, CuArray(n)), sum(red_steps, n))
            @test red_close(mapreduce(red_steps, max, CuArray(reshape(n, 10, 10)); dims = 1), mapreduce(red_steps, max, reshape(n, 10, 10); dims = 1))
        end
        @testset "user operators" begin
            @test red_close(mapreduce(red_absb, red_bigger, a; init = 0f0), mapreduce(red_absb, red_bigger, x; init = 0f0))
            @test red_close(reduce(red_bigger, dM; dims = 1, init = -Inf32), reduce(red_bigger, M; dims = 1, init = -Inf32))
            @test red_close(reduce(red_bigger, dM; dims = 2, init = -Inf32), reduce(red_bigger, M; dims = 2, init = -Inf32))
            k = Base.rand(0:20, 500)
            @test red_close(reduce(red_capped, CuArray(k); init = 0), reduce(red_capped, k; init = 0))
            @test red_close(mapreduce(v -> v ÷ 3, (p, q) -> p > q ? p : q, CuArray(k); init = 0), mapreduce(v -> v ÷ 3, max, k; init = 0))
            @test_throws ArgumentError mapreduce(identity, red_bigger, a)    # no neutral element: init needed
        end
        @testset "captured values and const Refs" begin
            c = 0.25f0
            @test red_close(sum(v -> v > c ? v - c : zero(v), a), sum(v -> v > c ? v - c : zero(v), x))
            RED_SCALE[] = 2f0
            @test red_close(sum(red_scaled, a), sum(red_scaled, x))
            RED_SCALE[] = 3f0                 # read at each launch, not baked into the kernel
            @test red_close(sum(red_scaled, a), sum(red_scaled, x))
            @test red_close(sum(red_scaled, dM; dims = 1), sum(red_scaled, M; dims = 1))
        end
        @testset "structs and tuples" begin
            ps = [RedPoint(Base.rand(Float32), Base.rand(Float32) - 0.5f0) for _ in 1:97]
            dp = CuArray(ps)
            @test red_close(sum(p -> p.m * p.x, dp), sum(p -> p.m * p.x, ps))
            @test red_close(mapreduce(p -> p.x > 0 ? p.m : 0f0, +, dp), mapreduce(p -> p.x > 0 ? p.m : 0f0, +, ps))
            @test red_close(reduce(red_addpoint, dp; init = RedPoint(0, 0)), reduce(red_addpoint, ps; init = RedPoint(0, 0)))
            ts = [(Int32(i), Float32(i) / 7) for i in 1:64]
            dt = CuArray(ts)
            @test red_close(sum(t -> t[1] * t[2], dt), sum(t -> t[1] * t[2], ts))
            @test red_close(reduce((s, t) -> (s[1] + t[1], max(s[2], t[2])), dt; init = (Int32(0), -Inf32)),
                            reduce((s, t) -> (s[1] + t[1], max(s[2], t[2])), ts; init = (Int32(0), -Inf32)))
            @test red_close(mapreduce(v -> (v, v * v), (s, t) -> (s[1] + t[1], s[2] + t[2]), a; init = (0f0, 0f0)),
                            mapreduce(v -> (v, v * v), (s, t) -> (s[1] + t[1], s[2] + t[2]), x; init = (0f0, 0f0)))
        end
        @testset "Complex" begin
            z = ComplexF32.(x[1:200], reverse(x[1:200]))
            dz = CuArray(z)
            @test red_close(sum(dz), sum(z))
            @test red_close(prod(dz[1:20] ./ 2), prod(z[1:20] ./ 2))
            @test red_close(sum(abs2, dz), sum(abs2, z))
            @test red_close(maximum(abs, dz), maximum(abs, z))
            Z = reshape(z, 20, 10)
            @test red_close(sum(CuArray(Z); dims = 2), sum(Z; dims = 2))
            @test red_close(sum(v -> real(v) > 0 ? v : conj(v), dz), sum(v -> real(v) > 0 ? v : conj(v), z))
            w = ComplexF64.(z)
            @test red_close(sum(CuArray(w)), sum(w))
            @test red_close(cumsum(dz), cumsum(z))
        end
        @testset "Float16" begin
            h = Float16.(x)
            dh = CuArray(h)
            @test red_close(sum(dh), sum(h))
            @test red_close(maximum(dh), maximum(h)) && red_close(minimum(dh), minimum(h))
            @test red_close(sum(v -> v > 0 ? v : zero(v), dh), sum(v -> v > 0 ? v : zero(v), h))
            @test red_close(sum(CuArray(reshape(h[1:300], 20, 15)); dims = 1), sum(reshape(h[1:300], 20, 15); dims = 1))
            @test findmax(dh) == findmax(h) && findmin(dh) == findmin(h)
            @test red_close(cumsum(dh[1:50]), cumsum(h[1:50]))
        end
        @testset "findmax and findmin" begin
            for v in (Float32[-0.0, 0.0, 1, 1], Float32[0.0, -0.0], Float64[2, NaN, 3, NaN], Int8[3, -1, 3, -1])
                d = CuArray(v)
                @test isequal(findmax(d), findmax(v)) && isequal(findmin(d), findmin(v))
                @test argmax(d) == argmax(v) && argmin(d) == argmin(v)
            end
            F = Float32[0.0 -0.0 1; -0.0 0.0 NaN]
            for dims in (1, 2)
                r, e = findmax(CuArray(F); dims = dims), findmax(F; dims = dims)
                @test isequal(Array(r[1]), e[1]) && Array(r[2]) == e[2]
                r, e = findmin(CuArray(F); dims = dims), findmin(F; dims = dims)
                @test isequal(Array(r[1]), e[1]) && Array(r[2]) == e[2]
            end
            K = Base.rand(Int16(-5):Int16(5), 7, 40)
            r, e = findmin(CuArray(K); dims = 2), findmin(K; dims = 2)
            @test Array(r[1]) == e[1] && Array(r[2]) == e[2]
        end
        @testset "scans with compiled operators" begin
            @test red_close(accumulate(red_bigger, a), accumulate(red_bigger, x))
            @test red_close(accumulate((p, q) -> p > q ? p : q, dM; dims = 1), accumulate(max, M; dims = 1))
            @test red_close(accumulate((p, q) -> p > q ? p : q, dM; dims = 2, init = 0.5f0),
                            accumulate((p, q) -> p > q ? p : q, M; dims = 2, init = 0.5f0))
            k = Base.rand(0:20, 3000)
            @test red_close(accumulate(red_capped, CuArray(k)), accumulate(red_capped, k))
            ts = [(Int32(i % 5), Float32(i) / 16) for i in 1:40]
            @test red_close(accumulate((s, t) -> (s[1] + t[1], max(s[2], t[2])), CuArray(ts)),
                            accumulate((s, t) -> (s[1] + t[1], max(s[2], t[2])), ts))
            if !CuMem.on_host() && CuMem.index_dir() !== nothing
                # a process's first scan of types that an earlier one scanned: its kernels from
                # the kernel index on disk (no source generated), the same results
                v = Base.rand(Float32, 5000)
                @test red_close(cumsum(CuArray(v)), cumsum(v)) && red_close(cumsum(dM; dims = 2), cumsum(M; dims = 2))
                s = CuMem.kernel_cache_stats()
                empty!(CuMem.INDEX_TRIED)
                @test red_close(cumsum(CuArray(v)), cumsum(v)) && red_close(cumsum(dM; dims = 2), cumsum(M; dims = 2))
                @test CuMem.kernel_cache_stats() == s
                @test count(e -> e isa CuMem.KernelEntry, values(CuMem.INDEX_TRIED)) == 2
            end
        end
        @testset "sorts with compiled by and lt" begin
            h = Base.rand(-50:50, 300)
            by = v -> v > 0 ? v : -2v
            @test red_close(sort(CuArray(h); by = by), sort(h; by = by, alg = MergeSort))
            lt = (p, q) -> p % 5 == q % 5 ? p < q : p % 5 < q % 5
            @test red_close(sort(CuArray(h); lt = lt), sort(h; lt = lt, alg = MergeSort))
            @test red_close(sortperm(CuArray(h); lt = lt, rev = true), sortperm(h; lt = lt, rev = true))
        end
        @testset "Julia's exceptions" begin
            i = [1, 2, 300]
            @test red_same_error(() -> sum(v -> Int8(v), CuArray(i)), () -> sum(v -> Int8(v), i))
            @test red_same_error(() -> sum(v -> Int8(v), CuArray(reshape(i, 1, 3)); dims = 2) |> Array,
                                 () -> sum(v -> Int8(v), reshape(i, 1, 3); dims = 2))
            j = Int32[4, 1, 0, 2]
            @test red_same_error(() -> sum(v -> div(Int32(12), v), CuArray(j)), () -> sum(v -> div(Int32(12), v), j))
            f = [1.0, -2.0, 3.0]
            g = v -> v < 0 ? throw(DomainError(v, "negative")) : sqrt(v)
            @test red_same_error(() -> sum(g, CuArray(f)), () -> sum(g, f))
            @test red_same_error(() -> mapreduce(g, +, CuArray(f); init = 0.0), () -> mapreduce(g, +, f; init = 0.0))
            @test red_close(sum(v -> Int8(v), CuArray([1, 2, 3])), 6)          # the error word was cleared
            @test red_same_error(() -> accumulate((p, q) -> div(p, q), CuArray(Int32[4, 2, 0])) |> Array,
                                 () -> accumulate((p, q) -> div(p, q), Int32[4, 2, 0]))
        end
    end
    return nothing
end

# A method redefined between two calls: the kernel compiles again (cache keyed by world age).
function reduce_redefinition_case(mod::Module)
    @testset "redefined methods recompile" begin
        Core.eval(mod, :(red_redef(v) = v + 1))
        r1 = Base.invokelatest(() -> sum(mod.red_redef, CuArray(Int32[1, 2, 3])))
        Core.eval(mod, :(red_redef(v) = v > 1 ? v * 10 : v))
        r2 = Base.invokelatest(() -> sum(mod.red_redef, CuArray(Int32[1, 2, 3])))
        @test r1 == 9 && r2 == 51
    end
end

# Reductions over one dimension: every shape class (kept dimensions, contiguous or strided
# reduced elements), each reduced twice (the general path, then, on a GPU or the emulation,
# dims_slot.jl's typed slot); both equal Base's.
function dims_slot_cases()
    @testset "one dimension of a type seen before: a typed slot (dims_slot.jl)" begin
        for sz in ((4, 4), (1, 7), (7, 1, 3), (3, 5, 2), (2, 1, 4, 3), (5, 2100)), d in 1:length(sz)
            h = Base.rand(Float32, sz...)
            a = CuArray(h)
            for _ in 1:2
                @test Array(sum(a; dims = d)) ≈ sum(h; dims = d)
                @test Array(maximum(a; dims = d)) == maximum(h; dims = d)
            end
        end
        hi = Base.rand(Int16(-9):Int16(9), 3, 5, 2)
        ai = CuArray(hi)
        for d in 1:3, _ in 1:2
            r = sum(ai; dims = d)
            @test eltype(r) === Int && Array(r) == sum(hi; dims = d)       # Base widens Int16 sums
        end
        @test Array(sum(CuArray(Float32[1 2; 3 4]); dims = 3)) == Float32[1 2; 3 4]   # dims > ndims: a copy
        @test_throws ArgumentError sum(CuArray(Float32[1 2; 3 4]); dims = 0)
        if !CuMem.on_host()
            key = (Tuple{typeof(identity),typeof(Base.add_sum),Float32}, 1, true)
            @test CuMem.DIMS_TABLE[][key] isa CuMem.DimsReduce
            a = CuArray(Float32[1 2; 3 4])
            @test Array(sum(a; dims = 1)) == Float32[4 6]   # (fills the slot again if a method was defined since)
            s = CuMem.kernel_cache_stats()
            @test Array(sum(a; dims = 1)) == Float32[4 6]
            @test CuMem.kernel_cache_stats() == s           # the slot: nothing looked up
            if CuMem.index_dir() !== nothing
                # a process's first call of a type that an earlier one reduced: the kernel
                # index on disk fills the slot (no source generated, the same result)
                CuMem.DIMS_TABLE[] = IdDict{Any,Any}()
                empty!(CuMem.INDEX_TRIED)
                @test Array(sum(a; dims = 1)) == Float32[4 6]
                @test CuMem.kernel_cache_stats() == s
                @test CuMem.DIMS_TABLE[][key] isa CuMem.DimsReduce
                @test Array(maximum(CuArray(Float32[1 5; 3 4]); dims = 1)) == Float32[3 5]
            end
            f = x -> x * 2f0                                 # a new closure type: the general path again
            @test Array(mapreduce(f, +, a; dims = 2)) == reshape(Float32[6, 14], 2, 1)
        else
            @test isempty(CuMem.DIMS_TABLE[])               # the host device runs Base: no slot
        end
    end
end

# The typed-IR compiler's cases (issue 23): every form it compiles, each result (or
# exception) against Base's. Included by kernel_emulation_tests.jl (the generated C run on
# the CPU by g++) and by compiler_tests.jl (any device: on a GPU the kernels themselves;
# `TESTS=test/compute/compiler/compiler_tests.jl bench/gpu/run.sh tests`). Needs `same(r, e)`
# from the including file.
using CuMem, Test
struct Particle; m::Float32; x::Float32; v::Float32; end
struct Mixed; a::Int8; b::Float64; c::Bool; end
const SCALE = Ref(2f0)
mutable struct Params; k::Float32; n::Int; end
const PARAMS = Params(1.5f0, 3)
scaled(v) = v * SCALE[]
withparams(v) = v * PARAMS.k + PARAMS.n
relu(v) = v > 0f0 ? v : 0f0
function collatz(n)
    s = 0
    while n > 1
        n = iseven(n) ? n >> 1 : 3n + 1
        s += 1
    end
    return s
end
function early(x)
    x < 0 && return -1.0
    x > 10 || return x / 2
    for k in 1:3
        x -= k
    end
    return x
end
fibr(k) = k < 2 ? k : fibr(k - 1) + fibr(k - 2)
andor(a, b) = (a > 0 && b > 0) || (a < -1 && b < -1)
maybe(v) = (r = v > 0 ? v : nothing; r === nothing ? 0f0 : 2r)
function throws_like(T, f, args...)
    e1 = try f(map(Array, args)...); nothing; catch e; e; end
    e2 = try Array(f(args...)); nothing; catch e; e; end
    e1 === nothing && println("Base did not throw")
    (typeof(e1) == typeof(e2) && sprint(showerror, e1) == sprint(showerror, e2)) || println(e1, "\n", e2)
    return e1 isa T && typeof(e1) == typeof(e2) && sprint(showerror, e1) == sprint(showerror, e2)
end
@testset "typed-IR compiler" begin
    x = Float32[-1.5, 0, 2, 3.25, -0.0, 7]
    a = CuArray(x)
    @test same(relu.(a), relu.(x))
    @test same(map(v -> v > 1 ? sqrt(v) : v < -1 ? -v : 2v, a), map(v -> v > 1 ? sqrt(v) : v < -1 ? -v : 2v, x))
    n = [1, 2, 7, 27, 97, 3]
    @test same(collatz.(CuArray(n)), collatz.(n))
    @test same(early.(CuArray([-3.0, 4.0, 12.5])), early.([-3.0, 4.0, 12.5]))
    @test same(andor.(a, CuArray(reverse(x))), andor.(x, reverse(x)))
    @test same(maybe.(a), maybe.(x))
    # bswap_int (Char code points go through it)
    for v in (UInt16[0x1234, 0xff00], Int32[0x01020304, -2], UInt64[0x0102030405060708, 1])
        @test same(bswap.(CuArray(v)), bswap.(v))
    end
    cs = collect("hello, World")
    @test same(map(c -> codepoint(c) + 1, CuArray(cs)), map(c -> codepoint(c) + 1, cs))
    # Base's uppercase(::Char) calls utf8proc for non-ASCII characters: its tables
    # (compiler/unicode.jl); a utf8proc call without a table (grapheme breaks) is refused
    cs2 = vcat(cs, collect("éßǅΣж"))
    @test same(uppercase.(CuArray(cs2)), uppercase.(cs2))
    @test same(isletter.(CuArray(cs2)), isletter.(cs2))
    @test_throws CuMem.KernelCompileError Base.Unicode.isgraphemebreak.(CuArray(cs), CuArray(cs))
    # structs in and out, tuples, NamedTuples, Complex
    ps = [Particle(Float32(i), Float32(2i), Float32(-i)) for i in 1:5]
    dps = CuArray(ps)
    @test same(map(p -> p.m * p.x, dps), map(p -> p.m * p.x, ps))
    mv(p) = Particle(p.m, p.x + p.v, p.v * 0.5f0)
    @test same(map(mv, dps), map(mv, ps))
    ms = [Mixed(Int8(i), i / 3, isodd(i)) for i in 1:4]
    @test same(map(s -> s.c ? s.a * s.b : -s.b, CuArray(ms)), map(s -> s.c ? s.a * s.b : -s.b, ms))
    @test same(map(s -> Mixed(s.a + Int8(1), 2s.b, !s.c), CuArray(ms)), map(s -> Mixed(s.a + Int8(1), 2s.b, !s.c), ms))
    y = Float32[1, 2, 3, 4, 5, 6]
    @test same(tuple.(a, CuArray(y)), tuple.(x, y))
    tp = [(1, 2), (3, 4), (-5, 6)]
    @test same(map(t -> t[1] + t[2], CuArray(tp)), map(t -> t[1] + t[2], tp))
    @test same(map(t -> (s = t.a * t.b, d = t.a - t.b), CuArray([(a = 1.0, b = 2.0), (a = 3.0, b = -1.0)])),
               map(t -> (s = t.a * t.b, d = t.a - t.b), [(a = 1.0, b = 2.0), (a = 3.0, b = -1.0)]))
    for C in (ComplexF32, ComplexF64)
        z = C[1 + 2im, -0.5 + 0.25im, 3 - 1im]
        dz = CuArray(z)
        @test same(dz .* dz .+ C(1, -1), z .* z .+ C(1, -1))
        @test same(abs2.(dz), abs2.(z))
        @test same(abs.(dz), abs.(z))
        @test same(exp.(dz), exp.(z))
        @test same(dz ./ C(2, 1), z ./ C(2, 1))
        @test same(real.(dz) .+ imag.(dz), real.(z) .+ imag.(z))
    end
    # Float16 through the hardware conversions; math mapped to the C library
    h = Float16[0.5, -1.25, 3, 100]
    @test same(CuArray(h) .* Float16(1.5) .+ CuArray(h), h .* Float16(1.5) .+ h)
    @test same(sin.(CuArray(h)), sin.(h))
    for T in (Float32, Float64)
        v = T[0.1, 0.5, 1.5, 2.0, 10.0]
        dv = CuArray(v)
        for f in (sin, cos, tan, exp, log, sqrt, cbrt, asinh, atan, tanh, expm1, log1p, log2, log10, exp2)
            @test same(f.(dv), f.(v))
        end
        @test same(dv .^ T(2.5), v .^ T(2.5))
        @test same(dv .^ 3, v .^ 3)
        @test same(hypot.(dv, T(3)), hypot.(v, T(3)))
        @test same(atan.(dv, T(-2)), atan.(v, T(-2)))
        @test same(map(t -> sum(sincos(t)), dv), map(t -> sum(sincos(t)), v))
    end
    @test same(CuArray([2, 3, -2]) .^ CuArray([10, 3, 3]), [2, 3, -2] .^ [10, 3, 3])
    # const bindings to mutable objects are read at each launch
    @test same(scaled.(a), scaled.(x))
    SCALE[] = 3f0
    @test same(scaled.(a), scaled.(x))
    @test same(withparams.(a), withparams.(x))
    PARAMS.k = -2f0; PARAMS.n = 7
    @test same(withparams.(a), withparams.(x))
    # a redefined function recompiles (world age)
    @eval Main redef(v) = v + 1f0
    @test Array(Base.invokelatest(() -> redef.(a))) == x .+ 1
    @eval Main redef(v) = v + 2f0
    @test Array(Base.invokelatest(() -> redef.(a))) == x .+ 2
    # Julia's exceptions: the kernel records them, the next wait for the stream throws Base's
    @test throws_like(DivideError, (p, q) -> div.(p, q), CuArray([1, 2]), CuArray([1, 0]))
    @test throws_like(InexactError, p -> Int8.(p), CuArray([1, 300]))
    @test throws_like(DomainError, p -> sqrt.(p), CuArray([1.0, -1.0]))
    @test throws_like(DomainError, p -> log.(p), CuArray(Float32[1, -2]))
    @test throws_like(DomainError, p -> sin.(p), CuArray([Inf32]))
    @test throws_like(DomainError, (p, q) -> p .^ q, CuArray([3, 2]), CuArray([1, -2]))
    @test throws_like(OverflowError, p -> Base.checked_add.(p, typemax(Int)), CuArray([0, 1]))
    @test throws_like(BoundsError, (p, k) -> map((t, i) -> t[i], p, k), CuArray([(1, 2), (3, 4)]), CuArray([1, 3]))
    @test throws_like(InexactError, p -> Int.(p), CuArray([1.5]))
    # after an exception, kernels run normally again
    @test same(a .+ 1f0, x .+ 1f0)
    # refusals: KernelCompileError naming the construct and the call chain
    err = try map(v -> v * 0f0 + rand(Float32), a); nothing; catch e; e; end
    @test err isa CuMem.KernelCompileError && occursin("rand", err.msg)
    err = try map(v -> string(v), a); nothing; catch e; e; end
    @test err isa CuMem.KernelCompileError
    err = try fibr.(CuArray([3])); nothing; catch e; e; end
    @test err isa CuMem.KernelCompileError && occursin("recursion", err.msg)
    for T in (Int32,)                    # a type held in a variable: not isbits
        ft(v) = v + T(1)
        err = try ft.(CuArray(Int32[1])); nothing; catch e; e; end
        @test err isa CuMem.KernelCompileError && occursin("a type held in a variable", err.msg)
    end
    err = try map(v -> [v][1], a); nothing; catch e; e; end
    @test err isa CuMem.KernelCompileError
    err = try map(v -> (try; v; catch; 0f0; end), a); nothing; catch e; e; end
    @test err === nothing || err isa CuMem.KernelCompileError
end

# Constant tables: a tuple of one primitive type and DC_TABLE_MIN or more fields, indexed at
# run time, is one file-scope constant of the kernel that its uses name (no copy into a
# local); a table holding a non-finite float is built at its use instead. Base's
# Float16(::Float32) reads two such tables (Base.shifttable, Base.basetable).
const TAB16 = ntuple(i -> UInt16((i * 7919) % 65521), 300)
const TABF = ntuple(i -> i == 5 ? Inf32 : Float32(i) / 7f0, 12)
const TABD = ntuple(i -> -Float64(i)^3 / 3, 20)
tab_u16(i) = TAB16[(i % 300) + 1] + TAB16[((i + 1) % 300) + 1]
tab_f32(i) = TABF[(i % 12) + 1] * TABD[(i % 20) + 1]
tab_h(x::Float32) = Float16(x) * Float16(3)
@testset "constant tables" begin
    i = collect(0:700)
    @test Array(tab_u16.(CuArray(i))) == tab_u16.(i)
    @test isequal(Array(tab_f32.(CuArray(i))), tab_f32.(i))
    x = Float32[0, -0.0, 1, -1, 0.1, 65504, 65520, 7e4, -7e4, 6e-8, 3e-8, 1e-5, NaN, Inf, -Inf, 2.7, 1f-20, 12345.678]
    @test isequal(Array(Float16.(CuArray(x))), Float16.(x))
    @test isequal(Array(tab_h.(CuArray(x))), tab_h.(x))
    src = CuMem.device_function(tab_u16, (Int,)).source
    @test occursin(r"static __device__ const jlt_\w+ jlk_[0-9a-f]+ = \{ ", src)
    @test !occursin(r"s\d+ = jlk_", src)          # named where used, never copied
    src = CuMem.device_function(tab_f32, (Int,)).source
    @test count("static __device__ const", src) == 1   # TABD; TABF (an Inf) is built where used
    @test occursin("static __device__ const", CuMem.device_function(tab_h, (Float32,)).source)
end

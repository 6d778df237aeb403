# Fused broadcasting, map, map!, fill!: every result against Base on Array, under
# allowscalar(false). Run by runtests.jl in a process per pool.
using CuMem, Test, Random, LinearAlgebra
CuMem.allowscalar(false)
Random.seed!(7)

const NVRTC = CuMem.nvrtc_available()
println("broadcast tests: generated kernels ", NVRTC ? "are compiled to PTX with NVRTC" :
        "are NOT compiled (libnvrtc not found: the NVRTC check is skipped)")

# Element values for which Base does not throw (no division by zero, no overflow errors).
testvals(::Type{Bool}, dims...) = Base.rand(Bool, dims...)
testvals(::Type{T}, dims...) where {T<:Integer} = T.(Base.rand(1:9, dims...)) .* T.(Base.rand((1, 1, -1), dims...) .% T)
testvals(::Type{T}, dims...) where {T<:Unsigned} = T.(Base.rand(1:9, dims...))
testvals(::Type{T}, dims...) where {T<:AbstractFloat} = T.(Base.rand(Float32, dims...) .* 4 .- 2)

# Equal values and element types (floats: approximately, NaNs equal: GPU math libraries
# differ from Julia's in the last bits).
function same(r, e)
    r = r isa CuArray ? Array(r) : r
    eltype(r) === eltype(e) || return false
    size(r) == size(e) || return false
    eltype(e) <: AbstractFloat || return isequal(r, e)
    return all(isapprox.(r, e; rtol = eltype(e) === Float16 ? 1e-2 : sqrt(eps(eltype(e))), atol = eltype(e) === Float16 ? 3e-2 : 1e-5, nans = true))
end

const EMULATED = false
Base.include(@__MODULE__, joinpath(@__DIR__, "broadcast_cases.jl"))   # Base.include: runtests.jl runs this file in a bare Module()

@testset "wrappers: one strided description with the copies (compute/broadcast/layout.jl)" begin
    x = Base.rand(Float32, 6, 8); y = Base.rand(Float32, 8, 6)
    a, b = CuArray(x), CuArray(y)
    # reshapes of views, permuted views, transposes of views (and views of transposes)
    @test same(reshape(view(a, :, 2:3), :) .+ 1f0, reshape(view(x, :, 2:3), :) .+ 1f0)
    @test same(reshape(view(a, :, 2:5), 12, 2) .* reshape(view(b, :, 2:4), 12, 2), reshape(view(x, :, 2:5), 12, 2) .* reshape(view(y, :, 2:4), 12, 2))
    @test same(reshape(view(a, 2:3, :), 4, 4) .- 1f0, reshape(view(x, 2:3, :), 4, 4) .- 1f0)
    @test same(PermutedDimsArray(view(a, 2:5, 1:2:7), (2, 1)) .* 2f0, PermutedDimsArray(view(x, 2:5, 1:2:7), (2, 1)) .* 2f0)
    @test same(transpose(view(a, 2:4, :)) .+ view(b, :, 1:3), transpose(view(x, 2:4, :)) .+ view(y, :, 1:3))
    @test same(view(transpose(a), 2:5, 1:3) .- adjoint(view(b, 1:3, 2:5)), view(transpose(x), 2:5, 1:3) .- adjoint(view(y, 1:3, 2:5)))
    # into wrappers
    c, z = copy(a), copy(x)
    reshape(view(c, :, 2:3), 3, 4) .= 7f0; reshape(view(z, :, 2:3), 3, 4) .= 7f0
    transpose(view(c, 1:2:5, :)) .= view(b, :, 4:6); transpose(view(z, 1:2:5, :)) .= view(y, :, 4:6)
    @test Array(c) == z
    # index-vector views are gathered first (kernels cannot read them in place)
    @test same(view(a, [1, 3, 6], :) .* 2f0, view(x, [1, 3, 6], :) .* 2f0)
    @test_throws ArgumentError CuMem.layout(view(a, [1, 3, 6], :))
    @test_throws DimensionMismatch reshape(view(a, :, 2:3), :) .+ view(a, :, 1)
end

@testset "the typed fast path (compute/broadcast/fastpath.jl)" begin
    using Base.Broadcast: broadcasted, instantiate
    s1, s2 = CuArray(Float32[1, 2, 3]), CuArray(Float32[10, 20, 30])
    r = similar(s1)
    bctype(dest, bc) = Tuple{typeof(dest),typeof(instantiate(Broadcast.Broadcasted{CuMem.CuArrayStyle{1}}(bc.f, bc.args, axes(dest))))}
    # the first call fills the slot, later ones take it, with the same results
    for i in 1:3
        r .= s1 .+ s2
        @test Array(r) == [11, 22, 33]
        z = s1 .* 2f0 .+ s2
        @test z isa CuVector{Float32} && Array(z) == [12, 24, 36]
        unsafe_free!(z)
    end
    @test CuMem.fast_get(bctype(r, broadcasted(+, s1, s2))) !== nothing
    # the launch arguments: context, count, destination, leaves, then the scalars as one struct
    bc = instantiate(broadcasted(+, broadcasted(*, s1, 2f0), broadcasted(-, s2, Float16(1))))
    fa = CuMem.fast_launch_args(r, bc)
    @test fa[1] isa CuMem.DCContext0 && fa[1].err == CuMem.kernel_error_address()
    @test fa[2:5] == (UInt32(3), r.ptr, s1.ptr, s2.ptr)
    @test length(fa) == 6 && fa[6] isa CuMem.BcExpr && fa[6].args[1].args[2] === 2f0 && fa[6].args[2].args[2] === Float16(1)
    entry_allocs(r, bc) = @allocated CuMem.fast_entry(r, bc)
    copyto!(r, bc)
    entry_allocs(r, bc)
    @test entry_allocs(r, bc) == 0                    # a typed look-up: no allocation
    # the fast path's arguments against the generated kernel's parameter list (one
    # argument per parameter, an address exactly where the kernel takes a pointer): the
    # slow path's cache entry holds the source, on the host device too
    for (dest, b) in ((r, bc), (r, instantiate(broadcasted(+, s1, s2))), (similar(s1, Bool), instantiate(broadcasted(>, s1, 1f0))))
        CuMem.take_last_broadcast!()
        CuMem.gpu_broadcast!(dest, b)
        src = CuMem.take_last_broadcast!().source
        i = findfirst("cumem_bcast(", src)
        sig = src[last(i)+1:findnext(')', src, last(i))-1]
        params = strip.(split(sig, ','))
        args = CuMem.fast_launch_args(dest, b)
        @test length(args) == length(params)
        @test [occursin('*', p) for p in params] == [a isa UInt64 && i > 2 for (i, a) in enumerate(args)]
    end
    # a method defined since the slot was filled (the world age moved): the slow path
    # again, which revalidates the kernel
    copyto!(r, bc)
    @test CuMem.fast_entry(r, bc) !== nothing
    @eval Main $(gensym(:fastpath_world))(x) = x
    @test Base.invokelatest(CuMem.fast_entry, r, bc) === nothing
    Base.invokelatest(copyto!, r, bc)
    @test Base.invokelatest(CuMem.fast_entry, r, bc) !== nothing
    # the same array in and out is fine; an overlapping one at another address takes the
    # slow path, which copies it first
    x = CuArray(Float32[1, 2, 3, 4])
    x .= x .+ 1f0
    x .= x .+ 1f0
    @test Array(x) == [3, 4, 5, 6]
    GC.@preserve x begin
        a = unsafe_wrap(CuArray, CuPtr{Float32}(x.ptr), 3; own = false)
        b = unsafe_wrap(CuArray, CuPtr{Float32}(x.ptr + 4), 3; own = false)
        bca = instantiate(Broadcast.Broadcasted{CuMem.CuArrayStyle{1}}(+, (a, 0f0), axes(b)))
        @test !CuMem.fast_ok(bca, b.dims, b.ptr, UInt64(12))          # overlaps at another address
        @test CuMem.fast_ok(bca, a.dims, a.ptr, UInt64(12))           # the same address
        @test CuMem.fast_entry(b, bca) === nothing
    end
    # other sizes (broadcasting a vector over a matrix) and wrappers: the slow path
    m, v = CuArray(ones(Float32, 3, 2)), CuArray(Float32[1, 2, 3])
    for _ in 1:2
        @test Array(m .+ v) == ones(3, 2) .+ [1, 2, 3]
        @test Array(m' .* 2f0) == 2 .* ones(2, 3)
    end
    # element types the slow path decided (Int .+ Float64, Bool results)
    for _ in 1:2
        @test Array(CuArray([1, 2]) .+ 1.5) == [2.5, 3.5]
        @test Array(s1 .> 1f0) == [false, true, true]
    end
    # a freed argument still throws
    y = CuArray(Float32[1, 2, 3])
    unsafe_free!(y)
    @test_throws AssertionError r .= y .+ s2
    # off: the same results
    CuMem.FAST_BROADCAST[] = false
    try
        r .= s1 .- s2
        @test Array(r) == [-9, -18, -27]
    finally
        CuMem.FAST_BROADCAST[] = true
    end
end

@testset "kernel index on disk (compute/runtime/kernel_index.jl)" begin
    using Base.Broadcast: broadcasted, instantiate
    fresh() = (CuMem.FAST_TABLE[] = IdDict{Any,Any}(); empty!(CuMem.INDEX_TRIED))
    withenv("CUMEM_CACHE_DIR" => mktempdir()) do
        a, b = CuArray(Float32[1, 2, 3]), CuArray(Float32[4, 5, 7])
        K = Tuple{CuArray{Float32,1},typeof(instantiate(broadcasted(-, a, b)))}
        k = CuMem.index_key(K)
        # module-qualified whatever Main imports (string(K) drops visible modules)
        @test startswith(k, "Core.Tuple{CuMem.CuArray{Core.Float32,1},Base.Broadcast.Broadcasted{")
        @test CuMem.index_safe(K)
        @test CuMem.index_lookup(k) === nothing
        fresh()
        @test same(a .- b, Float32[-3, -3, -4])          # the general path records its kernel
        r = CuMem.index_lookup(k)
        @test r !== nothing && r[1] == "cumem_bcast" && occursin("cumem_bcast", r[2])
        @test CuMem.index_lookup(CuMem.index_key(K.parameters[2]; prefix = "copy ")) == ("eltype", "Core.Float32")
        fresh()                                           # as a fresh process: no slot, nothing tried
        s = CuMem.kernel_cache_stats()
        @test same(a .- b, Float32[-3, -3, -4])
        c = similar(a)
        @test same(c .= a .- b, Float32[-3, -3, -4])
        @test CuMem.kernel_cache_stats() == s              # no code generated, no look-up
        # closures and functions outside Base/Core are never indexed
        f = v -> v + 1f0
        @test !CuMem.index_safe(Tuple{CuArray{Float32,1},typeof(instantiate(broadcasted(f, a)))})
        @test !CuMem.index_safe(Tuple{CuArray{Float32,1},typeof(instantiate(broadcasted(+, a, Ref(1f0))))})
        @test CuMem.index_safe(Tuple{CuArray{Float32,1},typeof(instantiate(broadcasted(+, a, 1f0)))})
    end
end

# index_keep!: what a kept family's later index_entry calls return from then on (the scans
# keep the kernels a process generated and recorded, so that their later calls skip the
# generator; julia/compute/algorithms/accumulate.jl's scan_generate)
@testset "index_keep! (compute/runtime/kernel_index.jl)" begin
    k1, k2 = (:index_keep_test, Float32, 1), (:index_keep_test, Float64, 1)
    ikey(key, arg) = nothing                           # (never in the index on disk)
    build(key, arg, text, kernels) = error("build is not called for a key without a record")
    dev = CuMem.task_device()
    try
        @test CuMem.index_entry(ikey, build, nothing, k1, nothing, true) === nothing      # tried: nothing recorded
        v = Ref(1)
        @test CuMem.index_keep!(k1, v) === nothing
        @test CuMem.index_entry(ikey, build, nothing, k1, nothing, true) === v            # the kept value, every call
        @test CuMem.index_entry(ikey, build, nothing, k1, nothing, true) === v
        @test CuMem.index_entry(ikey, build, nothing, k2, nothing, true) === nothing      # another key: untouched
    finally
        delete!(CuMem.INDEX_TRIED, (dev, k1)); delete!(CuMem.INDEX_TRIED, (dev, k2))
    end
end

# The general paths' look-ups by type (CuMem.type_memo): kept per type and world age.
@testset "compiled functions kept by type (type_memo)" begin
    x = CuArray(Float32[1, 2])
    A, col = CuArray(Float32[1 2; 3 4]), CuArray(Float32[10, 20])
    # the same function object for the same types; identity, not content, decides
    d1 = CuMem.device_function(+, (Float32, Float32))
    @test d1 === CuMem.device_function(+, (Float32, Float32))
    @test d1 !== CuMem.device_function(+, (Float64, Float64))
    # a Ref{Any}'s value decides the element type: never kept by the broadcast's type
    r = Ref{Any}(2f0)
    @test same(A .* r, Float32[2 4; 6 8])
    r[] = 2.0
    @test same(A .* r, [2.0 4.0; 6.0 8.0])
    # a redefined function compiles again, on the general path (arrays of other shapes) too
    @eval memo_g(v, c) = v + c
    @test same(Base.invokelatest(() -> A .+ memo_g.(A, col)), Float32[12 14; 26 28])
    @eval memo_g(v, c) = v - c
    @test same(Base.invokelatest(() -> A .+ memo_g.(A, col)), Float32[-8 -6; -14 -12])
    @eval memo_h(v) = v * 2f0
    @test same(Base.invokelatest(() -> sum(memo_h, A; dims = 1)), Float32[8 12])
    @eval memo_h(v) = v * 3f0
    @test same(Base.invokelatest(() -> sum(memo_h, A; dims = 1)), Float32[12 18])
    @test same(Base.invokelatest(() -> map(memo_h, x)), Float32[3, 6])
    # repeated allocating broadcasts of other shapes: the same results each time
    for _ in 1:3
        @test same(exp.(A .- col), exp.(Float32[1 2; 3 4] .- Float32[10, 20]))
    end
end

# A new element function's first call (compute/broadcast/fastpath.jl): the general path is
# compiled once for all types (its arguments pass inference barriers), fills the type's slot
# and leaves the run to the fast path; the results, the slots and an exception at once from
# a function that always throws are as before.
@testset "a new function's first call: the general path compiled once" begin
    # compiled specialisations of a method (Julia 1.5's table, or Base.specializations)
    function nspecs(m::Method)
        isdefined(Base, :specializations) && return count(_ -> true, Base.specializations(m))
        s = m.specializations
        s === nothing && return 0
        s isa Core.SimpleVector && return count(i -> isassigned(s, i) && s[i] isa Core.MethodInstance, 1:length(s))
        n = Ref(0)
        Base.visit(_ -> (n[] += 1), s)
        return n[]
    end
    general = (CuMem.general_broadcast!, CuMem.copy_general, CuMem.general_into!, CuMem.gpu_broadcast!,
               CuMem.remember_fast!, CuMem.index_fast!, CuMem.bc_function)
    x, y = CuArray(Float32[1, 2, 3]), CuArray(Float32[4, 5, 6])
    z = similar(x)
    warm = @eval v -> v * 2f0 + 1f0
    Base.invokelatest(() -> (warm.(x); z .= warm.(x) .+ y; map(warm, x)))
    before = [nspecs(m) for f in general for m in methods(f)]
    for k in 1:3
        g = @eval v -> v * $(Float32(k)) - 1f0
        @test same(Base.invokelatest(() -> g.(x)), Float32[1, 2, 3] .* k .- 1)
        @test same(Base.invokelatest(() -> z .= g.(x) .+ y), Float32[1, 2, 3] .* k .- 1 .+ Float32[4, 5, 6])
        @test same(Base.invokelatest(() -> map(g, y)), Float32[4, 5, 6] .* k .- 1)
        bc = Base.Broadcast.instantiate(Base.Broadcast.broadcasted(g, x))
        @test CuMem.fast_get(Tuple{CuArray{Float32,1},typeof(bc)}) !== nothing      # the slot, filled by the first call
        @test CuMem.fast_get(Tuple{Val{:copy},typeof(bc)}).eltype === Float32
    end
    @test [nspecs(m) for f in general for m in methods(f)] == before
    # a function that always throws: Base's exception from its first broadcast, at once
    thrower = @eval v -> throw(DomainError(v, "no"))
    @test_throws DomainError Base.invokelatest(() -> thrower.(x))
end

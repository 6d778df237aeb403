# Fused broadcasting: each broadcast expression over CuArrays (and strided views/wrappers
# of them) becomes ONE generated CUDA C kernel, cached by the expression's types (the
# design of CUDA.jl's GPUArrays broadcast, with CuPy's ElementwiseKernel's code generation).
# `map`, `map!`, `broadcast!` and `.=` use the same path. The expression's element function
# is compiled from Julia's typed IR (compute/broadcast/bcfunction.jl, compute/compiler/). On the host
# device Base computes on the buffers wrapped as Arrays, after the same compilation.

using Base.Broadcast: Broadcasted, AbstractArrayStyle, DefaultArrayStyle

## array types the kernels read and write: AnyCuArray (array/wrappers.jl)


"""
    CuMem.CuArrayStyle{N}

The `BroadcastStyle` of CuArrays and their wrappers: broadcasting over them compiles one
kernel per expression and returns a `CuArray`. It wins over Base's `DefaultArrayStyle`, so
a host `Array` mixed in is rejected with an error (upload it first), as in CUDA.jl.
"""
struct CuArrayStyle{N} <: AbstractArrayStyle{N} end
CuArrayStyle(::Val{N}) where {N} = CuArrayStyle{N}()
CuArrayStyle{M}(::Val{N}) where {N,M} = CuArrayStyle{N}()

Base.BroadcastStyle(::Type{<:CuArray{T,N}}) where {T,N} = CuArrayStyle{N}()
Base.BroadcastStyle(::Type{W}) where {W<:CuWrap1} = CuArrayStyle{ndims(W)}()
Base.BroadcastStyle(::Type{W}) where {W<:CuWrap2} = CuArrayStyle{ndims(W)}()
# `Ref(A)`: one value (0 dimensions), but a broadcast of CuArrays (GPUArrays.jl's rule), so
# that `getindex.(Ref(A), 1)` runs as a kernel rather than as Base's scalar code
Base.BroadcastStyle(::Type{<:Base.RefValue{<:CuArray}}) = CuArrayStyle{0}()

## array leaves

# `byvalue`: an array passed by value (a range, CartesianIndices: compute/broadcast/bcfunction.jl's
# BcIndexed), no memory (`base` nothing); the kernel passes the 1-based linear index into
# it, an `Int`, computed from `strides` as an array leaf's offset is.
struct Leaf
    base::Union{CuArray,Nothing}
    offset::Int
    strides::Vector{Int}
    linear::Bool
    eltype::Type
    byvalue::Bool
end

# Whether T is one of the primitive element types (compute/runtime/eltypes.jl) that the fixed
# kernels (random numbers, radix keys) and the linear-algebra kernels handle. Broadcasts,
# reductions, scans, findmax and sorts take any isbits type (compute/compiler/). `===` against each listed type: `T in
# KERNEL_ELTYPES` compares with `==`, which calls the runtime's type equality.
function is_kernel_eltype(@nospecialize(T))
    for E in KERNEL_ELTYPES
        E === T && return true
    end
    return false
end
check_kernel_eltype(@nospecialize(T)) = is_kernel_eltype(T) ||
    throw(ArgumentError("GPU kernels support the element types $(join(KERNEL_ELTYPES, ", ")); not $T"))

## the kernel

# The CUDA C source of a broadcast kernel: `df` the compiled element function of the
# expression, `cdf` the conversion to the destination's element type (or nothing).
# `leafinfo`: (eltype, linear, byvalue) per leaf. Parameters: the context, the count, the
# destination (and its strides), each leaf (and its strides), the sizes for Cartesian
# indexing, then the expression's scalars (one struct) unless it has none.
function bcast_source(df::DeviceFunction, cdf, @nospecialize(D::Type), dest_linear::Bool, leafinfo, N::Int, idx64::Bool,
                      unroll::Bool = BCAST_UNROLL[])
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    leafinfo = [length(l) >= 3 ? l : (l[1], l[2], false) for l in leafinfo]    # (eltype, linear): in memory
    cart = !dest_linear || any(l -> !l[2], leafinfo)
    F = df.argtypes[1]
    io = IOBuffer()
    print(io, "CUMEM_KERNEL void cumem_bcast(jl_ctx_t ctx, $IDX n, $(c_type(D))* dst")
    dest_linear || for d in 1:N; print(io, ", $OFF dst_s$d"); end
    for (k, (T, lin, byv)) in enumerate(leafinfo)
        byv || print(io, ", const $(dc_is_ghost(T) ? "jl_ghost_t" : c_type(T))* a$k")
        lin || for d in 1:N; print(io, ", $OFF a$(k)_s$d"); end
    end
    cart && for d in 1:N-1; print(io, ", $IDX n$d"); end
    dc_is_ghost(F) || print(io, ", $(c_type(F)) f")
    print(io, ")\n{\n  CUMEM_PDL_ENTRY();\n")
    dc_is_ghost(F) && print(io, "  jl_ghost_t f{};\n")
    start = "($IDX)blockIdx.x * blockDim.x + threadIdx.x"
    conv(c) = cdf === nothing ? c : string(cdf.name, "(&ctx, jl_ghost_t{}, jl_ghost_t{}, ", c, ")")
    V = cart || unroll ? 1 : bcast_vec_width(D, df.rettype, leafinfo)
    if !cart && unroll
        start = "i0"
        print_unrolled(io, IDX, [dc_is_ghost(T) ? "jl_ghost_t" : c_type(T) for (T, _) in leafinfo],
                       [l[3] for l in leafinfo],
                       dc_is_ghost(D) || df.rettype === Union{} ? nothing : c_type(D),
                       xs -> conv(string(df.name, "(&ctx, f", join([", " * x for x in xs]), ")")))
    elseif V > 1
        start = "i0 + " * start
        print_vectorized(io, IDX, V, [(c_type(T), byv) for (T, _, byv) in leafinfo], c_type(D),
                         xs -> conv(string(df.name, "(&ctx, f", join([", " * x for x in xs]), ")")))
    end
    print(io, "  for ($IDX i = $start; i < n; i += ($IDX)blockDim.x * gridDim.x) {\n")
    if cart
        print(io, "    $IDX r = i;\n")
        for d in 1:N-1
            print(io, "    const $OFF c$d = ($OFF)(r % n$d); r /= n$d;\n")
        end
        N >= 1 && print(io, "    const $OFF c$N = ($OFF)r;\n")
    end
    offset(prefix, lin) = lin ? "i" : (N == 0 ? "0" : join(["c$d * $(prefix)_s$d" for d in 1:N], " + "))
    elem(k, lin, byv) = byv ? "(int64_t)($(offset("a$k", lin))) + 1" : "a$k[$(offset("a$k", lin))]"
    call = conv(string(df.name, "(&ctx, f", join([", " * elem(k, lin, byv) for (k, (T, lin, byv)) in enumerate(leafinfo)]), ")"))
    print(io, "    ctx.elem = jl_elem(i);\n")
    if dc_is_ghost(D) || df.rettype === Union{}
        print(io, "    (void)", call, ";\n")
    else
        print(io, "    const $(c_type(D)) v = ", call, ";\n")
    end
    print(io, "    if (ctx.thrown) return;\n")
    dc_is_ghost(D) || df.rettype === Union{} || print(io, "    dst[$(offset("dst", dest_linear))] = v;\n")
    print(io, "  }\n}\n")
    body = String(take!(io))
    return cdf === nothing ? kernel_source(df; body = body) : kernel_source(df, cdf; body = body)
end

"""
    CuMem.BCAST_UNROLL :: Ref{Bool}

Whether broadcast kernels over contiguous arrays run their grid-stride loop four steps at a
time, loading every leaf's four elements before storing (`print_unrolled`); default
`false`: the vector loop (`print_vectorized`: one 16-byte chunk of every array per step
where the addresses allow, one element per step otherwise). On the H100
(2026-11-27, 2^28 Float32, the smallops suite of bench/gpu/run.sh) the build with the unrolled loop
gave 0.82 of the copy's bandwidth for `z .= x .* 2f0 .+ y ./ 3f0` where the plain loop gave
0.92, and axpy 0.90 where it gave 0.92: NVVM puts each step's loads next to its
arithmetic, and a Float32 division (IEEE, with a slow path ptxas branches to) then ends the
block that the next step's loads could be hoisted into, while the unrolled body's registers
lower the number of resident threads. Set it before the first broadcast of a type (the
typed slots keep their kernels); its kernels are not written to the kernel index.
"""
const BCAST_UNROLL = Ref(false)

# The grid-stride loop of a kernel whose arrays are all contiguous, four steps at a time:
# every leaf's four elements are loaded before any result is stored, so a
# thread keeps 4 × leaves loads in flight (one step at a time, the stores between them
# serialise the loads: the C compiler cannot know that dst does not alias a leaf).
# Elementwise, so the order does not matter; an array that overlaps dst elsewhere was
# copied before (`unalias_args`). A throw in any of the four steps stores none of them.
# Leaves the index of the first step not done in `i0`, for the plain loop that finishes.
# `TCs`: the leaves' C types (leaf k is `ak`); `byv`: whether each is passed by value (its
# "load" is the 1-based index, an int64_t); `DC`: the result's C type (nothing: a ghost,
# not stored); `call(loads)`: the C expression of the element's result from the loads.
function print_unrolled(io, IDX, TCs, byv, DC, call)
    print(io, "  const $IDX stride = ($IDX)blockDim.x * gridDim.x;\n")
    print(io, "  $IDX i0 = ($IDX)blockIdx.x * blockDim.x + threadIdx.x;\n")
    print(io, "  for (; i0 + 3 * stride < n; i0 += 4 * stride) {\n")
    ix(u) = u == 0 ? "i0" : "i0 + $u * stride"
    for u in 0:3, (k, CT) in enumerate(TCs)
        if byv[k]
            print(io, "    const int64_t l$(k)_$u = (int64_t)($(ix(u))) + 1;\n")
        else
            print(io, "    const $CT l$(k)_$u = a$k[$(ix(u))];\n")
        end
    end
    for u in 0:3
        # (the element's number first: a throw of a lower one wins, see jl_err_claim)
        c = string("(ctx.elem = jl_elem($(ix(u))), ", call(["l$(k)_$u" for k in eachindex(TCs)]), ")")
        if DC === nothing
            print(io, "    (void)", c, ";\n")
        else
            print(io, "    const $DC v$u = ", c, ";\n")
        end
    end
    print(io, "    if (ctx.thrown) return;\n")
    if DC !== nothing
        for u in 0:3
            print(io, "    dst[$(ix(u))] = v$u;\n")
        end
    end
    print(io, "  }\n")
end

# The number of elements a contiguous broadcast kernel moves as one chunk per array
# (`print_vectorized`): 16 bytes of the widest array's elements, or 1 (no vector loop) when
# the kernel stores nothing, an array's elements are ghosts, or an element size is not a
# power of two up to 8 bytes (16-byte elements are one load already).
function bcast_vec_width(@nospecialize(D::Type), @nospecialize(R), leafinfo)
    (dc_is_ghost(D) || R === Union{}) && return 1
    w = sizeof(D)
    for (T, _, byv) in leafinfo
        byv && continue
        dc_is_ghost(T) && return 1
        w = vec_widest(w, sizeof(T))
    end
    return vec_width(w)
end
# (the widest of two element sizes, 0 when either is not 1, 2, 4 or 8 bytes; V from it)
@inline vec_widest(w, s) = (w in (1, 2, 4, 8) && s in (1, 2, 4, 8)) ? max(w, s) : 0
@inline vec_width(w) = w in (1, 2, 4, 8) ? 16 ÷ w : 1

# The vector loop of a kernel whose arrays are all contiguous (as PyTorch's and CUB's
# elementwise kernels do): where every array's address is a multiple of its chunk's size
# (V elements, `jl_vec` in julia/cuda/prelude.cuh), each step of the grid-stride loop loads
# one chunk of every array with one vector instruction (16 bytes of the widest type), computes
# the V elements, and stores the destination's chunk with one instruction. A thread then keeps
# 16 bytes per array in flight, where the plain loop's scalar loads (4 bytes of a Float32)
# left a copy's bandwidth unreached (0.86 of it on the H200), and the loads precede all of
# the step's arithmetic (the unrolled loop's did not, `BCAST_UNROLL`). A throw in any of the
# V elements stores none of them (the record keeps the lowest element's throw). Leaves in
# `i0` the first element not done (V × the chunks, or 0 when an address is not aligned) for
# the plain loop, which finishes the n mod V elements left. `leaves`: (C type, passed by
# value) per leaf (leaf k is `ak`; a by-value leaf's "load" is its 1-based index); `DC`: the
# destination's C type; `call(loads)`: the C expression of the element's result.
function print_vectorized(io, IDX, V::Int, leaves, DC, call)
    vt(CT) = "jl_vec<$CT, $V>"
    print(io, "  $IDX i0 = 0;\n")
    conds = ["jl_aligned(dst, sizeof($(vt(DC))))"]
    for (k, (CT, byv)) in enumerate(leaves)
        byv || push!(conds, "jl_aligned(a$k, sizeof($(vt(CT))))")
    end
    print(io, "  if (", join(conds, " && "), ") {\n")
    print(io, "    const $IDX nv = n / $V;\n")
    print(io, "    for ($IDX j = ($IDX)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += ($IDX)blockDim.x * gridDim.x) {\n")
    for (k, (CT, byv)) in enumerate(leaves)
        byv || print(io, "      const $(vt(CT)) l$k = ((const $(vt(CT))*)a$k)[j];\n")
    end
    print(io, "      $(vt(DC)) v;\n")
    for u in 0:V-1
        ix = "j * $V + $u"
        xs = [byv ? "(int64_t)($ix) + 1" : "l$k.v[$u]" for (k, (CT, byv)) in enumerate(leaves)]
        # (the element's number first: a throw of a lower one wins, see jl_err_claim)
        print(io, "      ctx.elem = jl_elem($ix);\n")
        print(io, "      v.v[$u] = ", call(xs), ";\n")
    end
    print(io, "      if (ctx.thrown) return;\n")
    print(io, "      (($(vt(DC))*)dst)[j] = v;\n")
    print(io, "    }\n")
    print(io, "    i0 = nv * $V;\n")
    print(io, "  }\n")
end

sm_count() = max(1, device_info().sm_count)

# Blocks and threads for a grid-stride loop over n elements, V at a time (the vector loop's
# chunk, `bcast_vec_width`): one thread per chunk, at most 32 blocks per SM.
launch_shape(n, V = 1) = (max(1, min(cld(n, 256 * V), 32 * sm_count())), 256)

leaf_of(@nospecialize(a), dsz) = is_byvalue_array(a) ? leaf_of_value(a, dsz) : leaf_of_layout(a, dsz)
leaf_of_layout(@nospecialize(a), dsz) = (l = layout(a); (st, lin) = leaf_strides(l[3], l[4], dsz);
                   Leaf(l[1], l[2], st, lin, eltype(a), false))
# An array passed by value: the strides of a contiguous array of its size.
function leaf_of_value(@nospecialize(a), dsz)
    sz = collect(Int, size(a))
    st = similar(sz)
    s = 1
    for d in eachindex(sz)
        st[d] = s
        s *= sz[d]
    end
    (st2, lin) = leaf_strides(sz, st, dsz)
    return Leaf(nothing, 0, st2, lin, Int, true)
end
# The common leaf, a whole CuArray of the output's shape, without building its layout: the
# same strides and linearity as `leaf_of_layout` gives it, in one allocation.
function leaf_of(a::CuArray, dsz::Dims{N}) where {N}
    size(a) == dsz || return leaf_of_layout(a, dsz)
    st = Vector{Int}(undef, N)
    s = 1
    for d in 1:N
        st[d] = dsz[d] == 1 ? 0 : s
        s *= dsz[d]
    end
    return Leaf(a, 0, st, true, eltype(a), false)
end

# Whether two leaves touch the same buffer at different layouts (then an elementwise
# kernel could read what it already overwrote).
conflicts(a::Leaf, d::Leaf) = !a.byvalue && same_memory(a.base, d.base) && !(a.offset == d.offset && a.strides == d.strides)

# Copies aliased wrapper leaves into fresh arrays (rebuilding the Broadcasted).
unalias_args(bc::Broadcasted, dest, dleaf) =
    Broadcasted{Nothing}(bc.f, map(a -> unalias_args(a, dest, dleaf), bc.args), bc.axes)
function unalias_args(a::Union{AnyCuArray,CuReshaped}, dest, dleaf)
    l = leaf_of(a, size(dest))
    conflicts(l, dleaf) || return a
    c = CuArray{eltype(a)}(undef, size(a))
    copyto!(c, Broadcasted{Nothing}(identity, (a,), axes(a)))
    return c
end
unalias_args(a, dest, dleaf) = a

## host-device versions of the arguments (Arrays wrapping the same memory)

# The adaptor (array/adapt.jl) whose leaves are host views of device memory, no copy:
# wrappers are rebuilt around them by adapt's methods, broadcasts around their arguments.
struct HostViews end
adapt_storage(::HostViews, a::CuArray) = host_view(a)
adapt_structure(to::HostViews, bc::Broadcasted) = Broadcast.broadcasted(bc.f, map(x -> adapt(to, x), bc.args)...)
host_arg(x) = adapt(HostViews(), x)

# `Ref(A)` on the host device: a view of A's memory that names A in a BoundsError (as the
# GPU's error does, not the host Array behind it) and notes writes. Element functions that
# write through a Ref'd CuArray (`inc.(bins, Ref(hist))` with `h[b] += 1`) are not
# synchronised on a GPU: threads that update one element at once lose updates. The host
# device runs them in order, so it says so once (REF_WRITE_WARNED) instead of hiding it.
struct RefHostView{T,N,A<:AbstractArray{T,N},C} <: AbstractArray{T,N}
    a::A
    cu::C
end
Base.size(w::RefHostView) = size(w.a)
Base.IndexStyle(::Type{<:RefHostView}) = IndexLinear()
Base.@propagate_inbounds function Base.getindex(w::RefHostView, i::Int)
    @boundscheck checkbounds(Bool, w.a, i) || throw(BoundsError(w.cu, i))
    return @inbounds w.a[i]
end
Base.@propagate_inbounds function Base.setindex!(w::RefHostView, v, i::Int)
    @boundscheck checkbounds(Bool, w.a, i) || throw(BoundsError(w.cu, i))
    REF_WRITE_SEEN[] = true
    return @inbounds w.a[i] = v
end
Base.throw_boundserror(w::RefHostView, I) = throw(BoundsError(w.cu, I))
const REF_WRITE_SEEN = Ref(false)
const REF_WRITE_WARNED = Ref(false)
adapt_structure(::HostViews, r::Base.RefValue{<:CuArray}) = (a = r[]; Ref(RefHostView(host_view(a), a)))
function warn_ref_writes()
    REF_WRITE_SEEN[] || return nothing
    REF_WRITE_SEEN[] = false
    REF_WRITE_WARNED[] && return nothing
    REF_WRITE_WARNED[] = true
    @warn "A broadcast's element function wrote into a CuArray passed through Ref(...). On a GPU " *
          "such writes are not synchronised: elements written by several threads at once lose " *
          "updates (e.g. h[b] += 1). The host device ran them in order. Use a reduction, or the " *
          "kernel language's atomics (docs/julia.md). This warning is shown once."
    return nothing
end

## running a broadcast into a destination

# The kernel cache entry of each thread's last broadcast through gpu_broadcast! (for the
# typed fast path, compute/broadcast/fastpath.jl, which clears it before and reads it right after
# the call: no task switch in between). One slot per thread, made at `__init__`.
const LAST_BROADCAST = Any[]
init_broadcast() = (resize!(LAST_BROADCAST, Threads.nthreads()); fill!(LAST_BROADCAST, nothing); nothing)
@inline set_last_broadcast!(@nospecialize(e)) =
    (t = Threads.threadid(); t <= length(LAST_BROADCAST) && (@inbounds LAST_BROADCAST[t] = e); nothing)
@inline take_last_broadcast!() =
    (t = Threads.threadid(); t <= length(LAST_BROADCAST) || return nothing;
     e = @inbounds LAST_BROADCAST[t]; @inbounds LAST_BROADCAST[t] = nothing; e)

# Tuples among the arguments are collections in Base's broadcasting: uploaded as vectors.
bc_tuples(bc::Broadcasted) = any(a -> a isa Tuple || (a isa Broadcasted && bc_tuples(a)), bc.args)
bc_upload(bc::Broadcasted) = Broadcasted{Nothing}(bc.f, map(bc_upload, bc.args), bc.axes)
bc_upload(t::Tuple) = isbitstype(eltype(t)) ? CuArray(collect(t)) :
    all(x -> x isa CuArray, t) ? CuArray([CuDeviceArray(x) for x in t]) : bc_reject(t)   # (devarray.jl)
bc_upload(x) = x

# Compiled element functions whose objects were replaced in the cache: kept, so that
# their object ids (part of the kernel cache's keys) are never reused.
const BC_OLD_FUNCTIONS = Set{Any}()
const BC_OLD_FUNCTIONS_LOCK = ReentrantLock()


# The CuArrays a broadcast reaches through `Ref(A)` or a tuple `(A, B)` (element functions
# index them as CuDeviceArrays): the device rule covers them as it covers the leaves.
ref_arrays!(acc, bc::Broadcast.Broadcasted) = (foreach(a -> ref_arrays!(acc, a), bc.args); acc)
ref_arrays!(acc, r::Base.RefValue{<:CuArray}) = push!(acc, r[])
ref_arrays!(acc, t::Tuple) = (foreach(a -> a isa CuArray && push!(acc, a), t); acc)
ref_arrays!(acc, @nospecialize(x)) = acc

# `dest` is a CuArray, a wrapper of one (AnyCuArray) or a reshape of one (CuReshaped); it is
# declared `AbstractArray` so that a stack trace through here prints a short frame
# (`gpu_broadcast!(::AbstractArray, ::Broadcasted)`) rather than the Union of every wrapper.
# `run = false`: every check and the kernel (its cache entry for `take_last_broadcast!`),
# but nothing computed (fastpath.jl's general path then runs it on the fast path).
function gpu_broadcast!(@nospecialize(dest::AbstractArray), @nospecialize(bc::Broadcasted), run::Bool = true)
    bc_tuples(bc) && return gpu_broadcast!(dest, bc_upload(bc), run)
    D = eltype(dest)
    dsz = size(dest)
    N = length(dsz)
    leaves = bc_leaves!(Any[], bc)
    # (a wrapper over a freed array throws in leaf_of: its layout reads the address)
    for a in leaves
        a isa CuArray && check_alive(a)
    end
    dleaf = leaf_of(dest, dsz)
    check_alive(dleaf.base)
    # The operands first: `a1 .+ b1` on device 1 while the task is on device 0 is "arrays
    # of device 1", not a mix with the destination made on device 0.
    if MULTI[]
        arrs = filter(a -> !is_byvalue_array(a), leaves)
        ref_arrays!(arrs, bc)           # Ref(A) and tuples of CuArrays, indexed in the kernel
        check_devices("broadcast", arrs...); check_devices("broadcast", dleaf.base, arrs...)
    end
    lvs = Leaf[leaf_of(a, dsz) for a in leaves]
    if !on_host() && any(l -> conflicts(l, dleaf), lvs)
        return gpu_broadcast!(dest, unalias_args(bc, dest, dleaf), run)
    end
    df = bc_function(bc)
    R = df.rettype
    # (a function that always throws stores nothing: no conversion)
    cdf = R === D || R === Union{} ? nothing : device_function(convert, (Type{D}, R))
    n = prod(dsz)
    maxlen = max(n, length(dleaf.base))
    for l in lvs
        l.byvalue || (maxlen = max(maxlen, length(l.base)))
    end
    idx64 = maxlen >= typemax(Int32)
    # the leaves' linearity as bits (a tuple only beyond 64 leaves): cheaper to build and hash
    linkey = if length(lvs) <= 64
        m = UInt64(0)
        for i in eachindex(lvs)
            lvs[i].linear && (m |= UInt64(1) << (i - 1))
        end
        m
    else
        Tuple(l.linear for l in lvs)
    end
    unroll = BCAST_UNROLL[]
    key = (:bcast, objectid(df), cdf === nothing ? UInt(0) : objectid(cdf), typeof(dest), dleaf.linear, linkey, idx64, unroll)
    entry = cached_kernel(key) do
        lock(BC_OLD_FUNCTIONS_LOCK) do
            push!(BC_OLD_FUNCTIONS, df)
            cdf === nothing || push!(BC_OLD_FUNCTIONS, cdf)
        end
        src = bcast_source(df, cdf, D, dleaf.linear, [(l.eltype, l.linear, l.byvalue) for l in lvs], N, idx64, unroll)
        (src, "cumem_bcast", cdf === nothing ? (df,) : (df, cdf), Tuple{GlobalRef,DataType}[])
    end
    set_last_broadcast!(entry)
    (n == 0 || !run) && return dest
    if on_host()
        GC.@preserve leaves dest bc begin
            hd, hb = host_arg(dest), host_arg(bc)
            host_run(() -> (Broadcast.materialize!(hd, hb); nothing))
        end
        warn_ref_writes()
        return dest
    end
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    args = Any[launch_context(entry.extra...), IT(n), devaddr(dleaf.base) + UInt64(dleaf.offset * sizeof(D))]
    dleaf.linear || append!(args, map(OT, dleaf.strides))
    for l in lvs
        l.byvalue || push!(args, devaddr(l.base) + UInt64(l.offset * sizeof(l.eltype)))
        l.linear || append!(args, map(OT, l.strides))
    end
    cart = !dleaf.linear || any(l -> !l.linear, lvs)
    if cart
        for d in 1:N-1
            push!(args, IT(dsz[d]))
        end
    end
    dc_is_ghost(df.argtypes[1]) || push!(args, bc_object(bc))
    blocks, threads = launch_shape(n, cart ? 1 : bcast_vec_width(D, R, [(l.eltype, l.linear, l.byvalue) for l in lvs]))
    GC.@preserve leaves dest launch(entry.kernel, args...; blocks = blocks, threads = threads)
    # a function that always throws: its exception now, as Base throws it from the broadcast
    R === Union{} && synchronize()
    return dest
end

# Broadcast entry points.
Base.similar(bc::Broadcasted{CuArrayStyle{N}}, ::Type{T}) where {N,T} = CuArray{T}(undef, size(bc))

# `copy(bc)` and `copyto!(dest::AnyCuArray, bc)`: compute/broadcast/fastpath.jl, which runs a
# broadcast of a type seen before without gpu_broadcast!'s checks and look-ups.

host_dest_error(dest) = throw(ArgumentError("cannot broadcast CuArrays into a $(typeof(dest)): its data is on " *
                                            "the host. Compute into a CuArray and download it (`copyto!(dest, result)` or `Array(result)`)."))
Base.copyto!(dest::AbstractArray, bc::Broadcasted{<:CuArrayStyle}) = host_dest_error(dest)
Base.copyto!(dest::AbstractArray, bc::Broadcasted{CuArrayStyle{0}}) = host_dest_error(dest)

# `.=` into a view/wrapper of a CuArray whose style is not CuArrayStyle (e.g. from a
# scalar right-hand side) still lands in gpu_broadcast! through the methods above.

## map and map!

function check_same_axes(dest, srcs)
    for s in srcs
        axes(s) == axes(dest) || throw(DimensionMismatch("map on GPU arrays needs equal shapes: $(size(dest)) and $(size(s))"))
    end
end

Base.map(f, a::AnyCuArray, rest::AnyCuArray...) = cu_map(f, a, rest...)
Base.map!(f, dest::AnyCuArray, a::AnyCuArray, rest::AnyCuArray...) = cu_map!(f, dest, a, rest...)
# (named, for bcextras.jl's methods of equal shapes: `invoke` with the Union of every
# wrapper in its signature cost 16 µs a call)
cu_map(f, a, rest...) =
    (check_same_axes(a, rest); copy(Broadcast.instantiate(Broadcasted{CuArrayStyle{ndims(a)}}(f, (a, rest...)))))
cu_map!(f, dest, a, rest...) =
    (check_same_axes(dest, (a, rest...)); gpu_broadcast!(dest, Broadcast.instantiate(Broadcasted{Nothing}(f, (a, rest...), axes(dest)))))

## fill! with a value whose bytes differ (zeros and -1 are a memset: array.jl)

function fill_kernel!(a::CuArray{T}, v) where {T}
    x = convert(T, v)
    isbitstype(T) || return nothing      # not a kernel type: array.jl's upload-and-copy fallback
    # a struct value is one scalar, not a collection to broadcast over: Ref (as Base needs)
    arg = x isa Number ? x : Ref(x)
    gpu_broadcast!(a, Broadcast.instantiate(Broadcasted{Nothing}(identity, (arg,), axes(a))))
    return a
end

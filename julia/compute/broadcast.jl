# Fused broadcasting: each broadcast expression over CuArrays (and strided views/wrappers
# of them) becomes ONE generated CUDA C kernel, cached by the expression's types (the
# design of CUDA.jl's GPUArrays broadcast, with CuPy's ElementwiseKernel's code generation).
# `map`, `map!`, `broadcast!` and `.=` use the same path. On the host device Base computes
# on the buffers wrapped as Arrays, after the same code generation.

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

## strided layouts

# (base CuArray, element offset of the first element, sizes, strides in elements)
function layout(@nospecialize(a::CuArray))
    sz = size(a)
    n = length(sz)
    szv, st = Vector{Int}(undef, n), Vector{Int}(undef, n)
    s = 1
    for d in 1:n
        szv[d] = sz[d]
        st[d] = s
        s *= sz[d]
    end
    return (a, 0, szv, st)
end

function layout(@nospecialize(v::SubArray))
    b, off, psz, pst = layout(parent(v))
    idx = v.indices
    k = length(idx)
    if k < length(psz)           # trailing dimensions indexed linearly: merge them
        for d in k:length(psz)-1
            psz[d+1] == 1 || pst[d+1] == pst[d] * psz[d] ||
                throw(ArgumentError("cannot use a linearly indexed view of a non-contiguous array in a GPU kernel"))
        end
        psz = vcat(psz[1:k-1], prod(psz[k:end]))
        pst = pst[1:k]
    end
    while length(psz) < k
        push!(psz, 1)
        push!(pst, 0)
    end
    sz, st = Int[], Int[]
    for d in 1:k
        i = idx[d]
        if i isa Integer
            off += (i - 1) * pst[d]
        elseif i isa AbstractRange{<:Integer}
            isempty(i) || (off += (first(i) - 1) * pst[d])
            push!(sz, length(i))
            push!(st, step(i) * pst[d])
        else
            throw(ArgumentError("GPU kernels read views indexed by integers, ranges and colons; not by a $(typeof(i)) (copy it first)"))
        end
    end
    return (b, off, sz, st)
end

function layout(@nospecialize(a::Union{Adjoint,Transpose}))
    b, off, psz, pst = layout(parent(a))
    length(psz) == 1 && return (b, off, [1, psz[1]], [0, pst[1]])
    return (b, off, [psz[2], psz[1]], [pst[2], pst[1]])
end

function layout(a::PermutedDimsArray{T,N,perm}) where {T,N,perm}
    b, off, psz, pst = layout(parent(a))
    return (b, off, psz[collect(perm)], pst[collect(perm)])
end

# Strides of a leaf relative to the output's N dimensions (0 where extruded) and whether
# the leaf can be indexed by the output's linear index.
function leaf_strides(sz::Vector{Int}, st::Vector{Int}, dsz::Dims{N}) where {N}
    out = Base.zeros(Int, N)
    for d in 1:length(sz)
        if d <= N
            if sz[d] == dsz[d]
                out[d] = dsz[d] == 1 ? 0 : st[d]
            elseif sz[d] != 1
                throw(DimensionMismatch("array of size $(Tuple(sz)) cannot broadcast to $dsz"))
            end
        elseif sz[d] != 1
            throw(DimensionMismatch("array of size $(Tuple(sz)) cannot broadcast to $dsz"))
        end
    end
    linear = true
    s = 1
    for d in 1:N
        dsz[d] == 1 && continue
        (out[d] == s) || (linear = false)
        s *= dsz[d]
    end
    return out, linear
end

## flattening a Broadcasted into leaves (arrays), parameters (scalars) and baked constants

struct Leaf
    base::CuArray
    offset::Int
    strides::Vector{Int}
    linear::Bool
    eltype::Type
end

# (specialized on the argument tuple: this runs at every call, the loop over a tuple of
# mixed types would dispatch dynamically)
function flatten!(leaves, params, baked, ctx, bc::Broadcasted)
    lift_captures!(ctx, params, baked, bc.f)
    flatten_args!(leaves, params, baked, ctx, bc.args)
end
flatten_args!(leaves, params, baked, ctx, ::Tuple{}) = nothing
@inline flatten_args!(leaves, params, baked, ctx, args::Tuple) =
    (flatten!(leaves, params, baked, ctx, args[1]); flatten_args!(leaves, params, baked, ctx, Base.tail(args)))
flatten!(leaves, params, baked, ctx, @nospecialize(a::AnyCuArray)) = push!(leaves, a)
flatten!(leaves, params, baked, ctx, @nospecialize(x::KernelReal)) = push!(params, x)
function flatten!(leaves, params, baked, ctx, @nospecialize(x::Base.RefValue))
    v = x[]
    if v isa KernelReal
        push!(params, v)
    elseif v isa Function && !Base.issingletontype(typeof(v))
        lift_captures!(ctx, params, baked, v)
    elseif !(v isa Type || Base.issingletontype(typeof(v)))
        reject_arg(x)
    end
end
flatten!(leaves, params, baked, ctx, @nospecialize(x::Union{Type,Val,Function})) =
    Base.issingletontype(typeof(x)) || x isa Type ? nothing : lift_captures!(ctx, params, baked, x)
flatten!(leaves, params, baked, ctx, @nospecialize(x)) = reject_arg(x)

function reject_arg(x)
    if x isa AbstractArray || x isa Tuple
        throw(ArgumentError("cannot broadcast a $(typeof(x)) together with CuArrays: its data is on the " *
                            "host. Upload it first (`CuArray(x)` or `cu(x)`), or download the CuArrays (`Array(a)`)."))
    end
    throw(ArgumentError("cannot use a $(typeof(x)) in a GPU broadcast; kernels take CuArrays, numbers " *
                        "($(join(KERNEL_ELTYPES, ", "))) and functions"))
end

# The traced expression of a Broadcasted, with leaves named x1, x2, ... and parameters p1, ...
function trace_bc(ctx::TraceContext, @nospecialize(bc::Broadcasted), counts::Vector{Int}, params::Vector{Any}, baked::Vector{Any})
    lift_captures!(ctx, params, baked, bc.f)
    args = Any[]
    for a in bc.args
        push!(args, trace_arg(ctx, a, counts, params, baked))
    end
    return trace_fn(ctx, bc.f, args)
end
trace_arg(ctx, @nospecialize(a::Broadcasted), counts, params, baked) = trace_bc(ctx, a, counts, params, baked)
function trace_arg(ctx, @nospecialize(a::AbstractArray), counts, params, baked)
    counts[1] += 1
    return Sym(eltype(a), "x$(counts[1])")
end
function trace_arg(ctx, @nospecialize(x::KernelReal), counts, params, baked)
    push!(params, x)
    return Sym(typeof(x), "p$(length(params))")
end
function trace_arg(ctx, @nospecialize(x::Base.RefValue), counts, params, baked)
    v = x[]
    v isa KernelReal && return trace_arg(ctx, v, counts, params, baked)
    v isa Function && lift_captures!(ctx, params, baked, v)
    return v
end
function trace_arg(ctx, @nospecialize(x), counts, params, baked)
    x isa Function && lift_captures!(ctx, params, baked, x)
    return x
end

# `===` against each listed type: `T in KERNEL_ELTYPES` compares with `==`, which calls the
# runtime's type equality and showed up on every broadcast's profile.
function is_kernel_eltype(@nospecialize(T))
    for E in KERNEL_ELTYPES
        E === T && return true
    end
    return false
end
check_kernel_eltype(@nospecialize(T)) = is_kernel_eltype(T) ||
    throw(ArgumentError("GPU kernels support the element types $(join(KERNEL_ELTYPES, ", ")); not $T"))

# The element type a broadcast produces (traced once per expression type).
const BC_ELTYPES = Dict{Any,Any}()

function bc_eltype(@nospecialize(bc::Broadcasted))
    leaves, params, baked = Any[], Any[], Any[]
    flatten!(leaves, params, baked, nothing, bc)
    key = (typeof(bc), baked)
    e = lock(() -> get(BC_ELTYPES, key, nothing), KERNEL_CACHE_LOCK)
    e === nothing || !globals_valid(e[2]) || return e[1]
    for l in leaves
        check_kernel_eltype(eltype(l))
    end
    ctx = TraceContext()
    s = trace_bc(ctx, bc, [0], Any[], Any[])
    T = symtype(s)
    lock(() -> BC_ELTYPES[key] = (T, ctx.globals), KERNEL_CACHE_LOCK)
    return T
end

## the kernel

# The CUDA C source of a broadcast kernel. `leafinfo`: (eltype, linear) per leaf.
function bcast_source(expr::Sym, @nospecialize(D::Type), dest_linear::Bool, leafinfo, ptypes, globals, N::Int, idx64::Bool)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    cart = !dest_linear || any(l -> !l[2], leafinfo)
    io = IOBuffer()
    print(io, C_PRELUDE)
    print(io, "extern \"C\" __global__ void cumem_bcast($IDX n, $(codegen_ctype(D))* dst")
    dest_linear || for d in 1:N; print(io, ", $OFF dst_s$d"); end
    for (k, (T, lin)) in enumerate(leafinfo)
        print(io, ", const $(codegen_ctype(T))* a$k")
        lin || for d in 1:N; print(io, ", $OFF a$(k)_s$d"); end
    end
    cart && for d in 1:N-1; print(io, ", $IDX n$d"); end
    print_params(io, ptypes, globals)
    print(io, ")\n{\n")
    print_unpack(io, ptypes, globals)
    val = cv(expr, D)
    D === Float16 && (val = "jl_f2h($val)")
    start = "($IDX)blockIdx.x * blockDim.x + threadIdx.x"
    if !cart
        start = "i0"
        print_unrolled(io, IDX, [(ctype_compute(T), T === Float16 ? "jl_h2f(a$k[IX])" : "a$k[IX]") for (k, (T, _)) in enumerate(leafinfo)],
                       codegen_ctype(D), val)
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
    for (k, (T, lin)) in enumerate(leafinfo)
        load = "a$k[$(offset("a$k", lin))]"
        T === Float16 && (load = "jl_h2f($load)")
        print(io, "    const $(ctype_compute(T)) x$k = $load;\n")
    end
    print(io, "    dst[$(offset("dst", dest_linear))] = $val;\n  }\n}\n")
    return String(take!(io))
end

# The grid-stride loop of a kernel whose arrays are all contiguous, four steps at a time:
# every leaf's four elements are loaded before any result is stored, so a thread keeps
# 4 × leaves loads in flight (one step at a time, the stores between them serialise the
# loads: the compiler cannot know that dst does not alias a leaf). Elementwise, so the
# order does not matter; an array that overlaps dst elsewhere was copied before
# (`unalias_args`). Leaves the index of the first step not done in `i0`, for the plain
# loop that finishes. `loads`: (C type, load with the index as `IX`) per leaf (leaf k is
# `xk` in `val`, the result as `DC`).
function print_unrolled(io, IDX, loads, DC, val)
    print(io, "  const $IDX stride = ($IDX)blockDim.x * gridDim.x;\n")
    print(io, "  $IDX i0 = ($IDX)blockIdx.x * blockDim.x + threadIdx.x;\n")
    print(io, "  for (; i0 + 3 * stride < n; i0 += 4 * stride) {\n")
    for u in 0:3, (k, (CT, ld)) in enumerate(loads)
        print(io, "    const $CT l$(k)_$u = ", replace(ld, "IX" => u == 0 ? "i0" : "i0 + $u * stride"), ";\n")
    end
    print(io, "    $DC v[4];\n")
    for u in 0:3
        print(io, "    {")
        for (k, (CT, _)) in enumerate(loads)
            print(io, " const $CT x$k = l$(k)_$u;")
        end
        print(io, " v[$u] = $val; }\n")
    end
    for u in 0:3
        print(io, "    dst[", u == 0 ? "i0" : "i0 + $u * stride", "] = v[$u];\n")
    end
    print(io, "  }\n")
end

sm_count() = max(1, device_info().sm_count)

# Blocks and threads for a grid-stride loop over n elements.
launch_shape(n) = (max(1, min(cld(n, 256), 32 * sm_count())), 256)

leaf_of(@nospecialize(a), dsz) = leaf_of_layout(a, dsz)
leaf_of_layout(@nospecialize(a), dsz) = (l = layout(a); (st, lin) = leaf_strides(l[3], l[4], dsz);
                   Leaf(l[1], l[2], st, lin, eltype(a)))
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
    return Leaf(a, 0, st, true, eltype(a))
end

# Whether two leaves touch the same buffer at different layouts (then an elementwise
# kernel could read what it already overwrote).
conflicts(a::Leaf, d::Leaf) = same_memory(a.base, d.base) && !(a.offset == d.offset && a.strides == d.strides)

# Copies aliased wrapper leaves into fresh arrays (rebuilding the Broadcasted).
unalias_args(bc::Broadcasted, dest, dleaf) =
    Broadcasted{Nothing}(bc.f, map(a -> unalias_args(a, dest, dleaf), bc.args), bc.axes)
function unalias_args(a::AnyCuArray, dest, dleaf)
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

## running a broadcast into a destination

# The kernel cache entry of each thread's last broadcast through gpu_broadcast! (for the
# typed fast path, compute/fastpath.jl, which clears it before and reads it right after
# the call: no task switch in between). One slot per thread, made at `__init__`.
const LAST_BROADCAST = Any[]
init_broadcast() = (resize!(LAST_BROADCAST, Threads.nthreads()); fill!(LAST_BROADCAST, nothing); nothing)
@inline set_last_broadcast!(@nospecialize(e)) =
    (t = Threads.threadid(); t <= length(LAST_BROADCAST) && (@inbounds LAST_BROADCAST[t] = e); nothing)
@inline take_last_broadcast!() =
    (t = Threads.threadid(); t <= length(LAST_BROADCAST) || return nothing;
     e = @inbounds LAST_BROADCAST[t]; @inbounds LAST_BROADCAST[t] = nothing; e)

function gpu_broadcast!(@nospecialize(dest::AnyCuArray), @nospecialize(bc::Broadcasted))
    D = eltype(dest)
    check_kernel_eltype(D)
    dsz = size(dest)
    N = length(dsz)
    leaves, params, baked = Any[], Any[], Any[]
    flatten!(leaves, params, baked, nothing, bc)
    for a in leaves
        check_kernel_eltype(eltype(a))
        a isa CuArray ? check_alive(a) : check_alive(layout(a)[1])
    end
    dleaf = leaf_of(dest, dsz)
    check_alive(dleaf.base)
    # The operands first: `a1 .+ b1` on device 1 while the task is on device 0 is "arrays
    # of device 1", not a mix with the destination made on device 0.
    MULTI[] && (check_devices("broadcast", leaves...); check_devices("broadcast", dleaf.base, leaves...))
    lvs = Leaf[leaf_of(a, dsz) for a in leaves]
    if !on_host() && any(l -> conflicts(l, dleaf), lvs)
        return gpu_broadcast!(dest, unalias_args(bc, dest, dleaf))
    end
    n = prod(dsz)
    maxlen = max(n, length(dleaf.base))
    for l in lvs
        maxlen = max(maxlen, length(l.base))
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
    key = (:bcast, typeof(bc), typeof(dest), dleaf.linear, linkey, idx64, baked)
    entry = cached_kernel(key) do
        ctx = TraceContext()
        ps = Any[]
        expr = trace_bc(ctx, bc, [0], ps, Any[])
        ptypes = map(typeof, ps)
        src = bcast_source(expr, D, dleaf.linear, [(l.eltype, l.linear) for l in lvs], ptypes, ctx.globals, N, idx64)
        (src, "cumem_bcast", nothing, ctx.globals)
    end
    set_last_broadcast!(entry)
    n == 0 && return dest
    if on_host()
        GC.@preserve leaves dest begin
            Broadcast.materialize!(host_arg(dest), host_arg(bc))
        end
        return dest
    end
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    args = Any[IT(n), devaddr(dleaf.base) + UInt64(dleaf.offset * sizeof(D))]
    dleaf.linear || append!(args, map(OT, dleaf.strides))
    for l in lvs
        push!(args, devaddr(l.base) + UInt64(l.offset * sizeof(l.eltype)))
        l.linear || append!(args, map(OT, l.strides))
    end
    if !dleaf.linear || any(l -> !l.linear, lvs)
        for d in 1:N-1
            push!(args, IT(dsz[d]))
        end
    end
    for p in params
        push!(args, param_value(p))
    end
    for g in global_values(entry.globals)
        push!(args, param_value(g))
    end
    blocks, threads = launch_shape(n)
    GC.@preserve leaves dest launch(entry.kernel, args...; blocks = blocks, threads = threads)
    return dest
end

# Broadcast entry points.
Base.similar(bc::Broadcasted{CuArrayStyle{N}}, ::Type{T}) where {N,T} = CuArray{T}(undef, size(bc))

# `copy(bc)` and `copyto!(dest::AnyCuArray, bc)`: compute/fastpath.jl, which runs a
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

Base.map(f, a::AnyCuArray, rest::AnyCuArray...) =
    (check_same_axes(a, rest); copy(Broadcast.instantiate(Broadcasted{CuArrayStyle{ndims(a)}}(f, (a, rest...)))))

Base.map!(f, dest::AnyCuArray, a::AnyCuArray, rest::AnyCuArray...) =
    (check_same_axes(dest, (a, rest...)); gpu_broadcast!(dest, Broadcast.instantiate(Broadcasted{Nothing}(f, (a, rest...), axes(dest)))))

## fill! with a value whose bytes differ (zeros and -1 are a memset: array.jl)

function fill_kernel!(a::CuArray{T}, v) where {T}
    x = convert(T, v)
    if !(T in KERNEL_ELTYPES)
        return nothing      # not a kernel type: array.jl's upload-and-copy fallback
    end
    gpu_broadcast!(a, Broadcast.instantiate(Broadcasted{Nothing}(identity, (x,), axes(a))))
    return a
end

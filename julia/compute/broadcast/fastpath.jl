# The typed fast path of broadcasting: once a broadcast of a given type has run
# through `gpu_broadcast!` (broadcast.jl: leaves flattened into `Vector{Any}`s, the kernel
# cache's `Dict{Any,Any}` under a lock, aliasing checks, the launch arguments in a
# `Vector{Any}`), later calls with the same types skip all of that: the kernel comes from
# a slot of its own for that type (a `Ref` made once per type, read without a lock or a
# hash), and the launch arguments are packed into a tuple by code specialised on the
# `Broadcasted` type, without allocating.
#
# Which broadcasts take it: the destination a `CuArray`; every array argument a `CuArray`
# of the destination's size (contiguous, the same linear indexing); the other arguments
# isbits values (numbers, structs) or singletons (`Val`s, types); the functions isbits
# (closures over isbits values included); fewer than 2^31 elements; one device in use; the
# kernel reading no `const` binding to a mutable object at launch. Anything else, an
# argument overlapping the destination at another address, a tuple argument, a world age
# that moved (methods defined since: the slow path revalidates), and the first call of
# each type go
# through `gpu_broadcast!`, whose kernel cache entry then fills the slot. On the host
# device the fast path runs Base's broadcast on the arrays' memory, as the slow path does
# after its checks. `CuMem.FAST_BROADCAST[] = false` turns the fast path off.

# A slot's content: the kernel (nothing on the host device) and the world age it was
# valid in; for the allocating `copy`, the element type the slow path gave the result;
# whether the kernel can throw (a launch then marks the error record unchecked, see
# check_thrown_before_read in julia/memory/kernel_errors.jl).
struct FastBroadcast
    kernel::Union{Nothing,Kernel}
    world::UInt
    eltype::Type
    throws::Bool
end

# The slots: an IdDict by the pair's type `Tuple{destination type, Broadcasted type}` (a
# constant of the compiled caller; a type's object id is its address). Readers take the
# current table without a lock; a writer copies it, adds the entry and publishes the copy
# (new types are rare: once per broadcast type and world age). IdDict{Any,Any}, whose
# methods the system image has compiled, rather than a Dict of CuMem's types, whose
# methods each fresh process would compile on its first broadcast (Julia 1.5 keeps no
# compiled code of Base methods specialised on a package's types).
const FAST_TABLE = Ref(IdDict{Any,Any}())
const FAST_LOCK = ReentrantLock()
@inline fast_get(K::DataType) = (e = get(FAST_TABLE[], K, nothing); e === nothing ? nothing : e::FastBroadcast)
fast_set!(K::DataType, e::FastBroadcast) = publish_slot!(FAST_TABLE, FAST_LOCK, K, e)

# Sets `key`'s slot to `e` in a table of typed slots published as FAST_TABLE is (also
# reduce_full.jl's FULL_TABLE and dims_slot.jl's DIMS_TABLE): under `lk`, a copy of the
# current table with the entry, then the copy published.
function publish_slot!(table::Ref{IdDict{Any,Any}}, lk::ReentrantLock, key, e)
    lock(lk)
    try
        d = copy(table[])
        d[key] = e
        table[] = d
    finally
        unlock(lk)
    end
    return nothing
end

const FAST_BROADCAST = Ref(true)      # a switch for measuring the slow path

@inline world_counter() = ccall(:jl_get_world_counter, UInt, ())

# Whether `bc`'s leaves and scalars qualify (see above), given the destination's size,
# address and byte length.
@inline fast_ok(bc::Broadcasted, dsz, pd, nb) = fast_scalar(bc.f) && fast_args_ok(bc.args, dsz, pd, nb)
@inline fast_args_ok(::Tuple{}, dsz, pd, nb) = true
@inline fast_args_ok(args::Tuple, dsz, pd, nb) =
    fast_arg_ok(args[1], dsz, pd, nb) && fast_args_ok(Base.tail(args), dsz, pd, nb)
@inline fast_arg_ok(a::Broadcasted, dsz, pd, nb) = fast_ok(a, dsz, pd, nb)
@inline function fast_arg_ok(a::CuArray{T}, dsz, pd, nb) where {T}
    (a.dims == dsz && !a.freed) || return false
    p = a.ptr
    # the same memory at the same address reads each element before writing it; at
    # another address an elementwise kernel could read what it already overwrote
    return p == pd || p + UInt64(length(a) * sizeof(T)) <= pd || pd + nb <= p
end
@inline fast_arg_ok(x::Tuple, dsz, pd, nb) = false          # a collection: uploaded by the slow path
@inline fast_arg_ok(x::AbstractArray, dsz, pd, nb) = false
@inline fast_arg_ok(x, dsz, pd, nb) = fast_scalar(x)
@inline fast_scalar(x) = isbits(x) || Base.issingletontype(typeof(x)) || x isa Type

# The kernel's arguments, in the order broadcast.jl passes them: the launch context (the
# error record's address; the fast path is only taken by kernels that read no global at
# launch), the count, the destination, the leaves' addresses depth first, then the
# expression's scalars as one struct (the compiled `BcExpr`, compute/broadcast/bcfunction.jl) unless
# it has none. This must follow gpu_broadcast!'s order (broadcast_tests checks it against
# the generated kernel's parameter list, on the host device too).
@inline fast_leaves(bc::Broadcasted) = fast_leaves_t(bc.args)
@inline fast_leaves_t(::Tuple{}) = ()
@inline fast_leaves_t(args::Tuple) = (fast_leaf(args[1])..., fast_leaves_t(Base.tail(args))...)
@inline fast_leaf(a::CuArray) = (a.ptr,)
@inline fast_leaf(a::Broadcasted) = fast_leaves(a)
@inline fast_leaf(x) = ()
# The vector loop's chunk (`bcast_vec_width`) from the arrays' element sizes: a constant of
# the compiled code. (A kernel whose function always throws has no vector loop: launched
# with fewer threads, its grid-stride loop still covers every element.)
@inline fast_vec_width(dest::CuArray{T}, bc::Broadcasted) where {T} = vec_width(fast_widest(sizeof(T), bc.args))
@inline fast_widest(w, ::Tuple{}) = w
@inline fast_widest(w, args::Tuple) = fast_widest(fast_widest(w, args[1]), Base.tail(args))
@inline fast_widest(w, a::Broadcasted) = fast_widest(w, a.args)
@inline fast_widest(w, a::CuArray{T}) where {T} = vec_widest(w, sizeof(T))     # (a ghost's 0: none)
@inline fast_widest(w, x) = w
@inline fast_object(obj::O) where {O} = Base.issingletontype(O) ? () : (obj,)

"""
    CuMem.fast_launch_args(dest::CuArray, bc::Broadcasted) -> Tuple

The arguments the broadcast kernel of `dest .= bc` is launched with on the fast path:
the launch context, the element count (`UInt32`), the destination's address, each array
argument's address, then the expression's scalars as one isbits object (absent when it
has none). For tests; see julia/compute/broadcast/fastpath.jl.
"""
@inline fast_launch_args(dest::CuArray, bc::Broadcasted) =
    (DCContext0(kernel_error_address(), UInt64(0)), UInt32(length(dest)), dest.ptr, fast_leaves(bc)...,
     fast_object(bc_object(bc))...)

# The slot's entry if it is valid for `dest .= bc` now.
@inline function fast_entry(dest::CuArray{T}, bc::Broadcasted) where {T}
    FAST_BROADCAST[] && !MULTI[] || return nothing
    n = length(dest)
    (n == 0 || n >= typemax(Int32) || dest.freed) && return nothing
    fast_ok(bc, dest.dims, dest.ptr, UInt64(n * sizeof(T))) || return nothing
    e = fast_get(Tuple{typeof(dest),typeof(bc)})
    (e === nothing || e.world != world_counter()) && return nothing
    return e
end

# `dest .= bc` on the fast path; false (nothing done) when it does not apply.
@inline fast_broadcast!(dest, bc) = false
@inline function fast_broadcast!(dest::CuArray, bc::Broadcasted)
    e = fast_entry(dest, bc)
    e === nothing && return false
    run_fast!(e, dest, bc)
    return true
end

function run_fast!(e::FastBroadcast, dest::CuArray, bc::Broadcasted)
    k = e.kernel
    if k === nothing                       # the host device
        if CAPTURES[] != 0 && capture_state() !== nothing   # recorded as the general path is
            hd, hb = host_arg(dest), host_arg(bc)
            host_run(() -> (Broadcast.materialize!(hd, hb); nothing))
        else
            host_run!(dest, bc)
        end
        return nothing
    end
    blocks, threads = launch_shape(length(dest), fast_vec_width(dest, bc))
    GC.@preserve dest bc launch(k, fast_launch_args(dest, bc)...; blocks = blocks, threads = threads)
    e.throws && (DC_UNCHECKED[] = true)
    return nothing
end

# The host device's fast path: the elements computed in place through the arrays'
# addresses (every array argument has the destination's size and layout, and none
# overlaps it at another address, so element i reads only elements i), with Base's
# functions and `convert` as `materialize!` applies them, without wrapping each array in an
# `Array` first. Ordered after the task's stream as `host_view` is.
function host_run!(dest::CuArray{T}, bc::Broadcasted) where {T}
    if STREAMS_SET[]
        s = stream()
        s.handle == 0 || synchronize(s)
    end
    p = Ptr{T}(dest.ptr)
    GC.@preserve dest bc begin
        @inbounds for i in 1:length(dest)
            unsafe_store!(p, convert(T, host_elem(bc, i)), i)
        end
    end
    return nothing
end
@inline host_elem(bc::Broadcasted, i) = bc.f(host_elems(bc.args, i)...)
@inline host_elems(::Tuple{}, i) = ()
@inline host_elems(args::Tuple, i) = (host_elem(args[1], i), host_elems(Base.tail(args), i)...)
@inline host_elem(a::CuArray{T}, i) where {T} = unsafe_load(Ptr{T}(a.ptr), i)
@inline host_elem(x, i) = x

# Runs `dest .= bc`, on the fast path when it applies; after a slow-path broadcast,
# remembers its kernel for the type.
@inline function broadcast_into!(dest, bc)
    CAPTURES[] == 0 || return capture_broadcast!(dest, bc)
    return run_broadcast!(dest, bc)
end
# Inside a capture: one operation reading `bc`'s arrays and writing `dest` (its graph
# edges follow those, capture_edges.jl).
@noinline function capture_broadcast!(dest, bc)
    captured_op(() -> run_broadcast!(dest, bc), bc, dest)
    return dest
end
@inline function run_broadcast!(dest, bc)
    fast_broadcast!(dest, bc) && return dest
    index_fast!(dest, bc) && fast_broadcast!(dest, bc) && return dest
    Base.invokelatest(slow_broadcast!, dest, bc)
    return dest
end

# The general path, and the slot filled after it. Called through `invokelatest` so that
# inferring a broadcast's specialised entry points does not infer all of gpu_broadcast!
# and the code generator behind it: seconds of a fresh process's first broadcast, paid
# even when the kernel index makes the general path unnecessary.
function slow_broadcast!(@nospecialize(dest), @nospecialize(bc))
    take_last_broadcast!()
    gpu_broadcast!(dest, bc)
    remember_fast!(dest, bc, take_last_broadcast!())
    return nothing
end

# Fills the slot of `dest .= bc`'s types with `entry` (the kernel cache entry of the
# broadcast that just ran) when the fast path applies to these arguments and the kernel
# reads no global binding at launch.
remember_fast!(@nospecialize(dest), @nospecialize(bc), @nospecialize(entry)) = nothing
function remember_fast!(dest::CuArray{T}, bc::Broadcasted, entry::CachedKernel) where {T}
    (FAST_BROADCAST[] && !MULTI[] && isempty(entry.globals)) || return nothing
    entry.extra isa Tuple && all(d -> d isa DeviceFunction && isempty(d.ctx.globals), entry.extra) || return nothing
    n = length(dest)
    (0 < n < typemax(Int32)) || return nothing
    fast_ok(bc, dest.dims, dest.ptr, UInt64(n * sizeof(T))) || return nothing
    K = Tuple{typeof(dest),typeof(bc)}
    fast_set!(K, FastBroadcast(entry.kernel, world_counter(), T, any(d -> d.may_throw, entry.extra)))
    # a throw site's number belongs to the process that compiled it: such kernels stay out of the index
    !BCAST_UNROLL[] && all(d -> !d.may_throw, entry.extra) && index_safe(K) && index_store(index_key(K), entry.name, entry.source)
    return nothing
end

# A slot filled from the kernel index on disk (kernel_index.jl): the first broadcast of a
# type that an earlier process ran, without generating its kernel. Each type is looked up
# once per process.
const INDEX_TRIED = IdDict{Any,Any}()
index_fast!(@nospecialize(dest), @nospecialize(bc)) = false
@noinline function index_fast!(dest::CuArray{T}, bc::Broadcasted) where {T}
    (FAST_BROADCAST[] && !MULTI[] && !BCAST_UNROLL[]) || return false
    n = length(dest)
    (0 < n < typemax(Int32)) || return false
    fast_ok(bc, dest.dims, dest.ptr, UInt64(n * sizeof(T))) || return false
    K = Tuple{typeof(dest),typeof(bc)}
    index_first_try!(K) || return false
    k = index_kernel(index_key(K))
    k === missing && return false
    fast_set!(K, FastBroadcast(k, world_counter(), T, false))     # (the index holds kernels that cannot throw)
    return true
end
function index_first_try!(K::DataType)
    lock(FAST_LOCK)
    try
        haskey(INDEX_TRIED, K) && return false
        INDEX_TRIED[K] = nothing
    finally
        unlock(FAST_LOCK)
    end
    return index_safe(K)
end

# The element type of `copy(bc)` recorded in the index by an earlier process, when it is
# the one Base infers; nothing otherwise.
@noinline function index_copy_eltype(bc::Broadcasted)
    FAST_BROADCAST[] || return nothing
    T = Broadcast.combine_eltypes(bc.f, bc.args)
    T isa DataType || return nothing
    K = Tuple{Val{:copy},typeof(bc)}
    index_first_try!(K) || return nothing
    r = index_lookup(index_key(typeof(bc); prefix = "copy "))
    (r === nothing || r[2] != index_key(T)) && return nothing
    fast_set!(K, FastBroadcast(nothing, world_counter(), T, false))
    return T
end

# The allocating broadcast `copy(bc)`: on the fast path when an earlier `copy` of this
# type gave the element type that Base infers (a constant of the compiled code) and the
# broadcast into the new array takes the fast path.
@inline function fast_copy(bc::Broadcasted{CuArrayStyle{N}}) where {N}
    T = Broadcast.combine_eltypes(bc.f, bc.args)
    (T isa DataType && isbitstype(T)) || return nothing
    c = fast_get(Tuple{Val{:copy},typeof(bc)})
    (c === nothing || c.eltype !== T || c.world != world_counter()) && return nothing
    e = fast_get(Tuple{CuArray{T,N},typeof(bc)})
    (e === nothing || e.world != world_counter()) && return nothing
    (FAST_BROADCAST[] && !MULTI[]) || return nothing
    dest = CuArray{T,N}(undef, size(bc))
    # (inside a capture, one operation as broadcast_into!'s: queued bare, it would be a
    # barrier that waits for everything captured before it)
    ok = CAPTURES[] == 0 ? fast_broadcast!(dest, bc) : captured_op(() -> fast_broadcast!(dest, bc), bc, dest)
    ok && return dest
    unsafe_free!(dest)
    return nothing
end

## the broadcast entry points

function Base.copy(bc::Broadcasted{CuArrayStyle{N}}) where {N}
    bc = Broadcast.instantiate(bc)
    r = fast_copy(bc)
    r === nothing || return r
    # a type that ran before (but not on the fast path: e.g. arrays of other sizes)
    c = FAST_BROADCAST[] ? fast_get(Tuple{Val{:copy},typeof(bc)}) : nothing
    c === nothing || c.world != world_counter() || return broadcast_into!(CuArray{c.eltype}(undef, size(bc)), bc)
    T = index_copy_eltype(bc)
    T === nothing || return broadcast_into!(CuArray{T}(undef, size(bc)), bc)
    T = Base.invokelatest(bc_eltype, bc)
    # a function that always throws (Base's exception comes from the broadcast; an empty
    # result holds `nothing`s)
    T === Union{} && return broadcast_into!(CuArray{Nothing}(undef, size(bc)), bc)
    # GPUArrays.jl's error (CUDA.jl 2.x): no array of a non-concrete element type is made
    isconcretetype(T) || error("GPU broadcast resulted in non-concrete element type $T.\n" *
                               "This probably means that the function you are broadcasting contains an error or type instability.")
    dest = broadcast_into!(CuArray{T}(undef, size(bc)), bc)
    # the slot of the element type, once per type and world age (copying the table and
    # writing the index on every call cost microseconds per allocating broadcast)
    if FAST_BROADCAST[] && T isa DataType && bc_fixed_by_type(typeof(bc))
        K = Tuple{Val{:copy},typeof(bc)}
        fast_set!(K, FastBroadcast(nothing, world_counter(), T, false))
        index_safe(K) && index_store(index_key(typeof(bc); prefix = "copy "), "eltype", index_key(T))
    end
    return dest
end

Base.copyto!(dest::AnyCuArray, bc::Broadcasted{Nothing}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:CuArrayStyle}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{CuArrayStyle{0}}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:AbstractArrayStyle{0}}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:DefaultArrayStyle}) = broadcast_into!(dest, bc)

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
# each type go through `general_broadcast!` (`gpu_broadcast!`'s checks and kernel); the
# first call of a type the fast path takes fills its slot there (from the kernel index on
# disk, or from the kernel it generates) and then runs on the fast path itself. On the
# host device the fast path runs Base's broadcast on the arrays' memory, as the slow path
# does after its checks. `CuMem.FAST_BROADCAST[] = false` turns the fast path off.
#
# What is compiled for each broadcast type is kept to the fast path and a thin shell
# (`copy`, `broadcast_into!`): everything a type's first call does besides takes its
# arguments through `Base.inferencebarrier` and is compiled once for all types. A new
# element function's first `f.(x)` on the host device: 0.62 → 0.09 CPU s (docs/performance.md).

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

# Whether the fast path applies to `dest .= bc`'s arguments (its slot aside).
@inline fast_eligible(dest, bc) = false
@inline function fast_eligible(dest::CuArray{T}, bc::Broadcasted) where {T}
    FAST_BROADCAST[] && !MULTI[] || return false
    n = length(dest)
    (n == 0 || n >= typemax(Int32) || dest.freed) && return false
    return fast_ok(bc, dest.dims, dest.ptr, UInt64(n * sizeof(T)))
end
# The same for `copy(bc)` into a new array (which overlaps nothing).
@inline function fast_copy_eligible(bc::Broadcasted)
    FAST_BROADCAST[] && !MULTI[] || return false
    sz = size(bc)
    n = prod(sz)
    (n == 0 || n >= typemax(Int32)) && return false
    return fast_ok(bc, sz, UInt64(0), UInt64(0))
end
# The slot type of `dest .= bc` when the fast path applies to these arguments, else nothing
# (a constant of the compiled caller, or nothing).
@inline fast_slot_key(dest, bc) = fast_eligible(dest, bc) ? Tuple{typeof(dest),typeof(bc)} : nothing

# The slot's entry if it is valid for `dest .= bc` now.
@inline function fast_entry(dest::CuArray{T}, bc::Broadcasted) where {T}
    fast_eligible(dest, bc) || return nothing
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
            host_capture_run!(Base.inferencebarrier(dest), Base.inferencebarrier(bc))
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
# (behind an inference barrier: Base's broadcast over host Arrays is compiled for a type
# only when a capture records it, not with every type's fast path)
@noinline function host_capture_run!(@nospecialize(dest), @nospecialize(bc))
    hd, hb = host_arg(dest), host_arg(bc)
    host_run(() -> (Broadcast.materialize!(hd, hb); nothing))
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

# Runs `dest .= bc`: on the fast path when it applies, else through `general_broadcast!`,
# which fills the type's slot where it can and leaves the run to the fast path (a second
# turn of the loop).
#
# The code specialised on a broadcast's types is this shell and the fast path's; all that
# a type's first call does besides (the checks, the kernel index, generating the kernel,
# filling the slots) is compiled once for all types: it takes its arguments through
# `Base.inferencebarrier`, as `Any`. (Julia's inference specialises on the argument types
# of a call it can see, `@nospecialize` or not, so the barrier is what keeps a new
# function's first broadcast from inferring and compiling the general path again.)
@inline function broadcast_into!(dest, bc)
    CAPTURES[] == 0 || return capture_broadcast!(Base.inferencebarrier(dest), Base.inferencebarrier(bc))
    return run_broadcast!(dest, bc)
end
# Inside a capture: one operation reading `bc`'s arrays and writing `dest` (its graph
# edges follow those, capture_edges.jl).
@noinline function capture_broadcast!(@nospecialize(dest), @nospecialize(bc))
    captured_op(() -> run_broadcast!(dest, bc), bc, dest)
    return dest
end
@inline function run_broadcast!(dest, bc)
    again = false
    while true
        fast_broadcast!(dest, bc) && return dest
        general_broadcast!(Base.inferencebarrier(dest), Base.inferencebarrier(bc), !again,
                           Base.inferencebarrier(fast_slot_key(dest, bc))) || return dest
        again = true
    end
end

"""
    CuMem.general_broadcast!(dest, bc, retry::Bool, K) -> Bool

The general path of `dest .= bc` (compiled once: the arguments are taken as `Any`). When
the fast path applies to these arguments (`K`, their slot type, is not `nothing`: the
caller's `fast_slot_key`, computed by code compiled for the types) and `retry`, it only fills their
type's slot, from the kernel index on disk or from the kernel it generates
(`gpu_broadcast!` without running it), and returns `true`: the caller's fast path then runs
the broadcast, with the code compiled for the type anyway. Otherwise (and for an element
function that always throws, whose exception comes at once from the general path) it runs
the broadcast and returns `false`.
"""
function general_broadcast!(@nospecialize(dest), @nospecialize(bc), retry::Bool, @nospecialize(K))
    if K !== nothing
        e = fast_get(K)
        if e === nothing || e.world != world_counter()
            e = index_fast!(K, eltype(dest)) ? fast_get(K) : nothing
            e === nothing || retry && return true
        end
        # a valid slot that the caller's fast path did not take (`copy` of a type whose
        # element type Base infers differently): run it here
        e === nothing || (fast_broadcast!(dest, bc)::Bool && return false)
    end
    prepare = retry && K !== nothing
    take_last_broadcast!()
    gpu_broadcast!(dest, bc, !prepare)
    entry = take_last_broadcast!()
    K === nothing && return false
    filled = remember_fast!(K, eltype(dest), entry)
    prepare || return false
    filled && !always_throws(entry) && return true
    gpu_broadcast!(dest, bc)               # (a kernel cache hit now)
    return false
end
always_throws(@nospecialize(entry)) = entry isa CachedKernel && entry.extra isa Tuple && !isempty(entry.extra) &&
    entry.extra[1] isa DeviceFunction && entry.extra[1].rettype === Union{}

# Fills the slot `K` (destination element type `T`) with `entry`, the kernel cache entry of
# the broadcast just prepared, when its kernel reads no global binding at launch; true
# when filled.
function remember_fast!(@nospecialize(K), @nospecialize(T), @nospecialize(entry))
    (entry isa CachedKernel && FAST_BROADCAST[] && !MULTI[] && isempty(entry.globals)) || return false
    fns = entry.extra
    fns isa Tuple && all(d -> d isa DeviceFunction && isempty(d.ctx.globals), fns) || return false
    fast_set!(K, FastBroadcast(entry.kernel, world_counter(), T, any(d -> d.may_throw, fns)))
    # a throw site's number belongs to the process that compiled it: such kernels stay out of the index
    !BCAST_UNROLL[] && all(d -> !d.may_throw, fns) && index_safe(K) && index_store(index_key(K), entry.name, entry.source)
    return true
end

# A slot filled from the kernel index on disk (kernel_index.jl): the first broadcast of a
# type that an earlier process ran, without generating its kernel. Each type is looked up
# once per process and device (index_entry); true when the slot was filled.
function index_fast!(@nospecialize(K), @nospecialize(T))
    (FAST_BROADCAST[] && !MULTI[] && !BCAST_UNROLL[]) || return false
    return index_entry(fast_index_ikey, fast_slot_build, T, K, :recorded, false) !== nothing
end
fast_index_ikey(@nospecialize(K), @nospecialize(T)) = index_safe(K) ? (index_key(K), nothing) : nothing
# (the index holds kernels that cannot throw)
fast_slot_build(@nospecialize(K), @nospecialize(T), text::String, kernels::Vector{Any}) =
    (fast_set!(K, FastBroadcast(kernels[1], world_counter(), T, false)); true)

# The element type `T` (Base's inferred one, a DataType) of `copy(bc)` when an earlier
# process recorded it in the index for the slot `K`; nothing otherwise.
function index_copy_eltype(@nospecialize(bc), @nospecialize(K), @nospecialize(T))
    (FAST_BROADCAST[] && T isa DataType) || return nothing
    return index_entry(copy_index_ikey, copy_eltype_build, (typeof(bc), T), K, nothing, false)
end
copy_index_ikey(@nospecialize(K), @nospecialize(a)) = index_safe(K) ? (index_key(a[1]; prefix = "copy "), nothing) : nothing
function copy_eltype_build(@nospecialize(K), @nospecialize(a), text::String, ::Vector{Any})
    T = a[2]
    text == index_key(T) || return nothing
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
    ok = CAPTURES[] == 0 ? fast_broadcast!(dest, bc) :
         captured_fast!(Base.inferencebarrier(dest), Base.inferencebarrier(bc))
    ok && return dest
    unsafe_free!(dest)
    return nothing
end
@noinline captured_fast!(@nospecialize(dest), @nospecialize(bc)) =
    captured_op(() -> fast_broadcast!(dest, bc), bc, dest)::Bool

## the broadcast entry points

function Base.copy(bc::Broadcasted{CuArrayStyle{N}}) where {N}
    bc = Broadcast.instantiate(bc)
    again = false
    while true
        r = fast_copy(bc)
        r === nothing || return r
        # what the code compiled for the type knows cheaply: Base's element type, the element
        # type of an earlier call (its slot), whether the fast path applies to the arguments
        TB = Broadcast.combine_eltypes(bc.f, bc.args)
        c = FAST_BROADCAST[] ? fast_get(Tuple{Val{:copy},typeof(bc)}) : nothing
        T = c === nothing || c.world != world_counter() ? nothing : c.eltype
        r = copy_general(Base.inferencebarrier(bc), size(bc), Base.inferencebarrier(TB), Base.inferencebarrier(T),
                         fast_copy_eligible(bc), !again)
        r === nothing || return r     # (no `::CuArray{<:Any,N}`: a subtype test, 0.2 µs)
        again = true
    end
end

"""
    CuMem.copy_general(bc::Broadcasted, sz::Dims, TB, T, eligible::Bool, retry::Bool) -> Union{CuArray,Nothing}

The general path of `copy(bc)` (compiled once: the arguments are taken as `Any`; `sz` is
`size(bc)`). `TB`:
the element type Base infers (`combine_eltypes`); `T`: the element type an earlier call
of this type gave (its slot; `nothing`: none valid); `eligible`: whether the fast path
applies to the arguments (`fast_copy_eligible`). Finds the result's element type (`T`, the
kernel index, or the element function compiled for the leaves), makes the result, and
fills the slot of the element type. `nothing` when `retry` and it only filled the slots
(`general_broadcast!`): the caller's fast path then runs the broadcast.
"""
function copy_general(@nospecialize(bc), @nospecialize(sz::Dims), @nospecialize(TB), @nospecialize(T), eligible::Bool, retry::Bool)
    fresh = T === nothing
    K = fresh ? Tuple{Val{:copy},typeof(bc)} : nothing
    fresh && (T = index_copy_eltype(bc, K, TB))
    fresh = T === nothing
    if fresh
        T = bc_eltype(bc)
        # a function that always throws (Base's exception comes from the broadcast; an empty
        # result holds `nothing`s)
        T === Union{} && return general_into!(CuArray{Nothing}(undef, sz), bc, false, nothing)
        # GPUArrays.jl's error (CUDA.jl 2.x): no array of a non-concrete element type is made
        isconcretetype(T) || error("GPU broadcast resulted in non-concrete element type $T.\n" *
                                   "This probably means that the function you are broadcasting contains an error or type instability.")
    end
    fixed = fresh && FAST_BROADCAST[] && T isa DataType && bc_fixed_by_type(typeof(bc))
    dest = CuArray{T}(undef, sz)
    # (the caller's fast path runs it only when its element type is this one, and the type
    # has a copy slot: a valid `T` came from one)
    retry &= eligible && T === TB && (fresh ? fixed : true)
    left = general_into!(dest, bc, retry, eligible ? Tuple{typeof(dest),typeof(bc)} : nothing) === nothing
    # the slot of the element type, once per type and world age (copying the table and
    # writing the index on every call cost microseconds per allocating broadcast)
    if fixed
        fast_set!(K, FastBroadcast(nothing, world_counter(), T, false))
        index_safe(K) && index_store(index_key(typeof(bc); prefix = "copy "), "eltype", index_key(T))
    end
    left || return dest
    unsafe_free!(dest)
    return nothing
end
# `dest .= bc` by the general path (inside a capture, as one operation); nothing when it
# left the run to the caller's fast path (`retry`). `K`: as general_broadcast!'s.
function general_into!(@nospecialize(dest), @nospecialize(bc), retry::Bool, @nospecialize(K))
    CAPTURES[] == 0 || return (captured_op(() -> general_broadcast!(dest, bc, false, K), bc, dest); dest)
    return general_broadcast!(dest, bc, retry, K) ? nothing : dest
end

Base.copyto!(dest::AnyCuArray, bc::Broadcasted{Nothing}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:CuArrayStyle}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{CuArrayStyle{0}}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:AbstractArrayStyle{0}}) = broadcast_into!(dest, bc)
Base.copyto!(dest::AnyCuArray, bc::Broadcasted{<:DefaultArrayStyle}) = broadcast_into!(dest, bc)

# Reductions over one dimension of a type seen before (`sum(A; dims = 1)` in a loop): a
# typed slot, as reduce_full.jl's for whole arrays. The general path (mapreduce.jl) infers
# result and accumulator types, builds the compiled functions and a plan of vectors, and
# looks the kernel up by a tuple of types: about 10 µs of Julia per call, more than the
# launch. A slot keeps what that path found for (f, op, eltype, kept dimensions, whether
# the reduced elements are contiguous) and the next call only computes sizes, allocates the
# result and launches.

# A slot's content: the kernel of reduce.cuh's `cumem_reduce` for that shape, the
# accumulator and result element types, the neutral element (a kernel parameter), and the
# world age it was made in (a method defined since sends the call back to mapreduce.jl),
# whether the kernel can throw (a launch then marks the error record unchecked).
struct DimsReduce
    kernel::Any         # a Kernel (the g++ emulation of the tests has its own type)
    acc::Type
    out::Type
    neut::Any
    world::UInt
    throws::Bool
end

# Slots by `(Tuple{typeof(f), typeof(op), eltype}, kept dimensions, linear)`, published as
# reduce_full.jl's: readers take the current table without a lock.
const DIMS_TABLE = Ref(IdDict{Any,Any}())
const DIMS_LOCK = ReentrantLock()

# The shape class of reducing dimension `d` of a contiguous array of size `sz`: the number
# of kept dimensions of size > 1, and whether the reduced elements are contiguous (every
# dimension before `d` has size 1): the `nk`, `linear` of mapreduce.jl's plan.
@inline function dims_shape(sz::Dims{N}, d::Int) where {N}
    nk = 0
    linear = true
    for i in 1:N
        i == d && continue
        if sz[i] > 1
            nk += 1
            i < d && (linear = false)
        end
    end
    return nk, linear
end

"""
    CuMem.fast_dims_reduce(f, op, A::CuArray, d::Int) -> Union{Nothing,CuArray}

`mapreduce(f, op, A; dims = d)` without `init` through the slot of (f, op, eltype, shape
class) when one is filled and valid: singleton `f` and `op`, dimension `d` of size > 1,
fewer than 2^31 elements, one block per output (mapreduce.jl's `blocks_per_output`), one
device in use, a GPU, no capture under way. `nothing` otherwise (nothing done): mapreduce.jl then takes its
general path, which fills the slot. The result is what the general path returns (same
kernel, same launch shape); a throw in `f` or `op` is raised at the next download or
`synchronize`, as there.
"""
@inline function fast_dims_reduce(f::F, op::OP, A::CuArray{T,N}, d::Int) where {F,OP,T,N}
    # (inside a capture the general path records the operation's reads and writes)
    (FULL_REDUCE[] && !MULTI[] && CAPTURES[] == 0 && full_singletons(f, op) && !A.freed && 1 <= d <= N && !on_host()) ||
        return nothing
    sz = size(A)
    n = length(A)
    nred = sz[d]
    (nred > 1 && n < typemax(Int32)) || return nothing
    nout = n ÷ nred
    (nred <= 2048 || nout >= 8 * sm_count()) || return nothing      # one block per output
    nk, linear = dims_shape(sz, d)
    R, Acc = full_types(f, op, T)           # (inferred: concrete types below)
    e = get(DIMS_TABLE[], (Tuple{F,OP,T}, nk, linear), nothing)
    # (the kernel index on disk once per process, device and shape class, behind an inference
    # barrier: compiled once for all types; a process's first reduction of a type that an
    # earlier one ran then loads its kernel, without generating the source)
    e === nothing && (e = index_dims_slot(Base.inferencebarrier(Tuple{F,OP,T}), nk, linear, op,
                                          Base.inferencebarrier(Acc), Base.inferencebarrier(R)))
    e === nothing && return nothing
    e = e::DimsReduce
    (e.world == world_counter() && e.acc === Acc && e.out === R) || return nothing
    out = CuArray{R}(undef, ntuple(i -> i == d ? 1 : sz[i], Val(N)))
    k = e.kernel
    neut = e.neut::Acc
    # `Val(nk)` of a run-time `nk` costs microseconds (a type made per call): the usual
    # counts are constants here
    if k isa Kernel
        nk == 0 ? (linear ? dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(0), Val(true)) :
                            dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(0), Val(false))) :
        nk == 1 ? (linear ? dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(1), Val(true)) :
                            dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(1), Val(false))) :
        nk == 2 ? (linear ? dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(2), Val(true)) :
                            dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(2), Val(false))) :
                  dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(nk), Val(linear))
    else                                    # (the g++ emulation of the tests)
        dims_reduce_run(k, neut, A, out, sz, d, nout, nred, Val(nk), Val(linear))
    end
    e.throws && (DC_UNCHECKED[] = true)     # (a download waits and checks first)
    return out
end

# The launch of mapreduce.jl's `reduce_pass!` (final pass, one block per output, 32-bit
# indices) with the slot's kernel: context, source, result, sizes, neutral element, then
# (size, stride) of each kept dimension and, when not linear, of the reduced one. `NK` and
# `LIN` as type parameters keep the argument tuple concrete (one dynamic dispatch a call).
function dims_reduce_run(k, neut, A::CuArray{T,N}, out::CuArray, sz::Dims{N}, d::Int, nout::Int,
                         nred::Int, ::Val{NK}, ::Val{LIN}) where {T,N,NK,LIN}
    ks = flat_pairs(ntuple(k -> dim_pair(sz, kept_dim(sz, d, k)), Val(NK)))
    tail = LIN ? () : dim_pair(sz, d)
    gx = min(nout, 65535)
    threads = nred >= 256 ? 256 : max(32, nextpow(2, nred))
    ctx = DCContext0(kernel_error_address(), UInt64(0))
    GC.@preserve A out launch(k, ctx, devaddr(A), devaddr(out), UInt32(nout), UInt32(nred), UInt32(gx),
                              neut, ks..., tail...; blocks = gx, threads = threads)
    return nothing
end
# The index of the k-th dimension of size > 1 other than `d`; its (size, stride) in a
# contiguous array of size `sz`; a tuple of such pairs flattened.
@inline function kept_dim(sz::Dims{N}, d::Int, k::Int) where {N}
    c = 0
    for i in 1:N
        if i != d && sz[i] > 1
            c += 1
            c == k && return i
        end
    end
    return d
end
@inline function dim_pair(sz::Dims{N}, i::Int) where {N}
    st = 1
    for j in 1:i-1
        st *= sz[j]
    end
    return (UInt32(sz[i]), Int32(st))
end
flat_pairs(::Tuple{}) = ()
flat_pairs(t::Tuple) = (t[1]..., flat_pairs(Base.tail(t))...)

# Fills the slot after mapreduce.jl ran a one-block-per-output final pass of `kernel` over
# one dimension of a CuArray, for singleton `f`, `op` and compiled functions that read no
# global binding (their launch context is the error record's address alone), without `init`.
# Records the kernel's source in the kernel index (kernel_index.jl) when no compiled function
# can throw (a throw site's number belongs to the process that compiled it).
function dims_slot_fill!(f, op, ::Type{T}, nk::Int, linear::Bool, kernel, ::Type{Acc}, ::Type{Out},
                         neut, fns::Tuple, source::String) where {T,Acc,Out}
    (FULL_REDUCE[] && !MULTI[] && full_singletons(f, op) && all(d -> isempty(d.ctx.globals), fns)) || return nothing
    K = Tuple{typeof(f),typeof(op),T}
    throws = any(d -> d isa DeviceFunction && d.may_throw, fns)
    publish_slot!(DIMS_TABLE, DIMS_LOCK, (K, nk, linear), DimsReduce(kernel, Acc, Out, convert(Acc, neut), world_counter(), throws))
    !throws && index_safe(K) && index_store(dims_index_key(K, nk, linear), dims_index_name(Acc, Out), source)
    return nothing
end

# The kernel index's key of a slot, and the name recorded with its source (the types the
# kernel accumulates in and writes).
dims_index_key(@nospecialize(K::Type), nk::Int, linear::Bool) = index_key(K; prefix = string("dims ", nk, ' ', linear, ' '))
dims_index_name(@nospecialize(Acc::Type), @nospecialize(Out::Type)) =
    string(index_key(Acc; prefix = "cumem_reduce "), ' ', index_key(Out))

# The slot of `(K, nk, linear)` filled from the kernel index (index_entry: once per process,
# device and key), when an earlier process recorded the kernel for the accumulator and result
# types `Acc`, `Out` (compiled once for all types: every argument arrives as `Any`).
@noinline function index_dims_slot(@nospecialize(K), nk::Int, linear::Bool, @nospecialize(op),
                                   @nospecialize(Acc), @nospecialize(Out))
    e = index_entry(dims_index_ikey, dims_slot_build, (op, Acc, Out), (:dims, K, nk, linear), ("cumem_reduce",), false)
    return e === nothing ? nothing : e::DimsReduce
end
function dims_index_ikey(@nospecialize(key), @nospecialize(a))
    _, K, nk, linear = key
    _, Acc, Out = a
    (K isa DataType && Acc isa DataType && Out isa DataType && index_safe(K)) || return nothing
    return (dims_index_key(K, nk, linear), dims_index_name(Acc, Out))
end
function dims_slot_build(@nospecialize(key), @nospecialize(a), text::String, kernels::Vector{Any})
    _, K, nk, linear = key
    op, Acc, Out = a
    neut = neutral(op, Acc)
    neut === nothing && return nothing
    e = DimsReduce(kernels[1], Acc, Out, convert(Acc, neut), world_counter(), false)
    publish_slot!(DIMS_TABLE, DIMS_LOCK, (K, nk, linear), e)
    return e
end

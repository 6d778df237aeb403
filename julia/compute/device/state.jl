# The kernel language (CUDA.jl's kernel programming model): this room's files define the
# device intrinsics (intrinsics/), the argument conversion, the host device's runner
# (host.jl) and @cuda (execution.jl). Each intrinsic is one `@noinline` Julia function
# with two implementations: on a GPU the kernel compiler replaces its call by CUDA C (the
# translators registered in DC_DEVICE_CALLS, compute/compiler/kernelcalls.jl); on the host
# device the Julia body runs, reading the state of the thread that calls it (this file).

## the host device's threads

# One warp of a block on the host device: a rendezvous for shuffles, votes and sync_warp
# (every live lane of the mask deposits its value, the last one releases them all).
mutable struct HostWarp
    cond::Condition
    arrived::UInt32          # lanes (bits) arrived at the current rendezvous
    gen::Int
    live::UInt32             # lanes that exist and have not returned
    mask::UInt32             # the lanes the current rendezvous waits for
    vals::Vector{Any}        # 2 x 32 deposits (the buffer of generation parity)
end
HostWarp(live::UInt32) = HostWarp(Condition(), UInt32(0), 0, live, UInt32(0), Vector{Any}(nothing, 64))

# One block on the host device: its indices, the barrier (sync_threads and its count/and/or
# forms), its shared memory (the k-th static allocation of any thread is the block's k-th
# buffer) and its warps.
mutable struct HostBlock
    idx::NTuple{3,Int}       # 1-based
    dim::NTuple{3,Int}
    grid::NTuple{3,Int}
    cond::Condition
    live::Int
    arrived::Int
    gen::Int
    acc::Int32               # the barrier's predicate count being gathered
    res::Int32               # the last barrier's count
    nres::Int                # the threads that arrived at the last barrier
    shared::Vector{Vector{UInt8}}
    dyn::Vector{UInt8}       # dynamic shared memory (shmem bytes, at least 16)
    warps::Vector{HostWarp}
end

# One thread on the host device.
mutable struct HostThread
    idx::NTuple{3,Int}       # 1-based
    linear::Int              # 0-based position in the block (x fastest)
    block::HostBlock
    nshared::Int             # static shared allocations made so far
end

# The thread running on each Julia thread (tasks of a block switch only at the
# rendezvous points, which set it again).
const HOST_CUR = Any[]

@inline function host_thread()
    t = Threads.threadid()
    cur = HOST_CUR
    t <= length(cur) || host_outside()
    th = @inbounds cur[t]
    th isa HostThread || host_outside()
    return th::HostThread
end
@noinline host_outside() =
    throw(ArgumentError("a kernel intrinsic (threadIdx, sync_threads, ...) was called outside a kernel; " *
                        "launch the function with @cuda"))

function host_set_thread!(th)
    t = Threads.threadid()
    while length(HOST_CUR) < t
        push!(HOST_CUR, nothing)
    end
    @inbounds HOST_CUR[t] = th
    return nothing
end

# The last thread to arrive at a block barrier releases the others (sync_threads).
function host_release!(b::HostBlock)
    b.res = b.acc
    b.nres = b.arrived
    b.acc = 0
    b.arrived = 0
    b.gen += 1
    notify(b.cond)
    return nothing
end

# The last lane to arrive at a warp rendezvous releases the others (shuffles, votes).
function host_warp_release!(w::HostWarp)
    w.arrived = 0
    w.gen += 1
    base = 32 * (w.gen & 1)          # the next rendezvous' deposits start empty
    for k in 1:32
        @inbounds w.vals[base+k] = nothing
    end
    notify(w.cond)
    return nothing
end

## C translations

# Registers the C of intrinsic `f`: `make(fn, i, ts, args)` returns the expression.
dv_register!(make, @nospecialize(f)) = (DC_DEVICE_CALLS[f] = make; nothing)
# the C of argument k
dv_arg(fn, args, k) = dc_val(fn, args[k])

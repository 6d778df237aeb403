# Synchronization (CUDA.jl's src/device/intrinsics/synchronization.jl): block barriers,
# with a count, `and` or `or` of a predicate, warp barriers and memory fences. On the host
# device a barrier waits until every thread of the block that has not returned arrives
# (the block's threads are Julia tasks, host.jl); fences are no-ops there (the tasks of a
# block run on one Julia thread, one at a time).

# The block barrier on the host device; `pred` is added to the block's count, which is
# returned (the sum over the block's threads).
function host_barrier!(pred::Int32)
    th = host_thread()
    b = th.block
    b.acc += pred
    b.arrived += 1
    g = b.gen
    if b.arrived >= b.live
        host_release!(b)
    else
        while b.gen == g
            wait(b.cond)
        end
    end
    host_set_thread!(th)
    return b.res
end

"""
    sync_threads()

Waits until every thread of the block has reached this point and every global and shared
memory access they made before it is visible to the block (CUDA C's `__syncthreads()`).
All threads of the block must call it (a thread that has returned no longer counts).
"""
@noinline sync_threads() = (host_barrier!(Int32(0)); nothing)
dv_register!((fn, i, ts, args) -> "__syncthreads()", sync_threads)

"""
    sync_threads_count(predicate) -> Int32

[`sync_threads`](@ref), returning the number of the block's threads whose `predicate`
(`Bool` or `Int32`, non-zero is true) is true (`__syncthreads_count`).
"""
@noinline sync_threads_count(p::Int32) = host_barrier!(Int32(p != 0))
sync_threads_count(p::Bool) = sync_threads_count(Int32(p))
dv_register!((fn, i, ts, args) -> string("((int32_t)__syncthreads_count((int)(", dv_arg(fn, args, 1), ")))"), sync_threads_count)

"""
    sync_threads_and(predicate) -> Bool

[`sync_threads`](@ref), returning whether `predicate` is true for every thread of the
block (`__syncthreads_and`). `Int32` predicates give an `Int32` (0 or 1), as CUDA.jl.
"""
function sync_threads_and end
@noinline sync_threads_and_i(p::Int32) = host_barrier!(Int32(p != 0)) == host_thread().block.nres
dv_register!((fn, i, ts, args) -> string("(__syncthreads_and((int)(", dv_arg(fn, args, 1), ")) != 0)"), sync_threads_and_i)
sync_threads_and(p::Bool) = sync_threads_and_i(Int32(p))
sync_threads_and(p::Int32) = Int32(sync_threads_and_i(p))

"""
    sync_threads_or(predicate) -> Bool

[`sync_threads`](@ref), returning whether `predicate` is true for any thread of the block
(`__syncthreads_or`). `Int32` predicates give an `Int32` (0 or 1), as CUDA.jl.
"""
function sync_threads_or end
@noinline sync_threads_or_i(p::Int32) = host_barrier!(Int32(p != 0)) > 0
dv_register!((fn, i, ts, args) -> string("(__syncthreads_or((int)(", dv_arg(fn, args, 1), ")) != 0)"), sync_threads_or_i)
sync_threads_or(p::Bool) = sync_threads_or_i(Int32(p))
sync_threads_or(p::Int32) = Int32(sync_threads_or_i(p))

"""
    threadfence_block()

Orders the calling thread's memory accesses as seen by its block (`__threadfence_block`).
"""
@noinline threadfence_block() = (host_thread(); nothing)
dv_register!((fn, i, ts, args) -> "__threadfence_block()", threadfence_block)

"""
    threadfence()

Orders the calling thread's memory accesses as seen by the whole device (`__threadfence`).
"""
@noinline threadfence() = (host_thread(); nothing)
dv_register!((fn, i, ts, args) -> "__threadfence()", threadfence)

"""
    threadfence_system()

Orders the calling thread's memory accesses as seen by the device and the host
(`__threadfence_system`).
"""
@noinline threadfence_system() = (host_thread(); nothing)
dv_register!((fn, i, ts, args) -> "__threadfence_system()", threadfence_system)

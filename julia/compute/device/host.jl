# The host device's kernel runner: the kernel's Julia function itself runs for every
# thread of every block, block after block. A kernel whose compiled code has block or warp
# rendezvous (sync_threads and its forms, shuffles, votes, sync_warp) runs each thread of
# a block as a Julia task: a barrier waits (yielding) until every thread of the block that
# has not returned arrives, a shuffle until the lanes of its warp do. Other kernels run the
# threads one after another, without tasks. Intrinsics read the running thread's state
# (state.jl); shared memory is per block; atomics are plain loads and stores (one thread
# runs at a time). An exception a thread throws ends that thread only; the first one is
# thrown at the next synchronization (`synchronize`, a download), as on a GPU.

# The first exception of a kernel on the host device (kernel_errors.jl throws it).
function host_record_error!(@nospecialize(e))
    DC_HOST_ERROR[] === nothing && (DC_HOST_ERROR[] = e)
    return nothing
end

function host_block(idx, dim, grid, nt::Int, shmem::Int)
    nw = cld(nt, 32)
    warps = HostWarp[]
    for w in 1:nw
        n = min(32, nt - 32 * (w - 1))
        push!(warps, HostWarp(n == 32 ? 0xffffffff : (UInt32(1) << n) - UInt32(1)))
    end
    return HostBlock(idx, dim, grid, Condition(), nt, 0, 0, 0, 0, 0, Vector{UInt8}[],
                     Base.zeros(UInt8, max(16, shmem)), warps)
end

@inline host_tidx(t::Int, dim::NTuple{3,Int}) = (t % dim[1] + 1, (t ÷ dim[1]) % dim[2] + 1, t ÷ (dim[1] * dim[2]) + 1)

# A thread returned (or threw): it no longer counts at its block's and warp's rendezvous.
function host_exit!(th::HostThread)
    b = th.block
    b.live -= 1
    b.arrived > 0 && b.arrived >= b.live && host_release!(b)
    w = b.warps[th.linear ÷ 32 + 1]
    w.live &= ~(UInt32(1) << (th.linear % 32))
    w.arrived != 0 && (w.arrived & w.mask & w.live) == (w.mask & w.live) && host_warp_release!(w)
    return nothing
end

function host_thread_main(f::F, args::A, th::HostThread) where {F,A}
    host_set_thread!(th)
    try
        f(args...)
    catch e
        host_record_error!(e)
    finally
        host_exit!(th)
    end
    return nothing
end

"""
    CuMem.host_launch(f, args::Tuple, threads::NTuple{3,Int}, blocks::NTuple{3,Int}, shmem::Int, tasks::Bool)

Runs kernel `f(args...)` on the host device (see this file's header): `blocks` blocks of
`threads` threads with `shmem` bytes of dynamic shared memory each; `tasks`: each thread
a Julia task (the kernel meets at barriers or shuffles). Returns when the grid is done.
"""
function host_launch(f::F, args::A, threads::NTuple{3,Int}, blocks::NTuple{3,Int}, shmem::Int, tasks::Bool) where {F,A}
    nt = prod(threads)
    saved = Threads.threadid() <= length(HOST_CUR) ? HOST_CUR[Threads.threadid()] : nothing
    try
        for bz in 1:blocks[3], by in 1:blocks[2], bx in 1:blocks[1]
            b = host_block((bx, by, bz), threads, blocks, nt, shmem)
            if tasks
                ts = Vector{Task}(undef, nt)
                for t in 0:nt-1
                    th = HostThread(host_tidx(t, threads), t, b, 0)
                    ts[t+1] = Task(() -> host_thread_main(f, args, th))
                    schedule(ts[t+1])
                end
                for t in ts
                    wait(t)
                end
            else
                for t in 0:nt-1
                    host_thread_main(f, args, HostThread(host_tidx(t, threads), t, b, 0))
                end
            end
        end
    finally
        host_set_thread!(saved)
    end
    return nothing
end

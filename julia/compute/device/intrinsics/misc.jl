# Clocks and sleeping (CUDA.jl's src/device/intrinsics/misc.jl): the SM's cycle counter
# and `__nanosleep`. On the host device the counter is the monotonic clock in ns.

"""
    clock(UInt32) -> UInt32
    clock(UInt64) -> UInt64

A per-multiprocessor cycle counter (CUDA C's `clock()` / `clock64()`), as CUDA.jl; only
differences of two readings on the same thread mean something. On the host device the
monotonic clock in nanoseconds (`time_ns()`, truncated for `UInt32`).
"""
@noinline clock(::Type{UInt32}) = (host_thread(); time_ns() % UInt32)
@noinline clock(::Type{UInt64}) = (host_thread(); UInt64(time_ns()))
dv_register!((fn, i, ts, args) -> ts[1] === Type{UInt32} ? "((uint32_t)clock())" : "((uint64_t)clock64())", clock)

"""
    nanosleep(t::UInt32)

Suspends the calling thread for about `t` nanoseconds (at most 1 ms; CUDA C's
`__nanosleep`, sm_70 and later; a no-op on older GPUs), as CUDA.jl. On the host device
the thread yields to the block's other threads after sleeping.
"""
@noinline function nanosleep(t::UInt32)
    host_thread()
    t0 = time_ns()
    while time_ns() - t0 < min(t, UInt32(1_000_000))
    end
    return nothing
end
dv_register!((fn, i, ts, args) -> string("jl_nanosleep((uint32_t)(", dv_arg(fn, args, 1), "))"), nanosleep)

# Device memory for CuArrays: allocation through the ladder (docs/design.md), release that
# is safe in a GC finalizer, and the pressure that makes the GC collect in time. The
# Buffer type and the -g2 allocation traces are memory/tracking.jl's.
#
# A fresh CuArray owns its device address alone and needs no other object (array.jl).
# A `Buffer` appears only where memory is shared or needs a record: made by the first
# `reshape`/`vec` of an array (`share!`), by `unsafe_wrap`, and for every allocation
# while -g2 tracking is on.

## GC pressure
#
# The GC sees a CuArray as its wrapper (48 bytes now, 112 before this counting existed):
# it neither knows nor frees the device memory behind it until a collection runs its
# finalizer, and it collects after about 45 MB of *host* allocations (Julia 1.5's
# interval), i.e. every ~400 000 to ~950 000 dropped CuArrays. Between
# collections every dropped array's memory is out of reach of the pool, so a loop that
# leaves its arrays to the GC makes every allocation a cache miss: a device allocation per
# array for the binned and simple pools (one per 4 KiB block), one per 512 such arrays
# for split (2 MiB segments). That was the 3.8 µs per GC-freed 4 KiB allocation of
# binned on the H100 (docs/design.md, "The Julia hot path").
#
# So the package counts the bytes that the GC may return and collects when they grow:
# OUTSTANDING is the bytes held by arrays the engine allocated for the package (rounded
# up to 512, the smallest block of every pool), added at allocation and removed when the
# array is released (unsafe_free! or finalizer). When it exceeds its lowest value since
# the last collection by more than a growth allowance, the allocating thread runs
# GC.gc(false) (and GC.gc(true) when that returned less than half of the growth: the
# garbage is old; at most once per doubling, see FULL_AT). The allowance is half of that lowest value (as Julia's own heuristic
# lets the heap grow with its live size), at least GC_MIN_GROWTH and at most
# GC_MAX_GROWTH, both set from the device's (or the limit's) capacity at load time.
# Arrays freed with `unsafe_free!` lower OUTSTANDING at once and cause no collection.

const OUTSTANDING = Threads.Atomic{Int}(0)
const OUTSTANDING_LOW = Threads.Atomic{Int}(0)   # its lowest value since the last collection
const GC_MIN_GROWTH = Ref(64 << 20)               # bytes; see init_pressure
const GC_MAX_GROWTH = Ref(16 << 30)
const PRESSURE_COLLECTIONS = Threads.Atomic{Int}(0)

# The bytes charged for an allocation of `bytes`: every pool hands out at least 512-byte
# aligned blocks (MIN_BLOCK in src/pool/mod.rs).
@inline charge(bytes::Int) = (bytes + 511) & ~511

@inline growth_allowance(low::Int) = min(max(low >> 1, GC_MIN_GROWTH[]), GC_MAX_GROWTH[])

# Counts `bytes` as held by a CuArray and collects garbage when the count has grown by
# more than the allowance. Called before the allocation, so that what the GC returns
# serves it from the pool.
@inline function charge!(bytes::Int)
    c = charge(bytes)
    now = Threads.atomic_add!(OUTSTANDING, c) + c
    low = OUTSTANDING_LOW[]
    now - low > growth_allowance(low) && collect_garbage(now)
    return nothing
end

# The release of a charged allocation; safe in a finalizer (atomics only). The low mark
# is lowered by a plain store, not `atomic_min!` (a compare-and-swap loop, ~9 ns more per
# release on the development machine: the GC-freed loop lowers it on every release, as
# a collection's finalizers free one array after another). Two threads releasing at once
# may leave it one array's charge above the true minimum (the one that subtracted first
# stores last), so the next collection comes that much later: a heuristic's rounding.
@inline function uncharge!(bytes::Int)
    c = charge(bytes)
    now = Threads.atomic_sub!(OUTSTANDING, c) - c
    now < OUTSTANDING_LOW[] && (OUTSTANDING_LOW[] = now)
    return nothing
end

# Full collections are much dearer than young ones (tens to hundreds of ms with a large
# heap): one runs only when a young one returned less than half of the growth and the
# outstanding bytes have doubled since the last full one.
const FULL_AT = Threads.Atomic{Int}(0)

@noinline function collect_garbage(seen::Int)
    low = OUTSTANDING_LOW[]
    seen - low > growth_allowance(low) || return nothing   # another thread collected
    Threads.atomic_add!(PRESSURE_COLLECTIONS, 1)
    GC.gc(false)                      # young garbage: its finalizers release the arrays
    now = OUTSTANDING[]
    if now - low > (seen - low) >> 1 && now > FULL_AT[]   # the garbage is old
        GC.gc(true)
        now = OUTSTANDING[]
        FULL_AT[] = 2 * now + GC_MIN_GROWTH[]
    end
    OUTSTANDING_LOW[] = now
    return nothing
end

function init_pressure()
    r = Ref{CStats}()
    check(c_get_stats(r))
    limit = r[].limit_bytes % Int        # (memory_stats builds a 25-field NamedTuple: 0.2 s to infer at load)
    capacity = limit > 0 ? limit : total_memory()
    GC_MIN_GROWTH[] = max(min(64 << 20, capacity >> 4), 1 << 20)
    GC_MAX_GROWTH[] = max(GC_MIN_GROWTH[], capacity >> 2)
    return nothing
end

"""
    CuMem.gc_pressure() -> NamedTuple

What makes the package run the GC before device memory runs out (docs/design.md, "The
Julia hot path"): `outstanding`, the bytes held by CuArrays that the GC may return
(each allocation rounded up to 512 bytes; live arrays and garbage whose finalizer has not
run); `low`, its lowest value since the last collection; `next`, the value at which the
next allocation runs `GC.gc(false)` (`low` plus half of it, clamped to
`[min_growth, max_growth]`, set from the device's capacity or `JULIA_CUDA_MEMORY_LIMIT`);
and `collections`, the number of collections started this way. All in bytes but the last.
"""
function gc_pressure()
    low = OUTSTANDING_LOW[]
    return (outstanding = OUTSTANDING[], low = low, next = low + growth_allowance(low),
            min_growth = GC_MIN_GROWTH[], max_growth = GC_MAX_GROWTH[],
            collections = PRESSURE_COLLECTIONS[])
end

## the allocation ladder

# The engine's count of frees so far (all threads).
function frees_so_far()
    r = Ref{CStats}()
    c_get_stats(r)
    return r[].num_frees
end

# How often the ladder retries while other threads may still return memory, and how long
# it waits between tries (seconds). Bounded, so that threads allocating and freeing in a
# loop cannot keep a real out-of-memory from being reported (after about 1 s at most).
const FREE_WAIT_ROUNDS = 5000
const FREE_WAIT_PAUSE = 200e-6
# The ladder gives up once neither was true for this long (ns). Not one pause: on a loaded
# machine the thread running the finalizers can be descheduled for milliseconds.
const FREE_WAIT_QUIET_NS = 50_000_000
# A poll releases the engine's cache (which claims every thread cache) only when frees
# advanced since the last release, and at most once per this many ns.
const FREE_WAIT_RECLAIM_NS = 1_000_000

# Threads in `alloc_retry` now.
const LADDERS = Threads.Atomic{Int}(0)

# An allocation of `bytes` (> 0) bytes: the pool (`alloc_array_memory` below makes this
# first try inline); on out of memory GC.gc(false) and retry; then GC.gc(true) and retry;
# then, with several threads, while other threads are still freeing memory, release the
# cache and retry; last a plain allocation, for which the engine releases its cache and
# retries once itself; then OutOfGPUMemoryError.
#
# Every attempt but the last asks the engine not to release its cache or count a failure
# (`CUMEM_ALLOC_NO_RECLAIM`), so that memory the GC returns lands in a warm pool and the
# polls for other threads' frees stay cheap. The last rung (release the cache, retry) is
# the engine's alone: it counts one `num_alloc_retries`, `num_reclaim_retries`, and, when
# it fails, the one `num_ooms` and OOM event of the error thrown (PyTorch counts raised
# out-of-memory errors).
#
# Every attempt is on the task's current stream (stream.jl), whose pool the memory comes
# from: `s` is its handle, 0 for the default stream.
@noinline function alloc_retry(bytes::Int, code::Int32, s::UInt64 = UInt64(0))
    Threads.atomic_add!(LADDERS, 1)
    try
        return alloc_ladder(bytes, code, s)
    finally
        Threads.atomic_sub!(LADDERS, 1)
    end
end

function alloc_ladder(bytes::Int, code::Int32, s::UInt64 = UInt64(0))
    out = Ref{UInt64}(0)
    for full in (false, true)
        code == CUMEM_ERROR_OUT_OF_MEMORY || throw_code(code)
        GC.gc(full)               # young garbage, then everything unreachable
        code = alloc_on(bytes % UInt64, out, s, CUMEM_ALLOC_NO_RECLAIM | CUMEM_ALLOC_GC_RETRY)
        code == CUMEM_SUCCESS && return out[]
    end
    # With several threads, our GC.gc may not have collected anything: when another thread
    # is already collecting, it only waits for that collection, and that thread then runs
    # the finalizers, returning the memory one array at a time while we retry. So: one
    # more full collection, then retry while frees advance or another thread is in this
    # ladder too (its collection may be what frees our memory); stop once neither was
    # true for FREE_WAIT_QUIET_NS. The polls release the cache only when frees advanced
    # (what other threads freed may sit in it in other sizes), at most once a millisecond.
    if Threads.nthreads() > 1
        code == CUMEM_ERROR_OUT_OF_MEMORY || throw_code(code)
        GC.gc(true)
        c_reclaim(typemax(UInt64))
        code = alloc_on(bytes % UInt64, out, s, CUMEM_ALLOC_NO_RECLAIM | CUMEM_ALLOC_GC_RETRY)
        code == CUMEM_SUCCESS && return out[]
        frees = frees_so_far()
        progress = reclaimed = time_ns()
        collected = false
        for round in 2:FREE_WAIT_ROUNDS
            code == CUMEM_ERROR_OUT_OF_MEMORY || throw_code(code)
            now = frees_so_far()
            t = time_ns()
            if now != frees || LADDERS[] > 1
                progress = t
            elseif t - progress > FREE_WAIT_QUIET_NS
                # Quiet: before giving up, one more full collection. Arrays another thread
                # dropped after our collections above (e.g. its loop ended meanwhile) are
                # garbage that no one collects while we only poll (a CI run failed so).
                collected && break
                collected = true
                GC.gc(true)
                c_reclaim(typemax(UInt64))
                progress = time_ns()
            end
            if now != frees && t - reclaimed > FREE_WAIT_RECLAIM_NS
                c_reclaim(typemax(UInt64))
                reclaimed = t
            end
            frees = now
            GC.safepoint()
            Libc.systemsleep(FREE_WAIT_PAUSE)
            code = alloc_on(bytes % UInt64, out, s, CUMEM_ALLOC_NO_RECLAIM)
            code == CUMEM_SUCCESS && return out[]
        end
    end
    code == CUMEM_ERROR_OUT_OF_MEMORY || throw_code(code)
    code = alloc_on(bytes % UInt64, out, s, CUMEM_ALLOC_RECLAIM_RETRY)
    code == CUMEM_SUCCESS && return out[]
    code == CUMEM_ERROR_OUT_OF_MEMORY || throw_code(code)
    reason = last_error()
    flush_engine_log()
    throw(OutOfGPUMemoryError(bytes, sprint(memory_status), reason))
end

# The device memory of a new array of `bytes` bytes (0 for none), charged to OUTSTANDING.
@inline function alloc_array_memory(bytes::Int)
    bytes == 0 && return UInt64(0)
    charge!(bytes)
    count_alloc_bytes(bytes)
    TRACK[] && RECORDING[] && pass_origin()
    out = Ref{UInt64}(0)
    s = current_handle()
    code = alloc_on(bytes % UInt64, out, s, CUMEM_ALLOC_NO_RECLAIM)
    p = code == CUMEM_SUCCESS ? out[] : alloc_failed(bytes, code, s)
    CAPTURES[] == 0 || note_capture_alloc(p, bytes)
    return p
end

# -g2 while the history records (memtools.jl): the engine's alloc event carries the id of
# this Julia stack (`cumem_set_next_origin`; the -g2 table records the stack separately).
@noinline pass_origin() = c_set_next_origin(origin_id(backtrace()))

# One attempt on stream handle `s` (0: the default stream) with `cumem_alloc_ex` flags
# (`CUMEM_ALLOC_NO_RECLAIM`: keep the cache on out of memory; the ladder's retry flags).
@inline alloc_on(bytes::UInt64, out, s::UInt64, flags::UInt32) =
    s == 0 ? (flags == CUMEM_ALLOC_NO_RECLAIM ? c_alloc_noreclaim(bytes, out) : c_alloc_ex(bytes, out, flags)) :
    c_alloc_async(bytes, s, out, flags)

# The ladder; on failure the charge is withdrawn before the error propagates.
@noinline function alloc_failed(bytes::Int, code::Int32, s::UInt64 = UInt64(0))
    try
        return alloc_retry(bytes, code, s)
    catch
        uncharge!(bytes)
        rethrow()
    end
end

# A Buffer of its own for an allocation of `bytes` (deepcopy, tests), recorded under -g2.
function alloc_buffer(bytes::Int)
    bytes < 0 && throw(ArgumentError("cannot allocate $bytes bytes"))
    dev = task_device()                      # the allocation wrappers make it the thread's
    return new_buffer(alloc_array_memory(bytes), bytes, dev)
end

# The Buffer of a fresh allocation, holding one reference; entered in the -g2 table.
function new_buffer(ptr::UInt64, bytes::Int, dev::Int)
    buf = Buffer(ptr, bytes, Threads.Atomic{Int}(1), false, nothing, true, dev)
    if TRACK[] && ptr != 0
        track!(buf)
    end
    return buf
end

## release

# `unsafe_free!` from several threads at once on one object (a CuArray, a pinned block):
# the test of `freed` and its setting are one step under FREE_LOCK, so exactly one call
# releases. Without it two threads could both pass the test and release twice: a double
# free, or a shared Buffer's count dropping to 0 while a `reshape` sibling is live. A
# finalizer needs no lock: it runs only once its object is unreachable, so no
# `unsafe_free!` of the same object can run beside it. Nothing inside allocates or
# yields. Returns whether this call set `freed`.
const FREE_LOCK = Threads.SpinLock()

@inline function claim_free!(x)
    lock(FREE_LOCK)
    was = x.freed
    x.freed = true
    unlock(FREE_LOCK)
    return !was
end

# Returns the allocation at `ptr` (of `bytes`, charged) to the pool. Called from GC
# finalizers: it takes no lock, prints nothing and, with `throwerr` false, never throws
# (a refused free is recorded in FREE_ERRORS).
@inline function free_memory(ptr::UInt64, bytes::Int, throwerr::Bool)
    ptr == 0 && return nothing
    uncharge!(bytes)
    code = c_free(ptr)
    code == CUMEM_SUCCESS || free_failed(ptr, code, throwerr)
    return nothing
end

@noinline function free_failed(ptr::UInt64, code::Int32, throwerr::Bool)
    throwerr && throw_code(code)            # unsafe_free!: the caller sees the error
    Threads.atomic_add!(FREE_ERRORS, 1)
    LAST_FREE_ERROR_PTR[] = ptr
    LAST_FREE_ERROR_CODE[] = code
    return nothing
end

# Drops one reference to `buf`; the last one returns the memory to the pool. Safe in a
# finalizer as `free_memory`. The -g2 trace table is not touched here; its entry is
# marked by `freed` and pruned later by ordinary code.
@inline function release(buf::Buffer, throwerr::Bool)
    if Threads.atomic_sub!(buf.refs, 1) == 1
        buf.freed = true
        buf.owned && free_memory(buf.ptr, buf.bytes, throwerr)
    end
    return nothing
end

@inline retain(buf::Buffer) = (Threads.atomic_add!(buf.refs, 1); buf)

# The size in bytes of a `dims` array of `T`. Negative dimensions are an ArgumentError
# (as for Array); a number of elements or bytes that does not fit an Int is an
# OverflowError, instead of a product that silently wraps around.
function checked_bytes(::Type{T}, dims::Dims) where {T}
    len = 1
    for d in dims
        d < 0 && throw(ArgumentError("invalid CuArray dimensions $dims: negative size"))
        len, o = Base.Checked.mul_with_overflow(len, d)
        o && throw(OverflowError("CuArray dimensions $dims: the number of elements overflows Int"))
    end
    bytes, o = Base.Checked.mul_with_overflow(len, sizeof(T))
    o && throw(OverflowError("CuArray dimensions $dims: $len elements of $(sizeof(T)) bytes overflow Int"))
    return bytes
end

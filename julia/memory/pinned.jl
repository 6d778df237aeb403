# Pinned (page-locked) host memory: host `Array`s whose uploads and downloads run at the
# bus's speed (PyTorch's `pin_memory`, CUDA.jl's `pin`). The engine's pinned host pool
# (src/pinned.rs) caches the memory; this file makes Arrays of it and registers existing
# Arrays.

# One Array of `pinned`: its block, the array's objectid (to tell it from other arrays
# over the same memory), and whether the block was returned.
mutable struct PinnedBlock
    ptr::Ptr{Cvoid}
    bytes::Int
    id::UInt
    freed::Bool
end

# Block address → the block of the last array made there, for `unsafe_free!(::Array)`.
# Keyed by address, whose values come from the pool and repeat, so the table stays as
# small as the pool: a new array replaces the entry of the last one at its address, and
# a freed entry stays (so a second `unsafe_free!` finds it and does nothing) until then.
# No weak references (a WeakRef per array made the GC's work grow with the table). An
# entry is the array's when its objectid matches: two live objects never share one, and
# a dead array cannot be passed in. Only ordinary code touches the table (the finalizer
# only sets `freed` in its block and returns the memory), under PINNED_LOCK with the GC
# disabled (a spin lock: a collection started while another thread spins would wait for
# it forever; with the GC off no collection starts inside, and no finalizer runs there).
const PINNED_ARRAYS = Dict{Ptr{Cvoid},PinnedBlock}()
const PINNED_LOCK = Threads.SpinLock()

@inline function with_pinned_lock(f)
    gc_was_on = GC.enable(false)
    lock(PINNED_LOCK)
    try
        return f()
    finally
        unlock(PINNED_LOCK)
        gc_was_on && GC.enable(true)
    end
end

# Returns the block to the pool once. From the finalizer (`throwerr` false) it takes no
# lock, prints nothing and never throws: a refused free is counted in `free_errors()`.
function free_pinned_block(blk::PinnedBlock, throwerr::Bool)
    blk.freed && return nothing
    blk.freed = true
    blk.ptr == C_NULL && return nothing
    code = c_host_free(blk.ptr)
    if code != CUMEM_SUCCESS
        Threads.atomic_add!(FREE_ERRORS, 1)
        LAST_FREE_ERROR_PTR[] = UInt64(UInt(blk.ptr))
        LAST_FREE_ERROR_CODE[] = code
        throwerr && throw_code(code)
    end
    return nothing
end

# The finalizer of a pinned array.
(blk::PinnedBlock)(_) = free_pinned_block(blk, false)

# Allocates `bytes` (> 0) of pinned memory: the pool (which releases its cache and
# retries once itself); on out of memory GC.gc(false), then GC.gc(true), retrying after
# each (finalizers return dead pinned arrays to the pool); then CuMemError.
function host_alloc_ptr(bytes::Int)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    code = c_host_alloc(bytes % UInt64, out)
    code == CUMEM_SUCCESS && return out[]
    for full in (false, true)
        code == CUMEM_ERROR_OUT_OF_MEMORY || break
        GC.gc(full)
        code = c_host_alloc(bytes % UInt64, out)
        code == CUMEM_SUCCESS && return out[]
    end
    flush_engine_log()
    throw_code(code)
end

"""
    CuMem.pinned(T, dims...) -> Array{T}
    CuMem.pinned(T, dims::Tuple) -> Array{T}

An uninitialised `Array{T}` of `dims` in page-locked ("pinned") host memory from the
engine's pinned host pool, so that `copyto!` between it and a `CuArray` (and `CuArray(a)`,
`Array(x)` into it) runs at the bus's full speed instead of being staged through a driver
buffer (PyTorch's `pin_memory=True`; the pool caches blocks in power-of-two size classes
as PyTorch's `CachingHostAllocator`, with statistics of its own:
`memory_stats(:host)`, and a limit: `CUMEM_PINNED_LIMIT`). On the host device (no GPU)
the memory is page-aligned and `mlock`ed where the process may lock it.

It is an ordinary `Array` in every other respect. Its memory returns to the pool when the
array is garbage-collected, or at once with [`unsafe_free!`](@ref)`(a)` (after which the
array must not be used: its memory may belong to the next `pinned` array). Do not
`resize!` it. An array of 0 bytes is an ordinary empty `Array`.

`T` must be an `isbitstype`; otherwise `ArgumentError`. Negative dimensions are an
`ArgumentError` and sizes that overflow an `OverflowError`, as for `CuArray`. When the
pool cannot provide the memory (limit reached, or the driver cannot lock more, also
after a garbage collection) a `CuMemError` with code `CUMEM_ERROR_OUT_OF_MEMORY` = 1
names the limit and the pool's state.

```julia
buf = CuMem.pinned(Float32, 1024, 256)    # a Matrix{Float32}
buf .= batch                               # fill on the CPU
copyto!(x, buf)                            # x::CuArray: a DMA upload
```
"""
function pinned(::Type{T}, dims::Dims{N}) where {T,N}
    isbitstype(T) || throw(ArgumentError("CuMem.pinned supports element types that are " *
                                         "isbitstype; $T is not"))
    bytes = checked_bytes(T, dims)
    bytes == 0 && return Array{T,N}(undef, dims)
    ptr = host_alloc_ptr(bytes)
    a = try
        unsafe_wrap(Array, convert(Ptr{T}, ptr), dims; own = false)
    catch
        c_host_free(ptr)
        rethrow()
    end
    blk = PinnedBlock(ptr, bytes, objectid(a), false)
    finalizer(blk, a)                      # the block is its own finalizer: no closure
    with_pinned_lock(() -> (PINNED_ARRAYS[ptr] = blk))
    return a
end
pinned(::Type{T}, dims::Integer...) where {T} = pinned(T, convert(Tuple{Vararg{Int}}, dims))
pinned(::Type{T}, dims::Tuple{Vararg{Integer}}) where {T} = pinned(T, convert(Tuple{Vararg{Int}}, dims))

"""
    unsafe_free!(a::Array)

Returns the memory of `a`, an array made by [`CuMem.pinned`](@ref), to the pinned host
pool now instead of when `a` is garbage-collected. Calling it again does nothing (unless
the memory went to another pinned array meanwhile: then `ArgumentError`). `a` must not be
used afterwards: its memory may be handed to the next pinned array. Other arrays
(including `reshape`s of a pinned array, and arrays registered with [`CuMem.pin`](@ref),
whose memory is Julia's) are an `ArgumentError`, and nothing is freed; an empty array
is left alone (`pinned` of 0 bytes is an ordinary `Array`).
"""
function unsafe_free!(a::Array)
    sizeof(a) == 0 && return nothing       # (`pinned` of 0 bytes is an ordinary Array)
    ptr = convert(Ptr{Cvoid}, pointer(a))
    blk = with_pinned_lock(() -> get(PINNED_ARRAYS, ptr, nothing))
    if blk === nothing || blk.id != objectid(a)
        throw(ArgumentError("unsafe_free!: this $(typeof(a)) is not an array made by CuMem.pinned; " *
                            "only those (not reshapes of them, nor arrays registered with " *
                            "CuMem.pin, whose memory is Julia's) can be freed"))
    end
    free_pinned_block(blk, true)
    return nothing
end

"""
    CuMem.pin(a::Array) -> a

Page-locks the memory of an existing `Array` (`cuMemHostRegister`, as CUDA.jl's
`CUDA.pin`), so that copies between it and `CuArray`s run at the bus's full speed, and
returns `a`. The memory stays Julia's: it is unregistered when `a` is garbage-collected.
An array that is page-locked already (made by [`CuMem.pinned`](@ref), or pinned before)
and an empty array are returned as they are. On the host device (no GPU) the range is
only recorded, so that [`CuMem.is_pinned`](@ref) reports it.

Do not `resize!` a pinned array (its memory would move). Errors: `CuMemError` when the
driver refuses (e.g. a range that overlaps another registered range only in part).
"""
function pin(a::Array)
    bytes = sizeof(a)
    bytes == 0 && return a
    ptr = convert(Ptr{Cvoid}, pointer(a))
    (is_pinned(ptr) && is_pinned(ptr + (bytes - 1))) && return a
    check(c_host_register(ptr, bytes % UInt64))
    finalizer(_ -> unregister_pinned(ptr), a)
    return a
end

# The finalizer of `pin`: never throws; a refusal is counted in `free_errors()`.
function unregister_pinned(ptr::Ptr{Cvoid})
    code = c_host_unregister(ptr)
    if code != CUMEM_SUCCESS
        Threads.atomic_add!(FREE_ERRORS, 1)
        LAST_FREE_ERROR_PTR[] = UInt64(UInt(ptr))
        LAST_FREE_ERROR_CODE[] = code
    end
    return nothing
end

"""
    CuMem.is_pinned(a::Array) -> Bool
    CuMem.is_pinned(p::Ptr) -> Bool

Whether the memory of `a` (its first element; false for an empty array), or address `p`,
is page-locked: an array of [`CuMem.pinned`](@ref), one registered with
[`CuMem.pin`](@ref), or, on a GPU, memory the driver knows as page-locked whoever locked
it (PyTorch's `Tensor.is_pinned`, which asks `cudaPointerGetAttributes` too).
"""
is_pinned(a::Array) = sizeof(a) > 0 && is_pinned(convert(Ptr{Cvoid}, pointer(a)))
function is_pinned(p::Ptr)
    r = c_is_pinned(convert(Ptr{Cvoid}, p))
    r < 0 && throw_code(CUMEM_ERROR_INTERNAL)
    return r == 1
end

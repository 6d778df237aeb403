# Shared memory (CUDA.jl's CuStaticSharedArray / CuDynamicSharedArray, and 2.x's
# @cuStaticSharedMem / @cuDynamicSharedMem): arrays of a block's shared memory as
# CuDeviceArrays. In C each call site of a static array is one `__shared__` array; the
# dynamic one is the launch's `shmem` bytes (`extern __shared__`). On the host device the
# block's k-th static allocation (by any of its threads) is one buffer of the block, and
# the dynamic memory is one buffer of `shmem` bytes per block.

"""
    CuMem.shmem_static(T, Val(len)) -> UInt64

The address of `len` elements of `T` of the block's shared memory, one array per call site
(inside a loop, the same array each time). Used by [`CuStaticSharedArray`](@ref).
"""
@noinline function shmem_static(::Type{T}, ::Val{len}) where {T,len}
    th = host_thread()
    b = th.block
    th.nshared += 1
    k = th.nshared
    while length(b.shared) < k
        push!(b.shared, Base.zeros(UInt8, max(16, len * sizeof(T))))
    end
    return UInt64(UInt(pointer(b.shared[k])))
end
dv_register!(shmem_static) do fn, i, ts, args
    T = ts[1].parameters[1]
    len = ts[2].parameters[1]
    dc_is_ghost(T) && return "((uint64_t)0)"
    ct = dc_ct(fn, T)
    bytes = len * sizeof(T)
    println(fn.io, "  /* shmem ", bytes, " bytes */ __shared__ __align__(16) ", ct, " jl_sh", i, "[", max(1, len), "];")
    return string("((uint64_t)jl_sh", i, ")")
end

"""
    CuMem.shmem_dynamic() -> UInt64

The address of the launch's dynamic shared memory (`shmem` bytes, 16-byte aligned).
"""
@noinline shmem_dynamic() = UInt64(UInt(pointer(host_thread().block.dyn)))
dv_register!(shmem_dynamic) do fn, i, ts, args
    println(fn.io, "  extern __shared__ __align__(16) unsigned char jl_dynshmem[];")
    return "((uint64_t)jl_dynshmem)"
end

dv_dims(dims::Integer) = (Int(dims),)
dv_dims(dims::Tuple) = map(Int, dims)

"""
    CuStaticSharedArray(T, dims) -> CuDeviceArray{T}

An array of `T` (any isbits type) of size `dims` (an integer or a tuple, known when
compiling) in the block's shared memory, shared by the block's threads; each call site is
its own array; not initialised. Use [`sync_threads`](@ref) between writes and reads of
other threads. As CUDA.jl 3.x.
"""
@inline function CuStaticSharedArray(::Type{T}, dims) where {T}
    d = dv_dims(dims)
    return CuDeviceArray{T,length(d)}(shmem_static(T, Val(prod(d))), d)
end

"""
    CuDynamicSharedArray(T, dims, offset = 0) -> CuDeviceArray{T}

An array of `T` of size `dims` in the block's dynamic shared memory, starting `offset`
bytes in; the launch gives its size in bytes (`@cuda shmem = ...`). Several arrays of one
kernel share that memory: give each its own offset. As CUDA.jl 3.x.
"""
@inline function CuDynamicSharedArray(::Type{T}, dims, offset = 0) where {T}
    d = dv_dims(dims)
    return CuDeviceArray{T,length(d)}(shmem_dynamic() + UInt64(offset), d)
end

"""
    @cuStaticSharedMem(T, dims)

CUDA.jl 2.x's spelling of [`CuStaticSharedArray`](@ref)`(T, dims)`.
"""
macro cuStaticSharedMem(T, dims)
    return :(CuStaticSharedArray($(esc(T)), $(esc(dims))))
end

"""
    @cuDynamicSharedMem(T, dims, offset = 0)

CUDA.jl 2.x's spelling of [`CuDynamicSharedArray`](@ref)`(T, dims, offset)`.
"""
macro cuDynamicSharedMem(T, dims, offset = 0)
    return :(CuDynamicSharedArray($(esc(T)), $(esc(dims)), $(esc(offset))))
end

# Scalar results come back to the host through a small page-locked buffer per thread.
# Whole-array reductions (`sum(x)`, `maximum(x)`, `dot`, `norm`, `any`, `all`:
# reduce_full.jl) have their kernel's blocks write their partials straight into it (host
# memory the GPU addresses under unified addressing) and wait once for the stream;
# `read_scalar` copies one element of a CuArray into it with one `cuMemcpyDtoHAsync` and
# one stream synchronisation, instead of a `Vector` allocated per call and a synchronous
# copy from pageable memory (which CUDA stages through a buffer of its own).

# One buffer per thread (the copy and the wait run without a yield between them, so no
# other task of the thread can use it meanwhile), made on first use.
const READBACK_BYTES = 8192     # also the partials of reduce_full.jl: 4 per SM, up to 16 bytes each
const READBACK = Vector{Vector{UInt8}}()

@noinline function new_readback_buffer(t::Int)
    while length(READBACK) < t
        push!(READBACK, UInt8[])
    end
    READBACK[t] = pinned(UInt8, READBACK_BYTES)
    return READBACK[t]
end

@inline function readback_buffer()
    t = Threads.threadid()
    (t <= length(READBACK) && length(@inbounds READBACK[t]) == READBACK_BYTES) || return new_readback_buffer(t)
    return @inbounds READBACK[t]
end

"""
    CuMem.read_scalar(a::CuArray{T}) -> T

`a`'s first element, read back through a page-locked buffer on the current
[`stream()`](@ref): one asynchronous copy and one wait for the stream (so for everything
queued on it before). What scalar reductions return their result with; no scalar-indexing
check. Throws `AssertionError("Use of freed memory")` for a freed `a`, `ArgumentError`
for an empty one.
"""
function read_scalar(a::CuArray{T}) where {T}
    length(a) == 0 && throw(ArgumentError("read_scalar of an empty array"))
    CAPTURES[] == 0 || refuse_in_capture("a scalar read-back (a whole-array reduction, dot, ...)")
    sizeof(T) <= READBACK_BYTES || return Array(a)[1]
    p = devaddr(a)
    buf = readback_buffer()
    s = current_handle()
    check_thrown_before_read()
    GC.@preserve buf begin
        dst = convert(Ptr{Cvoid}, pointer(buf))
        check(c_copy_dtoh_async(dst, p, UInt64(sizeof(T)), s))
        check(c_stream_synchronize(s))
        check_kernel_errors()
        return unsafe_load(convert(Ptr{T}, dst))
    end
end

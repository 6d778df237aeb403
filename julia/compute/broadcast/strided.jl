# Strided copies between CuArrays and views of them, without the scalar path.
#
# Every non-scalar indexing operation (getindex with ranges, colons and integer vectors,
# setindex! of blocks, copies of views, transposes, permutedims, reverse, cat) is one
# copy between two "strided operands": a base address plus, per dimension, a length, a
# stride in elements (negative for reverse) and optionally an integer vector of
# coordinates (a gather on the source side, a scatter on the destination side).
#
# A copy is planned once: size-1 dimensions are dropped, neighbouring dimensions that are
# contiguous in both operands are merged, so a contiguous block becomes one engine copy
# (cuMemcpyDtoD) and anything else one launch of a fixed CUDA C kernel. The kernel moves
# machine words of 1, 2, 4, 8 or 16 bytes (an element of another size becomes several
# words: one more dimension) and does its index arithmetic in 32 bits when every offset
# fits, in 64 bits otherwise. On the host device the same plan runs in Julia on the host
# memory behind the buffers (contiguous runs with memmove), so CI checks the planning.

# Dimensions a kernel plan can hold (after merging, plus one for multi-word elements).
const MAX_RANK = 10

# The operands: StridedOperand, strided_operand, merge_dims!, ... (compute/broadcast/layout.jl).

## planning

# The lowest and highest element offsets (relative to addr) that `p` touches.
function extent(p::StridedOperand)
    lo = hi = 0
    for d in 1:length(p.dims)
        p.dims[d] == 0 && return (0, -1)
        if p.idx[d] === nothing
            far = (p.dims[d] - 1) * p.strides[d]
        else
            c = p.idx[d]
            a, b = (minimum(c) - 1) * p.strides[d], (maximum(c) - 1) * p.strides[d]
            lo += min(a, b); hi += max(a, b)
            continue
        end
        far < 0 ? (lo += far) : (hi += far)
    end
    return lo, hi
end

# The byte range [first, last] that `p` touches.
function byte_range(p::StridedOperand)
    lo, hi = extent(p)
    hi < lo && return (UInt64(1), UInt64(0))
    return p.addr + (lo * p.elsize) % UInt64, p.addr + (hi * p.elsize + p.elsize - 1) % UInt64
end

function overlaps(a::StridedOperand, b::StridedOperand)
    a1, a2 = byte_range(a)
    b1, b2 = byte_range(b)
    return a1 <= a2 && b1 <= b2 && a1 <= b2 && b1 <= a2
end

# CuMem.strided_copy!(dst::StridedOperand, src::StridedOperand)
#
# Copies every element of `src` to the same coordinates of `dst` (same `dims`, same element
# size): an engine copy when both are one contiguous block, else the strided-copy kernel
# (on the host device: the same plan in Julia). Overlapping operands go through a
# temporary, so the result is as if `src` were read first.
function strided_copy!(dst::StridedOperand, src::StridedOperand)
    MULTI[] && check_devices("copyto!", dst.roots..., src.roots...)
    dst.dims == src.dims || throw(DimensionMismatch("strided copy of $(src.dims) into $(dst.dims)"))
    dst.elsize == src.elsize || throw(ArgumentError("strided copy between element sizes $(src.elsize) and $(dst.elsize)"))
    any(==(0), dst.dims) && return nothing
    dst.conj && throw(ArgumentError("cannot write through an adjoint of complex numbers"))
    if overlaps(dst, src)
        # read src completely first (an index-vector destination may also hit one element
        # twice; the last write wins as in Base, but only when src is read first)
        tmp = CuArray{UInt8}(undef, prod(src.dims) * src.elsize)
        t = StridedOperand(devaddr(tmp), src.elsize, copy(src.dims), contiguous_strides(src.dims),
                           Union{Nothing,Vector{Int}}[nothing for _ in src.dims], false, Any[tmp])
        strided_copy!(t, src)
        strided_copy!(dst, t)
        unsafe_free!(tmp)
        return nothing
    end
    d, s = drop_unit_dims!(copy(dst), copy(src))
    merge_dims!((d, s))
    GC.@preserve dst src begin
        if isempty(d.dims) || (length(d.dims) == 1 && d.strides[1] == 1 && s.strides[1] == 1 &&
                               d.idx[1] === nothing && s.idx[1] === nothing && !s.conj)
            n = isempty(d.dims) ? 1 : d.dims[1]
            if s.conj     # a single conjugated element: a plan of one dimension
                for p in (d, s)
                    isempty(p.dims) && (push!(p.dims, 1); push!(p.strides, 1); push!(p.idx, nothing))
                end
                run_plan!(d, s)
            else
                check(ordered_copy_dtod(d.addr, s.addr, (n * d.elsize) % UInt64))
            end
        else
            run_plan!(d, s)
        end
    end
    return nothing
end

run_plan!(d::StridedOperand, s::StridedOperand) = on_host() ? host_plan!(d, s) : kernel_plan!(d, s)

## the host device: the plan in Julia, over the host memory behind the device addresses

# Moves of one element as a machine word of its size (any element size divides into
# words of 8, 4, 2 or 1 bytes).
function host_plan!(d::StridedOperand, s::StridedOperand)
    if s.conj
        s.elsize == 8 ? host_words!(d, s, ComplexF32, true) :
        s.elsize == 16 ? host_words!(d, s, ComplexF64, true) :
        throw(ArgumentError("conjugation of $(s.elsize)-byte elements"))
        return nothing
    end
    w = word_size(d, s, 8)
    d2, s2 = widen_words(d, s, w)
    W = w == 8 ? UInt64 : w == 4 ? UInt32 : w == 2 ? UInt16 : UInt8
    host_words!(d2, s2, W, false)
    return nothing
end

function host_words!(d::StridedOperand, s::StridedOperand, ::Type{W}, conjugate::Bool) where {W}
    dp, sp = Ptr{W}(d.addr), Ptr{W}(s.addr)
    rank = length(d.dims)
    n0 = d.dims[1]
    inner_contig = d.strides[1] == 1 && s.strides[1] == 1 && d.idx[1] === nothing &&
                   s.idx[1] === nothing && !conjugate
    outer = CartesianIndices(Tuple(d.dims[2:end]))
    for c in outer
        doff = 0; soff = 0
        for k in 2:rank
            j = c[k-1]
            doff += (d.idx[k] === nothing ? j - 1 : d.idx[k][j] - 1) * d.strides[k]
            soff += (s.idx[k] === nothing ? j - 1 : s.idx[k][j] - 1) * s.strides[k]
        end
        if inner_contig
            unsafe_copyto!(dp + doff * sizeof(W), sp + soff * sizeof(W), n0)
        else
            dI, sI, ds, ss = d.idx[1], s.idx[1], d.strides[1], s.strides[1]
            @inbounds for j in 1:n0
                dj = dI === nothing ? j - 1 : dI[j] - 1
                sj = sI === nothing ? j - 1 : sI[j] - 1
                v = unsafe_load(sp + (soff + sj * ss) * sizeof(W))
                unsafe_store!(dp + (doff + dj * ds) * sizeof(W), conjugate ? conj(v) : v)
            end
        end
    end
    return nothing
end

# The largest word (≤ maxw bytes) that divides the element size and both base addresses.
function word_size(d::StridedOperand, s::StridedOperand, maxw::Int)
    w = maxw
    while w > 1 && (d.elsize % w != 0 || d.addr % w != 0 || s.addr % w != 0)
        w ÷= 2
    end
    return w
end

# The operands in units of w-byte words: an element of k > 1 words adds an innermost
# dimension of length k; then contiguous dimensions are merged again.
function widen_words(d::StridedOperand, s::StridedOperand, w::Int)
    k = d.elsize ÷ w
    k == 1 && return d, s
    out = map((d, s)) do p
        StridedOperand(p.addr, w, vcat(k, p.dims), vcat(1, p.strides .* k),
                       vcat(Union{Nothing,Vector{Int}}[nothing], p.idx), p.conj, p.roots)
    end
    merge_dims!(out)
    return out
end

## the GPU: one kernel launch

# Matches `struct Plan` of the kernel source.
struct KernelPlan
    n::Int64
    rank::Int64
    dims::NTuple{MAX_RANK,Int64}
    dst_strides::NTuple{MAX_RANK,Int64}
    src_strides::NTuple{MAX_RANK,Int64}
    dst_idx::NTuple{MAX_RANK,UInt64}
    src_idx::NTuple{MAX_RANK,UInt64}
end

"""
    CuMem.STRIDED_COPY_SOURCE

The CUDA C of the strided-copy kernels: `cumem_copy_w<bytes>_i<32|64>` move words of 1,
2, 4, 8 or 16 bytes, `cumem_copy_conj<8|16>_i<32|64>` conjugate complex Float32/Float64
elements; `i32`/`i64` is the width of the index arithmetic. Each thread handles elements
i, i + (grid size), ... of the column-major box `dims` (a grid-stride loop); the offsets
come from per-dimension strides or, where given, from an index vector (Int64, 1-based)
for that dimension. The C is julia/cuda/strided.cuh after `#define MAX_RANK`.
"""
const STRIDED_COPY_SOURCE = "#define MAX_RANK $MAX_RANK\n" * cuda_source("strided.cuh")

const STRIDED_THREADS = 256

function kernel_plan!(d::StridedOperand, s::StridedOperand)
    if s.conj
        (s.elsize == 8 || s.elsize == 16) || throw(ArgumentError("conjugation of $(s.elsize)-byte elements"))
        w = s.elsize
        (d.addr % w == 0 && s.addr % w == 0) || (w = 0)
        w == 0 && throw(ArgumentError("conjugating copy of misaligned complex elements"))
        d2, s2 = d, s
        prefix = "cumem_copy_conj$(w)"
    else
        w = word_size(d, s, 16)
        d2, s2 = widen_words(d, s, w)
        prefix = "cumem_copy_w$(w)"
    end
    rank = length(d2.dims)
    rank <= MAX_RANK || throw(ArgumentError("strided copy of $rank non-contiguous dimensions (at most $MAX_RANK)"))
    n = prod(d2.dims)
    # 32-bit index arithmetic when the element count and every offset fit
    lo1, hi1 = extent(d2); lo2, hi2 = extent(s2)
    small = n < typemax(Int32) && max(abs(lo1), abs(hi1), abs(lo2), abs(hi2)) < typemax(Int32)
    name = prefix * (small ? "_i32" : "_i64")
    # index vectors go to the device as Int64 (1-based)
    keep = Any[]
    didx = ntuple(k -> k <= rank && d2.idx[k] !== nothing ? (a = CuArray{Int64}(d2.idx[k]); push!(keep, a); devaddr(a)) : UInt64(0), MAX_RANK)
    sidx = ntuple(k -> k <= rank && s2.idx[k] !== nothing ? (a = CuArray{Int64}(s2.idx[k]); push!(keep, a); devaddr(a)) : UInt64(0), MAX_RANK)
    pad(v) = ntuple(k -> k <= rank ? Int64(v[k]) : Int64(1), MAX_RANK)
    plan = KernelPlan(n, rank, pad(d2.dims), pad(d2.strides), pad(s2.strides), didx, sidx)
    k = fixed_kernel(:strided, STRIDED_COPY_SOURCE, name)
    threads = STRIDED_THREADS
    blocks = max(1, min(cld(n, threads), 65535 * 16))
    GC.@preserve keep launch(k, CuPtr{UInt8}(d2.addr), CuPtr{UInt8}(s2.addr), plan; blocks = blocks, threads = threads)
    # the index vectors are freed to the pool now: the pool's stream ordering keeps them
    # intact until the launch has read them
    foreach(unsafe_free!, keep)
    return nothing
end

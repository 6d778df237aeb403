# Sorting on the device: sort, sort!, sortperm, sortperm!, partialsort, partialsort!,
# sort(A; dims), issorted, unique.
#
# Two algorithms, chosen by what the ordering needs:
#
# - LSD radix sort (Merrill & Grimshaw's scheme, the one of CUB's DeviceRadixSort behind
#   CuPy's and PyTorch's sorts) whenever the comparison is Base's `isless` on a primitive key
#   (Bool, 8 to 64-bit integers, Float16/32/64) - the default `sort`, `rev=true`, and `by`
#   functions that map elements to such keys (the keys are computed by one broadcast and
#   sorted with the permutation). Keys are mapped to unsigned integers whose order is
#   `isless`'s (floats: sign-magnitude flipped, NaNs after +Inf, -0.0 before 0.0; `rev`
#   complements them), then sorted 8 bits per pass: a histogram kernel per tile of 4096
#   keys, a device scan of the digit counts (scan.jl), and a stable scatter that ranks
#   equal digits with warp match instructions (sm_70+). O(n) work, stable, so `sortperm`
#   and `sort(A; dims)` (a stable second sort by column) come from the same kernels.
# - Bitonic sort of the permutation (Batcher) for any other `lt`/`by` (Julia functions
#   compiled from their typed IR, branches included): O(n log² n), one launch per merge step, made stable by breaking ties on the
#   original index. Comparison sorts have no key to take apart, and bitonic needs no
#   temporary memory or data-dependent control flow.
#
# The radix kernels' CUDA C is fixed text per key width and payload; the bitonic kernel
# calls the compiled comparison (element_fns.jl). On the host device, Base sorts the buffer
# after the same code generation.

## key transforms

# The unsigned type of a key's bits.
key_uint(::Type{T}) where {T} = sizeof(T) == 1 ? UInt8 : sizeof(T) == 2 ? UInt16 : sizeof(T) == 4 ? UInt32 : UInt64

const RADIX_TYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, Float32, Float64)
radix_sortable(@nospecialize(T)) = any(S -> S === T, RADIX_TYPES)

const RADIX_THREADS = 256
const RADIX_ITEMS = 16
const RADIX_TILE = RADIX_THREADS * RADIX_ITEMS

# C: the ordered unsigned key of T's bits u (as UK), and back.
function key_transform_c(T::Type)
    UK = c_type(key_uint(T))
    bits = 8 * sizeof(T)
    sign = "(($UK)1 << $(bits - 1))"
    if T <: AbstractFloat
        mant = T === Float16 ? 10 : T === Float32 ? 23 : 52
        expmask = "(((($UK)1 << $(bits - 1 - mant)) - 1) << $mant)"
        mantmask = "((($UK)1 << $mant) - 1)"
        to = """
        static __device__ __forceinline__ $UK to_key($UK u) {
          if ((u & $expmask) == $expmask && (u & $mantmask) != 0) u &= ($UK)~$sign;   /* every NaN after +Inf */
          return (u & $sign) ? ($UK)~u : ($UK)(u | $sign);
        }
        static __device__ __forceinline__ $UK from_key($UK u) { return (u & $sign) ? ($UK)(u ^ $sign) : ($UK)~u; }
        """
    elseif T <: Signed
        to = """
        static __device__ __forceinline__ $UK to_key($UK u) { return ($UK)(u ^ $sign); }
        static __device__ __forceinline__ $UK from_key($UK u) { return ($UK)(u ^ $sign); }
        """
    else
        to = """
        static __device__ __forceinline__ $UK to_key($UK u) { return u; }
        static __device__ __forceinline__ $UK from_key($UK u) { return u; }
        """
    end
    return to
end

# Kernels for keys of type T (their bits), with a payload of `vbytes` bytes (0: none).
function radix_source(T::Type, vbytes::Int)
    UK = c_type(key_uint(T))
    VT = vbytes == 0 ? "uint8_t" : vbytes == 4 ? "uint32_t" : "uint64_t"
    io = IOBuffer()
    print(io, C_PRELUDE_V2, key_transform_c(T))
    print(io, """
    /* keys to ordered unsigned (dir 1) or back (dir -1); flip complements them (rev) */
    extern "C" __global__ void cumem_radix_keys($UK* k, int64_t n, int dir, int flip)
    {
      for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        $UK u = k[i];
        if (dir > 0) { u = to_key(u); if (flip) u = ($UK)~u; }
        else { if (flip) u = ($UK)~u; u = from_key(u); }
        k[i] = u;
      }
    }
    /* the payload 0, 1, 2, ... (the identity permutation, 0-based) */
    extern "C" __global__ void cumem_radix_iota($VT* v, int64_t n)
    {
      for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) v[i] = ($VT)i;
    }
    /* counts[d * nblocks + b]: keys of tile b whose digit (bits shift..shift+7) is d */
    extern "C" __global__ void cumem_radix_hist(const $UK* k, uint32_t* counts, int64_t n, int shift, int64_t nblocks)
    {
      __shared__ uint32_t h[256];
      const int t = threadIdx.x;
      h[t] = 0;
      __syncthreads();
      const int64_t start = (int64_t)blockIdx.x * $RADIX_TILE;
      for (int r = 0; r < $RADIX_ITEMS; r++) {
        const int64_t i = start + r * $RADIX_THREADS + t;
        if (i < n) atomicAdd(&h[(unsigned)((k[i] >> shift) & 255u)], 1u);
      }
      __syncthreads();
      counts[(int64_t)t * nblocks + blockIdx.x] = h[t];
    }
    /* stable scatter of tile b to its digits' places: incl is the inclusive scan of counts */
    extern "C" __global__ void cumem_radix_scatter(const $UK* kin, $UK* kout, const $VT* vin, $VT* vout,
                                                   const uint32_t* counts, const uint32_t* incl,
                                                   int64_t n, int shift, int64_t nblocks, int hasv)
    {
      __shared__ uint32_t run[256];
      __shared__ uint32_t wc[$(RADIX_THREADS ÷ 32)][256];
      const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
      { const int64_t j = (int64_t)t * nblocks + blockIdx.x; run[t] = incl[j] - counts[j]; }
      const int64_t start = (int64_t)blockIdx.x * $RADIX_TILE;
      for (int r = 0; r < $RADIX_ITEMS; r++) {
        for (int w = 0; w < $(RADIX_THREADS ÷ 32); w++) wc[w][t] = 0;
        __syncthreads();
        const int64_t i = start + r * $RADIX_THREADS + t;
        const bool valid = i < n;
        const $UK key = valid ? kin[i] : ($UK)0;
        const unsigned d = valid ? (unsigned)((key >> shift) & 255u) : 256u;
        const unsigned peers = __match_any_sync(0xffffffffu, d);
        const unsigned rank = __popc(peers & ((1u << lane) - 1u));
        if (valid && rank == 0) wc[warp][d] = __popc(peers);
        __syncthreads();
        if (valid) {
          uint32_t pos = run[d] + rank;
          for (int w = 0; w < warp; w++) pos += wc[w][d];
          kout[pos] = key;
          if (hasv) vout[pos] = vin[i];
        }
        __syncthreads();
        { uint32_t s = 0; for (int w = 0; w < $(RADIX_THREADS ÷ 32); w++) s += wc[w][t]; run[t] += s; }
        __syncthreads();
      }
    }
    """)
    return String(take!(io))
end

radix_entry(T, vbytes) = kernel_entry((:radix, T, vbytes)) do
    (radix_source(T, vbytes), ("cumem_radix_keys", "cumem_radix_iota", "cumem_radix_hist", "cumem_radix_scatter"), nothing)
end

# Sorts the n keys in `keys` (a CuArray of T's bits, as key_uint(T)) in place by isless
# (rev: reversed), carrying `vals` (a CuArray of 4- or 8-byte elements, or nothing) along.
# `bits`: the low bits that can differ (8 * sizeof(T) unless told; keys already ordered).
# `transform`: map T's bits to ordered keys first and back at the end.
function radix_sort!(::Type{T}, keys::CuArray, vals, rev::Bool; bits::Int = 8 * sizeof(T), transform::Bool = true) where {T}
    n = length(keys)
    n < typemax(UInt32) || throw(ArgumentError("the device sort handles fewer than 2^32 elements, got $n"))
    vbytes = vals === nothing ? 0 : sizeof(eltype(vals))
    entry = radix_entry(T, vbytes)
    (on_host() || n <= 1) && return keys
    UK = eltype(keys)
    blocks, threads = grid_for(n)
    kk = entry_kernel(entry, "cumem_radix_keys")
    transform && launch(kk, devaddr(keys), Int64(n), Int32(1), Int32(rev); blocks = blocks, threads = threads)
    nb = cld(n, RADIX_TILE)
    counts = CuArray{UInt32}(undef, 256 * nb)
    incl = CuArray{UInt32}(undef, 256 * nb)
    kalt = CuArray{UK}(undef, n)
    valt = vals === nothing ? nothing : similar(vals)
    kh = entry_kernel(entry, "cumem_radix_hist")
    ks = entry_kernel(entry, "cumem_radix_scatter")
    kin, kout, vin, vout = keys, kalt, vals, valt
    for shift in 0:8:bits-1
        launch(kh, devaddr(kin), devaddr(counts), Int64(n), Int32(shift), Int64(nb); blocks = nb, threads = RADIX_THREADS)
        gpu_accumulate!(+, incl, counts, 1, NOINIT)
        launch(ks, devaddr(kin), devaddr(kout), vin === nothing ? CuPtr{Nothing}(0) : devaddr(vin),
               vout === nothing ? CuPtr{Nothing}(0) : devaddr(vout), devaddr(counts), devaddr(incl), Int64(n), Int32(shift),
               Int64(nb), Int32(vin !== nothing); blocks = nb, threads = RADIX_THREADS)
        kin, kout, vin, vout = kout, kin, vout, vin
    end
    if kin !== keys          # an odd number of passes: the result is in the other buffers
        copyto!(keys, kin)
        vals === nothing || copyto!(vals, vin)
    end
    transform && launch(kk, devaddr(keys), Int64(n), Int32(-1), Int32(rev); blocks = blocks, threads = threads)
    foreach(unsafe_free!, (counts, incl, kalt))
    valt === nothing || unsafe_free!(valt)
    return keys
end

# The bits of a CuArray{T} as a CuArray of key_uint(T) sharing its memory.
key_bits(v::CuArray{T}) where {T} = key_uint(T) === T ? v : reinterpret_same(key_uint(T), v)
reinterpret_same(::Type{U}, v::CuArray) where {U} = unsafe_wrap(CuArray, CuPtr{U}(devaddr(v)), length(v); own = false)

## bitonic sort of a permutation (general lt/by)

function bitonic_source(cdf, T::Type)
    TC = c_type(T)
    io = IOBuffer()
    print(io, """
    /* one merge step (k, j) of Batcher's bitonic network over m = 2^p slots of the permutation
       idx (0-based; slots >= n hold indices >= n, which order after every element); cmp is
       the compiled lt(by(a), by(b)) */
    extern "C" __global__ void cumem_bitonic(jl_ctx_t ctx, const $TC* v, int64_t* idx, int64_t n, int64_t m, int64_t k, int64_t j$(fn_param(cdf, "cmp")))
    {
    $(fn_local(cdf, "cmp"))  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)blockDim.x * gridDim.x) {
        const int64_t l = i ^ j;
        if (l <= i) continue;
        const int64_t p = idx[i], q = idx[l];
        bool after;    /* whether element p belongs after element q */
        if (p >= n || q >= n) after = p > q;
        else {
          const bool qp = $(fn_call(cdf, "cmp", "v[q]", "v[p]"));
          const bool pq = $(fn_call(cdf, "cmp", "v[p]", "v[q]"));
          after = qp || (!pq && p > q);
        }
        if (((i & k) == 0) == after) { idx[i] = q; idx[l] = p; }
      }
    }
    """)
    return kernel_source(cdf; body = String(take!(io)))
end

"""
    CuMem.SortLess(lt, by, rev)

`(x, y) -> lt(by(x), by(y))` (arguments swapped when `rev`): the comparison of the bitonic
sort, compiled for the element type; `lt` and `by` travel in its fields.
"""
struct SortLess{L,B,R}
    lt::L
    by::B
end
SortLess(lt::L, by::B, rev::Bool) where {L,B} = SortLess{L,B,rev}(lt, by)
(c::SortLess{L,B,false})(x, y) where {L,B} = c.lt(c.by(x), c.by(y))
(c::SortLess{L,B,true})(x, y) where {L,B} = c.lt(c.by(y), c.by(x))

# The permutation (0-based Int64s) sorting v by lt(by(x), by(y)) (rev: reversed), on the device.
function bitonic_perm(v::CuArray{T}, lt, by, rev::Bool) where {T}
    cmp = SortLess(lt, by, rev)
    cdf = element_function(cmp, T, T)
    cdf.rettype === Bool || throw(ArgumentError("the comparison of a sort must give a Bool, got $(cdf.rettype)"))
    entry = kernel_entry((:bitonic, T, typeof(cmp)), (cdf,)) do
        (bitonic_source(cdf, T), "cumem_bitonic", nothing)
    end
    n = length(v)
    m = nextpow(2, max(n, 1))
    idx = CuArray{Int64}(undef, m)
    on_host() && return idx, entry
    blocks, threads = grid_for(m)
    ki = entry_kernel(radix_entry(UInt64, 8), "cumem_radix_iota")
    launch(ki, devaddr(idx), Int64(m); blocks = blocks, threads = threads)
    ctx = launch_context(cdf)
    tail = fn_values!(Any[], cmp)
    k = 2
    while k <= m
        j = k >> 1
        while j > 0
            launch(entry_kernel(entry), ctx, devaddr(v), devaddr(idx), Int64(n), Int64(m), Int64(k), Int64(j), tail...;
                   blocks = blocks, threads = threads)
            j >>= 1
        end
        k <<= 1
    end
    return idx, entry
end

## choosing the algorithm

# (lt, by, rev) after folding `order` in, as Base.Order.ord does.
function sort_order(lt, by, rev, order)
    if order === Base.Order.Reverse
        rev = !rev
    elseif order !== Base.Order.Forward
        throw(ArgumentError("GPU sorts take lt, by, rev and order = Forward or Reverse; not $order"))
    end
    return lt, by, rev === true
end

# Whether the radix path applies: isless on the keys and a key type it handles.
radix_path(lt, by, T) = lt === isless && (by === identity ? radix_sortable(T) : radix_sortable(result_type(by, T)))

# A stable permutation (0-based Int64s on the device) sorting v (contiguous).
function device_perm(v::CuArray{T}, lt, by, rev) where {T}
    n = length(v)
    if radix_path(lt, by, T)
        keys = by === identity ? copy(v) : by.(v)
        K = eltype(keys)
        perm = CuArray{Int64}(undef, n)
        if !on_host() && n > 0
            blocks, threads = grid_for(n)
            launch(entry_kernel(radix_entry(K, 8), "cumem_radix_iota"), devaddr(perm), Int64(n);
                   blocks = blocks, threads = threads)
        end
        radix_sort!(K, key_bits(keys), perm, rev)
        unsafe_free!(keys)
        return perm
    end
    idx, _ = bitonic_perm(v, lt, by, rev)
    return on_host() ? idx : view_head(idx, n)
end
view_head(idx, n) = length(idx) == n ? idx : copy(view(idx, 1:n))

## the Base API

const SortKw = Union{typeof(isless),Any}

"""
    sort!(v::CuVector; lt=isless, by=identity, rev=false, order=Forward) -> v
    sort(v::AnyCuVector; ...) -> CuVector
    sort(A::AnyCuArray; dims, ...) / sort!(A::CuArray; dims, ...)

Sorts on the device, as Base (stable, so equal elements keep their order; NaNs last, and
first with `rev=true`; `-0.0` before `0.0`). With the default `lt=isless` on Bool, integer
or float keys (also keys made by `by`, e.g. `by=abs`) it is a radix sort; any other `lt`
(and `by`), compiled from Julia for the GPU (branches allowed), uses a bitonic sort (see
the top of `julia/compute/algorithms/sorting.jl` and `docs/compute.md`). `sort(A; dims)` sorts every slice along `dims`.
The `alg` keyword is accepted and ignored. Fewer than 2^32 elements.
"""
function Base.sort!(v::CuArray{T,1}; lt = isless, by = identity, rev::Bool = false,
                    order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T}
    check_alive(v)
    lt, by, rev = sort_order(lt, by, rev, order)
    n = length(v)
    if radix_path(lt, by, T) && by === identity
        radix_sort!(T, key_bits(v), nothing, rev)
    else
        p = device_perm(v, lt, by, rev)
        if !on_host() && n > 1
            s = v[p .+ 1]            # gather (an index vector on the device)
            copyto!(v, s); unsafe_free!(s)
        end
        unsafe_free!(p)
    end
    if on_host() && n > 1     # (stable, as the device sorts)
        GC.@preserve v sort!(host_view(v); lt = lt, by = by, rev = rev, alg = Base.Sort.MergeSort)
    end
    return v
end
Base.sort(v::AnyCuArray{T,1}; kw...) where {T} = sort!(copy(v); kw...)

# Column id of each element of a contiguous n×m layout (sorted dim first), as UInt32 keys.
function Base.sort!(A::CuArray{T}; dims::Integer, lt = isless, by = identity, rev::Bool = false,
                    order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T}
    check_alive(A)
    1 <= dims || throw(ArgumentError("dimension out of range"))
    dims > ndims(A) && return A
    ndims(A) == 1 && return sort!(A; lt = lt, by = by, rev = rev, order = order)
    lt, by, rev = sort_order(lt, by, rev, order)
    # the sorted dimension first, contiguous
    perm = (dims, (d for d in 1:ndims(A) if d != dims)...)
    B = dims == 1 ? A : permutedims(A, perm)
    len = size(A, dims)
    nseg = length(A) ÷ max(len, 1)
    if length(A) > 1 && len > 1
        if on_host()
            device_perm(vec(B), lt, by, rev)      # generates the kernels
            GC.@preserve B sort!(host_view(B); dims = 1, lt = lt, by = by, rev = rev, alg = Base.Sort.MergeSort)
        else
            sort_segments!(vec(B), len, nseg, lt, by, rev)
        end
    end
    dims == 1 || permutedims!(A, B, invperm(perm))
    return A
end
Base.sort(A::AnyCuArray; dims::Integer, kw...) = sort!(copy(A); dims = dims, kw...)

# Sorts each of the nseg contiguous segments of `len` elements of v: a stable sort of the
# whole vector, then a stable radix sort of the permutation by segment number.
function sort_segments!(v::CuArray{T,1}, len, nseg, lt, by, rev) where {T}
    p = device_perm(v, lt, by, rev)                 # 0-based positions in sorted order
    seg = UInt32.(p .÷ len)                         # their segments
    bits = max(8, 8 * cld(ndigits(max(nseg - 1, 1); base = 2), 8))
    radix_sort!(UInt32, seg, p, false; bits = bits, transform = false)
    s = v[p .+ 1]
    copyto!(v, s)
    foreach(unsafe_free!, (p, seg, s))
    return v
end

"""
    sortperm(v::AnyCuVector; lt=isless, by=identity, rev=false, order=Forward) -> CuVector{Int}
    sortperm!(ix::CuVector{Int}, v; ...) -> ix

The stable sorting permutation (as Base's default for `sortperm`), computed on the device
by the same algorithms as [`sort!`](@ref).
"""
function Base.sortperm(v::AnyCuArray{T,1}; lt = isless, by = identity, rev::Bool = false,
                       order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T}
    lt, by, rev = sort_order(lt, by, rev, order)
    c = v isa CuArray ? v : copy(v)
    p = device_perm(c, lt, by, rev)
    if on_host()
        unsafe_free!(p)
        GC.@preserve c return CuArray(sortperm(host_view(c); lt = lt, by = by, rev = rev))
    end
    r = p .+ 1
    unsafe_free!(p)
    return r
end
function Base.sortperm!(ix::CuArray{<:Integer,1}, v::AnyCuArray{T,1}; initialized::Bool = false, kw...) where {T}
    length(ix) == length(v) || throw(ArgumentError("index vector must have the same length as v"))
    copyto!(ix, sortperm(v; kw...))
    return ix
end

"""
    partialsort(v::AnyCuVector, k; kw...) / partialsort!(v::CuVector, k; kw...)

The `k`-th element (an integer `k`: a number) or elements (a range: a CuVector) of the
sorted `v`, as Base; through a full device sort (no selection algorithm yet).
"""
function Base.partialsort!(v::CuArray{T,1}, k::Union{Integer,OrdinalRange}; kw...) where {T}
    checkbounds(v, k)
    sort!(v; kw...)
    return k isa Integer ? Array(view(v, k:k))[1] : v[k]
end
Base.partialsort(v::AnyCuArray{T,1}, k::Union{Integer,OrdinalRange}; kw...) where {T} = partialsort!(copy(v), k; kw...)

"""
    issorted(v::AnyCuVector; lt=isless, by=identity, rev=false, order=Forward) -> Bool

Whether `v` is sorted: one broadcast compares neighbours and one reduction combines them.
"""
function Base.issorted(v::AnyCuArray{T,1}; lt = isless, by = identity, rev::Bool = false,
                       order::Base.Ordering = Base.Order.Forward) where {T}
    lt2, by2, rev2 = sort_order(lt, by, rev, order)
    n = length(v)
    n <= 1 && return true
    a, b = view(v, 1:n-1), view(v, 2:n)
    # whether a neighbour pair is out of order: lt(by(b), by(a)) (reversed: lt(by(a), by(b)))
    return !any(map(SortLess(lt2, by2, !rev2), a, b))
end

"""
    unique(A::AnyCuArray) -> CuVector

The distinct elements of `A` (by `isequal`) in the order of their first occurrence, as Base:
a stable device sort, a comparison of neighbours, a compaction of the group starts, and a
sort of their first positions.
"""
function Base.unique(A::AnyCuArray{T}) where {T}
    v = vec(copy_if_wrapper(A))
    n = length(v)
    n <= 1 && return copy(v)
    if on_host()
        device_perm(v, isless, identity, false)
        GC.@preserve v return CuArray(unique(host_view(v)))
    end
    p = device_perm(v, isless, identity, false)       # stable: each group starts at its first occurrence
    s = v[p .+ 1]
    starts = similar(s, Bool)
    starts[1:1] .= true
    view(starts, 2:n) .= .!isequal.(view(s, 2:n), view(s, 1:n-1))
    first_pos = p[starts]                              # 0-based first occurrences
    sort!(first_pos)
    r = v[first_pos .+ 1]
    foreach(unsafe_free!, (p, s, starts, first_pos))
    return r
end

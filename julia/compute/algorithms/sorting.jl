# Sorting on the device: sort, sort!, sortperm, sortperm!, partialsort, partialsort!,
# sort(A; dims), issorted, unique.
#
# Two algorithms, chosen by what the ordering needs:
#
# - Onesweep LSD radix sort (Adinets & Merrill 2022, the scheme of CUB's DeviceRadixSort
#   behind CuPy's and PyTorch's sorts) whenever the comparison is Base's `isless` on a
#   primitive key (Bool, Char, 8 to 64-bit integers, Float16/32/64) - the default `sort`,
#   `rev=true`, and `by` functions that map elements to such keys (the keys are computed by
#   one broadcast and sorted with the permutation). Keys are mapped to unsigned integers whose
#   order is `isless`'s (floats: sign-magnitude flipped, NaNs after +Inf, -0.0 before 0.0;
#   `rev` complements them) on the first pass's load and back on the last pass's store. One
#   kernel counts every 8-bit digit's histogram, one block turns them into offsets and drops
#   the digits equal over all keys, then one kernel per digit ranks tiles (4096 keys by default) in
#   shared memory (warp match), finds each digit's place by decoupled look-back over the
#   tiles and writes the keys regrouped by digit. No host synchronization; O(n) work, stable,
#   so `sortperm` (32-bit positions as payload) and `sort(A; dims)` (a stable second sort
#   by column) come from the same kernels (`julia/cuda/sort.cuh`).
# - Bitonic sort of the permutation (Batcher) for any other `lt`/`by` (Julia functions
#   compiled from their typed IR, branches included): O(n log² n), one launch per merge step, made stable by breaking ties on the
#   original index. Comparison sorts have no key to take apart, and bitonic needs no
#   temporary memory or data-dependent control flow.
#
# The radix kernels' CUDA C is fixed text (sort.cuh) instantiated per key type and payload;
# the bitonic kernel calls the compiled comparison (element_fns.jl). On the host device, Base sorts the buffer
# after the same code generation.

## the onesweep radix sort (julia/cuda/sort.cuh)

# The unsigned type of a key's bits.
key_uint(::Type{T}) where {T} = sizeof(T) == 1 ? UInt8 : sizeof(T) == 2 ? UInt16 : sizeof(T) == 4 ? UInt32 : UInt64

const RADIX_TYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, Float32, Float64, Char)
radix_sortable(@nospecialize(T)) = any(S -> S === T, RADIX_TYPES)

const SORT_CUH = cuda_source("sort.cuh")

const RADIX_WIDE = 1 << 30                  # from n = 2^30 on, 64-bit look-back words

"""
    CuMem.RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early = 0, threads = 256, hist = 4, walk = 0)

The onesweep sort's tuning (sort.cuh's CUMEM_SORT_ITEMS, CUMEM_SORT_BLOCKS_PER_SM,
CUMEM_SORT_LOOKBACK, CUMEM_SORT_SLEEP_NS, CUMEM_SORT_MATCH, CUMEM_SORT_EARLY, CUMEM_SORT_THREADS,
CUMEM_SORT_HIST, CUMEM_SORT_WALK): keys per thread (tiles of
`threads` × `items` keys, 1 to 32), the onesweep kernel's `__launch_bounds__` minimum of resident
blocks per SM (0: none, up to 8), the tiles a digit's look-back reads per round trip (1 to
32), the look-back's pause (`__nanosleep`, 0 to 10000 ns; 0: none) before it reads a tile
that was not yet published again, and how a warp finds its keys of equal digits (1: a
shared-memory `atomicOr` per key, 0: eight ballots per key, 2: each pass the ballots where
one digit holds more than 1/8 of the keys, whose lanes would serialize the `atomicOr`, else
the `atomicOr`; 3: as 2 with `__match_any_sync` in place of the ballots), and the early counts
(CUB's: 0 none, the tile's digit counts published after its ranking; 1 counted by
shared-memory atomics right after the load and published at once, the look-back after the
ranking; 2 likewise, the look-back before the ranking), the threads of a block (a multiple
of 32 from 256 to 1024; threads 0-255 own the digits' counts and look-back; CUB's onesweep
for 4-byte keys on sm_90 takes 384 threads of 19-20 keys: `CUB_NAMESPACE::RadixSortPolicy`'s
`Policy900`), the keys each thread of the histogram kernel loads before counting any
(1 to 32: the loads in flight together) and how the look-back takes a window of tiles (0
tile by tile, a branch each; 1 the window's flags as bit masks, its stop by one `__ffs`, no
branch). [`CuMem.sort_tuning`](@ref) gives the one in use.
"""
struct RadixTuning
    items::Int
    blocks_per_sm::Int
    lookback::Int
    sleep_ns::Int
    match::Int
    early::Int
    threads::Int
    hist::Int
    walk::Int
end
# (five to eight fields: the default's for the others)
RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match) = RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, RADIX_DEFAULT.early)
RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early) =
    RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, RADIX_DEFAULT.threads)
RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, threads) =
    RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, threads, RADIX_DEFAULT.hist)
RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, threads, hist) =
    RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, threads, hist, RADIX_DEFAULT.walk)
# (24 keys per thread, 3 blocks per SM, 16 histogram keys in flight: 0.90-0.94 x the earlier
# 16 / 4 / 4 in all four sorts at 10^8 on an H200, each timed interleaved with it:
# bench/results/h200x4-2026-11-28-session12, call B)
const RADIX_DEFAULT = RadixTuning(24, 3, 8, 100, 2, 0, 256, 16, 0)
const SORT_TUNING = Ref(RadixTuning(0, 0, 0, 0, 0, 0, 0, 0, 0))     # items 0: not yet read from ENV
# each field's variable and values
const SORT_VARS = (items = "CUMEM_SORT_ITEMS" => 1:32, blocks_per_sm = "CUMEM_SORT_BLOCKS_PER_SM" => 0:8,
                   lookback = "CUMEM_SORT_LOOKBACK" => 1:32, sleep_ns = "CUMEM_SORT_SLEEP_NS" => 0:10000,
                   match = "CUMEM_SORT_MATCH" => 0:3, early = "CUMEM_SORT_EARLY" => 0:2, threads = "CUMEM_SORT_THREADS" => 256:32:1024,
                   hist = "CUMEM_SORT_HIST" => 1:32, walk = "CUMEM_SORT_WALK" => 0:1)

"""
    CuMem.sort_tuning() -> RadixTuning
    CuMem.sort_tuning(t::RadixTuning) -> t

The onesweep radix sort's tuning in use, read on first use from the environment variables
`CUMEM_SORT_ITEMS` (keys per thread, 1-32, default 24; 8-byte keys or payload take at most 22 with 256 threads,
the most whose shared memory fits CUDA's 48 KiB per block: `CuMem.radix_fit`), `CUMEM_SORT_BLOCKS_PER_SM`
(`__launch_bounds__` blocks per SM, 0-8, default 3), `CUMEM_SORT_LOOKBACK` (look-back
tiles per round trip, 1-32, default 8), `CUMEM_SORT_SLEEP_NS` (the look-back's pause,
0-10000, default 100), `CUMEM_SORT_MATCH` (1 atomicOr, 0 ballots, 2 by pass, 3 by pass with
`__match_any_sync`; default 2), `CUMEM_SORT_EARLY` (early counts: 0 none, 1 before the
ranking, 2 with the look-back before the ranking; default 0), `CUMEM_SORT_THREADS` (threads
of a block, a multiple of 32 from 256 to 1024, default 256), `CUMEM_SORT_HIST` (keys in
flight per thread of the histogram kernel, 1-32, default 16) and `CUMEM_SORT_WALK` (the
look-back's window: 0 tile by tile, 1 by bit masks; default 0); the second
form sets it for the sorts that follow
(bench/julia/sort_bench.jl compares variants in one process). Each tuning compiles its own
kernels. Throws `ArgumentError` for a value out of range (the tuning is then unchanged).
"""
function sort_tuning()
    t = SORT_TUNING[]
    t.items != 0 && return t
    return SORT_TUNING[] = tuning_from_env(sort_tuning_check, RADIX_DEFAULT, SORT_VARS)
end
sort_tuning(t::RadixTuning) = (SORT_TUNING[] = sort_tuning_check(t))
function sort_tuning_check(t::RadixTuning)
    tuning_in_ranges(t, SORT_VARS) || throw(ArgumentError("sort tuning out of range: $t ($(tuning_ranges_text(SORT_VARS)))"))
    # (every tuning must fit 4-byte keys with a 4-byte payload, sortperm's; 8-byte ones take fewer items: radix_fit)
    check_static_smem("the sort kernels for 4-byte keys and payload with $t would", maximum(radix_smem(4, 4, t.items, t.threads)))
    return t
end
radix_tile(t::RadixTuning) = t.threads * t.items      # CUMEM_SORT_TILE

# Bytes of static shared memory of sort.cuh's kernels (hist, offsets, onesweep, small; their
# __shared__ declarations in order) for keys of `kb` bytes, a payload of `vb` (0: none, a
# uint8_t placeholder), `items` keys per thread and blocks of `threads` (the warps' digit
# counts and match words share their bytes with the keys and payload). With 256 threads
# 4-byte keys fit every items of 1 to 32, 8-byte keys (or payload) up to 22 (onesweep: 2088
# + 2048 items bytes); with 384 threads 8-byte keys up to 15 (CUB's 384 x 15 for them).
function radix_smem(kb::Int, vb::Int, items::Int, threads::Int = RADIX_DEFAULT.threads)
    W, tile, vs = threads ÷ 32, threads * items, max(vb, 1)
    a, buf = max(kb, vs), max(tile * kb, tile * vs)     # the key/payload union's alignment and size
    onesweep = smem_layout(((4 * (256 + 256 + 8 + 1), 4), (max(8 * W * 256, buf), max(a, 4)), (0, max(a, 4))))
    small = smem_layout(((4 * 256, 4), (4 * 8, 4), (4 * kb, 4), (max(4 * W * 256, buf), max(a, 4))))
    return (hist = 4 * kb * 256, offsets = 4 * (256 + 8 + 8), onesweep = onesweep, small = small)
end

# `t` for keys of type T and a payload of `vbytes`: its items per thread lowered to the largest
# whose kernels fit CUDA's 48 KiB of static shared memory per block (8-byte keys or payload:
# at most 22 with 256 threads; e.g. items = 24, valid for Float32, sorts Int64 with 22). The
# sorts use it; ArgumentError if even 1 would not fit (not with sort.cuh's arrays as they are).
function radix_fit(::Type{T}, vbytes::Int, t::RadixTuning = sort_tuning()) where {T}
    items = t.items
    while items > 1 && maximum(radix_smem(sizeof(T), vbytes, items, t.threads)) > STATIC_SMEM_LIMIT
        items -= 1
    end
    check_static_smem("the sort kernels for $T keys and a $vbytes-byte payload would", maximum(radix_smem(sizeof(T), vbytes, items, t.threads)))
    return items == t.items ? t : RadixTuning(items, t.blocks_per_sm, t.lookback, t.sleep_ns, t.match, t.early, t.threads, t.hist, t.walk)
end

# The source for keys of type T (their bits), a payload of `vbytes` bytes (0: none) and
# look-back words of 64 bits (wide) or 32: sort.cuh after its typedefs and tuning.
function radix_source(T::Type, vbytes::Int, wide::Bool, tune::RadixTuning = sort_tuning())
    kind = T <: AbstractFloat ? 2 : T <: Signed ? 1 : 0
    mant = T === Float16 ? 10 : T === Float32 ? 23 : T === Float64 ? 52 : 0
    VT = vbytes == 0 ? "uint8_t" : vbytes == 4 ? "uint32_t" : "uint64_t"
    return string(C_PRELUDE_V2,
                  "typedef ", c_type(key_uint(T)), " cumem_key_t;\n",
                  "typedef ", VT, " cumem_val_t;\n",
                  "typedef ", wide ? "uint64_t" : "uint32_t", " cumem_status_t;\n",
                  "#define CUMEM_KEY_KIND ", kind, "\n#define CUMEM_KEY_BITS ", 8 * sizeof(T), "\n#define CUMEM_MANT ", mant, "\n",
                  "#define CUMEM_SORT_ITEMS ", tune.items, "\n#define CUMEM_SORT_BLOCKS_PER_SM ", tune.blocks_per_sm,
                  "\n#define CUMEM_SORT_LOOKBACK ", tune.lookback, "\n#define CUMEM_SORT_SLEEP_NS ", tune.sleep_ns, "\n#define CUMEM_SORT_MATCH ", tune.match, "\n#define CUMEM_SORT_EARLY ", tune.early,
                  "\n#define CUMEM_SORT_THREADS ", tune.threads, "\n#define CUMEM_SORT_HIST ", tune.hist, "\n#define CUMEM_SORT_WALK ", tune.walk,
                  "\n#define CUMEM_SORT_HAS_PAYLOAD ", vbytes == 0 ? 0 : 1, "\n",
                  SORT_CUH)
end

const RADIX_KERNELS = ("cumem_sort_hist", "cumem_sort_offsets", "cumem_sort_onesweep", "cumem_sort_finish", "cumem_sort_small")
radix_entry(T, vbytes, wide::Bool, tune::RadixTuning) = kernel_entry((:onesweep, T, vbytes, wide, tune)) do
    (radix_source(T, vbytes, wide, tune), RADIX_KERNELS, nothing)
end

#     CuMem.radix_sort!(T, keys::CuVector, vals, rev::Bool; src = keys, iota = false) -> keys
#
# Sorts the n keys of type `T`, stored as their bits in `keys` (a CuVector of `key_uint(T)`),
# in place by `isless` (`rev`: reversed), stable, carrying `vals` (a CuVector of 4- or 8-byte
# elements, or `nothing`) along: the onesweep radix sort of `julia/cuda/sort.cuh`
# (8-bit digits, one histogram pass for all digits, digits equal over all keys skipped, no
# host synchronization; up to a tile of keys (4096 by default): one block sorts them in shared memory). `src`: where the keys are read from (the first pass reads it, so
# `keys` may be uninitialized scratch when `src !== keys`); `iota`: `vals` starts as the
# positions 0, 1, 2, ... (made on the device; `vals`' contents are not read). Throws
# `ArgumentError` for 2^32 or more keys. Device memory: one more copy of the keys and of
# `vals`, 1 KiB per tile (4096 keys by default) and digit pass (2 KiB from 2^30 keys).
function radix_sort!(::Type{T}, keys::CuArray, vals, rev::Bool; src::CuArray = keys, iota::Bool = false) where {T}
    n = length(keys)
    n < typemax(UInt32) || throw(ArgumentError("the device sort handles fewer than 2^32 elements, got $n"))
    length(src) == n || throw(DimensionMismatch("radix_sort!: $(length(src)) source keys for $n"))
    vals === nothing || length(vals) == n || throw(DimensionMismatch("radix_sort!: $(length(vals)) values for $n keys"))
    vbytes = vals === nothing ? 0 : sizeof(eltype(vals))
    wide = n >= RADIX_WIDE
    tune = radix_fit(T, vbytes)        # (items lowered where the shared memory would not fit)
    entry = radix_entry(T, vbytes, wide, tune)
    on_host() && return keys
    n == 0 && return keys
    UK = eltype(keys)
    ntiles = cld(n, radix_tile(tune))
    flip = rev ? typemax(UK) : zero(UK)
    null = CuPtr{Nothing}(0)
    if ntiles == 1          # one block, every pass in shared memory
        GC.@preserve src keys vals launch(entry_kernel(entry, "cumem_sort_small"), devaddr(src), devaddr(keys),
            vals === nothing ? null : devaddr(vals), Int64(n), flip, Int32(vals !== nothing), Int32(iota); blocks = 1, threads = tune.threads)
        return keys
    end
    return radix_passes!(T, Base.inferencebarrier(keys), vals, rev, src, iota, entry, tune, ntiles, flip)  # (compiled when it runs)
end
function radix_passes!(::Type{T}, keys::CuArray, vals, rev::Bool, src::CuArray, iota::Bool, entry, tune, ntiles::Int, flip) where {T}
    n, UK, null = length(keys), eltype(keys), CuPtr{Nothing}(0)
    npass, wide = sizeof(UK), n >= RADIX_WIDE
    # one zeroed allocation: hist (npass x 256), info (npass + 1), the passes' tile counters
    # (npass), a pad to 8 bytes, the look-back words (npass x ntiles x 256, 4 or 8 bytes)
    ST = wide ? UInt64 : UInt32
    head = npass * 256 + 2 * npass + 2
    scratch = CuArray{UInt32}(undef, head + npass * ntiles * 256 * (sizeof(ST) ÷ 4))
    fill!(scratch, 0x0)
    hist = devaddr(scratch)
    info = hist + 4 * npass * 256
    counters = info + 4 * (npass + 1)
    status = hist + 4 * head
    kalt = CuArray{UK}(undef, n)
    valt = vals === nothing ? nothing : similar(vals)
    vA = vals === nothing ? null : devaddr(vals)
    vB = valt === nothing ? null : devaddr(valt)
    GC.@preserve src keys vals begin
        # (the histogram at full occupancy, as CUB's DeviceRadixSortHistogramKernel: 2048 threads
        # an SM, each with CUMEM_SORT_HIST keys in flight; was 4 blocks of 256 an SM)
        hb = max(1, min(ntiles, (2048 ÷ tune.threads) * sm_count()))
        launch(entry_kernel(entry, "cumem_sort_hist"), devaddr(src), hist, Int64(n), flip; blocks = hb, threads = tune.threads)
        launch(entry_kernel(entry, "cumem_sort_offsets"), hist, info, Int64(n); blocks = 1, threads = 256)
        ks = entry_kernel(entry, "cumem_sort_onesweep")
        for p in 0:npass-1
            launch(ks, devaddr(src), devaddr(keys), devaddr(kalt), vA, vB, hist, info,
                   status + p * ntiles * 256 * sizeof(ST), counters + 4 * p, Int64(n), Int32(p), flip,
                   Int32(vals !== nothing), Int32(iota); blocks = ntiles, threads = tune.threads)
        end
        blocks, threads = grid_for(n)
        launch(entry_kernel(entry, "cumem_sort_finish"), devaddr(keys), devaddr(kalt), vA, vB, info, Int64(n),
               Int32(vals !== nothing), Int32(iota); blocks = blocks, threads = threads)
    end
    foreach(unsafe_free!, (scratch, kalt))
    valt === nothing || unsafe_free!(valt)
    return keys
end

# The bits of a CuArray{T} as a CuArray of key_uint(T) sharing its memory.
key_bits(v::CuArray{T}) where {T} = key_uint(T) === T ? v : reinterpret_same(key_uint(T), v)
reinterpret_same(::Type{U}, v::CuArray) where {U} = unsafe_wrap(CuArray, CuPtr{U}(devaddr(v)), length(v); own = false)

## bitonic sort of a permutation (general lt/by)

const BITONIC_CUH = cuda_source("bitonic.cuh")

# The bitonic step kernel (bitonic.cuh) with the compiled comparison cdf on two T's.
function bitonic_source(cdf, T::Type)
    TC = c_type(T)
    io = IOBuffer()
    print(io, BITONIC_CUH)
    print(io, "CUMEM_KERNEL void cumem_bitonic(jl_ctx_t ctx, const $TC* v, int64_t* idx, int64_t n, int64_t m, int64_t k, int64_t j",
          fn_param(cdf, "cmp"), ") {\n  CUMEM_PDL_ENTRY();\n", fn_local(cdf, "cmp"))
    print(io, "  auto c = [&](const $TC a, const $TC b) -> bool { return ", fn_call(cdf, "cmp", "a", "b"), "; };\n")
    print(io, "  cumem_bitonic_step(v, idx, n, m, k, j, c);\n}\n")
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
    idx .= 0:m-1
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

# A stable permutation (0-based; UInt32s from the radix sort, Int64s from the bitonic sort)
# sorting v (contiguous), on the device.
function device_perm(v::CuArray{T}, lt, by, rev) where {T}
    n = length(v)
    if radix_path(lt, by, T)
        keys = by === identity ? v : by.(v)
        K = eltype(keys)
        perm = CuArray{UInt32}(undef, n)
        scratch = CuArray{key_uint(K)}(undef, n)
        radix_sort!(K, scratch, perm, rev; src = key_bits(keys), iota = true)
        unsafe_free!(scratch)
        keys === v || unsafe_free!(keys)
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
function Base.sort!(v::CuArray{T,1}; lt::LT = isless, by::BY = identity, rev::Bool = false,
                    order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T,LT,BY}
    # (specialised on lt and by: with them unspecialised, a first sort inferred every path,
    # Base's host sort included, for abstract functions: seconds in each process)
    check_alive(v)
    lt, by, rev = sort_order(lt, by, rev, order)
    # (the other paths behind inference barriers: Julia compiles every branch of a method at
    # its first call; the radix sort's also compiled the permutation path and the host's sort)
    radix_path(lt, by, T) && by === identity ? radix_sort!(T, key_bits(v), nothing, rev) :
                                               sort_by_perm!(Base.inferencebarrier(v), lt, by, rev)
    on_host() && length(v) > 1 && host_sort!(Base.inferencebarrier(v), lt, by, rev)
    return v
end
# v sorted through a permutation of it (device_perm), gathered on the device.
function sort_by_perm!(v::CuArray, lt::L, by::B, rev::Bool) where {L,B}   # (specialised as sort! is)
    p = device_perm(v, lt, by, rev)
    !on_host() && length(v) > 1 && (s = v[p .+ 1]; copyto!(v, s); unsafe_free!(s))   # a gather
    unsafe_free!(p); return v
end
# The host device's answer: Base's stable sort of the memory, as the device sorts.
host_sort!(v::CuArray, lt::L, by::B, rev::Bool) where {L,B} = GC.@preserve v sort!(host_view(v); lt = lt, by = by, rev = rev, alg = Base.Sort.MergeSort)
Base.sort(v::AnyCuArray{T,1}; kw...) where {T} = sort!(copy(v); kw...)

# Column id of each element of a contiguous n×m layout (sorted dim first), as UInt32 keys.
function Base.sort!(A::CuArray{T}; dims::Integer, lt::LT = isless, by::BY = identity, rev::Bool = false,
                    order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T,LT,BY}
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
    radix_sort!(UInt32, seg, p, false)              # (constant high digits are skipped)
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
function Base.sortperm(v::AnyCuArray{T,1}; lt::LT = isless, by::BY = identity, rev::Bool = false,
                       order::Base.Ordering = Base.Order.Forward, alg = nothing) where {T,LT,BY}
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

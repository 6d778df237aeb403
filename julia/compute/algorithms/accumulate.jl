# Scans: accumulate, accumulate!, cumsum, cumprod (and their ! forms) along any dimension,
# with any operator compiled from Julia's typed IR (element_fns.jl), and `init`. The device algorithm is
# the one-pass scan with decoupled look-back (Merrill & Garland 2016; CUB's DeviceScan under
# CuPy's and PyTorch's cumsum; julia/cuda/scan.cuh): long lines (vectors, the dimension of a
# matrix with few lines) are cut into tiles of 16 KiB of accumulators (4096 Float32s); each
# block scans its tile in shared memory, publishes the tile's total at once and finds its
# prefix from the totals of the tiles before it - one read and one write of the data. Arrays
# with many short lines scan one line per thread. The operator
# must be associative (its applications are regrouped, as in CUDA.jl and CuPy); Float16
# accumulates in Float32. On the host device Base computes after the same code generation.

## the kernels (julia/cuda/scan.cuh)

const SCAN_CUH = cuda_source("scan.cuh")

# ENV[name] as an Int in lo:hi (default when unset); an ArgumentError naming the variable
# otherwise. (The scan's and the sort's tuning variables.)
function tuning_env(name::String, default::Int, lo::Int, hi::Int)
    s = get(ENV, name, "")
    isempty(s) && return default
    v = tryparse(Int, strip(s))
    (v === nothing || !(lo <= v <= hi)) && throw(ArgumentError("$name=$(repr(s)): expected an integer from $lo to $hi"))
    return v
end

# A tuning (a struct of Int fields: the scan's, the sort's) from the environment: each field f
# from the variable vars.f.first (tuning_env) within the ends of the range vars.f.second (lo:hi
# or lo:step:hi; `check`, which gets the tuning, tests the step), the default's value when
# unset.
# (Loops over the field names: generators over a NamedTuple compiled at each first sort and
# scan cost more than a process's every tuning read.)
function tuning_from_env(check, default::T, @nospecialize(vars::NamedTuple)) where {T}
    v = Int[]
    for f in fieldnames(T)
        name, r = vars[f]::Pair
        push!(v, tuning_env(name::String, getfield(default, f)::Int, first(r)::Int, last(r)::Int))
    end
    return check(T(v...))
end

# Whether each field f of tuning t is in its range vars.f.second; and the ranges as an error
# message gives them ("threads 64-256 in steps of 32, items 1-32, ...").
function tuning_in_ranges(t, @nospecialize(vars::NamedTuple))
    for f in fieldnames(typeof(t))
        getfield(t, f) in (vars[f]::Pair).second || return false
    end
    return true
end
tuning_ranges_text(vars::NamedTuple) =
    join(("$f $(first(v.second))-$(last(v.second))" * (step(v.second) == 1 ? "" : " in steps of $(step(v.second))") for (f, v) in pairs(vars)), ", ")

# CUDA's limit on a block's static (`__shared__`) shared memory: 48 KiB, whatever the GPU
# (ptxas: "uses too much shared data (..., 0xc000 max)"). The sort's and the scan's tunings
# are checked against it before any compile.
const STATIC_SMEM_LIMIT = 48 * 1024

# `ArgumentError` unless `bytes` of static shared memory per block (what `what` needs) fit.
check_static_smem(what, bytes::Int) = bytes <= STATIC_SMEM_LIMIT ? bytes :
    throw(ArgumentError("$what need $bytes bytes of static shared memory per block, above CUDA's limit of $STATIC_SMEM_LIMIT (48 KiB)"))

# The bytes of a list of (size, alignment) declarations laid out one after the other, each at
# its alignment (as ptxas places a kernel's __shared__ variables; a struct's fields likewise).
function smem_layout(decls)
    o = 0
    for (sz, al) in decls
        o = cld(o, al) * al + sz
    end
    return o
end

"""
    CuMem.ScanTuning(threads, items, blocks_per_sm, sleep_ns, spin = 0, kernel = 1, window = 2)

The one-pass scan's tuning: threads per block (64 to 256, a multiple of 32; also the tiles
its look-back reads per round trip; scan.cuh's CUMEM_SCAN_THREADS), elements per thread for
accumulators of up to 4 bytes (1 to 32; larger accumulators take proportionally fewer, a
tile at most 32 KiB and its shared memory within CUDA's 48 KiB of static shared memory per
block), the kernel's `__launch_bounds__` minimum of resident blocks per SM
(0: none, up to 16; CUMEM_SCAN_BLOCKS_PER_SM; for accumulators of up to 8 bytes), and the
look-back's pause (`__nanosleep`, 0 to 10000 ns; 0: none) before it reads a tile that was
not yet published again, and how the look-back waits for unpublished tiles (scan.cuh's
CUMEM_SCAN_SPIN; 1: each thread nearer than the window's nearest published prefix waits on
its own tile, then one combine; 0: rounds of the whole block, each reading the window again
from the nearest unpublished tile), the kernel (scan.cuh's `cumem_scan_onepass`, 0: each
element through shared memory between coalesced loads and each thread's consecutive elements,
the block's threads in the look-back; 1: `cumem_scan_onepass_vec`, the elements in registers
with 16-byte vector loads and stores where the line has unit strides and aligned addresses,
scans by warp shuffles, the look-back by one warp without block barriers, for inputs and
outputs of 1, 2, 4 or 8 bytes, other element types take kernel 0; kernels 2 and 3, a
pipelined and a `cp.async` variant, were measured slower and removed: `ArgumentError`), and
the look-back window per lane of kernel 1 (1 to 16 status words: 32 × `window` tiles per
round trip to L2; CUMEM_SCAN_WINDOW). [`CuMem.scan_tuning`](@ref) gives the one in use.
"""
struct ScanTuning
    threads::Int
    items::Int
    blocks_per_sm::Int
    sleep_ns::Int
    spin::Int
    kernel::Int
    window::Int
end
# (four or five fields: the default's look-back wait, kernel and window)
ScanTuning(threads, items, blocks_per_sm, sleep_ns) = ScanTuning(threads, items, blocks_per_sm, sleep_ns, SCAN_DEFAULT.spin)
ScanTuning(threads, items, blocks_per_sm, sleep_ns, spin) =
    ScanTuning(threads, items, blocks_per_sm, sleep_ns, spin, SCAN_DEFAULT.kernel, SCAN_DEFAULT.window)
# The default: the vector kernel, 128 threads of 32 Float32s (tiles of 4096), a look-back
# window of 2 status words a lane. Nsight Compute on an H200 (bench/results/h200-2026-11-29-session15,
# call 2, probes/scan_inst.sh; cumsum! of 10^8 Float32, two calls each): its kernel 292-297 us
# and 48-50 M instructions, CUB's (PyTorch's cumsum) 305-311 us and 55 M, kernel 0 at the old
# default (256, 16, 0, 0, 0, 0, 8) 393-401 us and 135 M (56 registers: 4 blocks an SM), the
# vector kernel at 256 x 16 with a window of 8 516-522 us (of 1: 318; of 2: 323-331).
const SCAN_DEFAULT = ScanTuning(128, 32, 0, 0, 0, 1, 2)
const SCAN_TUNING = Ref(ScanTuning(0, 0, 0, 0, 0, 0, 0))     # threads 0: not yet read from ENV
# each field's variable and values
const SCAN_VARS = (threads = "CUMEM_SCAN_THREADS" => 64:32:256, items = "CUMEM_SCAN_ITEMS" => 1:32,
                   blocks_per_sm = "CUMEM_SCAN_BLOCKS_PER_SM" => 0:16, sleep_ns = "CUMEM_SCAN_SLEEP_NS" => 0:10000,
                   spin = "CUMEM_SCAN_SPIN" => 0:1, kernel = "CUMEM_SCAN_KERNEL" => 0:1, window = "CUMEM_SCAN_WINDOW" => 1:16)

"""
    CuMem.scan_tuning() -> ScanTuning
    CuMem.scan_tuning(t::ScanTuning) -> t

The one-pass scan's tuning in use, read on first use from the environment variables
`CUMEM_SCAN_THREADS` (64-256, a multiple of 32, default 128), `CUMEM_SCAN_ITEMS` (1-32,
default 32), `CUMEM_SCAN_BLOCKS_PER_SM` (0-16, default 0), `CUMEM_SCAN_SLEEP_NS` (0-10000,
default 0), `CUMEM_SCAN_SPIN` (0 or 1, default 0), `CUMEM_SCAN_KERNEL` (0 or 1, default 1) and
`CUMEM_SCAN_WINDOW` (1-16, default 2); the second form sets it for the scans that follow (bench/julia/sort_bench.jl
compares variants in one process). Each tuning compiles its own kernels. Throws
`ArgumentError` for a value out of range (the tuning is then unchanged).
"""
function scan_tuning()
    t = SCAN_TUNING[]
    t.threads != 0 && return t
    return SCAN_TUNING[] = tuning_from_env(scan_tuning_check, SCAN_DEFAULT, SCAN_VARS)
end
scan_tuning(t::ScanTuning) = (SCAN_TUNING[] = scan_tuning_check(t))
function scan_tuning_check(t::ScanTuning)
    # (kernels 2 and 3, docs/performance.md: 1.9-4 times the default's time on an H200)
    t.kernel in (2, 3) && throw(ArgumentError("scan tuning $t: kernel $(t.kernel) (the pipelined and cp.async scan kernels 2 and 3) " *
                                              "was removed after measuring slower than kernel 0; kernel 0 or 1"))
    tuning_in_ranges(t, SCAN_VARS) || throw(ArgumentError("scan tuning out of range: $t ($(tuning_ranges_text(SCAN_VARS)))"))
    check_static_smem("the one-pass scan of Float32 with $t would", scan_smem(Float32, t.threads, t.items, t.spin))
    return t
end
# Elements per thread of the one-pass scan: `items` for accumulators of up to 4 bytes, fewer
# for larger ones, the tile at most 32 KiB (the defaults: 4096 Float32s, 16 KiB), and at most
# what fits the 48 KiB of static shared memory (scan_smem; e.g. 64-byte accumulators with 256
# threads: 1 where items >= 32 would give 2).
function scan_items(Acc, t::ScanTuning = scan_tuning())
    k = clamp(min(4 * t.items ÷ max(sizeof(Acc), 1), 32768 ÷ (t.threads * max(sizeof(Acc), 1))), 1, t.items)
    while k > 1 && scan_smem(Acc, t.threads, k, t.spin) > STATIC_SMEM_LIMIT
        k -= 1
    end
    return k
end
# Bytes of static shared memory of cumem_scan_onepass (scan.cuh's __shared__ declarations in
# their order) for accumulators of type Acc, `threads` per block, `items` per thread and
# look-back `spin` (1 adds s_lbm2).
function scan_smem(Acc, threads::Int, items::Int, spin::Int = 1)
    sa, al, w = sizeof(Acc), Base.datatype_alignment(Acc), threads ÷ 32
    n = threads * items
    return smem_layout(((sa * (n + n >> 5), al), (sa * threads, al), (sa * w, al), (sa, al), (4, 4), (4w, 4), (4w, 4),
                        (4w * spin, 4), (sa * w, al), (8, 8), (8, 8), (8, 8)))
end
scan_tile(Acc, t::ScanTuning = scan_tuning()) = t.threads * scan_items(Acc, t)
# The vector kernel's (ScanTuning's kernel 1, scan.cuh's cumem_scan_onepass_vec) elements per chunk for input elements T and outputs Out (one 16-byte
# load of the wider of the two per lane), 0 where kernel 0 scans: kernel 0 tuned, or an element
# size that is not 1, 2, 4 or 8 bytes, or accumulators over 16 bytes.
function scan_vec(T, Out, Acc, t::ScanTuning = scan_tuning())
    t.kernel == 1 || return 0
    a, b = sizeof(T), sizeof(Out)
    (a in (1, 2, 4, 8) && b in (1, 2, 4, 8) && sizeof(Acc) <= 16) || return 0
    return 16 ÷ max(a, b)
end
# Elements per thread of the vector kernel: scan_items' rounded down to whole chunks of g (at least one).
scan_vitems(Acc, g::Int, t::ScanTuning = scan_tuning()) = max(g, scan_items(Acc, t) ÷ g * g)
# Elements per tile of the kernel that scans T into Out with accumulators Acc.
function scan_tile(T, Out, Acc, t::ScanTuning = scan_tuning())
    g = scan_vec(T, Out, Acc, t)
    return g == 0 ? scan_tile(Acc, t) : t.threads * scan_vitems(Acc, g, t)
end
# Accumulators up to 64 bytes fit the one-pass kernel's shared memory; larger ones scan serially.
scan_onepass_ok(Acc) = sizeof(Acc) <= 64
# Whether the one-pass kernel's look-back status is one 64-bit word per tile (flag and value
# together: accumulators of up to 4 bytes, `PACK` in scan.cuh).
scan_packed(Acc) = sizeof(Acc) <= 4

# fns: the compiled op (two Acc -> Acc), load (T -> Acc) and store (Acc -> Out); has_init:
# whether p0 (the init, as Acc) is a parameter. Two kernels, each the launch context first and
# the function objects after its own parameters, calling scan.cuh's templates:
# cumem_scan_lines (a thread per line) and cumem_scan_onepass (tiles, decoupled look-back).
function scan_kernels_source(fns, T::Type, Acc::Type, Out::Type, nk::Int, has_init::Bool, tune::ScanTuning = scan_tuning())
    odf, ldf, sdf = fns
    AC, TC, OC = c_type(Acc), c_type(T), c_type(Out)
    io = IOBuffer()
    # (the launch bounds for accumulators of up to 8 bytes: larger ones would spill under them)
    print(io, "#define CUMEM_SCAN_THREADS ", tune.threads, "\n#define CUMEM_SCAN_BLOCKS_PER_SM ", sizeof(Acc) <= 8 ? tune.blocks_per_sm : 0,
          "\n#define CUMEM_SCAN_SLEEP_NS ", tune.sleep_ns, "\n#define CUMEM_SCAN_SPIN ", tune.spin, "\n#define CUMEM_SCAN_WINDOW ", tune.window, "\n")
    print(io, "#define CUMEM_SCAN_OP(a, b) ", fn_call(odf, "op", "a", "b"), "\n")
    print(io, "#define CUMEM_SCAN_LD(x) ", fn_call(ldf, "ld", "x"), "\n")
    print(io, "#define CUMEM_SCAN_ST(a) ", fn_call(sdf, "st", "a"), "\n")
    print(io, SCAN_CUH)
    # line j's first element: kept dims ks (sizes), kst (input strides), okst (output strides)
    dims = join([", int64_t ks$d, int64_t kst$d, int64_t okst$d" for d in 1:nk])
    tail = (has_init ? ", $AC p0" : "") * fn_param(odf, "op") * fn_param(ldf, "ld") * fn_param(sdf, "st") * ") {\n  CUMEM_PDL_ENTRY();\n"
    p0 = has_init ? "p0" : "$AC{}"
    function body(call, g = 0)
        print(io, fn_local(odf, "op"), fn_local(ldf, "ld"), fn_local(sdf, "st"))
        for a in ("ks", "kst", "okst")
            print(io, "  const int64_t ", nk == 0 ? "* $a = 0" : "$a[] = {" * join(["$a$d" for d in 1:nk], ", ") * "}", ";\n")
        end
        print(io, "  CUMEM_SCAN_LAMBDAS($AC, $nk)\n")
        g > 0 && print(io, "  CUMEM_SCAN_VLAMBDAS($AC, $g, $TC)\n")
        print(io, "  ", call, "\n}\n")
    end
    print(io, "CUMEM_KERNEL void cumem_scan_lines(jl_ctx_t ctx, const $TC* src, $OC* dst, int64_t nlines, int64_t n, int64_t ist, int64_t ost", dims, tail)
    body("cumem_scan_serial<$AC, $has_init>(nlines, n, $p0, s_op, s_line, s_ld, s_st);")
    if scan_onepass_ok(Acc)
        print(io, "CUMEM_KERNEL void CUMEM_SCAN_BOUNDS cumem_scan_onepass(jl_ctx_t ctx, const $TC* src, $OC* dst, int64_t n, int64_t ntiles, int64_t ist, int64_t ost",
              dims, ", uint32_t* flags, $AC* aggs, $AC* incs, uint32_t* counter", tail)
        g = scan_vec(T, Out, Acc, tune)
        if g == 0
            body("cumem_scan_onepass<$AC, $(scan_items(Acc, tune)), $has_init>(n, ntiles, $p0, s_op, s_line, s_ld, s_st, s_ld1, s_st1, ist == 1 && ost == 1, flags, aggs, incs, counter);")
        else
            body("cumem_scan_onepass_vec<$AC, $(scan_vitems(Acc, g, tune)), $g, $has_init>(n, ntiles, $p0, s_op, s_line, s_ld, s_st, s_vld, s_vst, s_vok, flags, aggs, incs, counter);", g)
        end
    end
    return kernel_source(unique_fns(fns)...; body = String(take!(io)))
end

## planning and launching

# The accumulator type of op over T (init's type joins in), as Base's accumulate promotes.
function scan_acc_type(op, T, init)
    A = init === NOINIT ? Base.promote_op(op, T, T) : Base.promote_op(op, typeof(init), T)
    for _ in 1:4
        B = Base.promote_op(op, A, T)
        B === A && break
        A = B
    end
    return A
end

# Column-major strides (in elements) of a contiguous array of sizes sz.
scan_strides(sz) = (st = Vector{Int}(undef, length(sz)); acc = 1; for d in eachindex(sz); st[d] = acc; acc *= sz[d]; end; st)

# dst (contiguous, A's shape) = the scan of A along dimension d (nothing: linear order).
function gpu_accumulate!(op, dst::CuArray, A, d, init)
    T, Out = eltype(A), eltype(dst)
    # Float16 accumulates in Float32 under the known operators (rounded at each store)
    Acc = Out === Float16 && neutral(op, Float32) !== nothing ? Float32 : Out
    b, off, sz, st = layout(A)
    N = length(sz)
    if d === nothing || N == 1
        # one line in linear order (contiguous A: stride 1; otherwise copy first)
        if N != 1 && !(A isa CuArray)
            A = copy(A); b, off, sz, st = layout(A)
        end
        n, ist, ost, ksz, kst, okst = length(A), (N == 1 ? st[1] : 1), 1, Int[], Int[], Int[]
    elseif d > N
        n, ist, ost = 1, 0, 0
        ksz, kst, okst = collect(sz), collect(st), scan_strides(sz)
    else
        ost_all = scan_strides(sz)
        n, ist, ost = sz[d], st[d], ost_all[d]
        keep = [k for k in 1:N if k != d && sz[k] != 1]
        ksz, kst, okst = sz[keep], st[keep], ost_all[keep]
    end
    nlines = foldl(*, ksz; init = 1)
    has_init = init !== NOINIT
    tune = scan_tuning()
    scan_onepass_ok(Acc) &&     # (before any compile: ptxas would refuse it)
        check_static_smem("the one-pass scan of $Acc with $tune would", scan_smem(Acc, tune.threads, scan_items(Acc, tune), tune.spin))
    key = (:scan1, typeof(op), T, Acc, Out, length(ksz), has_init, tune)
    names = scan_onepass_ok(Acc) ? ("cumem_scan_lines", "cumem_scan_onepass") : ("cumem_scan_lines",)
    # the kernels an earlier process generated for these types (kernel_index.jl), behind an
    # inference barrier: a fresh process's first scan then runs no code generator
    entry = has_init || on_host() ? nothing : scan_index_entry(Base.inferencebarrier(key), Base.inferencebarrier(names))
    if entry === nothing
        # (the code generator's calls, compiled once for all types: arguments as `Any`)
        entry, ctx, tail = scan_generate(Base.inferencebarrier(op), Base.inferencebarrier(key),
                                         Base.inferencebarrier(names), init)::Tuple{KernelEntry,Any,Vector{Any}}
        (length(dst) == 0 || on_host()) && return dst
    else
        length(dst) == 0 && return dst
        ctx = DCContext0(kernel_error_address(), UInt64(0))
        tail = Any[]
    end
    dims = Any[]
    for k in eachindex(ksz); push!(dims, Int64(ksz[k]), Int64(kst[k]), Int64(okst[k])); end
    srcp = devaddr(b) + UInt64(off * sizeof(T))
    tile = scan_tile(T, Out, Acc, tune)
    ntiles = cld(n, tile)
    GC.@preserve b dst begin
        if !scan_onepass_ok(Acc) || n <= 32 || (ntiles <= 1 && nlines >= 4 * sm_count() * tune.threads) ||
           nlines >= 8 * sm_count() * tune.threads ÷ max(1, min(ntiles, 64))
            k = entry_kernel(entry, "cumem_scan_lines")
            blocks = max(1, min(cld(nlines, 128), 65535))
            launch(k, ctx, srcp, devaddr(dst), Int64(nlines), Int64(n), Int64(ist), Int64(ost), dims..., tail...;
                   blocks = blocks, threads = 128)
        else
            # look-back state (zeroed): the tiles' status and the tile counter after them;
            # accumulators of up to 4 bytes: 64-bit words holding flag and value (scan.cuh's
            # cumem_scan_pack), larger ones: 32-bit flags, then aggregates and prefixes
            total = nlines * ntiles
            k = entry_kernel(entry, "cumem_scan_onepass")
            blocks = total          # (a block per tile)
            if scan_packed(Acc)
                words = CuArray{UInt64}(undef, total + 1)
                fill!(words, 0x0)
                launch(k, ctx, srcp, devaddr(dst), Int64(n), Int64(ntiles), Int64(ist), Int64(ost), dims...,
                       devaddr(words), UInt64(0), UInt64(0), devaddr(words) + 8 * total,
                       tail...; blocks = blocks, threads = tune.threads)
                unsafe_free!(words)
            else
                flags = CuArray{UInt32}(undef, total + 1)
                fill!(flags, 0x0)
                part = CuArray{Acc}(undef, 2 * total)
                launch(k, ctx, srcp, devaddr(dst), Int64(n), Int64(ntiles), Int64(ist), Int64(ost), dims...,
                       devaddr(flags), devaddr(part), devaddr(part) + total * sizeof(Acc), devaddr(flags) + 4 * total,
                       tail...; blocks = blocks, threads = tune.threads)
                unsafe_free!(flags); unsafe_free!(part)
            end
        end
    end
    return dst
end

# The kernel index's key of a scan's kernel key (its operator, element, accumulator and
# result types, kept dimensions and tuning; only without `init`), `nothing` when the types'
# meaning could change between processes.
function scan_index_key(@nospecialize(key))
    K = Tuple{key[2],key[3],key[4],key[5]}
    index_safe(K) || return nothing
    t = key[8]
    return index_key(K; prefix = string("scan ", key[6], ' ', join([getfield(t, i) for i in 1:nfields(t)], ','), ' '))
end
scan_index_store(@nospecialize(key), source::String, @nospecialize(names)) =
    (k = scan_index_key(key); k === nothing || index_store(k, join(names, ' '), source); nothing)

# The scan kernels of `key` (gpu_accumulate!'s) loaded from the kernel index on the task's
# device, once per process, device and key (index_entry, which keeps the entry: later scans
# of the key take it from there); `nothing` when not recorded.
@noinline scan_index_entry(@nospecialize(key), @nospecialize(names)) =
    index_entry(scan_index_ikey, scan_index_build, names, key, names, true)
scan_index_ikey(@nospecialize(key), @nospecialize(names)) = (k = scan_index_key(key); k === nothing ? nothing : (k, join(names, ' ')))
scan_index_build(@nospecialize(key), @nospecialize(names), text::String, kernels::Vector{Any}) =
    KernelEntry(text, String[n for n in names], kernels, nothing, ())

# The kernels of gpu_accumulate!'s `key` generated (the compiled op, load and store), the
# launch context and the arguments after the dimensions (`init`, function values); their
# source recorded in the kernel index when nothing in them can differ between processes.
function scan_generate(op, key, names, init)
    _, _, T, Acc, Out, nk, has_init, tune = key
    odf, oo = converted_function(Acc, op, Acc, Acc)
    ldf, lo = converted_function(Acc, identity, T)
    sdf, so = converted_function(Out, identity, Acc)
    fns = (odf, ldf, sdf)
    entry = kernel_entry(key, fns) do
        (scan_kernels_source(fns, T, Acc, Out, nk, has_init, tune), names, nothing)
    end
    ctx = launch_context(unique_fns(fns)...)
    tail = Any[]
    has_init && push!(tail, convert(Acc, init))
    fn_values!(tail, oo, lo, so)
    # (a throw site's number belongs to the process that compiled it: none recorded)
    if !on_host() && !has_init && isempty(tail) && all(f -> isempty(f.ctx.globals) && !f.may_throw, fns)
        scan_index_store(key, entry.source, names)
        # (later calls of the key take gpu_accumulate!'s index path: this entry, no generator)
        scan_index_key(key) === nothing || index_keep!(key, entry)
    end
    return entry, ctx, tail
end

scan_dims(A, dims) = dims === nothing ? (ndims(A) == 1 ? 1 : nothing) : Int(dims)

# The host device's answer: Base's scan of the memory, behind a barrier specialised on `op`
# (Base's scans inferred for a `Function`-typed `op` cost seconds in each process).
function host_accumulate(op::O, h, d, init) where {O}
    kw = init === NOINIT ? () : (init = init,)
    return d === nothing ? collect(Iterators.accumulate(op, h; kw...)) : accumulate(op, h; dims = d, kw...)
end

host_scan!(dst::CuArray, A, op, d, init) =
    GC.@preserve A dst copyto!(host_view(dst), host_accumulate(op, host_arg(A), d, init))

function cu_accumulate!(op, B::AnyCuArray, A::AnyCuArray, dims, init)
    dims === nothing || dims >= 1 || throw(ArgumentError("dims must be a positive integer, got $dims"))
    size(B) == size(A) || throw(DimensionMismatch("accumulate!: the destination has size $(size(B)), the source $(size(A))"))
    check_devices("accumulate", B, A)
    d = scan_dims(A, dims)
    dst = B isa CuArray && !same_memory(B, layout(A)[1]) ? B : CuArray{eltype(B)}(undef, size(B))
    gpu_accumulate!(op, dst, A, d, init)
    # (behind an inference barrier: compiled only on the host device)
    on_host() && length(A) > 0 && host_scan!(Base.inferencebarrier(dst), A, op, d, init)
    dst === B || copyto!(B, dst)
    return B
end

"""
    accumulate(op, A::AnyCuArray; dims=nothing, init) / accumulate!(op, B, A; dims, init)

Inclusive scan of `A` with `op` along `dims` (a vector: its only dimension; other arrays
without `dims`: linear order, as Base), with Base's element types (`cumsum` of `Int8`s
gives `Int`s). `op` may be any associative Julia function that compiles for the GPU (branches, structs,
tuples, Complex: see `docs/compute.md`); GPU threads regroup its applications. `init` is
applied once, first. A `throw` in `op` is thrown as Base's exception at the next download
or `synchronize`.
"""
function Base.accumulate(op, A::AnyCuArray; dims::Union{Nothing,Integer} = nothing, init = NOINIT)
    T = eltype(A)
    Out = scan_acc_type(op, T, init)
    isbitstype(Out) || throw(ArgumentError("accumulate with `$(fname(op))` on $T gives $Out in Julia's inference; " *
                                           "GPU scans accumulate isbits values (a concrete type)"))
    return cu_accumulate!(op, CuArray{Out}(undef, size(A)), A, dims, init)
end
Base.accumulate!(op, B::AnyCuArray, A::AnyCuArray; dims::Union{Nothing,Integer} = nothing, init = NOINIT) =
    cu_accumulate!(op, B, A, dims, init)

"""
    cumsum(A::AnyCuArray; dims) / cumprod(A; dims) / cumsum!(B, A; dims) / cumprod!(B, A; dims)

Cumulative sums and products along `dims` (required for arrays of two or more dimensions,
as Base), through [`accumulate`](@ref) with Base's `add_sum`/`mul_prod` (small integers widen).
"""
Base.cumsum(A::AnyCuArray{T,1}) where {T} = accumulate(Base.add_sum, A)
Base.cumsum(A::AnyCuArray; dims::Integer) = accumulate(Base.add_sum, A; dims = dims)
Base.cumprod(A::AnyCuArray{T,1}) where {T} = accumulate(Base.mul_prod, A)
Base.cumprod(A::AnyCuArray; dims::Integer) = accumulate(Base.mul_prod, A; dims = dims)
Base.cumsum!(B::AnyCuArray, A::AnyCuArray; dims::Integer = 1) = accumulate!(Base.add_sum, B, A; dims = dims)
Base.cumprod!(B::AnyCuArray, A::AnyCuArray; dims::Integer = 1) = accumulate!(Base.mul_prod, B, A; dims = dims)

# Scans: accumulate, accumulate!, cumsum, cumprod (and their ! forms) along any dimension,
# with any operator compiled from Julia's typed IR (element_fns.jl), and `init`. The device algorithm is the
# classic three-phase scan (Blelloch; CUB's reduce-then-scan, as CuPy's cumsum): long lines
# (vectors, the dimension of a matrix with few lines) are cut into tiles of 2048 elements;
# one kernel reduces each tile, one scans the tile totals of each line, one rescans each
# tile from its prefix. Arrays with many short lines scan one line per thread. The operator
# must be associative (its applications are regrouped, as in CUDA.jl and CuPy); Float16
# accumulates in Float32. On the host device Base computes after the same code generation.

## the kernels

const SCAN_THREADS = 256
const SCAN_ITEMS = 8
const SCAN_TILE = SCAN_THREADS * SCAN_ITEMS

# fns: the compiled op (two Acc -> Acc), load (T -> Acc) and store (Acc -> Out); has_init:
# whether p0 (the init, as Acc) is a parameter. Every kernel takes the launch context first
# and the function objects (those with storage) after its own parameters.
function scan_kernels_source(fns, T::Type, Acc::Type, Out::Type, nk::Int, has_init::Bool)
    odf, ldf, sdf = fns
    AC, TC, OC = c_type(Acc), c_type(T), c_type(Out)
    load(ex) = fn_call(ldf, "ld", ex)
    store(ex) = fn_call(sdf, "st", ex)
    io = IOBuffer()
    # line j's first element: kept dims ks (sizes), kst (input strides), okst (output strides)
    sig_dims = join([", int64_t ks$d, int64_t kst$d, int64_t okst$d" for d in 1:nk])
    bases = "  int64_t ib = 0, ob = 0;\n" * (nk == 0 ? "" :
            "  { int64_t r = j;\n" * join(["    ib += (r % ks$d) * kst$d; ob += (r % ks$d) * okst$d; r /= ks$d;\n" for d in 1:nk]) * "  }\n")
    extra = (has_init ? ", $AC p0" : "") * fn_param(odf, "op") * fn_param(ldf, "ld") * fn_param(sdf, "st")
    unpack = fn_local(odf, "op") * fn_local(ldf, "ld") * fn_local(sdf, "st")
    OP(r, a, b) = "$r = $(fn_call(odf, "op", a, b));"
    # one thread per line
    print(io, """
    extern "C" __global__ void cumem_scan_lines(jl_ctx_t ctx, const $TC* src, $OC* dst, int64_t nlines, int64_t n, int64_t ist, int64_t ost$sig_dims$extra)
    {
    $unpack  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nlines; j += (int64_t)blockDim.x * gridDim.x) {
    $bases    $AC acc = $(load("src[ib]"));
    $(has_init ? "    " * OP("acc", "p0", "acc") * "\n" : "")    dst[ob] = $(store("acc"));
        for (int64_t k = 1; k < n; k++) { const $AC x = $(load("src[ib + k * ist]")); $(OP("acc", "acc", "x")) dst[ob + k * ost] = $(store("acc")); }
      }
    }
    """)
    # phase 1: tile totals (blockIdx.x: tile, blockIdx.y + gridDim.y * blockIdx.z: line)
    tile_head = """
      const int64_t j = (int64_t)blockIdx.y + (int64_t)gridDim.y * blockIdx.z;
      if (j >= nlines) return;
    $bases  const int64_t t0 = (int64_t)blockIdx.x * $SCAN_TILE + (int64_t)threadIdx.x * $SCAN_ITEMS;
      const int cnt = t0 >= n ? 0 : (n - t0 < $SCAN_ITEMS ? (int)(n - t0) : $SCAN_ITEMS);
      __shared__ $AC sh[$SCAN_THREADS];
    """
    # inclusive Hillis-Steele scan of the threads' values in sh (threads without elements
    # come last, so their garbage flows only to threads without elements)
    block_scan = """
      for (int o = 1; o < $SCAN_THREADS; o <<= 1) {
        $AC t = v;
        if ((int)threadIdx.x >= o) { const $AC u = sh[threadIdx.x - o]; $(OP("t", "u", "v")) }
        __syncthreads();
        v = t; sh[threadIdx.x] = v;
        __syncthreads();
      }
    """
    print(io, """
    extern "C" __global__ void cumem_scan_tiles(jl_ctx_t ctx, const $TC* src, $AC* part, int64_t nlines, int64_t n, int64_t ntiles, int64_t ist$sig_dims$extra)
    {
    $unpack$tile_head  $AC v{};
      if (cnt > 0) { v = $(load("src[ib + t0 * ist]")); for (int k = 1; k < cnt; k++) { const $AC x = $(load("src[ib + (t0 + k) * ist]")); $(OP("v", "v", "x")) } }
      sh[threadIdx.x] = v;
      __syncthreads();
    $block_scan  const int64_t last = (n - (int64_t)blockIdx.x * $SCAN_TILE + $(SCAN_ITEMS - 1)) / $SCAN_ITEMS - 1;
      if ((int64_t)threadIdx.x == (last < $(SCAN_THREADS - 1) ? last : $(SCAN_THREADS - 1))) part[j * ntiles + blockIdx.x] = v;
    }
    """)
    # phase 2: inclusive scan of each line's tile totals, in place (one block per line)
    print(io, """
    extern "C" __global__ void cumem_scan_parts(jl_ctx_t ctx, $AC* part, int64_t nlines, int64_t ntiles$extra)
    {
    $unpack  const int64_t j = (int64_t)blockIdx.y + (int64_t)gridDim.y * blockIdx.z;
      if (j >= nlines) return;
      $AC* p = part + j * ntiles;
      __shared__ $AC sh[$SCAN_THREADS];
      const int64_t chunk = (ntiles + $(SCAN_THREADS - 1)) / $SCAN_THREADS;
      const int64_t lo = chunk * threadIdx.x, hi = lo + chunk < ntiles ? lo + chunk : ntiles;
      $AC v{};
      if (lo < hi) { v = p[lo]; for (int64_t k = lo + 1; k < hi; k++) { const $AC x = p[k]; $(OP("v", "v", "x")) } }
      sh[threadIdx.x] = v;
      __syncthreads();
    $block_scan  if (lo < hi) {
        $AC acc = p[lo];
        if (threadIdx.x > 0) { const $AC u = sh[threadIdx.x - 1]; $(OP("acc", "u", "acc")) }
        p[lo] = acc;
        for (int64_t k = lo + 1; k < hi; k++) { const $AC x = p[k]; $(OP("acc", "acc", "x")) p[k] = acc; }
      }
    }
    """)
    # phase 3: each tile rescanned from its prefix
    print(io, """
    extern "C" __global__ void cumem_scan_apply(jl_ctx_t ctx, const $TC* src, const $AC* part, $OC* dst, int64_t nlines, int64_t n, int64_t ntiles, int64_t ist, int64_t ost$sig_dims$extra)
    {
    $unpack$tile_head  $AC x[$SCAN_ITEMS];
      $AC v{};
      for (int k = 0; k < cnt; k++) x[k] = $(load("src[ib + (t0 + k) * ist]"));
      if (cnt > 0) { v = x[0]; for (int k = 1; k < cnt; k++) $(OP("v", "v", "x[k]")) }
      sh[threadIdx.x] = v;
      __syncthreads();
    $block_scan  if (cnt == 0) return;
      bool have = false; $AC pre{};
    $(has_init ? "  pre = p0; have = true;\n" : "")  if (blockIdx.x > 0) { const $AC u = part[j * ntiles + blockIdx.x - 1]; if (have) { $(OP("pre", "pre", "u")) } else pre = u; have = true; }
      if (threadIdx.x > 0) { const $AC u = sh[threadIdx.x - 1]; if (have) { $(OP("pre", "pre", "u")) } else pre = u; have = true; }
      $AC acc = x[0];
      if (have) $(OP("acc", "pre", "x[0]"))
      dst[ob + t0 * ost] = $(store("acc"));
      for (int k = 1; k < cnt; k++) { $(OP("acc", "acc", "x[k]")) dst[ob + (t0 + k) * ost] = $(store("acc")); }
    }
    """)
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
    odf, oo = converted_function(Acc, op, Acc, Acc)
    ldf, lo = converted_function(Acc, identity, T)
    sdf, so = converted_function(Out, identity, Acc)
    fns = (odf, ldf, sdf)
    key = (:scan3, typeof(op), T, Acc, Out, length(ksz), has_init)
    entry = kernel_entry(key, fns) do
        src = scan_kernels_source(fns, T, Acc, Out, length(ksz), has_init)
        (src, ("cumem_scan_lines", "cumem_scan_tiles", "cumem_scan_parts", "cumem_scan_apply"), nothing)
    end
    (length(dst) == 0 || on_host()) && return dst
    ctx = launch_context(unique_fns(fns)...)
    tail = Any[]
    has_init && push!(tail, convert(Acc, init))
    fn_values!(tail, oo, lo, so)
    dims = Any[]
    for k in eachindex(ksz); push!(dims, Int64(ksz[k]), Int64(kst[k]), Int64(okst[k])); end
    srcp = devaddr(b) + UInt64(off * sizeof(T))
    ntiles = cld(n, SCAN_TILE)
    GC.@preserve b dst begin
        if ntiles <= 1 || nlines >= 8 * sm_count() * SCAN_THREADS ÷ max(1, min(ntiles, 64))
            k = entry_kernel(entry, "cumem_scan_lines")
            blocks = max(1, min(cld(nlines, 128), 65535))
            launch(k, ctx, srcp, devaddr(dst), Int64(nlines), Int64(n), Int64(ist), Int64(ost), dims..., tail...;
                   blocks = blocks, threads = 128)
        else
            part = CuArray{Acc}(undef, nlines * ntiles)
            gy, gz = nlines <= 65535 ? (nlines, 1) : (65535, cld(nlines, 65535))
            k1 = entry_kernel(entry, "cumem_scan_tiles")
            launch(k1, ctx, srcp, devaddr(part), Int64(nlines), Int64(n), Int64(ntiles), Int64(ist), dims..., tail...;
                   blocks = (ntiles, gy, gz), threads = SCAN_THREADS)
            k2 = entry_kernel(entry, "cumem_scan_parts")
            launch(k2, ctx, devaddr(part), Int64(nlines), Int64(ntiles), tail...; blocks = (1, gy, gz), threads = SCAN_THREADS)
            k3 = entry_kernel(entry, "cumem_scan_apply")
            launch(k3, ctx, srcp, devaddr(part), devaddr(dst), Int64(nlines), Int64(n), Int64(ntiles), Int64(ist), Int64(ost),
                   dims..., tail...; blocks = (ntiles, gy, gz), threads = SCAN_THREADS)
            unsafe_free!(part)
        end
    end
    return dst
end

scan_dims(A, dims) = dims === nothing ? (ndims(A) == 1 ? 1 : nothing) : Int(dims)

function cu_accumulate!(op, B::AnyCuArray, A::AnyCuArray, dims, init)
    dims === nothing || dims >= 1 || throw(ArgumentError("dims must be a positive integer, got $dims"))
    size(B) == size(A) || throw(DimensionMismatch("accumulate!: the destination has size $(size(B)), the source $(size(A))"))
    check_devices("accumulate", B, A)
    d = scan_dims(A, dims)
    dst = B isa CuArray && !same_memory(B, layout(A)[1]) ? B : CuArray{eltype(B)}(undef, size(B))
    gpu_accumulate!(op, dst, A, d, init)
    if on_host() && length(A) > 0
        GC.@preserve A dst begin
            h = host_arg(A)
            kw = init === NOINIT ? () : (init = init,)
            r = d === nothing ? collect(Iterators.accumulate(op, h; kw...)) : accumulate(op, h; dims = d, kw...)
            copyto!(host_view(dst), r)
        end
    end
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

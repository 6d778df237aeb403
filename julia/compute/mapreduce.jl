# Reductions: mapreduce (and sum, prod, maximum, minimum, any, all, count, reduce through
# it) over all or some dimensions. findmax/findmin/argmax/argmin are findext.jl's,
# cumsum/cumprod accumulate.jl's.
#
# GPU algorithm (as CUDA.jl's GPUArrays mapreduce and CuPy's ReductionKernel): each block
# reduces a part of one output's elements with a grid-stride loop that applies `f` while
# loading, then warp shuffles and one shared-memory step; when an output has many elements
# several blocks each write a partial and a second kernel reduces the partials. `f` and
# `op` are traced into the kernel (codegen.jl). On the host device Base reduces the buffer
# wrapped as an Array, after the same code generation.

const NOINIT = Base.Broadcast.Extruded   # a private sentinel type: "no init given"

# Known operators: their neutral element for an accumulator type, and the operator Base
# really applies (sum and prod go through add_sum/mul_prod, which widen small integers).
function neutral(op, ::Type{T}) where {T}
    if op === (+) || op === Base.add_sum || op === (|) || op === xor
        return zero(T)
    elseif op === (*) || op === Base.mul_prod
        return one(T)
    elseif op === max
        return T <: AbstractFloat ? T(-Inf) : typemin(T)
    elseif op === min
        return T <: AbstractFloat ? T(Inf) : typemax(T)
    elseif op === (&)
        return T === Bool ? true : ~zero(T)
    end
    return nothing
end

# The accumulator type: the fixed point of promote_op(op, Acc, R); Float16 accumulates in
# Float32 (rounded once at the end).
function accumulator_type(op, R)
    A = R
    for _ in 1:4
        B = Base.promote_op(op, A, R)
        B === A && break
        A = B
    end
    A in KERNEL_ELTYPES || throw(KernelTraceError("reducing $R with `$(fname(op))` gives $A, which GPU kernels cannot compute"))
    return A === Float16 ? Float32 : A
end

normalize_dims(dims::Colon, N) = collect(1:N)
normalize_dims(dims::Integer, N) = normalize_dims((dims,), N)
function normalize_dims(dims, N)
    ds = Int[]
    for d in dims
        d isa Integer && d >= 1 || throw(ArgumentError("region dimension(s) must be ≥ 1, got $d"))
        d <= N && !(d in ds) && push!(ds, d)
    end
    return sort!(ds)
end

## the kernel source

# Loops over the dimensions, shared by the reduction and findmax/findmin kernels: output j
# walks the kept dimensions (sizes ks1.., strides kst1..) to its first element `base`,
# and reduced index k walks the reduced dimensions (rs1.., rst1..) from there to `off`
# (or adds k itself when the reduced elements are contiguous: `linear`).

# The dimension parameters of the kernel's signature.
function print_dim_params(io, IDX, OFF, nk, nr, linear)
    for d in 1:nk
        print(io, ", $IDX ks$d, $OFF kst$d")
    end
    linear || for d in 1:nr; print(io, ", $IDX rs$d, $OFF rst$d"); end
end

# `base += ...` for output j (nothing without kept dimensions).
function print_base_offset(io, IDX, OFF, nk)
    nk > 0 || return
    print(io, "    { $IDX r = j;\n")
    for d in 1:nk
        print(io, "      base += ($OFF)(r % ks$d) * kst$d; r /= ks$d;\n")
    end
    print(io, "    }\n")
end

# `off`, the element of reduced index k.
function print_reduced_offset(io, IDX, OFF, nr, linear)
    if linear
        print(io, "      const $OFF off = base + ($OFF)k;\n")
    else
        print(io, "      $OFF off = base; $IDX r = k;\n")
        for d in 1:nr
            print(io, "      off += ($OFF)(r % rs$d) * rst$d; r /= rs$d;\n")
        end
    end
end

# `fx`: f's expression of x1 (input compute type), as Acc. `opx`: op of a and b, as Acc.
# kept/reduced dims: counts of each (their sizes and strides are kernel parameters).
function reduce_source(fx::String, T::Type, Acc::Type, opx::String, neutral_ex::String, Out::Type,
                       nk::Int, nr::Int, linear::Bool, final::Bool, finx::String,
                       ptypes, globals, idx64::Bool)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    AC = ctype_compute(Acc)
    io = IOBuffer()
    print(io, C_PRELUDE)
    print(io, "extern \"C\" __global__ void cumem_reduce(const $(codegen_ctype(T))* src, $(final ? codegen_ctype(Out) : AC)* out, $IDX nout, $IDX nred, $IDX gx")
    print_dim_params(io, IDX, OFF, nk, nr, linear)
    print_params(io, ptypes, globals)
    print(io, ")\n{\n")
    print_unpack(io, ptypes, globals)
    print(io, """
      __shared__ $AC sh[32];
      const $IDX by = blockIdx.x / gx, bx = blockIdx.x % gx, gy = gridDim.x / gx;
      const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
      for ($IDX j = bx; j < nout; j += gx) {
        $OFF base = 0;
    """)
    print_base_offset(io, IDX, OFF, nk)
    print(io, "    $AC acc = $neutral_ex;\n")
    load = T === Float16 ? "jl_h2f(src[off])" : "src[off]"
    if linear
        # Contiguous elements: four independent accumulators over four consecutive grid-stride
        # steps keep four loads in flight per thread (a single accumulator serialises each
        # load behind the previous add, which left sum at 0.69 of torch.sum's bandwidth on an
        # H100). The order of combination changes only as the grid-stride loop already does.
        print(io, "    $AC acc1 = $neutral_ex, acc2 = $neutral_ex, acc3 = $neutral_ex;\n")
        print(io, "    const $IDX stride = ($IDX)blockDim.x * gy;\n")
        print(io, "    $IDX k = by * blockDim.x + threadIdx.x;\n")
        # One output over a contiguous buffer of 4- or 8-byte elements whose start is 16-byte
        # aligned (the pool's array starts are; a view's may not be, checked here): 16-byte
        # loads (W elements each) into W accumulators, the W-aligned tail below.
        W = nk == 0 && T !== Float16 && sizeof(T) in (4, 8) ? 16 ÷ sizeof(T) : 0
        if W > 0
            print(io, "    if (((uint64_t)src & 15) == 0) {\n")
            print(io, "      struct __align__(16) vec_t { $(codegen_ctype(T)) x[$W]; };\n")
            print(io, "      const vec_t* vs = reinterpret_cast<const vec_t*>(src);\n")
            print(io, "      const $IDX nv = nred / $W;\n")
            print(io, "      #pragma unroll 4\n")
            print(io, "      for ($IDX i = k; i < nv; i += stride) {\n")
            print(io, "        const vec_t w = vs[i];\n")
            for (u, a) in zip(0:W-1, ("acc", "acc1", "acc2", "acc3"))
                print(io, "        { const $(ctype_compute(T)) x1 = w.x[$u]; const $AC b = $fx; const $AC a = $a; $a = $opx; }\n")
            end
            print(io, "      }\n")
            print(io, "      k += nv * $W;\n")
            print(io, "    } else\n")
        end
        print(io, "    for (; k + 3 * stride < nred; k += 4 * stride) {\n")
        for u in 0:3
            print(io, "      const $(ctype_compute(T)) v$u = ", replace(load, "off" => "base + ($OFF)(k + $u * stride)"), ";\n")
        end
        for (u, a) in zip(0:3, ("acc", "acc1", "acc2", "acc3"))
            print(io, "      { const $(ctype_compute(T)) x1 = v$u; const $AC b = $fx; const $AC a = $a; $a = $opx; }\n")
        end
        print(io, "    }\n")
        print(io, "    { const $AC a = acc; const $AC b = acc1; acc = $opx; }\n")
        print(io, "    { const $AC a = acc2; const $AC b = acc3; acc2 = $opx; }\n")
        print(io, "    { const $AC a = acc; const $AC b = acc2; acc = $opx; }\n")
        print(io, "    for (; k < nred; k += stride) {\n")
    else
        print(io, "    for ($IDX k = by * blockDim.x + threadIdx.x; k < nred; k += ($IDX)blockDim.x * gy) {\n")
    end
    print_reduced_offset(io, IDX, OFF, nr, linear)
    print(io, "      const $(ctype_compute(T)) x1 = $load;\n")
    print(io, "      const $AC b = $fx;\n")
    print(io, "      { const $AC a = acc; acc = $opx; }\n")
    print(io, "    }\n")
    print(io, """
        for (int o = 16; o > 0; o >>= 1) { const $AC a = acc; const $AC b = ($AC)__shfl_down_sync(0xffffffffu, acc, o); acc = $opx; }
        if (lane == 0) sh[warp] = acc;
        __syncthreads();
        if (warp == 0) {
          acc = lane < nwarps ? sh[lane] : ($AC)($neutral_ex);
          for (int o = 16; o > 0; o >>= 1) { const $AC a = acc; const $AC b = ($AC)__shfl_down_sync(0xffffffffu, acc, o); acc = $opx; }
          if (lane == 0) {
    """)
    if final
        val = finx
        Out === Float16 && (val = "jl_f2h($val)")
        print(io, "        out[by * nout + j] = $val;\n")
    else
        print(io, "        out[by * nout + j] = acc;\n")
    end
    print(io, "      }\n    }\n    __syncthreads();\n  }\n}\n")
    return String(take!(io))
end

## planning a reduction

struct ReducePlan
    base::CuArray
    offset::Int
    ksz::Vector{Int}; kst::Vector{Int}   # kept dims (sizes, strides)
    rsz::Vector{Int}; rst::Vector{Int}   # reduced dims
    linear::Bool                         # the reduced elements of an output are contiguous from its start
    nout::Int
    nred::Int
end

function plan_reduce(A, rdims::Vector{Int})
    b, off, sz, st = layout(A)
    N = length(sz)
    ksz, kst, rsz, rst = Int[], Int[], Int[], Int[]
    for d in 1:N
        if d in rdims
            sz[d] == 1 || (push!(rsz, sz[d]); push!(rst, st[d]))
        else
            sz[d] == 1 || (push!(ksz, sz[d]); push!(kst, st[d]))
        end
    end
    # contiguous reduced elements: strides 1, n1, n1*n2, ...
    linear = true
    s = 1
    for d in eachindex(rsz)
        rst[d] == s || (linear = false)
        s *= rsz[d]
    end
    return ReducePlan(b, off, ksz, kst, rsz, rst, linear, prod(ksz), prod(rsz))
end

# Traces f (on T) and op (on Acc) and returns their C expressions and parameter lists.
function trace_reduce(f, op, T::Type, Acc::Type, init)
    ctx = TraceContext()
    params, baked = Any[], Any[]
    lift_captures!(ctx, params, baked, f)
    fr = trace_fn(ctx, f, Any[Sym(T, "x1")])
    fx = cv(fr, Acc)
    lift_captures!(ctx, params, baked, op)
    opr = trace_fn(ctx, op, Any[Sym(Acc, "a"), Sym(Acc, "b")])
    opx = cv(opr, Acc)
    finx = "acc"
    if init !== NOINIT
        push!(params, init)
        fin = trace_fn(ctx, op, Any[Sym(typeof(init), "p$(length(params))"), Sym(Acc, "acc")])
        finx = fin.ex
        return fx, opx, params, ctx.globals, symtype(fin), fin
    end
    return fx, opx, params, ctx.globals, Acc, Sym(Acc, "acc")
end

reduce_key_params(f, op) = (ps = Any[]; bk = Any[]; lift_captures!(nothing, ps, bk, f); lift_captures!(nothing, ps, bk, op); (ps, bk))

# One reduction kernel launch: input described by `plan` (or a contiguous partials array),
# `gy` blocks per output.
function reduce_pass!(out::CuArray, plan::ReducePlan, T, f, op, Acc, neut, Out, final::Bool, init, gy::Int)
    idx64 = max(length(plan.base), length(out)) >= typemax(Int32)
    ps, baked = reduce_key_params(f, op)
    key = (:reduce, typeof(f), typeof(op), T, Acc, Out, length(plan.ksz), length(plan.rsz), plan.linear,
           final, final && init !== NOINIT ? typeof(init) : nothing, idx64, baked)
    entry = cached_kernel(key) do
        fx, opx, params, globals, _, fin = trace_reduce(f, op, T, Acc, final ? init : NOINIT)
        finx = final ? cv(fin, Out) : "acc"
        ptypes = map(typeof, params)
        src = reduce_source(fx, T, Acc, opx, c_literal(neut), Out, length(plan.ksz), length(plan.rsz),
                            plan.linear, final, finx, ptypes, globals, idx64)
        (src, "cumem_reduce", nothing, globals)
    end
    on_host() && return out
    final && init !== NOINIT && push!(ps, init)
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    threads = plan.nred >= 256 ? 256 : max(32, nextpow(2, plan.nred))
    gx = min(plan.nout, 65535)
    args = Any[devaddr(plan.base) + UInt64(plan.offset * sizeof(T)), devaddr(out), IT(plan.nout), IT(plan.nred), IT(gx)]
    for d in eachindex(plan.ksz)
        push!(args, IT(plan.ksz[d]), OT(plan.kst[d]))
    end
    if !plan.linear
        for d in eachindex(plan.rsz)
            push!(args, IT(plan.rsz[d]), OT(plan.rst[d]))
        end
    end
    for p in ps
        push!(args, param_value(p))
    end
    for g in global_values(entry.globals)
        push!(args, param_value(g))
    end
    GC.@preserve plan out launch(entry.kernel, args...; blocks = gx * gy, threads = threads)
    return out
end

# How many blocks share one output's elements.
function blocks_per_output(plan::ReducePlan)
    plan.nred <= 2048 && return 1
    target = 8 * sm_count()                      # blocks to fill the GPU
    plan.nout >= target && return 1
    return clamp(min(cld(plan.nred, 256 * 8), fld(target, plan.nout)), 1, 4096)
end

# Reduces `A` (an AnyCuArray) over `rdims` into the contiguous `out` (Out eltype, nout elements).
function gpu_reduce!(out::CuArray, A, f, op, rdims::Vector{Int}, init)
    T = eltype(A)
    check_kernel_eltype(T)
    plan = plan_reduce(A, rdims)
    R = traced_type(f, T)
    Acc = accumulator_type(op, R)
    neut = neutral(op, Acc)
    if neut === nothing
        init === NOINIT && throw(ArgumentError("mapreduce with the operator `$(fname(op))` on GPU arrays needs `init`, " *
                                               "a neutral element of the operator (each GPU thread starts from it)"))
        neut = convert(Acc, init)
        init = NOINIT
    end
    Out = eltype(out)
    gy = blocks_per_output(plan)
    if gy == 1
        reduce_pass!(out, plan, T, f, op, Acc, neut, Out, true, init, 1)
    else
        part = CuArray{Acc}(undef, plan.nout * gy)
        reduce_pass!(part, plan, T, f, op, Acc, neut, Acc, false, NOINIT, gy)
        p2 = ReducePlan(part, 0, plan.nout == 1 ? Int[] : [plan.nout], plan.nout == 1 ? Int[] : [1],
                        [gy], [plan.nout], plan.nout == 1, plan.nout, gy)
        reduce_pass!(out, p2, Acc, identity, op, Acc, neut, Out, true, init, 1)
        unsafe_free!(part)
    end
    return out
end

# The whole of a contiguous array (`plan.linear`, no kept dimension) reduced by one kernel
# (reduce_full.jl) into the accumulator's value; `init` (not NOINIT) only for an operator
# without a known neutral element, whose neutral element it then is. On the host device
# the kernel is generated (and checked by NVRTC when available) and `nothing` returned.
function reduce_all(plan::ReducePlan, f, op, T, Acc, init)
    return reduce_all((plan,), f, op, (T,), Acc, init)
end
# `f` of K arrays' elements (contiguous plans of equal length, eltypes Ts) reduced with op.
function reduce_all(plans::Tuple, f, op, Ts::Tuple, Acc, init)
    K = length(plans)
    n = plans[1].nred
    idx64 = any(p -> length(p.base) >= typemax(Int32), plans)
    neut = init === NOINIT ? neutral(op, Acc) : convert(Acc, init)
    neut === nothing && throw(ArgumentError("mapreduce with the operator `$(fname(op))` on GPU arrays needs `init`, " *
                                            "a neutral element of the operator (each GPU thread starts from it)"))
    ps, baked = reduce_key_params(f, op)
    key = (:reduce_all, typeof(f), typeof(op), Ts, Acc, idx64, init === NOINIT ? nothing : neut, baked)
    entry = cached_kernel(key) do
        ctx = TraceContext()
        params, bk = Any[], Any[]
        lift_captures!(ctx, params, bk, f)
        fx = cv(trace_fn(ctx, f, Any[Sym(Ts[q], "x$q") for q in 1:K]), Acc)
        lift_captures!(ctx, params, bk, op)
        opx = cv(trace_fn(ctx, op, Any[Sym(Acc, "a"), Sym(Acc, "b")]), Acc)
        ptypes = map(typeof, params)
        xs = join(["x$(q)_" for q in 1:K], ", ")
        loads = join([Ts[q] === Float16 ? "jl_h2f(x$(q)_)" : "(x$(q)_)" for q in 1:K], ", ")
        header = C_PRELUDE * "#define CUMEM_F1($(join(["x$q" for q in 1:K], ", "))) ($fx)\n" *
                 "#define CUMEM_F($xs) CUMEM_F1($loads)\n#define CUMEM_OP(a, b) ($opx)\n"
        pio, uio = IOBuffer(), IOBuffer()
        print_params(pio, ptypes, ctx.globals)
        print_unpack(uio, ptypes, ctx.globals)
        sz = sizeof(Ts[1])
        W = all(T -> T !== Float16 && sizeof(T) == sz, Ts) && sz in (4, 8) ? 16 ÷ sz : 0
        src = full_reduce_source(header, String[codegen_ctype(T) for T in Ts], ctype_compute(Acc), W, c_literal(neut);
                                 params = String(take!(pio)), unpack = String(take!(uio)), idx64 = idx64)
        (src, "cumem_reduce_all", nothing, ctx.globals)
    end
    if on_host()
        init === NOINIT && isempty(ps) && isempty(entry.globals) && !idx64 &&
            full_slot_fill!(f, op, Ts, nothing, Acc, entry.source)   # Base on the memory next time
        return nothing
    end
    extra = Any[param_value(p) for p in ps]
    for g in global_values(entry.globals)
        push!(extra, param_value(g))
    end
    srcs = ntuple(q -> devaddr(plans[q].base) + UInt64(plans[q].offset * sizeof(Ts[q])), K)
    v = GC.@preserve plans full_reduce_run(entry.kernel, op, srcs, idx64 ? UInt64(n) : UInt32(n), Acc, extra...)
    if init === NOINIT && isempty(ps) && isempty(entry.globals) && !idx64
        full_slot_fill!(f, op, Ts, entry.kernel, Acc, entry.source)
    end
    return v
end

## the Base API

reduced_size(sz::Dims{N}, rdims) where {N} = ntuple(d -> d in rdims ? 1 : sz[d], N)

# Result eltype of a reduction with dims, as Base's (through inference, on real types).
function reduce_out_type(f, op, T, init)
    R = Base.promote_op(f, T)
    R === Union{} && (R = T)
    if init === NOINIT
        A = R
        for _ in 1:4
            B = Base.promote_op(op, A, R)
            B === A && break
            A = B
        end
        return A
    end
    return Base.promote_op(op, typeof(init), R)
end

"""
    mapreduce(f, op, A::CuArray; dims=:, init)

Reduces `f.(A)` with `op` on the GPU: over everything (a scalar, downloaded) or over
`dims` (a `CuArray` whose reduced dimensions have size 1, as Base). `f` and `op` compile
into the reduction kernel (see `docs/compute.md` for what compiles). `op` may be `+`, `*`,
`max`, `min`, `&`, `|`, `xor` or a traceable function; for other operators pass `init`,
which must then be a neutral element (each GPU thread starts from it, as in CUDA.jl). With
a known operator `init` is applied once, as in Base. Empty arrays give Base's result or
error. Sums of Float16 accumulate in Float32; small integers widen as Base's `sum` does.
"""
function Base.mapreduce(f, op, A::AnyCuArray; dims = :, init = NOINIT)
    if dims === (:) && A isa CuArray          # a reduction run before: its typed slot
        v = fast_full_reduce(f, op, A)
        v === nothing || return init === NOINIT ? v : op(init, v)
    end
    # the general path, hidden from the inference of this entry point (as fastpath.jl's)
    return Base.invokelatest(gpu_mapreduce, f, op, A, dims, init)
end

function gpu_mapreduce(f, op, A, dims, init)
    check_devices("mapreduce", A)
    N = ndims(A)
    T = eltype(A)
    rdims = normalize_dims(dims, N)
    if length(A) == 0 || (dims !== (:) && any(d -> size(A, d) == 0, 1:N))
        # Base's answer (or error) on an empty host array of the same shape
        kw = init === NOINIT ? (dims = dims,) : (dims = dims, init = init)
        r = mapreduce(f, op, Array{T,N}(undef, size(A)); kw...)
        return dims === (:) ? r : CuArray(r)
    end
    check_kernel_eltype(T)
    if dims === (:)
        R = traced_type(f, T)
        Acc = accumulator_type(op, R)
        known = neutral(op, Acc) !== nothing
        plan = plan_reduce(A, rdims)
        if plan.linear && FULL_REDUCE[]
            # one kernel, partials straight to the host (reduce_full.jl)
            v = reduce_all(plan, f, op, T, Acc, known ? NOINIT : init)
        else
            out = CuArray{Acc}(undef, 1)
            gpu_reduce!(out, A, f, op, rdims, known ? NOINIT : init)
            v = on_host() ? nothing : read_scalar(out)
            unsafe_free!(out)
        end
        if on_host()
            GC.@preserve A begin
                return init === NOINIT ? mapreduce(f, op, host_arg(A)) : mapreduce(f, op, host_arg(A); init = init)
            end
        end
        Rt = reduce_out_type(f, op, T, NOINIT)
        v = Rt in KERNEL_ELTYPES && Rt !== Acc ? convert(Rt, v) : v
        return known && init !== NOINIT ? op(init, v) : v
    end
    Out = reduce_out_type(f, op, T, init)
    Out in KERNEL_ELTYPES || (Out = accumulator_type(op, traced_type(f, T)))
    out = CuArray{Out}(undef, reduced_size(size(A), rdims))
    gpu_reduce!(out, A, f, op, rdims, init)
    if on_host()
        GC.@preserve A out begin
            r = init === NOINIT ? mapreduce(f, op, host_arg(A); dims = dims) :
                                  mapreduce(f, op, host_arg(A); dims = dims, init = init)
            copyto!(host_view(out), r)
        end
    end
    return out
end

function Base.mapreduce(f, op, A::AnyCuArray, B::AnyCuArray, rest::AnyCuArray...; kw...)
    if isempty(rest) && isempty(kw) && A isa CuArray && B isa CuArray && size(A) == size(B)
        v = fast_full_reduce(f, op, A, B)           # f of both arrays' elements: one kernel
        v === nothing || return v
        v = Base.invokelatest(reduce_two, f, op, A, B)
        v === nothing || return v
    end
    return mapreduce(identity, op, map(f, A, B, rest...); kw...)
end

# mapreduce(f, op, A, B) by reduce_all on contiguous, non-empty arrays of equal size with
# a known operator, on a GPU; nothing when it does not apply.
function reduce_two(f, op, A, B)
    (on_host() || MULTI[] || !FULL_REDUCE[] || length(A) == 0) && return nothing
    Ta, Tb = eltype(A), eltype(B)
    (is_kernel_eltype(Ta) && is_kernel_eltype(Tb)) || return nothing
    R, Acc = full_types(f, op, Ta, Tb)
    (Acc !== Union{} && neutral(op, Acc) !== nothing) || return nothing
    check_alive(A); check_alive(B)
    v = reduce_all((plan_reduce(A, collect(1:ndims(A))), plan_reduce(B, collect(1:ndims(B)))), f, op, (Ta, Tb), Acc, NOINIT)
    return convert(R, v::Acc)
end

# any/all/count go through loops with early exit in Base; here they are reductions.
Base.any(A::AnyCuArray; dims = :) = mapreduce(identity, |, A; dims = dims)
Base.all(A::AnyCuArray; dims = :) = mapreduce(identity, &, A; dims = dims)
Base.any(f::Function, A::AnyCuArray; dims = :) = mapreduce(x -> f(x)::Bool, |, A; dims = dims)
Base.all(f::Function, A::AnyCuArray; dims = :) = mapreduce(x -> f(x)::Bool, &, A; dims = dims)
Base.count(A::AnyCuArray{Bool}; dims = :) = mapreduce(Int, +, A; dims = dims)
Base.count(f, A::AnyCuArray; dims = :) = mapreduce(x -> Int(f(x)::Bool), +, A; dims = dims)

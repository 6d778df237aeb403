# Reductions: mapreduce (and sum, prod, maximum, minimum, any, all, count, reduce through
# it) over all or some dimensions. findmax/findmin/argmax/argmin are findext.jl's,
# cumsum/cumprod accumulate.jl's.
#
# GPU algorithm (as CUDA.jl's GPUArrays mapreduce and CuPy's ReductionKernel): each block
# reduces a part of one output's elements with a grid-stride loop that applies `f` while
# loading, then warp shuffles and one shared-memory step; when an output has many elements
# several blocks each write a partial and a second kernel reduces the partials. `f` and
# `op` are Julia functions compiled from their typed IR (element_fns.jl, compiler/) into
# the kernel; a `throw` in them surfaces as Base's exception when the result is read. On
# the host device Base reduces the buffer wrapped as an Array, after the same code
# generation.

const NOINIT = Base.Broadcast.Extruded   # a private sentinel type: "no init given"

# The known operators' neutral elements (`neutral`, `known_neutral`): reduce_full.jl.

# The accumulator type: the fixed point of promote_op(op, Acc, R); Float16 accumulates in
# Float32 (rounded once at the end) under the known operators.
# (kept by type: `promote_op` is inference, microseconds on every reduction)
accumulator_type(op, @nospecialize(R)) = type_memo(() -> accumulator_type_new(op, R), Tuple{Val{:acc},typeof(op),Type{R}})
function accumulator_type_new(op, @nospecialize(R))
    # a function whose result type is a small Union (`v > 1 ? v * 10 : v` on Int32): its
    # values promote to one type first, as Base's reductions promote them (to Int64 here)
    if R isa Union
        P = foldl(promote_type, Base.uniontypes(R))
        isbitstype(P) && (R = P)
    end
    A = R
    for _ in 1:4
        B = Base.promote_op(op, A, R)
        B === A && break
        A = B
    end
    isbitstype(A) || throw(ArgumentError("reducing $R with `$(fname(op))` gives $A in Julia's inference; " *
                                         "GPU reductions accumulate isbits values (a concrete type)"))
    return A === Float16 && neutral(op, Float32) !== nothing ? Float32 : A
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

# The dimensions, shared by the reduction and findmax/findmin kernels (julia/cuda/reduce.cuh,
# findext.cuh): output j walks the kept dimensions (sizes ks1.., strides kst1..) to its
# first element `base`, and reduced index k walks the reduced dimensions (rs1.., rst1..)
# from there to `off` (or adds k itself when the reduced elements are contiguous: `linear`).

# The dimension parameters of the kernel's signature.
function print_dim_params(io, IDX, OFF, nk, nr, linear)
    for d in 1:nk
        print(io, ", $IDX ks$d, $OFF kst$d")
    end
    linear || for d in 1:nr; print(io, ", $IDX rs$d, $OFF rst$d"); end
end

# The kernel's dimension parameters as the arrays ks, kst (kept) and rs, rst (reduced) that
# reduce.cuh/findext.cuh take (null pointers when there are none).
function print_dim_arrays(io, IDX, OFF, nk, nr, linear)
    arr(T, name, v, n) = print(io, "  const $T ", n == 0 ? "* $name = 0" : "$name[] = {" * join(["$v$d" for d in 1:n], ", ") * "}", ";\n")
    nr = linear ? 0 : nr
    arr(IDX, "ks", "ks", nk); arr(OFF, "kst", "kst", nk)
    arr(IDX, "rs", "rs", nr); arr(OFF, "rst", "rst", nr)
end

# The reduction kernel: `fdf` (f, as Acc, on T), `odf` (op on two Acc, as Acc), `findf` (the
# result of an output from its accumulator: `op(init, acc)` and/or the conversion to Out;
# nothing: acc itself). Kept/reduced dims: counts of each (their sizes and strides are
# kernel parameters). The neutral element `neut` (an Acc) is a parameter, so any isbits
# accumulator (Complex, tuples, structs) works; partials cross lanes word by word.
function reduce_source(fdf, odf, findf, T::Type, Acc::Type, Out::Type, nk::Int, nr::Int, linear::Bool,
                       final::Bool, idx64::Bool)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    AC, TC = c_type(Acc), c_type(T)
    OUT = final ? c_type(Out) : AC
    fin = final && findf !== nothing
    # 16-byte loads for one output over 4- or 8-byte elements (reduce.cuh)
    W = linear && nk == 0 && T !== Float16 && sizeof(T) in (4, 8) ? 16 ÷ sizeof(T) : 0
    io = IOBuffer()
    print(io, "#define CUMEM_F(x) ", fn_call(fdf, "f", "x"), "\n")
    print(io, "#define CUMEM_OP(a, b) ", fn_call(odf, "op", "a", "b"), "\n")
    print(io, "#define CUMEM_OUT(a) ", fin ? fn_call(findf, "fin", "a") : "(a)", "\n")
    print(io, REDUCE_CUH)
    print(io, "CUMEM_KERNEL void cumem_reduce(jl_ctx_t ctx, const $TC* src, $OUT* out, $IDX nout, $IDX nred, $IDX gx, $AC neut")
    print_dim_params(io, IDX, OFF, nk, nr, linear)
    print(io, fn_param(fdf, "f"), fn_param(odf, "op"), findf === nothing ? "" : fn_param(findf, "fin"), ") {\n  CUMEM_PDL_ENTRY();\n")
    print(io, fn_local(fdf, "f"), fn_local(odf, "op"), findf === nothing ? "  const jl_ghost_t fin = {};\n" : fn_local(findf, "fin"))
    print_dim_arrays(io, IDX, OFF, nk, nr, linear)
    print(io, "  cumem_reduce_body<$TC, $AC, $OUT, $IDX, $OFF, $nk, $(linear ? 0 : nr), $linear, $W>",
          "(ctx, src, out, nout, nred, gx, neut, ks, kst, rs, rst, f, op, fin);\n}\n")
    return kernel_source(unique_fns((fdf, odf, findf))...; body = String(take!(io)))
end
const REDUCE_CUH = cuda_source("reduce.cuh")


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

# The compiled functions of one reduction pass and the objects passed for them: f (on T) and
# op (on two Acc), both as Acc; on the final pass the result of an output (op(init, acc) when
# `init` is applied there, converted to Out), or nothing when it is the accumulator itself.
# (The compiled functions are kept by the types they depend on; the objects are built here.)
function reduce_fns(f, op, T::Type, Acc::Type, Out::Type, final::Bool, init)
    fns, conv = type_memo(() -> reduce_fns_new(f, op, T, Acc, Out, final, init),
                          Tuple{Val{:reduce_fns},typeof(f),typeof(op),Type{T},Type{Acc},Type{Out},Val{final},init_key(init)})
    fo = conv[1] ? Converted{Acc}(f) : f
    oo = conv[2] ? Converted{Acc}(op) : op
    length(fns) == 2 && return fns, (fo, oo)
    fin = init !== NOINIT ? WithInit(op, init) : identity
    return fns, (fo, oo, conv[3] ? Converted{Out}(fin) : fin)
end
function reduce_fns_new(f, op, T::Type, Acc::Type, Out::Type, final::Bool, init)
    fdf, fo = converted_function(Acc, f, T)
    odf, oo = converted_function(Acc, op, Acc, Acc)
    fin = !final ? nothing : init !== NOINIT ? WithInit(op, init) : Out === Acc ? nothing : identity
    fin === nothing && return (fdf, odf), (fo !== f, oo !== op)
    ndf, no = converted_function(Out, fin, Acc)
    return (fdf, odf, ndf), (fo !== f, oo !== op, no !== fin)
end
# The key type of an `init` argument (its type; NOINIT, a type, as itself: `Type{}` of it is
# not a cached type).
init_key(init) = init === NOINIT ? Val{:noinit} : typeof(init)

# One reduction kernel launch: input described by `plan` (or a contiguous partials array),
# `gy` blocks per output.
# `slot`: fill dims_slot.jl's slot of this reduction (over one dimension of a CuArray, no
# `init`) when the pass qualifies.
function reduce_pass!(out::CuArray, plan::ReducePlan, T, f, op, Acc, neut, Out, final::Bool, init, gy::Int;
                      slot::Bool = false)
    idx64 = max(length(plan.base), length(out)) >= typemax(Int32)
    fns, objs = reduce_fns(f, op, T, Acc, Out, final, init)
    key = (:reduce, typeof(f), typeof(op), T, Acc, Out, length(plan.ksz), length(plan.rsz), plan.linear,
           final, final && init !== NOINIT ? typeof(init) : nothing, idx64)
    entry = kernel_entry(key, fns) do
        src = reduce_source(fns[1], fns[2], length(fns) == 3 ? fns[3] : nothing, T, Acc, Out,
                            length(plan.ksz), length(plan.rsz), plan.linear, final, idx64)
        (src, "cumem_reduce", nothing)
    end
    on_host() && return out
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    threads = plan.nred >= 256 ? 256 : max(32, nextpow(2, plan.nred))
    gx = min(plan.nout, 65535)
    args = Any[launch_context(unique_fns(fns)...), devaddr(plan.base) + UInt64(plan.offset * sizeof(T)), devaddr(out),
               IT(plan.nout), IT(plan.nred), IT(gx), convert(Acc, neut)]
    for d in eachindex(plan.ksz)
        push!(args, IT(plan.ksz[d]), OT(plan.kst[d]))
    end
    if !plan.linear
        for d in eachindex(plan.rsz)
            push!(args, IT(plan.rsz[d]), OT(plan.rst[d]))
        end
    end
    nargs = length(args)
    fn_values!(args, objs...)
    k = entry_kernel(entry)
    GC.@preserve plan out launch(k, args...; blocks = gx * gy, threads = threads)
    # (a slot's launch passes no function values: only for functions that take none)
    slot && final && gy == 1 && !idx64 && length(args) == nargs && length(plan.rsz) == 1 &&
        dims_slot_fill!(f, op, T, length(plan.ksz), plan.linear, k, Acc, Out, neut, fns, entry.source)
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
function gpu_reduce!(out::CuArray, A, f, op, rdims::Vector{Int}, init; slot::Bool = false)
    T = eltype(A)
    plan = plan_reduce(A, rdims)
    Acc = accumulator_type(op, result_type(f, T))
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
        reduce_pass!(out, plan, T, f, op, Acc, neut, Out, true, init, 1;
                     slot = slot && A isa CuArray && init === NOINIT && plan.base === A)
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

# The whole of contiguous arrays (`plan.linear`, no kept dimension) reduced by one kernel
# (reduce_full.jl) into the accumulator's value: `f` of the K arrays' elements (plans of
# equal length, eltypes Ts), combined with `op`. `init` (not NOINIT) only for an operator
# without a known neutral element, whose neutral element it then is. On the host device
# the kernel is generated (and checked by NVRTC when available) and `nothing` returned.
reduce_all(plan::ReducePlan, f, op, T, Acc, init) = reduce_all((plan,), f, op, (T,), Acc, init)
function reduce_all(plans::Tuple, f, op, Ts::Tuple, Acc, init)
    K = length(plans)
    n = plans[1].nred
    idx64 = any(p -> length(p.base) >= typemax(Int32), plans)
    neut = init === NOINIT ? neutral(op, Acc) : convert(Acc, init)
    neut === nothing && throw(ArgumentError("mapreduce with the operator `$(fname(op))` on GPU arrays needs `init`, " *
                                            "a neutral element of the operator (each GPU thread starts from it)"))
    fdf, fo = converted_function(Acc, f, Ts...)
    odf, oo = converted_function(Acc, op, Acc, Acc)
    fns = unique_fns((fdf, odf))
    key = (:reduce_all, typeof(f), typeof(op), Ts, Acc, idx64)
    entry = kernel_entry(key, fns) do
        xs = join(["x$q" for q in 1:K], ", ")
        header = "#define CUMEM_F($xs) " * fn_call(fdf, "f", ["x$q" for q in 1:K]...) * "\n" *
                 "#define CUMEM_OP(a, b) " * fn_call(odf, "op", "a", "b") * "\n"
        sz = sizeof(Ts[1])
        W = all(T -> T !== Float16 && sizeof(T) == sz, Ts) && sz in (4, 8) ? 16 ÷ sz : 0
        AC = c_type(Acc)
        body = full_reduce_source(header, String[c_type(T) for T in Ts], AC, W, "neut";
                                  params = ", $AC neut" * fn_param(fdf, "f") * fn_param(odf, "op"),
                                  unpack = fn_local(fdf, "f") * fn_local(odf, "op"), idx64 = idx64,
                                  unroll = !fn_heavy(fdf))
        (kernel_source(fns...; body = body), "cumem_reduce_all", nothing)
    end
    plain = init === NOINIT && all(d -> isempty(d.ctx.globals), fns) && !idx64
    if on_host()
        plain && full_slot_fill!(f, op, Ts, nothing, Acc, neut, fns, entry.source)   # Base on the memory next time
        return nothing
    end
    args = fn_values!(Any[convert(Acc, neut)], fo, oo)
    srcs = ntuple(q -> devaddr(plans[q].base) + UInt64(plans[q].offset * sizeof(Ts[q])), K)
    k = entry_kernel(entry)
    v = GC.@preserve plans full_reduce_run(k, op, launch_context(fns...), srcs, idx64 ? UInt64(n) : UInt32(n), Acc, args...)
    plain && full_slot_fill!(f, op, Ts, k, Acc, neut, fns, entry.source)
    return v
end

## the Base API

reduced_size(sz::Dims{N}, rdims) where {N} = ntuple(d -> d in rdims ? 1 : sz[d], N)

# Result eltype of a reduction with dims, as Base's (through inference, on real types).
reduce_out_type(f, op, @nospecialize(T), init) =
    type_memo(() -> reduce_out_type_new(f, op, T, init), Tuple{Val{:out},typeof(f),typeof(op),Type{T},init_key(init)})
function reduce_out_type_new(f, op, @nospecialize(T), init)
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
into the reduction kernel, compiled from their typed IR (branches, loops, structs, tuples,
Complex; see `docs/compute.md` for what compiles). With `+`, `*`, `max`, `min`, `&`, `|`,
`xor` (and Base's `add_sum`/`mul_prod`) `init` is applied once, as in Base; for other
operators pass `init`, which must then be a neutral element (each GPU thread starts from
it, as in CUDA.jl), and the operator must be associative (GPU threads regroup it). Empty
arrays give Base's result or error. Sums of Float16 accumulate in Float32; small integers
widen as Base's `sum` does. A `throw` in `f` or `op` (`DivideError`, `InexactError`,
`DomainError`, ...) is thrown as Base's exception when the result is read: at once for a
full reduction, at the next download or `synchronize` for one with `dims`.
"""
function Base.mapreduce(f, op, A::AnyCuArray; dims = :, init = NOINIT)
    if dims === (:) && A isa CuArray          # a reduction run before: its typed slot (reduce_full.jl)
        v = fast_full_reduce(f, op, A)
        v === nothing || return init === NOINIT ? v : op(init, v)
    elseif dims isa Int && init === NOINIT && A isa CuArray   # one dimension, a slot (dims_slot.jl)
        r = fast_dims_reduce(f, op, A, Int(dims))
        r === nothing || return r
    end
    # the general path, hidden from the inference of this entry point (as fastpath.jl's)
    return Base.invokelatest(gpu_mapreduce, f, op, A, dims, init)
end

# The host device's answer: Base's mapreduce on the memory. A barrier specialised on `f` and
# `op` (gpu_mapreduce takes them unspecialised): Base's reductions called with `Function`-typed
# arguments are inferred for every function in each process (seconds), concrete ones are not.
host_mapreduce(f::F, op::O, h, dims, init) where {F,O} =
    dims === (:) ? (init === NOINIT ? mapreduce(f, op, h) : mapreduce(f, op, h; init = init)) :
                   (init === NOINIT ? mapreduce(f, op, h; dims = dims) : mapreduce(f, op, h; dims = dims, init = init))

function gpu_mapreduce(f, op, A, dims, init)
    check_devices("mapreduce", A)
    N = ndims(A)
    T = eltype(A)
    rdims = normalize_dims(dims, N)
    # (Base's reductions of host arrays behind inference barriers here and below: compiled
    # for a function only when they run, not with every first reduction on a GPU)
    if length(A) == 0 || (dims !== (:) && any(d -> size(A, d) == 0, 1:N))
        # Base's answer (or error) on an empty host array of the same shape
        r = base_mapreduce(Base.inferencebarrier(f), op, Array{T,N}(undef, size(A)), dims, init)
        return dims === (:) ? r : CuArray(r)
    end
    R = result_type(f, T)
    # f throws on every element: Base's exception (from the first element) on a copy
    R === Union{} && return base_mapreduce(Base.inferencebarrier(f), op, Array(A), dims, init)
    if dims === (:)
        CAPTURES[] == 0 || refuse_in_capture("a whole-array reduction (a scalar read-back of its value)")
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
            # the slot reduce_all just filled: Base on the memory, as every later call runs
            # it (fast_full_reduce, compiled for f anyway: no other host code for f)
            if init === NOINIT && A isa CuArray && plan.linear && FULL_REDUCE[]
                v = fast_full_reduce(f, op, A)
                v === nothing || return v
            end
            GC.@preserve A begin
                return host_mapreduce(Base.inferencebarrier(f), op, host_arg(A), :, init)
            end
        end
        check_kernel_errors()             # a throw in f or op: Base's exception, here
        Rt = reduce_out_type(f, op, T, NOINIT)
        v = isbitstype(Rt) && Rt !== Acc ? convert(Rt, v) : v
        return known && init !== NOINIT ? op(init, v) : v
    end
    Out = reduce_out_type(f, op, T, init)
    isbitstype(Out) || (Out = accumulator_type(op, R))
    out = CuArray{Out}(undef, reduced_size(size(A), rdims))
    # one operation of a capture, reading A and writing out (capture_edges.jl)
    CAPTURES[] == 0 ? reduce_dims!(out, A, f, op, rdims, dims, init) :
                      captured_op(() -> reduce_dims!(out, A, f, op, rdims, dims, init), A, out)
    return out
end

# `out` = the reduction of `A` over `rdims` (the GPU's kernels, or the host's Base call).
function reduce_dims!(out, A, f, op, rdims, dims, init)
    gpu_reduce!(out, A, f, op, rdims, init; slot = dims isa Int && init === NOINIT)
    # (the host device's answer inline: a barrier here cost each host-device call a dynamic
    # dispatch, 0.25 µs of bench/julia/host_overhead.jl's 6 µs `sum(A; dims = 1)`)
    if on_host()
        GC.@preserve A out begin
            hA, hout = host_arg(A), host_view(out)
            host_run(() -> (copyto!(hout, host_mapreduce(f, op, hA, dims, init)); nothing))
        end
    end
    return out
end
base_mapreduce(f, op, h, dims, init) =
    init === NOINIT ? mapreduce(f, op, h; dims = dims) : mapreduce(f, op, h; dims = dims, init = init)

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
    check_devices("mapreduce", A, B)
    Ta, Tb = eltype(A), eltype(B)
    (isbitstype(Ta) && isbitstype(Tb)) || return nothing
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

# Reductions of a whole contiguous array to one value (`sum(x)`, `maximum(x)`, `any`,
# `all`, `dot`, `norm`, ...): one kernel and one wait. Each block reduces its
# grid-stride share of the elements and writes its partial straight into the thread's
# page-locked read-back buffer (readback.jl; host memory that kernels address directly
# under unified addressing, as CUDA's zero-copy memory); one stream synchronisation waits
# for the kernel, and the host combines the partials (at most `FULL_MAX_BLOCKS` values)
# with `op`. No second kernel, no device allocation, no device-to-host copy: the path of
# CUDA's threadFenceReduction sample without its atomic counter, whose last step runs on
# the host that waits anyway.
#
# A reduction of a given (f, op, element type) runs once through mapreduce.jl, which
# compiles its element functions (element_fns.jl, the typed-IR compiler) and fills a typed
# slot here; later calls find the kernel in the slot (one IdDict lookup by a type, no
# lock) and launch it with the arguments in a tuple. The kernel's body is
# `full_reduce_source`'s skeleton; the compiled functions are called through the C macros
# `CUMEM_F(x1, ...)` (f of loaded elements, as the accumulator's C type) and
# `CUMEM_OP(a, b)` (op of two accumulators) that `header` defines. The kernel's first
# parameter is the compiler's launch context (`jl_ctx_t ctx`); a throw in f or op is
# recorded there and rethrown by `check_kernel_errors()` after the wait.

# Known operators: their neutral element for an accumulator type, and the operator Base
# really applies (sum and prod go through add_sum/mul_prod, which widen small integers).
function neutral(op, ::Type{T}) where {T}
    try
        return known_neutral(op, T)
    catch e
        e isa MethodError || e isa InexactError || rethrow()
        return nothing       # e.g. a struct without zero: init is needed
    end
end
function known_neutral(op, ::Type{T}) where {T}
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

const FULL_THREADS = 256
const FULL_REDUCE = Ref(true)          # a switch for measuring the two-kernel path

# Blocks for n elements: one per 4096 elements (16 per thread), at most 4 per SM (all
# resident at once: one wave, no tail) and at most what the read-back buffer holds.
@inline function full_blocks(n::Int, accbytes::Int)
    cap = min(4 * sm_count(), READBACK_BYTES ÷ accbytes)
    return clamp(cld(n, 16 * FULL_THREADS), 1, max(1, cap))
end

"""
    CuMem.full_reduce_source(header, TCs, AC, W, neut_ex; params = "", unpack = "", idx64 = false, unroll = true) -> String

The body (for `kernel_source`) of `cumem_reduce_all(jl_ctx_t ctx, const TC1* src1, ...,
IDX n, AC* part [params])` over `K =
length(TCs)` arrays of `n` elements: block `b` reduces the elements `b*256 + t + k*stride`
(grid-stride) with `CUMEM_OP(acc, CUMEM_F(x1, ..., xK))` (macros that `header` defines,
with whatever prelude they need), starting from `neut_ex`, and writes its partial to
`part[b]`. `W` > 0: elements are read `W` at a time through 16-byte loads when every
source is 16-byte aligned (4- or 8-byte elements, all of one size), four loads per source
in flight per thread; `params`/`unpack`: extra kernel parameters and the code that
unpacks them. `unroll = false`: one load per source in flight (no loop four grid-stride
steps at a time), for an `f` whose code is long (`fn_heavy`): each unrolled step is
another inlined copy of `f` (25 in all with W = 4, 5 without), and NVRTC's time grows
with them, not with the source's length (a `sum(x -> sin(x) * 9f0 + x / 3f0, x)` kernel,
NVRTC 13 on the loaded 2-core development machine: 151 KB of PTX and 0.70 CPU s unrolled,
33 KB and 0.12 s not), while such an `f` makes the loop compute-bound anyway.
"""
function full_reduce_source(header::String, TCs::Vector{String}, AC::String, W::Int, neut_ex::String;
                            params::String = "", unpack::String = "", idx64::Bool = false, unroll::Bool = true)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    K = length(TCs)
    srcs = join(["const $(TCs[q])* src$q, " for q in 1:K])
    io = IOBuffer()
    print(io, header, REDUCE_ALL_CUH)
    print(io, "CUMEM_KERNEL void CUMEM_BOUNDS cumem_reduce_all(jl_ctx_t ctx, $(srcs)$IDX n, $AC* part$params);\n")
    print(io, "CUMEM_KERNEL void cumem_reduce_all(jl_ctx_t ctx, $(srcs)$IDX n, $AC* part$params)\n{\n  CUMEM_PDL_ENTRY();\n")
    print(io, unpack)
    print(io, "  const $IDX stride = ($IDX)blockDim.x * gridDim.x;\n")
    print(io, "  $IDX k = ($IDX)blockIdx.x * blockDim.x + threadIdx.x;\n")
    print(io, "  $AC acc = $neut_ex, acc1 = $neut_ex, acc2 = $neut_ex, acc3 = $neut_ex;\n")
    accs = ("acc", "acc1", "acc2", "acc3")
    args(pre, post) = join(["$pre$q$post" for q in 1:K], ", ")
    if W > 0
        # 16-byte loads, four independent ones per source and iteration
        print(io, "  if (((", join(["(uint64_t)src$q" for q in 1:K], " | "), ") & 15) == 0) {\n")
        for q in 1:K
            print(io, "    struct __align__(16) vec$(q)_t { $(TCs[q]) x[$W]; };\n")
            print(io, "    const vec$(q)_t* vs$q = reinterpret_cast<const vec$(q)_t*>(src$q);\n")
        end
        print(io, "    const $IDX nv = n / $W;\n")
        print(io, "    $IDX i = k;\n")
        if unroll
            print(io, "    for (; i + 3 * stride < nv; i += 4 * stride) {\n")
            for u in 0:3, q in 1:K
                print(io, "      const vec$(q)_t w$(q)_$u = vs$q[i + $u * stride];\n")
            end
            for u in 0:3, e in 0:W-1
                print(io, "      CUMEM_ACC_AT((uint64_t)(i + $u * stride) * $W + $e, $(accs[mod(u * W + e, 4) + 1]), ", args("w", "_$u.x[$e]"), ");\n")
            end
            print(io, "    }\n")
        end
        print(io, "    for (; i < nv; i += stride) {\n")
        for q in 1:K
            print(io, "      const vec$(q)_t w$q = vs$q[i];\n")
        end
        for e in 0:W-1
            print(io, "      CUMEM_ACC_AT((uint64_t)i * $W + $e, $(accs[e % 4 + 1]), ", args("w", ".x[$e]"), ");\n")
        end
        print(io, "    }\n")
        print(io, "    k += nv * $W;\n")
        print(io, unroll ? "  } else\n" : "  }\n")
    end
    # any alignment: four loads per source in flight from four grid-stride steps
    if unroll
        print(io, "  for (; k + 3 * stride < n; k += 4 * stride) {\n")
        for u in 0:3, q in 1:K
            print(io, "    const $(TCs[q]) v$(q)_$u = src$q[k + $u * stride];\n")
        end
        for u in 0:3
            print(io, "    CUMEM_ACC_AT(k + $u * stride, $(accs[u+1]), ", args("v", "_$u"), ");\n")
        end
        print(io, "  }\n")
    end
    print(io, "  for (; k < n; k += stride) CUMEM_ACC_AT(k, acc, ", args("src", "[k]"), ");\n")
    print(io, "  cumem_reduce_all_finish(ctx, op, acc, acc1, acc2, acc3, $neut_ex, part);\n}\n")

    return String(take!(io))
end
const REDUCE_ALL_CUH = cuda_source("reduce_all.cuh")

## running it

"""
    CuMem.full_reduce_run(k, op, ctx, srcs::NTuple{K,UInt64}, n::Union{UInt32,UInt64}, ::Type{Acc}, extra...) -> Acc

Launches `cumem_reduce_all` (see [`full_reduce_source`](@ref)) with the launch context
`ctx` over the `n` elements at the device addresses `srcs` (`n` a `UInt64` for a kernel
made with `idx64`) on the task's stream with `extra` as its trailing parameters, waits
for the stream, rethrows an error the kernel recorded (`check_kernel_errors`), and
combines the blocks' partials (Acc values in the thread's read-back buffer) with `op` on
the host, in block order.
"""
@inline function full_reduce_run(k, op::OP, ctx, srcs::NTuple{K,UInt64}, n::Union{UInt32,UInt64}, ::Type{Acc},
                                 extra::Vararg{Any,M}) where {OP,K,Acc,M}
    # (a capture cannot wait for the value: refused before anything is launched, as mapreduce does)
    CAPTURES[] == 0 || refuse_in_capture("a whole-array reduction (a scalar read-back of its value)")
    nb = full_blocks(Int(n), sizeof(Acc))
    buf = readback_buffer()
    GC.@preserve buf begin
        p = convert(Ptr{Acc}, pointer(buf))
        launch(k, ctx, srcs..., n, UInt64(p), extra...; blocks = nb, threads = FULL_THREADS)
        check(c_stream_synchronize(current_handle()))
        check_kernel_errors()
        v = unsafe_load(p, 1)
        for i in 2:nb
            v = op(v, unsafe_load(p, i))
        end
        return v
    end
end

## the typed slots of the fast path

# A slot's content: the kernel (nothing on the host device), the accumulator type it
# computes in, its neutral element (the kernel's parameter), the world age it was made in
# (a method defined since sends the call back through mapreduce.jl). Only kernels whose
# compiled functions read no global binding have slots: their launch context is the
# error record's address alone.
struct FullReduce
    kernel::Union{Nothing,Kernel}
    acc::Type
    neut::Any
    world::UInt
end

# Slots by `Tuple{typeof(f), typeof(op), eltypes...}` (a constant of the compiled caller),
# kept and published as fastpath.jl's: readers take the current table without a lock.
const FULL_TABLE = Ref(IdDict{Any,Any}())
const FULL_LOCK = ReentrantLock()
@inline full_slot_get(K::DataType) = (e = get(FULL_TABLE[], K, nothing); e === nothing ? nothing : e::FullReduce)
full_slot_set!(K::DataType, e::FullReduce) = publish_slot!(FULL_TABLE, FULL_LOCK, K, e)

# The result and accumulator types of `mapreduce(f, op, ::Array{T})` (or of f on several
# arrays' elements) as inference gives them (constants of the compiled caller): the fixed
# point R of promote_op(op, R, f's result) reached in one step, accumulated in Float32
# when it is Float16; (Union{}, Union{}) when there is none.
@inline function full_types(f, op, Ts::Type...)
    R = Base.promote_op(f, Ts...)
    A1 = Base.promote_op(op, R, R)
    A2 = Base.promote_op(op, A1, R)
    (A1 === A2 && isconcretetype(A1) && isbitstype(A1)) || return (Union{}, Union{})
    return (A1, A1 === Float16 ? Float32 : A1)
end

# Whether f and op carry no values (nothing to pass to the kernel).
@inline full_singletons(f, op) = Base.issingletontype(typeof(f)) && Base.issingletontype(typeof(op))

"""
    CuMem.fast_full_reduce(f, op, A::CuArray, B::CuArray...) -> Union{Nothing,R}

`mapreduce(f, op, A)` (or of `f` on the elements of `A` and `B` of the same size) without
`init` through the typed slot of (f, op, eltypes) when one is filled and valid: singleton
`f` and `op` with a known neutral element, non-empty arrays below 2^31 elements, one
device in use, a GPU. `nothing` otherwise (nothing done): mapreduce.jl then takes its
general path, which fills the slot.
"""
@inline function fast_full_reduce(f::F, op::OP, A::CuArray{T}, B::CuArray...) where {F,OP,T}
    Ts = (T, map(eltype, B)...)
    R, Acc = full_types(f, op, Ts...)
    (Acc !== Union{} && full_singletons(f, op) && FULL_REDUCE[] && !MULTI[]) || return nothing
    n = length(A)
    (n == 0 || n >= typemax(Int32) || A.freed || any(b -> b.freed || length(b) != n, B)) && return nothing
    K = Tuple{F,OP,Ts...}
    e = full_slot_get(K)
    # (the calls below the inference barriers are compiled for a reduction's types only when
    # they run: the index once, Base's reduction on the host device only)
    e === nothing && !on_host() && (e = index_full_slot(Base.inferencebarrier(K), op, Acc))
    (e === nothing || e.acc !== Acc || e.world != world_counter()) && return nothing
    k = e.kernel
    k === nothing && return host_full_reduce(Base.inferencebarrier(f), op, A, B...)::R
    v = GC.@preserve A B full_slot_run(k, op, (A.ptr, map(b -> b.ptr, B)...), UInt32(n), Acc, e.neut::Acc)
    return convert(R, v::Acc)::R
end
# A slot's launch, compiled once per operator and types (not inlined into each function's
# fast path, whose inference and native code it would otherwise repeat).
@noinline full_slot_run(k::Kernel, op::OP, srcs::NTuple{K,UInt64}, n::UInt32, ::Type{Acc}, neut::Acc) where {OP,K,Acc} =
    full_reduce_run(k, op, DCContext0(kernel_error_address(), UInt64(0)), srcs, n, Acc, neut)

# The host device: Base's mapreduce on the arrays' memory (its result, summation order
# included), ordered after the task's stream as `host_view` is.
function host_full_reduce(f::F, op::OP, A::CuArray{T}) where {F,OP,T}
    STREAMS_SET[] && (s = stream(); s.handle == 0 || synchronize(s))
    return GC.@preserve A mapreduce(f, op, unsafe_wrap(Array, Ptr{T}(A.ptr), length(A)))
end
host_full_reduce(f, op, A::CuArray, B::CuArray) = nothing

# Fills the slot of (f, op, Ts) after mapreduce.jl ran this reduction with `kernel`
# (accumulating in Acc from `neut`, compiled functions `fns` reading no global binding,
# 32-bit indices) when the fast path applies to it; records its source in the kernel index
# (kernel_index.jl) when no compiled function can throw (a throw site's number belongs to
# the process that compiled it).
function full_slot_fill!(f, op, Ts::Tuple, kernel, ::Type{Acc}, neut, fns::Tuple, source::String) where {Acc}
    ((kernel isa Kernel || (kernel === nothing && on_host())) && FULL_REDUCE[] && !MULTI[] &&
     full_singletons(f, op)) || return nothing
    kernel === nothing && length(Ts) != 1 && return nothing      # the host device: one array
    full_types(f, op, Ts...)[2] === Acc || return nothing
    K = Tuple{typeof(f),typeof(op),Ts...}
    full_slot_set!(K, FullReduce(kernel, Acc, convert(Acc, neut), world_counter()))
    kernel === nothing && return nothing
    all(d -> !d.may_throw, fns) && index_safe(K) && index_store(index_key(K), index_key(Acc; prefix = "cumem_reduce_all "), source)
    return nothing
end

# The slot of K = Tuple{F,OP,T...} filled from the kernel index (index_entry: once per
# process, device and type).
@noinline function index_full_slot(@nospecialize(K::DataType), op, @nospecialize(Acc::Type))
    e = index_entry(full_index_ikey, full_slot_build, (op, Acc), (:full, K), ("cumem_reduce_all",), false)
    return e === nothing ? nothing : e::FullReduce
end
full_index_ikey(@nospecialize(key), @nospecialize(a)) =
    index_safe(key[2]) ? (index_key(key[2]), index_key(a[2]; prefix = "cumem_reduce_all ")) : nothing
function full_slot_build(@nospecialize(key), @nospecialize(a), text::String, kernels::Vector{Any})
    op, Acc = a
    neut = neutral(op, Acc)
    neut === nothing && return nothing
    e = FullReduce(kernels[1], Acc, neut, world_counter())
    full_slot_set!(key[2], e)
    return e
end

# Compiling and launching kernels (CUDA.jl's src/compiler/execution.jl): `cufunction`
# compiles a Julia function for argument types into a kernel (the typed-IR compiler's entry
# function wrapped in an `extern "C" __global__` function), `@cuda` converts the arguments
# and launches it, `launch_configuration` sizes it. A kernel is compiled once per
# (function type, argument types, world age) and device; NVRTC's output is kept on disk by
# the engine. On the host device the same compile runs (the errors are the GPU's), and the
# Julia function then runs on the host (host.jl).

include_dependency(joinpath(@__DIR__, "..", "..", "cuda", "device.cuh"))
"""
    CuMem.DV_DEVICE_CUH :: String

The device helpers of user kernels (julia/cuda/device.cuh): atomics, shuffles, lane id.
"""
const DV_DEVICE_CUH = cuda_source("device.cuh")      # (an include_dependency: editing it recompiles)

"""
    CuFunction

A compiled kernel on one device (CUDA.jl's name; a kernel object's `fun`): the engine's
kernel (`nothing` on the host device), the C entry's `name`, the CUDA C `source`, the bytes
of static shared memory (`static_shmem`), whether it meets at barriers or warp
rendezvous (`tasks`, how the host device runs it), the compiled device function, the
launch bound `maxthreads` (threads per block; 0: none) and the dynamic shared memory the
driver was last told the kernel may use (`dyn_shmem`, bytes; 48 KiB until a launch asks
for more).
"""
struct CuFunction
    kernel::Union{Nothing,Kernel}
    name::String
    source::String
    static_shmem::Int
    tasks::Bool
    df::DeviceFunction
    maxthreads::Int
    dyn_shmem::Base.RefValue{Int}
end
Base.show(io::IO, f::CuFunction) = print(io, "CuFunction(", repr(f.name), ")")

"""
    HostKernel{F,TT}

A kernel ready to launch (what `cufunction` and `@cuda launch=false` return, as CUDA.jl):
the function `f`, its argument types `TT` (as the kernel sees them) and its
[`CuFunction`](@ref) `fun`. Call it as `k(args...; threads = 1, blocks = 1, shmem = 0,
stream = stream())`.
"""
struct HostKernel{F,TT}
    f::F
    fun::CuFunction
end
Base.show(io::IO, k::HostKernel{F,TT}) where {F,TT} = print(io, "CuMem.HostKernel for ", k.f, TT)

const DV_COMPILE_LOCK = ReentrantLock()
const DV_SYNC_MARKS = ("__syncthreads", "jl_shfl<", "__all_sync", "__any_sync", "__ballot_sync", "__syncwarp")

# The kernel of `f` for argument types `tt` (a Tuple type) on the current device, with
# launch bounds (max threads per block, min blocks per SM; 0: none).
function dv_compile(@nospecialize(f), @nospecialize(tt::Type), bounds::NTuple{2,Int} = (0, 0))
    F = Core.Typeof(f)
    argtypes = (tt.parameters...,)
    for (k, T) in enumerate((F, argtypes...))
        ok = T isa DataType && (isbitstype(T) || dc_is_ghost(T))
        ok || throw(ArgumentError(k == 1 ? "the kernel function of type $T is not isbits (it captures arrays, " *
                                           "strings or mutable values); pass them as arguments" :
                                           "kernel argument $(k - 1) of type $T is not isbits: kernels take CuArrays, " *
                                           "isbits values (numbers, structs, tuples) and Refs of them"))
    end
    # no method for these types: Julia's MethodError, as CUDA.jl's compiler throws
    hasmethod(f, tt) || throw(MethodError(f, tt))
    df = device_function(f, argtypes)
    (df.rettype === Nothing || df.rettype === Union{}) ||
        throw(KernelCompileError("cannot compile for the GPU: the kernel $(dc_callable_name(F)) returns a value of type " *
                                 "$(df.rettype); kernels must return `nothing`"))
    kname = "jlk_" * df.name[5:end]
    io = IOBuffer()
    print(io, "CUMEM_KERNEL void ")      # extern "C" __global__ (common.cuh)
    bounds[1] > 0 && print(io, "__launch_bounds__(", bounds[1], bounds[2] > 0 ? ", $(bounds[2])" : "", ") ")
    print(io, kname, "(jl_ctx_t ctx")
    call = IOBuffer()
    print(call, df.name, "(&ctx")
    for (k, T) in enumerate((F, argtypes...))
        if dc_is_ghost(T)
            print(call, ", jl_ghost_t{}")
        else
            print(io, ", ", c_type(T), " p", k)
            print(call, ", p", k)
        end
    end
    print(io, ") { CUMEM_PDL_ENTRY(); (void)", String(take!(call)), "); }\n")
    src = kernel_source(df; body = String(take!(io)), prelude = DV_DEVICE_CUH)
    shm = 0
    for m in eachmatch(r"/\* shmem (\d+) bytes \*/", src)
        shm += parse(Int, m[1])
    end
    tasks = any(s -> occursin(s, src), DV_SYNC_MARKS)
    kern = on_host() ? nothing : load_kernel(src, kname)
    return CuFunction(kern, kname, src, shm, tasks, df, bounds[1], Ref(DV_MAX_SHMEM))
end

"""
    cufunction(f, tt::Type = Tuple{}; maxthreads, minthreads, blocks_per_sm, maxregs, name) -> HostKernel

Compiles `f` for arguments of the types in `tt` (what the kernel sees: `CuDeviceArray`s,
isbits values, `Type{T}` for a type; see [`cudaconvert`](@ref)) into a kernel on the
current device, as CUDA.jl's `cufunction`. Compiled once per (function type, argument
types, launch bounds, world age) and device; later calls cost a typed look-up.

`maxthreads` (an integer, or a tuple of up to 3 whose product counts) bounds the threads
per block the kernel is launched with and `blocks_per_sm` asks for that many resident
blocks per multiprocessor: CUDA C's `__launch_bounds__(maxthreads, blocks_per_sm)`; a
launch with more threads throws a `CuMemError` (`CUMEM_ERROR_INVALID_VALUE`, the driver's
`CUDA_ERROR_INVALID_VALUE`). `minthreads`, `maxregs` and `name` are accepted and ignored
(NVRTC has no per-kernel form of them). Throws `KernelCompileError` for what cannot run
on a GPU (see `CuMem.device_function`; also a kernel returning a value), `ArgumentError`
for a non-isbits argument type or a bound below 1.
"""
function cufunction(f::F, tt::Type{TT} = Tuple{}; maxthreads = nothing, blocks_per_sm = nothing,
                    minthreads = nothing, maxregs = nothing, name = nothing) where {F,TT<:Tuple}
    (maxthreads === nothing && blocks_per_sm === nothing) && return dv_cufunction(f, TT, Val((0, 0)))
    mt = maxthreads === nothing ? 0 : prod(dv_dims3(maxthreads))
    bps = blocks_per_sm === nothing ? 0 : Int(blocks_per_sm)
    (maxthreads === nothing || mt >= 1) || throw(ArgumentError("maxthreads must be 1 or more, got $maxthreads"))
    (blocks_per_sm === nothing || bps >= 1) || throw(ArgumentError("blocks_per_sm must be 1 or more, got $blocks_per_sm"))
    mt == 0 && (mt = 1024)      # __launch_bounds__ needs the threads to give the blocks
    return dv_cufunction(f, TT, Val((mt, bps)))
end
@inline function dv_cufunction(f::F, ::Type{TT}, ::Val{B}) where {F,TT,B}
    slots = type_memo(() -> Any[], Tuple{Val{:cufunction},F,TT,Val{B}})::Vector{Any}
    d = task_device() + 1
    fun = d <= length(slots) ? @inbounds(slots[d]) : nothing
    fun === nothing && (fun = dv_fill_slot!(slots, d, f, TT, B))
    return HostKernel{F,TT}(f, fun::CuFunction)
end
@noinline function dv_fill_slot!(slots::Vector{Any}, d::Int, @nospecialize(f), @nospecialize(TT), bounds::NTuple{2,Int})
    lock(DV_COMPILE_LOCK) do
        while length(slots) < d
            push!(slots, nothing)
        end
        slots[d] === nothing && (slots[d] = dv_compile(f, TT, bounds))
        return slots[d]
    end
end

## launching

dv_dims3(n::Integer) = (Int(n), 1, 1)
dv_dims3(t::Tuple{Integer}) = (Int(t[1]), 1, 1)
dv_dims3(t::Tuple{Integer,Integer}) = (Int(t[1]), Int(t[2]), 1)
dv_dims3(t::Tuple{Integer,Integer,Integer}) = (Int(t[1]), Int(t[2]), Int(t[3]))
dv_dims3(t) = throw(ArgumentError("threads and blocks must be integers or tuples of 1 to 3 integers, got $t"))

const DV_MAX_THREADS = (1024, 1024, 64)
const DV_MAX_BLOCKS = (2^31 - 1, 65535, 65535)
const DV_MAX_SHMEM = 48 * 1024           # per block without opting in (every GPU)
const DV_MAX_SHMEM_OPTIN = 227 * 1024    # with cuFuncSetAttribute: an H100's (sm_90) limit

# The launch's checks, before anything runs (the driver's limits of every current GPU).
@noinline function dv_check_launch(fun::CuFunction, t::NTuple{3,Int}, b::NTuple{3,Int}, shmem::Int)
    for (k, c) in zip(1:3, "xyz")
        1 <= t[k] <= DV_MAX_THREADS[k] ||
            throw(ArgumentError("the number of threads in the $c dimension ($(t[k])) must be 1 to $(DV_MAX_THREADS[k])"))
        1 <= b[k] <= DV_MAX_BLOCKS[k] ||
            throw(ArgumentError("the number of blocks in the $c dimension ($(b[k])) must be 1 to $(DV_MAX_BLOCKS[k])"))
    end
    prod(t) <= 1024 || throw(ArgumentError("too many threads per block: $(prod(t)) (at most 1024)"))
    (fun.maxthreads == 0 || prod(t) <= fun.maxthreads) ||
        throw(CuMemError(CUMEM_ERROR_INVALID_VALUE, "launching $(prod(t)) threads per block, more than the kernel's " *
                                                    "launch bound maxthreads = $(fun.maxthreads)"))
    shmem >= 0 || throw(ArgumentError("shmem must be 0 or more bytes, got $shmem"))
    fun.static_shmem + shmem <= DV_MAX_SHMEM_OPTIN ||
        throw(ArgumentError("too much shared memory: $(fun.static_shmem) static + $shmem dynamic bytes per block " *
                            "(at most $DV_MAX_SHMEM_OPTIN)"))
    fun.static_shmem + shmem <= DV_MAX_SHMEM && return nothing
    # more than 48 KiB: the kernel must be allowed it first (the driver refuses beyond the GPU's limit)
    if fun.kernel !== nothing && shmem > fun.dyn_shmem[]
        check(c_kernel_set_attribute(fun.kernel.handle, Int32(8), Int32(shmem)))
        fun.dyn_shmem[] = shmem
    end
    return nothing
end

# The kernel's parameters: the non-ghost values, in order.
@inline dv_params() = ()
@inline dv_params(x, xs...) = dc_is_ghost(Core.Typeof(x)) ? dv_params(xs...) : (x, dv_params(xs...)...)

"""
    (k::HostKernel)(args...; threads = 1, blocks = 1, shmem = 0, stream = stream())

Launches kernel `k` with `args` (converted by [`cudaconvert`](@ref); their types must be
`k`'s) on `blocks` blocks of `threads` threads (integers or tuples of up to 3) with `shmem`
bytes of dynamic shared memory per block, queued on `stream`; returns without waiting.
Throws `ArgumentError` before anything runs for a shape or shared memory size beyond the
GPU's limits (1024 threads per block; 48 KiB of shared memory) or arguments of other types.
"""
function (k::HostKernel{F,TT})(args...; threads = 1, blocks = 1, shmem::Integer = 0,
                               stream::Union{Nothing,CuStream} = nothing, kwargs...) where {F,TT}
    dv_launch(k, map(cudaconvert, args), dv_dims3(threads), dv_dims3(blocks), Int(shmem), stream)
    return nothing
end

@inline function dv_launch(k::HostKernel{F,TT}, args::Tuple, t::NTuple{3,Int}, b::NTuple{3,Int}, shmem::Int,
                           s::Union{Nothing,CuStream}) where {F,TT}
    dv_tt(args) === TT || dv_type_mismatch(TT, dv_tt(args))
    fun = k.fun
    (prod(t) <= 1024 && b[2] <= 65535 && b[3] <= 65535 && fun.static_shmem + shmem <= DV_MAX_SHMEM &&
     shmem >= 0 && all(>(0), t) && all(>(0), b) && fun.maxthreads == 0) || dv_check_launch(fun, t, b, shmem)
    kern = fun.kernel
    if kern === nothing
        st = s === nothing ? stream() : s
        if capture_state() !== nothing      # recorded: the arguments are device arrays (addresses)
            f, tasks = k.f, fun.tasks
            host_run(() -> host_launch(f, args, t, b, shmem, tasks))
            return nothing
        end
        st.handle == 0 || synchronize(st)
        host_launch(k.f, args, t, b, shmem, fun.tasks)
        return nothing
    end
    vals = dv_params(launch_context(fun.df), k.f, args...)
    dv_gpu_launch(kern, s === nothing ? current_handle() : live_handle(s), t, b, shmem, vals)
    return nothing
end
@noinline dv_type_mismatch(TT, T) =
    throw(ArgumentError("this kernel was compiled for arguments of types $TT, got $T (compile it with cufunction again)"))

# cuLaunchKernel with the values of `vals` (one tuple; a pointer to each field).
function dv_gpu_launch(k::Kernel, s::UInt64, t::NTuple{3,Int}, b::NTuple{3,Int}, shmem::Int, vals::V) where {V<:Tuple}
    N = fieldcount(V)
    vref = Ref(vals)
    code = GC.@preserve vref begin
        base = Ptr{UInt8}(Base.unsafe_convert(Ptr{Cvoid}, vref))
        ptrs = Ref(ntuple(i -> Ptr{Cvoid}(base + fieldoffset(V, i)), Val(N)))
        argp = Ptr{Ptr{Cvoid}}(Base.unsafe_convert(Ptr{Cvoid}, ptrs))
        GC.@preserve ptrs (s == 0 ?
            c_kernel_launch(k.handle, UInt32(b[1]), UInt32(b[2]), UInt32(b[3]), UInt32(t[1]), UInt32(t[2]),
                            UInt32(t[3]), UInt32(shmem), argp) :
            c_kernel_launch_async(s, k.handle, UInt32(b[1]), UInt32(b[2]), UInt32(b[3]), UInt32(t[1]), UInt32(t[2]),
                                  UInt32(t[3]), UInt32(shmem), argp))
    end
    check(code)
    return nothing
end

"""
    @cuda [threads = 1] [blocks = 1] [shmem = 0] [stream = stream()] [launch = true] f(args...)

Compiles `f` for the types of `args` as the kernel sees them ([`cudaconvert`](@ref):
CuArrays become `CuDeviceArray`s) and launches it on `blocks` blocks of `threads` threads
(integers or tuples of up to 3), with `shmem` bytes of dynamic shared memory, on
`stream`; returns without waiting (an exception in the kernel surfaces at the next
[`synchronize`](@ref)). `launch = false` compiles only and returns the
[`HostKernel`](@ref), to launch later as `k(args...; threads, blocks, shmem, stream)`
(sized with [`launch_configuration`](@ref)`(k.fun)`). The compile keywords `maxthreads`,
`blocks_per_sm`, `minthreads`, `maxregs` and `name` go to [`cufunction`](@ref). As
CUDA.jl's `@cuda`. On the host device the kernel runs before `@cuda` returns.
"""
macro cuda(ex...)
    call = ex[end]
    Meta.isexpr(call, :call) || throw(ArgumentError("@cuda: the last argument must be a call f(args...)"))
    kws = Any[]
    ckws = Any[]
    launch = true
    for kw in ex[1:end-1]
        Meta.isexpr(kw, :(=)) || throw(ArgumentError("@cuda: options are `key = value`, got $kw"))
        key, val = kw.args
        if key === :launch
            val isa Bool || throw(ArgumentError("@cuda: `launch` must be a literal true or false"))
            launch = val
        elseif key in (:threads, :blocks, :shmem, :stream)
            push!(kws, Expr(:kw, key, esc(val)))
        elseif key in (:maxthreads, :minthreads, :blocks_per_sm, :maxregs, :name)
            push!(ckws, Expr(:kw, key, esc(val)))
        else
            throw(ArgumentError("@cuda: unknown keyword `$key`"))
        end
    end
    f = esc(call.args[1])
    args = map(esc, call.args[2:end])
    if launch && isempty(ckws)
        return quote
            dv_cuda($f, ($(args...),); $(kws...))
            nothing
        end
    elseif launch
        k = gensym("kernel")
        as = gensym("args")
        return quote
            local $as = ($(args...),)
            local $k = dv_cufunction_for($f, $as; $(ckws...))
            $k($as...; $(kws...))
            nothing
        end
    else
        return :(dv_cufunction_for($f, ($(args...),); $(ckws...)))
    end
end

# The kernel's argument types, as CUDA.jl: a type passed as an argument is `Type{T}` (a
# ghost: the kernel is compiled for that type), not `DataType`.
@generated function dv_tt(args::Tuple)
    any(T -> T <: Type, args.parameters) || return :($args)
    return :(Tuple{map(Core.Typeof, args)...})
end
dv_cufunction_for(f, args::Tuple; kw...) = (kf = cudaconvert(f); cufunction(kf, dv_tt(map(cudaconvert, args)); kw...))

# `@cuda f(args...)`: the typed path (a look-up per call).
@inline function dv_cuda(f::F, args::Tuple; threads = 1, blocks = 1, shmem::Integer = 0,
                         stream::Union{Nothing,CuStream} = nothing) where {F}
    kf = cudaconvert(f)
    kargs = map(cudaconvert, args)
    k = cufunction(kf, dv_tt(kargs))
    dv_launch(k, kargs, dv_dims3(threads), dv_dims3(blocks), Int(shmem), stream)
    return nothing
end

"""
    launch_configuration(fun::CuFunction; shmem = 0, max_threads = 0) -> (blocks = Int, threads = Int)

The block size that maximises `fun`'s occupancy with `shmem` bytes of dynamic shared
memory (`shmem` may also be a function of the block size, as CUDA.jl; it is called with
the answer's threads) and at most `max_threads` threads per block (0: no limit), and the
smallest number of blocks that fills the GPU at that size (`cuOccupancyMaxPotentialBlockSize`),
as CUDA.jl's `launch_configuration`. On the host device: `blocks = 1`,
`threads = max_threads` (1024 without a limit).
"""
function launch_configuration(fun::CuFunction; shmem = 0, max_threads::Integer = 0)
    bytes = shmem isa Integer ? Int(shmem) : 0
    g, t = Ref{Int32}(0), Ref{Int32}(0)
    check(c_kernel_occupancy(fun.kernel === nothing ? UInt64(0) : fun.kernel.handle, UInt64(bytes),
                             Int32(max_threads), g, t))
    if !(shmem isa Integer) && fun.kernel !== nothing
        # a size that depends on the block: ask again with the bytes of the block size found
        check(c_kernel_occupancy(fun.kernel.handle, UInt64(shmem(Int(t[]))), Int32(max_threads), g, t))
    end
    return (blocks = Int(g[]), threads = Int(t[]))
end

## a compiled kernel's resources (CUDA.jl's `version`, `memory`, `registers`, `maxthreads`)

# attribute `attr` (the driver's CUfunction_attribute number) of a GPU kernel
function dv_attribute(fun::CuFunction, attr::Integer)
    v = Ref{Int32}(0)
    check(c_kernel_attribute(fun.kernel.handle, Int32(attr), v))
    return Int(v[])
end

"""
    CuMem.version(k::HostKernel) -> (ptx = VersionNumber, binary = VersionNumber)

The PTX ISA version and the SM architecture a kernel was compiled for
(`cuFuncGetAttribute`'s `PTX_VERSION` and `BINARY_VERSION`, e.g. `v"9.0"` on an H100),
as CUDA.jl. On the host device, where nothing is compiled to PTX: `v"0"` for both.
"""
function version(k::HostKernel)
    fun = k.fun
    fun.kernel === nothing && return (ptx = v"0", binary = v"0")
    vn(x) = VersionNumber(divrem(x, 10)...)
    return (ptx = vn(dv_attribute(fun, 5)), binary = vn(dv_attribute(fun, 6)))
end

"""
    CuMem.memory(k::HostKernel) -> (local = Int, shared = Int, constant = Int)

The bytes of local memory per thread, of static shared memory per block and of
constant memory a kernel uses (`cuFuncGetAttribute`), as CUDA.jl. On the host device:
the static shared memory the kernel declares, and 0 for the others.
"""
function memory(k::HostKernel)
    fun = k.fun
    fun.kernel === nothing && return (var"local" = 0, shared = fun.static_shmem, constant = 0)
    return (var"local" = dv_attribute(fun, 3), shared = dv_attribute(fun, 1), constant = dv_attribute(fun, 2))
end

"""
    CuMem.registers(k::HostKernel) -> Int

The registers per thread a kernel uses (`cuFuncGetAttribute`'s `NUM_REGS`), as CUDA.jl;
0 on the host device.
"""
registers(k::HostKernel) = k.fun.kernel === nothing ? 0 : dv_attribute(k.fun, 4)

"""
    CuMem.maxthreads(k::HostKernel) -> Int

The most threads per block a kernel can be launched with (`cuFuncGetAttribute`'s
`MAX_THREADS_PER_BLOCK`: its launch bound, or what its registers allow), as CUDA.jl. On
the host device: the launch bound, else 1024.
"""
function maxthreads(k::HostKernel)
    fun = k.fun
    fun.kernel === nothing && return fun.maxthreads == 0 ? 1024 : fun.maxthreads
    return dv_attribute(fun, 0)
end

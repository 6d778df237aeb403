# GPU compute through the engine: CUDA C compiled with NVRTC, kernels loaded, cached and
# launched on the task's current stream (devices/streams.jl; the legacy default stream
# unless set), GEMM through cuBLAS, and, on the host device (no GPU), a view of device
# memory as an `Array` so the same API computes with Base.
# The C functions are those of include/cumem.h (src/ffi/compute.rs), called through
# lib/libcumem.jl; `on_host()` is there too.

## the device

"""
    CuMem.host_view(a::CuArray{T,N}) -> Array{T,N}

An `Array` over `a`'s memory (no copy) on the host device, for computing with Base
(broadcast, reductions, BLAS) without the scalar path. Writes to it are writes to `a`.
The caller keeps `a` alive while the view is in use (`GC.@preserve a ...`): the view does
not own the memory. An empty `a` gives a new empty `Array`.

Compute on the host device runs on the calling thread; with a current stream other than
the default one, `host_view` first waits for the work queued on it, so host compute is
ordered after that stream's copies as a kernel on it would be.

Throws `CuMemError` (`CUMEM_ERROR_NOT_SUPPORTED`) on a GPU, whose memory the CPU cannot
read, and `AssertionError("Use of freed memory")` for a freed `a`.
"""
function host_view(a::CuArray{T,N}) where {T,N}
    p = devaddr(a)
    on_host() || throw(CuMemError(CUMEM_ERROR_NOT_SUPPORTED,
                                  "host_view needs the host device; the engine runs on $(device_name())"))
    s = stream()
    s.handle == 0 || capture_state() !== nothing || synchronize(s)   # (a capture on the host records)
    length(a) == 0 && return Array{T,N}(undef, size(a))
    return unsafe_wrap(Array, Ptr{T}(p), size(a); own = false)
end

"""
    synchronize()

Waits until all work queued on the current task's device (kernels, cuBLAS calls, copies),
on every stream, is done (`cuCtxSynchronize`, as `CUDA.synchronize()`; on the host device,
every stream's queue). `synchronize(s::CuStream)` waits for one stream. Downloads
(`Array(x)`, `copyto!` into an `Array`) synchronize by themselves. A fault of an earlier
kernel (e.g. an out-of-bounds address) is reported here as a `CuMemError`; an exception
thrown inside a compiled kernel (`DivideError`, `InexactError`, ...) is thrown here as
Julia's exception ([`CuMem.check_kernel_errors`](@ref)).
"""
function synchronize()
    CAPTURES[] == 0 || refuse_in_capture("synchronize()")
    DC_UNCHECKED[] = false        # (every stream of the device: checked below)
    check(c_synchronize())
    check_kernel_errors()
end

"""
    CuMem.@sync expr

Evaluates `expr`, then [`synchronize`](@ref)s, and returns `expr`'s value; for timing GPU
work (`@time CuMem.@sync y .= a .* x .+ y`). As `CUDA.@sync`.
"""
macro sync(ex)
    quote
        local ret = $(esc(ex))
        synchronize()
        ret
    end
end

## NVRTC

const NVRTC_AVAILABLE = Ref{Int8}(-1)

"""
    CuMem.nvrtc_available() -> Bool

Whether the engine found libnvrtc (`CUMEM_NVRTC_LIBRARY`, the linker's path or
`/usr/local/cuda/lib64`), so [`compile_ptx`](@ref) works. NVRTC needs no GPU.
"""
function nvrtc_available()
    if NVRTC_AVAILABLE[] < 0
        NVRTC_AVAILABLE[] = c_nvrtc_version(Ref{Int32}(0), Ref{Int32}(0)) == CUMEM_SUCCESS
    end
    return NVRTC_AVAILABLE[] == 1
end

"""
    CuMem.nvrtc_version() -> VersionNumber

NVRTC's version, e.g. `v"13.0.0"`. Throws `CuMemError` (`CUMEM_ERROR_NOT_SUPPORTED`)
without libnvrtc.
"""
function nvrtc_version()
    a, b = Ref{Int32}(0), Ref{Int32}(0)
    check(c_nvrtc_version(a, b))
    return VersionNumber(a[], b[])
end

# Throws the error a failed compile or load stands for.
@noinline function throw_compile(code::Int32)
    code == CUMEM_ERROR_COMPILE && throw(KernelCompileError(last_error()))
    throw_code(code)
end

function check_source(source::AbstractString, what)
    occursin('\0', source) && throw(ArgumentError("the kernel $what contains a NUL character"))
    return String(source)
end

"""
    CuMem.compile_ptx(source::String; arch = nothing) -> String

Compiles CUDA C++ `source` to PTX with NVRTC (`-std=c++17`, no fast math, and
`--fmad=false`: `a * b + c` is not fused, as in Julia, so results match Base) for `arch`
(e.g. `"compute_90"`; `nothing`: the GPU's own, or `"compute_75"` on the host device).
Needs libnvrtc but no GPU: the tests use it to check every generated kernel in CI.

Throws [`KernelCompileError`](@ref) when NVRTC rejects the source (its log and the
numbered source), `CuMemError` with `CUMEM_ERROR_NOT_SUPPORTED` without libnvrtc
(see [`nvrtc_available`](@ref)) or `CUMEM_ERROR_INVALID_VALUE` for a malformed `arch`,
`ArgumentError` for a NUL character.
"""
function compile_ptx(source::AbstractString; arch::Union{Nothing,AbstractString} = nothing)
    src = check_source(source, "source")
    a = arch === nothing ? nothing : check_source(arch, "architecture")
    len = Ref{UInt64}(0)
    buf = Vector{UInt8}(undef, 64 * 1024)   # most kernels' PTX fits: one compile
    while true
        code = c_compile_ptx(src, a, buf, UInt64(length(buf)), len)
        code == CUMEM_SUCCESS || throw_compile(code)
        if len[] <= length(buf)
            return String(resize!(buf, len[] - 1))
        end
        resize!(buf, len[])
    end
end

## kernels

"""
    CuMem.Kernel

A compiled kernel on the GPU: the engine's handle (`handle`), the function's `name`, the
block size that maximises its occupancy (`block`, see [`suggest_block`](@ref)), and the
byte size of each parameter (`param_sizes`; `nparams` is -1 when the driver cannot tell,
before CUDA 12.4), which [`launch`](@ref) checks the arguments against. Made by
[`load_kernel`](@ref); valid for the life of the process.
"""
struct Kernel
    handle::UInt64
    name::String
    block::Int
    nparams::Int
    param_sizes::Vector{Int}
end

Base.show(io::IO, k::Kernel) = print(io, "CuMem.Kernel(", repr(k.name), ", handle ", k.handle, ")")

"""
    CuMem.load_kernel(source::String, name::String) -> Kernel

The `extern "C" __global__` function `name` of CUDA C++ `source`, compiled by NVRTC for
the GPU (machine code for its `sm_XY`; compiler options as [`compile_ptx`](@ref)) and loaded on
the current task's device. The engine keeps loaded modules by `(device, source, name)`: a
second call costs its hash lookup and no compile (the package's own kernels are kept once
more by type, see [`CuMem.kernel_entry`](@ref)). A kernel runs only on the device it was
loaded on.

Throws [`KernelCompileError`](@ref) (NVRTC's log and the numbered source), `CuMemError`
with `CUMEM_ERROR_NOT_SUPPORTED` on the host device or without libnvrtc, or with
`CUMEM_ERROR_INVALID_VALUE` when `source` has no function `name`.
"""
function load_kernel(source::AbstractString, name::AbstractString)
    src, nm = check_source(source, "source"), check_source(name, "name")
    h = Ref{UInt64}(0)
    code = c_kernel_load(src, nm, h)
    code == CUMEM_SUCCESS || throw_compile(code)
    t = Ref{Int32}(0)
    check(c_kernel_block_size(h[], t))
    nparams, sizes = kernel_params(h[])
    return Kernel(h[], nm, Int(t[]), nparams, sizes)
end

# (number of parameters, byte size of each) of the kernel with engine handle `h`; -1 and
# none when the driver cannot tell. (`Base.zeros`: CuMem's own `zeros` makes a CuArray.)
function kernel_params(h::UInt64)
    count = Ref{Int32}(0)
    sizes = Base.zeros(UInt64, 64)
    check(c_kernel_params(h, count, sizes, Int32(length(sizes))))
    if count[] > length(sizes)
        resize!(sizes, count[])
        check(c_kernel_params(h, count, sizes, Int32(length(sizes))))
    end
    return Int(count[]), Int[sizes[i] for i in 1:max(0, Int(count[]))]
end

"""
    CuMem.suggest_block(k::Kernel) -> Int

Threads per block that maximise `k`'s occupancy without dynamic shared memory
(`cuOccupancyMaxPotentialBlockSize`, as CUDA.jl's `launch_configuration`).
"""
suggest_block(k::Kernel) = k.block

"""
    CuMem.uses_pdl(k::Kernel) -> Bool

Whether `k` is launched with programmatic dependent launch (PDL): its launch may overlap
the end of the kernel before it on the stream, and under capture its edges from kernel
nodes are programmatic (see [`CuMem.graph_info`](@ref)). True when its code executes
`griddepcontrol.wait` before touching memory (every kernel CuMem generates or ships
starts with `CUMEM_PDL_ENTRY()`, julia/cuda/common.cuh; a kernel of your own CUDA C can
call `cudaGridDependencySynchronize()` first), the GPU is sm_90 or later with a driver of
CUDA 12.3 or later, and PDL is on ([`CuMem.pdl!`](@ref), `CUMEM_PDL`).
"""
function uses_pdl(k::Kernel)
    out = Ref{Int32}(0)
    check(c_kernel_uses_pdl(k.handle, out))
    return out[] != 0
end

"""
    CuMem.pdl!(on::Bool) -> Bool

Turns programmatic dependent launch on or off for the kernels launched from now on (see
[`CuMem.uses_pdl`](@ref)) and returns whether it was on: the switch of the benchmarks
that measure it. On by default; `CUMEM_PDL=0` in the environment turns it off for the
process and wins over this call. A graph keeps the edges it was captured with.
"""
function pdl!(on::Bool)
    was = Ref{Int32}(0)
    check(c_set_pdl(Int32(on), was))
    return was[] != 0
end

# One kernel argument as the value cuLaunchKernel copies: a device address for arrays and
# pointers, the value itself for isbits scalars (and isbits structs, whose layout must
# match the kernel's C struct).
@inline kernel_value(a::CuArray) = devaddr(a)
@inline kernel_value(p::CuPtr) = p.addr
kernel_value(a::AbstractArray) =
    throw(ArgumentError("a $(typeof(a)) cannot be passed to a kernel: only CuArrays, CuPtrs and isbits values"))
@inline function kernel_value(x::T) where {T}
    isbitstype(T) || throw(ArgumentError("a $T cannot be passed to a kernel: only CuArrays, CuPtrs and isbits values"))
    return x
end

dims3(n::Integer, what) = dims3((n,), what)
@noinline function dims3(t::Tuple, what)
    1 <= length(t) <= 3 || throw(ArgumentError("$what must be an integer or a tuple of 1 to 3 integers, got $t"))
    for x in t
        (x isa Integer && 1 <= x <= typemax(UInt32)) ||
            throw(ArgumentError("$what must be positive integers below 2^32, got $t"))
    end
    return (UInt32(t[1]), UInt32(length(t) >= 2 ? t[2] : 1), UInt32(length(t) >= 3 ? t[3] : 1))
end

"""
    CuMem.launch(k::Kernel, args...; blocks, threads, shmem = 0)

Queues kernel `k` on the device with `blocks` blocks of `threads` threads (integers or
tuples of up to 3) and `shmem` bytes of dynamic shared memory, and returns without
waiting. Each argument is passed by value as `cuLaunchKernel` expects: a `CuArray` as
its device address (`T*` in the kernel), a `CuPtr` as its address, an isbits value
(`Int64` → `long long`, `Float32` → `float`, `Bool` → `bool`, ...) as itself. The
number of arguments and each one's size in bytes are checked against the kernel's
parameters (where the driver reports them: CUDA 12.4 and later); the types themselves
cannot be checked (a `Float32` passes for an `int`).

The kernel is queued on the current [`stream()`](@ref) (the legacy default stream unless
set with [`stream!`](@ref)): work on one stream runs in order, so a later copy or kernel
on it sees this one's results; [`synchronize`](@ref) waits for it. Arrays of another
stream that the kernel uses must be declared with [`record_stream`](@ref) before they
are freed. Throws `ArgumentError` for an
argument that cannot be passed (e.g. an `Array`) or bad sizes, `CuMemError` for a
geometry the GPU refuses (`CUMEM_ERROR_INVALID_VALUE`) or a failed launch.
"""
function launch(k::Kernel, args::Vararg{Any,N}; blocks, threads, shmem::Integer = 0) where {N}
    g = dims3(blocks, "blocks")
    b = dims3(threads, "threads")
    0 <= shmem <= typemax(UInt32) || throw_shmem(shmem)
    # All values in one isbits tuple and one tuple of pointers into it: no allocation per
    # argument (a launch's Julia side costs tens of ns). Only this packing is compiled for
    # each list of argument types; the rest (launch_packed) once.
    vals = map(kernel_value, args)
    k.nparams >= 0 && check_args(k, map(sizeof, vals))
    V = typeof(vals)
    vref = Ref(vals)
    GC.@preserve args vref begin
        base = Ptr{UInt8}(Base.unsafe_convert(Ptr{Cvoid}, vref))
        ptrs = Ref(ntuple(i -> Ptr{Cvoid}(base + fieldoffset(V, i)), Val(N)))
        argp = N == 0 ? Ptr{Ptr{Cvoid}}(C_NULL) : Ptr{Ptr{Cvoid}}(Base.unsafe_convert(Ptr{Cvoid}, ptrs))
        GC.@preserve ptrs launch_packed(k, g, b, UInt32(shmem), argp)
    end
    return nothing
end
@noinline throw_shmem(shmem) = throw(ArgumentError("shmem must be 0 to 2^32-1 bytes, got $shmem"))
# The launch of `k` with its packed arguments on the task's stream.
@noinline function launch_packed(k::Kernel, g::NTuple{3,UInt32}, b::NTuple{3,UInt32}, shmem::UInt32, argp::Ptr{Ptr{Cvoid}})
    s = live_handle(stream())
    check(s == 0 ? c_kernel_launch(k.handle, g..., b..., shmem, argp) : c_kernel_launch_async(s, k.handle, g..., b..., shmem, argp))
    return nothing
end

# The arguments' sizes against the kernel's parameters (a mismatch would make the GPU
# read garbage or the driver read past the argument array).
@noinline function check_args(k::Kernel, sizes::NTuple{N,Int}) where {N}
    if N != k.nparams
        throw(ArgumentError("kernel $(k.name) takes $(k.nparams) arguments, got $N"))
    end
    for i in 1:N
        if sizes[i] != k.param_sizes[i]
            throw(ArgumentError("argument $i of kernel $(k.name) is $(sizes[i]) bytes but the parameter " *
                                "is $(k.param_sizes[i]) bytes (a CuArray or CuPtr passes an 8-byte address)"))
        end
    end
    return nothing
end

## GEMM

blas_dtype(::Type{Float32}) = Int32(0)
blas_dtype(::Type{Float64}) = Int32(1)
blas_dtype(::Type{ComplexF32}) = Int32(2)
blas_dtype(::Type{ComplexF64}) = Int32(3)

function blas_op(t::Char)
    t == 'N' && return Int32(0)
    t == 'T' && return Int32(1)
    t == 'C' && return Int32(2)
    throw(ArgumentError("trans must be 'N', 'T' or 'C', got $(repr(t))"))
end

"""
    CuMem.gemm!(tA::Char, tB::Char, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}, beta, C::CuVecOrMat{T}) -> C

`C = alpha * op(A) * op(B) + beta * C` with `op` given by `tA`, `tB` (`'N'` as is, `'T'`
transposed, `'C'` conjugate transposed), for `T` in `Float32`, `Float64`, `ComplexF32`,
`ComplexF64`, as `LinearAlgebra.BLAS.gemm!`. On a GPU through cuBLAS (default math
mode: no TF32), queued on the current [`stream()`](@ref); on the host device through Base's
BLAS on [`host_view`](@ref)s. `C` must not share memory with `A` or `B`.

Throws `DimensionMismatch` for inconsistent sizes, `ArgumentError` for another `tA`/`tB`.
"""
function gemm!(tA::Char, tB::Char, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}, beta,
               C::CuVecOrMat{T}) where {T<:LinearAlgebra.BlasFloat}
    opa, opb = blas_op(tA), blas_op(tB)
    m, n = size(C, 1), size(C, 2)
    am, ak = tA == 'N' ? (size(A, 1), size(A, 2)) : (size(A, 2), size(A, 1))
    bk, bn = tB == 'N' ? (size(B, 1), size(B, 2)) : (size(B, 2), size(B, 1))
    if am != m || bn != n || ak != bk
        throw(DimensionMismatch("gemm!: op(A) is $am×$ak, op(B) $bk×$bn, C $m×$n"))
    end
    check_devices("gemm!", A, B, C)
    # one operation of a capture: reads A, B, C, writes C and cuBLAS's workspace
    CAPTURES[] == 0 || return captured_op(() -> gemm_queue!(tA, tB, alpha, A, B, beta, C), (A, B, C),
                                          (C, CUBLAS_WORKSPACE))
    return gemm_queue!(tA, tB, alpha, A, B, beta, C)
end
function gemm_queue!(tA::Char, tB::Char, alpha, A::CuMatrix{T}, B::CuVecOrMat{T}, beta,
                     C::CuVecOrMat{T}) where {T<:LinearAlgebra.BlasFloat}
    opa, opb = blas_op(tA), blas_op(tB)
    m, n = size(C, 1), size(C, 2)
    ak = tA == 'N' ? size(A, 2) : size(A, 1)
    if on_host()
        GC.@preserve A B C begin
            hA, hB, hC, a, b = host_view(A), host_view(B), host_view(C), convert(T, alpha), convert(T, beta)
            host_run(() -> (LinearAlgebra.BLAS.gemm!(tA, tB, a, hA, hB, b, hC); nothing))
        end
        return C
    end
    a, b = Ref{T}(convert(T, alpha)), Ref{T}(convert(T, beta))
    GC.@preserve A B C a b check(c_gemm_async(live_handle(stream()), blas_dtype(T), opa, opb, m, n, ak,
                                        Base.unsafe_convert(Ptr{Cvoid}, a), devaddr(A), max(1, size(A, 1)),
                                        devaddr(B), max(1, size(B, 1)), Base.unsafe_convert(Ptr{Cvoid}, b),
                                        devaddr(C), max(1, size(C, 1))))
    return C
end

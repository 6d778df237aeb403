# Julia's exceptions from compiled kernels (the compiler is compute/compiler/). A throw site in compiled code (a call that
# never returns, `throw`, an integer division's divide check, a bounds-checked field of a
# tuple, a mapped math function's domain check) becomes: claim the error record (the throw of
# the lowest element number wins), store the site's number and the run-time values its exception is built
# from, return. The record lives in page-locked host memory that kernels write directly;
# the host reads it at the next point that waits for the stream (`synchronize`, a
# download, a scalar result) in `check_kernel_errors`, and rebuilds the exception by
# evaluating the site's expression again with those values on the host (e.g. calling
# `Base.throw_inexacterror(:trunc, Int8, 300)` or `checked_sdiv_int(1, 0)`), so the
# exception is exactly Base's. As CUDA.jl's KernelException, it surfaces late: at the
# next synchronisation point, not at the launch.

# Where a kernel threw: the site's rebuild expression (`tree`, see dc_eval_site), the
# function and file:line it came from. `DC_SITES` holds one per compiled throw site.
struct KernelErrorSite
    tree::Any            # expression to evaluate on the host (see dc_eval_site)
    where_::String       # "f at file:line"
end

const DC_SITES = KernelErrorSite[]
const DC_SITES_LOCK = ReentrantLock()

# Registers a throw site whose values take `nbytes` bytes of the record's payload (the
# record grows to hold them before the next launch, see dc_err_record); its number.
function dc_register_site(tree, where_::String, nbytes::Integer = 0)
    lock(DC_SITES_LOCK) do
        push!(DC_SITES, KernelErrorSite(tree, where_))
        nbytes > DC_ERR_CAP[] && (DC_ERR_CAP[] = (Int(nbytes) + 63) & -64)
        return length(DC_SITES)
    end
end

# Rebuild trees: (:const, v), (:payload, T, offset), (:call, f, args...), (:new, T, args...),
# (:throw, x): throw the value of x; (:raise, x): evaluate x, which throws.
function dc_eval_site(tree, payload::Vector{UInt8})
    k = tree[1]
    if k === :const
        return tree[2]
    elseif k === :payload
        T, off = tree[2], tree[3]
        return GC.@preserve payload unsafe_load(Ptr{T}(pointer(payload) + off))
    elseif k === :call
        f = dc_eval_site(tree[2], payload)
        args = Any[dc_eval_site(a, payload) for a in tree[3:end]]
        return f(args...)
    elseif k === :new
        T = tree[2]
        args = Any[dc_eval_site(a, payload) for a in tree[3:end]]
        return ccall(:jl_new_structv, Any, (Any, Ptr{Any}, UInt32), T, args, length(args))
    elseif k === :throw
        throw(dc_eval_site(tree[2], payload))
    end
    error("bad kernel error site $k")
end

# The error record: one per process, in page-locked host memory that kernels write (the
# same address on the device under unified addressing): flag (0: none), site number, a lock,
# the element number of the throw (prelude.cuh's jl_err_claim keeps the lowest), then the
# payload: DC_ERR_CAP[] bytes, at least the largest registered site's. When a site needs
# more, the next launch gets a new, larger record; the old ones stay (kernels still running
# may write them) and are checked too.
const DC_ERR = Ref{Vector{UInt64}}(UInt64[])
const DC_ERR_CAP = Ref(64)
const DC_ERR_OLD = Vector{UInt64}[]
const DC_ERR_HEADER = 16          # bytes before the payload

function dc_err_record()
    r = DC_ERR[]
    length(r) >= (DC_ERR_HEADER + DC_ERR_CAP[]) >> 3 && return r
    return dc_err_grow()
end

# (apart from dc_err_record, whose every launch would otherwise box the variables this
# closure captures: 64 bytes per broadcast)
@noinline function dc_err_grow()
    return lock(DC_SITES_LOCK) do
        r = DC_ERR[]
        need = (DC_ERR_HEADER + DC_ERR_CAP[]) >> 3
        length(r) >= need && return r
        n = try
            pinned(UInt64, need)
        catch
            Vector{UInt64}(undef, need)       # no engine pinned pool: plain memory (host device)
        end
        fill!(n, 0)
        isempty(r) || push!(DC_ERR_OLD, r)
        DC_ERR[] = n
        return n
    end
end

"""
    CuMem.kernel_error_address() -> UInt64

The address of the error record that compiled kernels fill when they throw (passed to
each launch in the context, see [`launch_context`](@ref)).
"""
kernel_error_address() = UInt64(UInt(pointer(dc_err_record())))

# The first exception a kernel threw on the host device (compute/device/host.jl), thrown
# at the next check as a GPU kernel's.
const DC_HOST_ERROR = Ref{Any}(nothing)

"""
    CuMem.check_kernel_errors()

Throws the exception that a kernel recorded since the last check (the throw of the lowest
element index, where the kernel numbers its elements, as Base would have thrown first),
as Julia would have thrown it (`DivideError()`, `InexactError(:trunc, Int8, 300)`,
`DomainError(x, msg)`, `BoundsError(t, i)`, `OverflowError(msg)`, ...), and clears the
record. Called by every point that waits for the stream: [`synchronize`](@ref), downloads
(`Array(x)`, `copyto!` into host memory), scalar results (`sum`, `x[i]`). A kernel's
exception therefore surfaces at the first such point after its launch, like CUDA.jl's
`KernelException`; later kernels of the same stream still ran (their results must not be
trusted). Cheap when nothing threw: one load from host memory.
"""
@inline function check_kernel_errors()
    DC_HOST_ERROR[] === nothing || dc_raise_host()
    isempty(DC_ERR_OLD) || dc_check_old()
    r = DC_ERR[]
    isempty(r) && return nothing
    flag = unsafe_load(Ptr{UInt32}(pointer(r)))
    flag == 0 && return nothing
    dc_raise(r)
end

# Whether a kernel that can throw (a compiled function with a throw site) may have run
# since the last check before a read-back: set by such launches (`launch_context`, the
# typed fast paths of broadcasts and of reductions over a dimension), cleared by
# `check_thrown_before_read` and `synchronize()`.
const DC_UNCHECKED = Ref(false)

"""
    CuMem.check_thrown_before_read()

Called before a copy from the device to host memory (`Array(x)`, `copyto!` into an
`Array`, `x[i]`, [`CuMem.read_scalar`](@ref)): when a kernel that can throw was launched
since the last such check, waits for the task's stream and throws the exception a kernel
recorded ([`CuMem.check_kernel_errors`](@ref)) before anything is copied, so that a
download never reads a result that a throwing kernel left partly unwritten (its bytes would
be thrown away with the exception; compute-sanitizer's initcheck reports the copy). After
kernels that cannot throw: one load, nothing else. The wait is for the current stream (and
what the legacy default stream waits for): a throwing kernel on another stream or device,
or one launched by another thread during the wait, is still thrown after the copy, as the
copies do in every case.
"""
@inline function check_thrown_before_read()
    DC_UNCHECKED[] || return nothing
    return dc_wait_and_check()
end
@noinline function dc_wait_and_check()
    DC_UNCHECKED[] = false     # (before the wait: a launch during it sets it again)
    check(c_stream_synchronize(current_handle()))
    check_kernel_errors()
    return nothing
end

# The records replaced by larger ones (kernels launched before may have written them).
@noinline function dc_check_old()
    for r in DC_ERR_OLD
        unsafe_load(Ptr{UInt32}(pointer(r))) == 0 || dc_raise(r)
    end
end

@noinline function dc_raise_host()
    e = DC_HOST_ERROR[]
    DC_HOST_ERROR[] = nothing
    throw(e)
end

@noinline function dc_raise(r::Vector{UInt64})
    site = Int(unsafe_load(Ptr{UInt32}(pointer(r)) + 4))
    nb = 8 * length(r) - DC_ERR_HEADER
    payload = Vector{UInt8}(undef, nb)
    GC.@preserve r payload unsafe_copyto!(pointer(payload), Ptr{UInt8}(pointer(r) + DC_ERR_HEADER), nb)
    fill!(r, 0)
    s = lock(() -> 1 <= site <= length(DC_SITES) ? DC_SITES[site] : nothing, DC_SITES_LOCK)
    s === nothing && error("a GPU kernel threw an exception at an unknown site ($site)")
    e = try
        dc_eval_site(s.tree, payload)
        nothing
    catch err
        err
    end
    e === nothing && error("a GPU kernel threw an exception in $(s.where_), which the host could not reproduce")
    throw(e)
end


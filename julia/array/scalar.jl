# Scalar indexing: each element access is a device copy of a few bytes, so it works but
# warns once (CUDA.jl 2.x's policy); `allowscalar(false)` makes it an error and
# `@allowscalar` allows it silently for one expression.

const SCALAR_ALLOWED = Ref(true)
const SCALAR_WARNED = Ref(false)
const SCALAR_TLS_KEY = :CuMemAllowScalar
# A task's scope setting (task-local, under SCALAR_TLS_KEY): true (allowed), false
# (disallowed), :warn / :warned (allowed with one warning, not yet / already given), absent
# (the process-wide policy). Scopes whose setting is not `true` running now, in any task:
# while there is one, every scalar access takes the slow path that reads the task's setting.
const SCALAR_STRICT_SCOPES = Threads.Atomic{Int}(0)

"""
    allowscalar(allow::Bool = true, warn::Bool = true)
    allowscalar(f::Function, allow::Bool = true, warn::Bool = false)

Whether scalar indexing of CuArrays (`x[i]`, `x[i] = v`, iteration) is allowed. Allowed by
default, with one warning the first time; `allowscalar(false)` makes it an error (to find
slow code); `allowscalar(true, false)` allows it without the warning; `allowscalar(true)`
re-arms the warning. Outside any scope this sets the process-wide policy; inside an
[`@allowscalar`](@ref) or [`@disallowscalar`](@ref) scope (or the function form) it sets the
current task's setting until the scope ends. The function form runs `f()` with scalar
indexing allowed (with `allow = false`, disallowed; with `warn = true`, allowed with one
warning) in this task and restores the previous setting afterwards. As GPUArrays.jl 6
(CUDA.jl 2.x), whose setting is always per task.
"""
function allowscalar(allow::Bool = true, warn::Bool = true)
    tls = task_local_storage()
    if haskey(tls, SCALAR_TLS_KEY)
        set_scalar_scope!(tls, scope_value(allow, warn))
    else
        SCALAR_ALLOWED[] = allow
        SCALAR_WARNED[] = !warn
    end
    return nothing
end

allowscalar(f::Base.Callable, allow::Bool = true, warn::Bool = false) =
    with_scalar_scope(f, scope_value(allow, warn))

scope_value(allow::Bool, warn::Bool) = !allow ? false : warn ? :warn : true

# Sets the current task's scope setting (`nothing`: none), returning the previous one.
function set_scalar_scope!(tls, v)
    old = get(tls, SCALAR_TLS_KEY, nothing)
    old === nothing || old === true || Threads.atomic_sub!(SCALAR_STRICT_SCOPES, 1)
    if v === nothing
        delete!(tls, SCALAR_TLS_KEY)
    else
        v === true || Threads.atomic_add!(SCALAR_STRICT_SCOPES, 1)
        tls[SCALAR_TLS_KEY] = v
    end
    return old
end

function with_scalar_scope(f, v)
    tls = task_local_storage()
    old = set_scalar_scope!(tls, v)
    try
        f()
    finally
        set_scalar_scope!(tls, old)
    end
end

"""
    @allowscalar ex

Evaluates `ex` with scalar indexing of CuArrays allowed, without the warning, even under
`allowscalar(false)` (in the current task). See also [`@disallowscalar`](@ref).
"""
macro allowscalar(ex)
    scalar_scope_expr(ex, true)
end

"""
    @disallowscalar ex

Evaluates `ex` with scalar indexing of CuArrays disallowed (an error) in the current task,
whatever the policy set by [`allowscalar`](@ref). As GPUArrays.jl 6 (CUDA.jl 2.x).
"""
macro disallowscalar(ex)
    scalar_scope_expr(ex, false)
end

# Inline (not a closure), so that assignments in `ex` are visible after it.
scalar_scope_expr(ex, v::Bool) = quote
    local tls = task_local_storage()
    local old = set_scalar_scope!(tls, $v)
    try
        $(esc(ex))
    finally
        set_scalar_scope!(tls, old)
    end
end

@inline function assertscalar(op::String)
    (SCALAR_ALLOWED[] & SCALAR_WARNED[] & (SCALAR_STRICT_SCOPES[] == 0)) && return nothing
    scalar_slow(op)
end

const SCALAR_WARNING = "Performing scalar operations on GPU arrays: This is very slow, consider " *
                       "disallowing these operations with `allowscalar(false)`"

@noinline function scalar_slow(op::String)
    tls = task_local_storage()
    scope = get(tls, SCALAR_TLS_KEY, nothing)
    (scope === true || scope === :warned) && return nothing
    if scope === :warn
        tls[SCALAR_TLS_KEY] = :warned      # still a strict scope: the count is unchanged
        @warn SCALAR_WARNING
    elseif scope === false || !SCALAR_ALLOWED[]
        error(scalar_message(op, backtrace()))
    elseif !SCALAR_WARNED[]
        SCALAR_WARNED[] = true
        @warn SCALAR_WARNING
    end
    return nothing
end

# "scalar getindex is disallowed" (CUDA.jl's words), then which library function fell back
# to element-by-element access, and the ways out. The function is the outermost frame of
# Base, a standard library or CuMem before the caller's code.
function scalar_message(op::String, bt)
    lib(m) = (r = Base.moduleroot(m); r === Base || r === Core || r === CuMem ||
              isdir(joinpath(Sys.STDLIB, string(nameof(r)))))
    fn = nothing
    for fr in Base.StackTraces.stacktrace(bt)
        fr.func === Symbol("top-level scope") && break             # the caller's code
        li = fr.linfo
        li isa Core.MethodInstance && li.def isa Method || continue # an inlined frame
        m = li.def.module
        lib(m) || break
        m === CuMem || (fn = (fr.func, nameof(m)))
    end
    head = "scalar $op is disallowed"
    fn === nothing && return head * ": x[i] of a CuArray copies one element between device and host. " *
        "Use whole-array operations (broadcasts, reductions, x[i:i]), Array(x) for a host copy, " *
        "or CuMem.@allowscalar for a few elements"
    return head * ": $(fn[1]) ($(fn[2])) has no GPU version in CuMem and falls back to accessing the " *
        "CuArray element by element (a device-host copy each). Call it on a host copy " *
        "($(fn[1])(Array(x), ...)), or allow it for this call with CuMem.@allowscalar"
end

Base.@propagate_inbounds function Base.getindex(a::CuArray{T}, i::Int) where {T}
    check_alive(a)
    @boundscheck checkbounds(a, i)
    assertscalar("getindex")
    CAPTURES[] == 0 || refuse_in_capture("a scalar read-back (getindex)")
    r = Ref{T}()
    sizeof(T) == 0 && return r[]
    check_thrown_before_read()
    GC.@preserve r check(ordered_copy_dtoh(convert(Ptr{Cvoid}, Base.unsafe_convert(Ptr{T}, r)),
                                     offset_addr(a, i), nbytes(T, 1)))
    check_kernel_errors()
    return r[]
end

Base.@propagate_inbounds function Base.setindex!(a::CuArray{T}, v, i::Int) where {T}
    check_alive(a)
    @boundscheck checkbounds(a, i)
    assertscalar("setindex!")
    CAPTURES[] == 0 || refuse_in_capture("a scalar write from the host (setindex!)")
    r = Ref{T}(convert(T, v))
    sizeof(T) == 0 && return a
    GC.@preserve r check(ordered_copy_htod(offset_addr(a, i),
                                     convert(Ptr{Cvoid}, Base.unsafe_convert(Ptr{T}, r)), nbytes(T, 1)))
    return a
end

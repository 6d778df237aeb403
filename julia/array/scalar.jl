# Scalar indexing: each element access is a device copy of a few bytes, so it works but
# warns once (CUDA.jl 2.x's policy); `allowscalar(false)` makes it an error and
# `@allowscalar` allows it silently for one expression.

const SCALAR_ALLOWED = Ref(true)
const SCALAR_WARNED = Ref(false)
const SCALAR_TLS_KEY = :CuMemAllowScalar

"""
    allowscalar(flag::Bool)

Whether scalar indexing of CuArrays (`x[i]`, `x[i] = v`, iteration) is allowed in this
process. Allowed by default, with one warning the first time; `allowscalar(false)` makes
it an error (to find slow code). See also [`@allowscalar`](@ref).
"""
function allowscalar(flag::Bool = true)
    SCALAR_ALLOWED[] = flag
    return nothing
end

"""
    @allowscalar ex

Evaluates `ex` with scalar indexing of CuArrays allowed, without the warning, even under
`allowscalar(false)` (in the current task).
"""
macro allowscalar(ex)
    quote
        local tls = task_local_storage()
        local old = get(tls, $(QuoteNode(SCALAR_TLS_KEY)), nothing)
        tls[$(QuoteNode(SCALAR_TLS_KEY))] = true
        try
            $(esc(ex))
        finally
            if old === nothing
                delete!(tls, $(QuoteNode(SCALAR_TLS_KEY)))
            else
                tls[$(QuoteNode(SCALAR_TLS_KEY))] = old
            end
        end
    end
end

@inline function assertscalar(op::String)
    (SCALAR_ALLOWED[] & SCALAR_WARNED[]) && return nothing
    scalar_slow(op)
end

@noinline function scalar_slow(op::String)
    get(task_local_storage(), SCALAR_TLS_KEY, false) === true && return nothing
    if !SCALAR_ALLOWED[]
        error("scalar $op is disallowed")
    elseif !SCALAR_WARNED[]
        SCALAR_WARNED[] = true
        @warn("Performing scalar operations on GPU arrays: This is very slow, consider " *
              "disallowing these operations with `allowscalar(false)`")
    end
    return nothing
end

Base.@propagate_inbounds function Base.getindex(a::CuArray{T}, i::Int) where {T}
    check_alive(a)
    @boundscheck checkbounds(a, i)
    assertscalar("getindex")
    r = Ref{T}()
    sizeof(T) == 0 && return r[]
    GC.@preserve r check(ordered_copy_dtoh(convert(Ptr{Cvoid}, Base.unsafe_convert(Ptr{T}, r)),
                                     offset_addr(a, i), nbytes(T, 1)))
    check_kernel_errors()
    return r[]
end

Base.@propagate_inbounds function Base.setindex!(a::CuArray{T}, v, i::Int) where {T}
    check_alive(a)
    @boundscheck checkbounds(a, i)
    assertscalar("setindex!")
    r = Ref{T}(convert(T, v))
    sizeof(T) == 0 && return a
    GC.@preserve r check(ordered_copy_htod(offset_addr(a, i),
                                     convert(Ptr{Cvoid}, Base.unsafe_convert(Ptr{T}, r)), nbytes(T, 1)))
    return a
end

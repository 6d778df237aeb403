# TEMPORARY stand-in for broadcasting and reductions over CuArrays (julia/broadcast.jl and
# julia/mapreduce.jl of the broadcast work), host device only: Base's broadcast and
# mapreduce on the host memory behind the arrays. Lets the demo and the linear algebra
# run in CI until the real implementation is merged; delete this file (and its include)
# then. On a GPU it throws.

using Base.Broadcast: Broadcasted, AbstractArrayStyle

struct CuArrayStyle{N} <: AbstractArrayStyle{N} end
CuArrayStyle(::Val{N}) where {N} = CuArrayStyle{N}()
CuArrayStyle{M}(::Val{N}) where {M,N} = CuArrayStyle{N}()
Base.BroadcastStyle(::Type{<:CuArray{T,N}}) where {T,N} = CuArrayStyle{N}()

Base.similar(bc::Broadcasted{CuArrayStyle{N}}, ::Type{T}) where {N,T} =
    CuArray{T}(undef, map(length, axes(bc)))

standin_host() = on_host() ||
    throw(CuMemError(CUMEM_ERROR_NOT_SUPPORTED, "broadcasting over CuArrays is not available in this build"))

# Arguments with CuArrays replaced by Arrays over the same memory (caller preserves).
hostify(x::CuArray) = host_view(x)
hostify(bc::Broadcasted{S}) where {S} = Broadcasted{Nothing}(bc.f, map(hostify, bc.args), bc.axes)
hostify(x) = x
cuarrays_in(x::CuArray) = Any[x]
cuarrays_in(bc::Broadcasted) = reduce(vcat, map(cuarrays_in, bc.args); init = Any[])
cuarrays_in(x) = Any[]

function Base.copyto!(dest::CuArray, bc::Broadcasted{Nothing})
    standin_host()
    keep = cuarrays_in(bc)
    GC.@preserve dest keep copyto!(host_view(dest), hostify(bc))
    return dest
end

function Base.mapreduce(f, op, A::CuArray; dims = :, kw...)
    standin_host()
    r = GC.@preserve A mapreduce(f, op, host_view(A); dims = dims, kw...)
    return dims === (:) ? r : CuArray(r)
end

# findmax, findmin, argmax, argmin over all or some dimensions: one block of threads per
# output, reducing (value, index) pairs; the layout comes from mapreduce.jl's plan.

"""
    CuMem.FindBetter{ismax}()

`(w, v) -> Bool`: whether a candidate `w` replaces `v` in Base's `findmax` (`ismax`) or
`findmin`, whatever their positions: a NaN (`x != x`) beats every number and nothing beats
it, otherwise `isless` decides (so `-0.0 < 0.0`). Compiled for the element type; the kernel
breaks ties by the first index, as Base's loop does.
"""
struct FindBetter{M} end
(::FindBetter{true})(w, v) = (v == v) & ((w != w) | isless(v, w))
(::FindBetter{false})(w, v) = (v == v) & ((w != w) | isless(w, v))

# One block per output keeps (value, index) pairs, combined by `better` (a compiled
# FindBetter) with ties to the first index; kept/reduced dims as the reduction's.
function findext_source(bdf, T::Type, nk::Int, nr::Int, linear::Bool, idx64::Bool)
    is_ghost(bdf) || throw(ArgumentError("findext_source: the comparison must carry no values"))
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    TC = c_type(T)
    io = IOBuffer()
    print(io, "#define CUMEM_BETTER(a, b) ", fn_call(bdf, "jl_ghost_t{}", "a", "b"), "\n")
    print(io, FINDEXT_CUH)
    print(io, "CUMEM_KERNEL void cumem_findext(jl_ctx_t ctx, const $TC* src, $TC* outv, int64_t* outi, $IDX nout, $IDX nred, $IDX gx")
    print_dim_params(io, IDX, OFF, nk, nr, linear)
    print(io, ") {\n  CUMEM_PDL_ENTRY();\n")
    print_dim_arrays(io, IDX, OFF, nk, nr, linear)
    print(io, "  cumem_findext_body<$TC, $IDX, $OFF, $nk, $(linear ? 0 : nr), $linear>",
          "(ctx, src, outv, outi, nout, nred, ks, kst, rs, rst);\n}\n")
    return kernel_source(bdf; body = String(take!(io)))
end
const FINDEXT_CUH = cuda_source("findext.cuh")

# The cached findmax/findmin kernel of A's element type and layout.
function findext_entry(T, ismax, plan, idx64)
    bdf = element_function(FindBetter{ismax}(), T, T)
    bdf.rettype === Bool || throw(ArgumentError("$(ismax ? "findmax" : "findmin") compares $T elements with `isless` and `!=`, " *
                                                "which give $(bdf.rettype), not Bool"))
    key = (:findext, T, ismax, length(plan.ksz), length(plan.rsz), plan.linear, idx64)
    return bdf, kernel_entry(key, (bdf,)) do
        (findext_source(bdf, T, length(plan.ksz), length(plan.rsz), plan.linear, idx64), "cumem_findext", nothing)
    end
end

function gpu_findext(A, ismax::Bool, dims)
    check_devices(ismax ? "findmax" : "findmin", A)
    N = ndims(A)
    T = eltype(A)
    rdims = normalize_dims(dims, N)
    if length(A) == 0 || on_host()
        if length(A) > 0
            plan = plan_reduce(A, rdims)
            findext_entry(T, ismax, plan, length(plan.base) >= typemax(Int32))
        end
        h = length(A) == 0 ? Array{T,N}(undef, size(A)) : host_arg(A)
        GC.@preserve A begin
            r = dims === (:) ? (ismax ? findmax(h) : findmin(h)) : (ismax ? findmax(h; dims = dims) : findmin(h; dims = dims))
            return dims === (:) ? r : (CuArray(r[1]), CuArray(r[2]))
        end
    end
    plan = plan_reduce(A, rdims)
    idx64 = max(length(plan.base), plan.nout) >= typemax(Int32)
    bdf, entry = findext_entry(T, ismax, plan, idx64)
    osz = reduced_size(size(A), rdims)
    vals = CuArray{T}(undef, osz)
    idx = CuArray{Int64}(undef, plan.nout)
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    gx = min(plan.nout, 65535)
    args = Any[launch_context(bdf), devaddr(plan.base) + UInt64(plan.offset * sizeof(T)), devaddr(vals), devaddr(idx),
               IT(plan.nout), IT(plan.nred), IT(gx)]
    for d in eachindex(plan.ksz)
        push!(args, IT(plan.ksz[d]), OT(plan.kst[d]))
    end
    plan.linear || for d in eachindex(plan.rsz); push!(args, IT(plan.rsz[d]), OT(plan.rst[d])); end
    GC.@preserve plan vals idx launch(entry_kernel(entry), args...; blocks = gx, threads = 256)
    # k (0-based over the reduced dimensions) -> the index into A
    ks = Array(idx)
    unsafe_free!(idx)
    check_kernel_errors()
    rsz = ntuple(d -> d in rdims ? size(A, d) : 1, N)
    RC, OC = CartesianIndices(rsz), CartesianIndices(osz)
    cart = [OC[j] + RC[ks[j]+1] - oneunit(CartesianIndex{N}) for j in 1:plan.nout]
    if dims === (:)
        v = Array(vals)[1]
        return (v, N == 1 ? cart[1][1] : cart[1])
    end
    return (vals, CuArray(reshape(cart, osz)))
end

"""
    findmax(A::CuArray; dims=:) / findmin / argmax / argmin

The maximum (minimum) and its index, as Base: a `CartesianIndex` for arrays of 2 or more
dimensions, an `Int` for vectors; along `dims`, a `CuArray` of values and a `CuArray` of
`CartesianIndex`es. Ties give the first index; a NaN is the result when there is one;
otherwise `isless` orders (so `-0.0 < 0.0`), for any element type that has it (the
comparison is compiled from Julia, see [`CuMem.FindBetter`](@ref)). One block of threads
per output.
"""
Base.findmax(A::AnyCuArray; dims = :) = gpu_findext(A, true, dims)
Base.findmin(A::AnyCuArray; dims = :) = gpu_findext(A, false, dims)
Base.argmax(A::AnyCuArray; dims = :) = findmax(A; dims = dims)[2]
Base.argmin(A::AnyCuArray; dims = :) = findmin(A; dims = dims)[2]

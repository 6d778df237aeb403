# findmax, findmin, argmax, argmin over all or some dimensions: one block of threads per
# output, reducing (value, index) pairs; the layout comes from mapreduce.jl's plan.

# One block per output keeps (value, index) pairs; ties go to the first index, NaN wins
# (is the maximum for findmax, the minimum for findmin), as Base.
function findext_source(T::Type, ismax::Bool, nk::Int, nr::Int, linear::Bool, idx64::Bool)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    AC = ctype_compute(T)
    cmp = ismax ? ">" : "<"
    io = IOBuffer()
    print(io, C_PRELUDE)
    print(io, """
    static __device__ __forceinline__ void combine($AC &v, int64_t &i, $AC w, int64_t k) {
      if (k < 0) return;
      const bool nv = jl_isnan(v), nw = jl_isnan(w);
      const bool same = (v == w) || (nv && nw);
      if (i < 0 || (nw && !nv) || (!nv && !nw && w $cmp v) || (same && k < i)) { v = w; i = k; }
    }
    """)
    print(io, "extern \"C\" __global__ void cumem_findext(const $(codegen_ctype(T))* src, $(codegen_ctype(T))* outv, int64_t* outi, $IDX nout, $IDX nred, $IDX gx")
    print_dim_params(io, IDX, OFF, nk, nr, linear)
    print(io, ")\n{\n")
    print(io, """
      __shared__ $AC shv[32];
      __shared__ int64_t shi[32];
      const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
      for ($IDX j = blockIdx.x; j < nout; j += gridDim.x) {
        $OFF base = 0;
    """)
    print_base_offset(io, IDX, OFF, nk)
    print(io, "    $AC v = 0; int64_t vi = -1;\n")
    print(io, "    for ($IDX k = threadIdx.x; k < nred; k += blockDim.x) {\n")
    print_reduced_offset(io, IDX, OFF, nr, linear)
    print(io, "      combine(v, vi, $(T === Float16 ? "jl_h2f(src[off])" : "src[off]"), (int64_t)k);\n    }\n")
    print(io, """
        for (int o = 16; o > 0; o >>= 1) {
          const $AC w = ($AC)__shfl_down_sync(0xffffffffu, v, o);
          const int64_t k = __shfl_down_sync(0xffffffffu, vi, o);
          combine(v, vi, w, k);
        }
        if (lane == 0) { shv[warp] = v; shi[warp] = vi; }
        __syncthreads();
        if (warp == 0) {
          v = lane < nwarps ? shv[lane] : ($AC)0; vi = lane < nwarps ? shi[lane] : -1;
          for (int o = 16; o > 0; o >>= 1) {
            const $AC w = ($AC)__shfl_down_sync(0xffffffffu, v, o);
            const int64_t k = __shfl_down_sync(0xffffffffu, vi, o);
            combine(v, vi, w, k);
          }
          if (lane == 0) { outv[j] = $(T === Float16 ? "jl_f2h(v)" : "v"); outi[j] = vi; }
        }
        __syncthreads();
      }
    }
    """)
    return String(take!(io))
end

function gpu_findext(A, ismax::Bool, dims)
    check_devices(ismax ? "findmax" : "findmin", A)
    N = ndims(A)
    T = eltype(A)
    rdims = normalize_dims(dims, N)
    if length(A) == 0 || on_host()
        if length(A) > 0
            check_kernel_eltype(T)
            plan = plan_reduce(A, rdims)
            idx64 = length(plan.base) >= typemax(Int32)
            cached_kernel((:findext, T, ismax, length(plan.ksz), length(plan.rsz), plan.linear, idx64)) do
                (findext_source(T, ismax, length(plan.ksz), length(plan.rsz), plan.linear, idx64), "cumem_findext",
                 nothing, Tuple{GlobalRef,DataType}[])
            end
        end
        h = length(A) == 0 ? Array{T,N}(undef, size(A)) : host_arg(A)
        GC.@preserve A begin
            r = dims === (:) ? (ismax ? findmax(h) : findmin(h)) : (ismax ? findmax(h; dims = dims) : findmin(h; dims = dims))
            return dims === (:) ? r : (CuArray(r[1]), CuArray(r[2]))
        end
    end
    check_kernel_eltype(T)
    plan = plan_reduce(A, rdims)
    idx64 = max(length(plan.base), plan.nout) >= typemax(Int32)
    entry = cached_kernel((:findext, T, ismax, length(plan.ksz), length(plan.rsz), plan.linear, idx64)) do
        (findext_source(T, ismax, length(plan.ksz), length(plan.rsz), plan.linear, idx64), "cumem_findext",
         nothing, Tuple{GlobalRef,DataType}[])
    end
    osz = reduced_size(size(A), rdims)
    vals = CuArray{T}(undef, osz)
    idx = CuArray{Int64}(undef, plan.nout)
    IT = idx64 ? UInt64 : UInt32
    OT = idx64 ? Int64 : Int32
    gx = min(plan.nout, 65535)
    args = Any[devaddr(plan.base) + UInt64(plan.offset * sizeof(T)), devaddr(vals), devaddr(idx), IT(plan.nout), IT(plan.nred), IT(gx)]
    for d in eachindex(plan.ksz)
        push!(args, IT(plan.ksz[d]), OT(plan.kst[d]))
    end
    plan.linear || for d in eachindex(plan.rsz); push!(args, IT(plan.rsz[d]), OT(plan.rst[d])); end
    GC.@preserve plan vals idx launch(entry.kernel, args...; blocks = gx, threads = 256)
    # k (0-based over the reduced dimensions) -> the index into A
    ks = Array(idx)
    unsafe_free!(idx)
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
`CartesianIndex`es. Ties give the first index; a NaN is the result when there is one.
One block of threads per output.
"""
Base.findmax(A::AnyCuArray; dims = :) = gpu_findext(A, true, dims)
Base.findmin(A::AnyCuArray; dims = :) = gpu_findext(A, false, dims)
Base.argmax(A::AnyCuArray; dims = :) = findmax(A; dims = dims)[2]
Base.argmin(A::AnyCuArray; dims = :) = findmin(A; dims = dims)[2]

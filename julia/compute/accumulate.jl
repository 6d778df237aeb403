# Scans: cumsum and cumprod of vectors (CUDA.jl's accumulate.jl), one block of threads
# scanning chunks and their totals in shared memory; the reductions' plan (mapreduce.jl)
# gives the layout.

function scan_source(T::Type, Acc::Type, Out::Type, opx::String, neutral_ex::String, idx64::Bool)
    IDX = idx64 ? "uint64_t" : "uint32_t"
    OFF = idx64 ? "int64_t" : "int32_t"
    AC = ctype_compute(Acc)
    load = T === Float16 ? "jl_h2f(src[(($OFF)i) * st])" : "src[(($OFF)i) * st]"
    store = Out === Float16 ? "jl_f2h(acc)" : "acc"
    return C_PRELUDE * """
    static __device__ __forceinline__ $AC op($AC a, $AC b) { return $opx; }
    /* one block: each thread scans a contiguous chunk, the chunk totals are scanned in shared memory */
    extern "C" __global__ void cumem_scan(const $(codegen_ctype(T))* src, $OFF st, $(codegen_ctype(Out))* dst, $IDX n)
    {
      __shared__ $AC tot[1024];
      const $IDX chunk = (n + blockDim.x - 1) / blockDim.x;
      const $IDX lo = chunk * threadIdx.x, hi = lo + chunk < n ? lo + chunk : n;
      $AC acc = $neutral_ex;
      for ($IDX i = lo; i < hi; i++) acc = op(acc, ($AC)$load);
      tot[threadIdx.x] = acc;
      __syncthreads();
      for (unsigned o = 1; o < blockDim.x; o <<= 1) {
        const $AC t = threadIdx.x >= o ? tot[threadIdx.x - o] : ($AC)$neutral_ex;
        __syncthreads();
        tot[threadIdx.x] = op(t, tot[threadIdx.x]);
        __syncthreads();
      }
      acc = threadIdx.x > 0 ? tot[threadIdx.x - 1] : ($AC)$neutral_ex;
      for ($IDX i = lo; i < hi; i++) { acc = op(acc, ($AC)$load); dst[i] = $store; }
    }
    """
end

function gpu_scan(A, op, baseop)
    check_devices("scan", A)
    T = eltype(A)
    Out = Base.promote_op(op, T, T)
    if on_host() || length(A) == 0
        length(A) > 0 && scan_kernel(A, T, Out, op)
        GC.@preserve A return CuArray(baseop(length(A) == 0 ? T[] : host_arg(A)))
    end
    entry = scan_kernel(A, T, Out, op)
    b, off, sz, st = layout(A)
    out = CuArray{Out}(undef, length(A))
    n = length(A)
    idx64 = max(n, length(b)) >= typemax(Int32)
    launch(entry.kernel, devaddr(b) + UInt64(off * sizeof(T)), idx64 ? Int64(st[1]) : Int32(st[1]), devaddr(out),
           idx64 ? UInt64(n) : UInt32(n); blocks = 1, threads = 1024)
    return out
end

function scan_kernel(A, T, Out, op)
    check_kernel_eltype(T)
    check_kernel_eltype(Out)
    Acc = Out === Float16 ? Float32 : Out
    b = layout(A)[1]
    idx64 = length(b) >= typemax(Int32)
    return cached_kernel((:scan, T, Out, op, idx64)) do
        opx = cv(PRIMITIVES[op](Sym(Acc, "a"), Sym(Acc, "b")), Acc)
        (scan_source(T, Acc, Out, opx, c_literal(neutral(op, Acc)), idx64), "cumem_scan", nothing, Tuple{GlobalRef,DataType}[])
    end
end

"""
    cumsum(v::CuVector) / cumprod(v::CuVector)

Inclusive scans with Base's element types (small integers widen, as Base's `add_sum` and
`mul_prod`). One block of threads; Float16 accumulates in Float32.
"""
Base.cumsum(A::AnyCuArray{T,1}) where {T} = gpu_scan(A, Base.add_sum, cumsum)
Base.cumprod(A::AnyCuArray{T,1}) where {T} = gpu_scan(A, Base.mul_prod, cumprod)

# Indexing and dimensions (CUDA.jl's src/device/intrinsics/indexing.jl): threadIdx,
# blockIdx, blockDim, gridDim (NamedTuples (x, y, z) of Int, 1-based indices), warpsize,
# laneid.

for (dim, k) in ((:x, 1), (:y, 2), (:z, 3))
    ti, bi, bd, gd = Symbol(:threadIdx_, dim), Symbol(:blockIdx_, dim), Symbol(:blockDim_, dim), Symbol(:gridDim_, dim)
    @eval begin
        @doc $("    $ti()::Int\n\nThe thread's index in its block along $dim, from 1 (`threadIdx().$dim`).")
        @noinline $ti() = host_thread().idx[$k]
        @doc $("    $bi()::Int\n\nThe block's index in the grid along $dim, from 1 (`blockIdx().$dim`).")
        @noinline $bi() = host_thread().block.idx[$k]
        @doc $("    $bd()::Int\n\nThreads per block along $dim (`blockDim().$dim`).")
        @noinline $bd() = host_thread().block.dim[$k]
        @doc $("    $gd()::Int\n\nBlocks in the grid along $dim (`gridDim().$dim`).")
        @noinline $gd() = host_thread().block.grid[$k]
        dv_register!((fn, i, ts, args) -> $("((int64_t)threadIdx.$dim + 1)"), $ti)
        dv_register!((fn, i, ts, args) -> $("((int64_t)blockIdx.$dim + 1)"), $bi)
        dv_register!((fn, i, ts, args) -> $("((int64_t)blockDim.$dim)"), $bd)
        dv_register!((fn, i, ts, args) -> $("((int64_t)gridDim.$dim)"), $gd)
    end
end

"""
    threadIdx() -> (x = Int, y = Int, z = Int)

The index of the calling thread in its block, from 1 in each dimension (CUDA C's
`threadIdx` + 1), as CUDA.jl. Only inside a kernel (`@cuda`).
"""
@inline threadIdx() = (x = threadIdx_x(), y = threadIdx_y(), z = threadIdx_z())

"""
    blockIdx() -> (x = Int, y = Int, z = Int)

The index of the calling thread's block in the grid, from 1 (CUDA C's `blockIdx` + 1).
"""
@inline blockIdx() = (x = blockIdx_x(), y = blockIdx_y(), z = blockIdx_z())

"""
    blockDim() -> (x = Int, y = Int, z = Int)

The number of threads per block in each dimension (the launch's `threads`).
"""
@inline blockDim() = (x = blockDim_x(), y = blockDim_y(), z = blockDim_z())

"""
    gridDim() -> (x = Int, y = Int, z = Int)

The number of blocks in the grid in each dimension (the launch's `blocks`).
"""
@inline gridDim() = (x = gridDim_x(), y = gridDim_y(), z = gridDim_z())

"""
    warpsize() -> Int

Threads per warp: 32 (CUDA C's `warpSize`; the host device's warps are 32 lanes too).
"""
@noinline warpsize() = (host_thread(); 32)
dv_register!((fn, i, ts, args) -> "((int64_t)warpSize)", warpsize)

"""
    laneid() -> Int32

The calling thread's lane in its warp, from 1 (PTX `%laneid` + 1, as CUDA.jl 3.x).
"""
@noinline laneid() = Int32(host_thread().linear % 32 + 1)
dv_register!((fn, i, ts, args) -> "jl_laneid()", laneid)

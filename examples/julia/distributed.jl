# One process per device with Julia's Distributed: each worker takes one device, trains
# nothing fancy but computes with CuMem's kernels (a broadcast, a reduction and a GEMM),
# and sends its own memory_stats() back to the driver.
#
#   CUMEM_DEVICE=host:2 julia --project examples/julia/distributed.jl     # no GPU: 2 stand-ins
#   CUMEM_DEVICE=cuda   julia --project examples/julia/distributed.jl     # one worker per GPU
#
# Workers are started by `addprocs` with this project; they inherit the environment
# (CUMEM_DEVICE, CUMEM_LIBRARY, JULIA_CUDA_MEMORY_POOL/LIMIT), so every worker's engine
# is configured as the driver's would be. Each worker is a process of its own with its
# own engines: nothing is shared between workers but what Distributed sends.
# For several machines, start the workers with a cluster manager instead
# (`addprocs([("node1", 2), ("node2", 2)]; exeflags = "--project=...")` over SSH, or
# ClusterManagers.jl / MPI.jl's MPIClusterManagers under Slurm); the worker code is the
# same. docs/julia.md, "Several GPUs", says what CuMem does and does not do there.

using Distributed

const NWORKERS = parse(Int, get(ENV, "CUMEM_WORKERS", "2"))
const PROJECT = dirname(Base.active_project())

workers_added = addprocs(NWORKERS; exeflags = "--project=$PROJECT")

@everywhere using CuMem

# Runs on a worker: take device `dev`, allocate, compute, report.
@everywhere function worker_job(dev::Int)
    device!(dev)
    x = CuArray(Float32.(1:4096))
    y = 2 .* x .+ 1                          # a fused broadcast kernel
    total = sum(y)                           # a reduction kernel
    A = CuArray(Float32[i == j ? 2 : 0 for i in 1:64, j in 1:64])
    B = CuMem.ones(Float32, 64, 64)
    C = A * B                                # GEMM (cuBLAS on a GPU)
    trace = sum(C)
    return (worker = myid(), device = CuMem.deviceid(), device_name = CuMem.device_name(),
            sum = total, gemm_sum = trace, stats = memory_stats())
end

function run_workers()
    n = ndevices_on(first(workers_added))
    futures = [remotecall(worker_job, w, (i - 1) % n) for (i, w) in enumerate(workers_added)]
    return map(fetch, futures)
end

ndevices_on(w) = remotecall_fetch(ndevices, w)

if abspath(PROGRAM_FILE) == @__FILE__
    results = run_workers()
    for r in results
        println("worker ", r.worker, " on device ", r.device, " (", r.device_name, "): sum ", r.sum,
                ", GEMM sum ", r.gemm_sum, "; ", r.stats.num_allocations, " allocations, ",
                r.stats.num_frees, " frees, ", Base.format_bytes(r.stats.requested_bytes), " live, peak ",
                Base.format_bytes(r.stats.peak_allocated_bytes))
    end
    rmprocs(workers_added)
end

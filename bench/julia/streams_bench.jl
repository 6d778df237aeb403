# How much of the upload time the prefetching CuIterator hides behind compute.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/streams_bench.jl [--quick]
#
# For each batch size (the demo's: 784×64 Float32 features and 64 Int labels; and one
# 64 MiB Float32 matrix) it measures, per epoch of N batches:
#   upload   the epoch with prefetch = 0 and no compute (N uploads, synchronous);
#   compute  a deliberately slow kernel per batch (CuMem.sleep_on on the current stream),
#            of `ratio` × the upload time of one batch, ratio in 0.5, 1.5, 3;
#   serial   the epoch with prefetch = 0 and compute (upload, then compute, per batch);
#   prefetch the epoch with prefetch = 1 and compute;
# and reports hidden = (serial − prefetch) / upload, the fraction of the upload time that
# no longer adds to the epoch (1 = fully hidden; the target is ≥ 0.9 when compute per
# batch exceeds the upload), and speedup = serial / prefetch. One JSON line per case;
# medians of 3 epochs after a warm-up. The staging buffers are what
# `CuMem.staging_array` gives (pageable Arrays until the pinned host pool is used there).
using CuMem, Printf

median(v) = (s = sort(v); s[(length(s) + 1) ÷ 2])

const QUICK = "--quick" in ARGS

function epoch(batches, prefetch, compute_s)
    synchronize()
    t = time_ns()
    for b in CuIterator(batches; prefetch = prefetch)
        compute_s > 0 && CuMem.sleep_on(stream(), compute_s)
    end
    synchronize()
    return (time_ns() - t) / 1e9
end

median_epoch(batches, prefetch, compute_s; reps = 3) =
    (epoch(batches, prefetch, compute_s); median([epoch(batches, prefetch, compute_s) for _ in 1:reps]))

function run_case(name, batches)
    n = length(batches)
    bytes = sum(b -> sum(sizeof, b), batches) ÷ n
    up = median_epoch(batches, 0, 0.0)
    per = up / n
    for ratio in (0.5, 1.5, 3.0)
        c = ratio * per
        serial = median_epoch(batches, 0, c)
        pre = median_epoch(batches, 1, c)
        hidden = (serial - pre) / up
        @printf(stderr, "%-6s %3d × %9d B  upload %.3f ms/batch  compute %.3f ms  serial %.3f s  prefetch %.3f s  hidden %.2f  speedup %.2f\n",
                name, n, bytes, 1e3 * per, 1e3 * c, serial, pre, hidden, serial / pre)
        println("{\"case\":\"$name\",\"device\":\"$(CuMem.device_name())\",\"batches\":$n,\"batch_bytes\":$bytes,",
                "\"upload_s_per_batch\":$per,\"compute_ratio\":$ratio,\"compute_s_per_batch\":$c,",
                "\"epoch_serial_s\":$serial,\"epoch_prefetch_s\":$pre,\"hidden_fraction\":$hidden,",
                "\"speedup\":$(serial / pre)}")
    end
end

demo = [(rand(Float32, 784, 64), rand(1:10, 64)) for _ in 1:(QUICK ? 50 : 200)]
run_case("demo", demo)
demo = nothing
big = [(rand(Float32, 4096, 4096),) for _ in 1:(QUICK ? 6 : 16)]
run_case("64MiB", big)

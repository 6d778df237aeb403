# Writes the onesweep sort's CUDA source (CuMem.radix_source, as the sorts compile it) for
# each tuning and key type below into the directory ARGS[1], as <tuning>_<keys>.cu.
# Run with the checkout whose julia/cuda/sort.cuh is measured, e.g.
#   CUMEM_DEVICE=host julia --project=. bench/results/host-2026-11-29-sort15/sources.jl /tmp/src
using CuMem
const TUNINGS = [
    # name => RadixTuning(items, blocks_per_sm, lookback, sleep_ns, match, early, threads, hist, walk)
    "256x24b3" => CuMem.RadixTuning(24, 3, 8, 100, 2, 0, 256, 16, 0),     # RADIX_DEFAULT
    "256x24b4" => CuMem.RadixTuning(24, 4, 8, 100, 2, 0, 256, 16, 0),
    "256x22b4" => CuMem.RadixTuning(22, 4, 8, 100, 2, 0, 256, 16, 0),
    "256x20b4" => CuMem.RadixTuning(20, 4, 8, 100, 2, 0, 256, 16, 0),
    "384x20b3" => CuMem.RadixTuning(20, 3, 8, 100, 2, 0, 384, 16, 0),
    "384x19b3" => CuMem.RadixTuning(19, 3, 8, 100, 2, 0, 384, 16, 0),
    "384x18b3" => CuMem.RadixTuning(18, 3, 8, 100, 2, 0, 384, 16, 0),
    "384x16b3" => CuMem.RadixTuning(16, 3, 8, 100, 2, 0, 384, 16, 0),
    "512x14b2" => CuMem.RadixTuning(14, 2, 8, 100, 2, 0, 512, 16, 0),
    "512x12b3" => CuMem.RadixTuning(12, 3, 8, 100, 2, 0, 512, 16, 0),
]
# sort! of Float32 (4-byte keys, no payload), sortperm's (a 4-byte payload), Int64 keys (their
# items lowered by radix_fit where the shared memory would not fit, as the sorts do)
const KEYS = [("f32", Float32, 0), ("f32v4", Float32, 4), ("i64", Int64, 0), ("i64v4", Int64, 4)]
dir = ARGS[1]
mkpath(dir)
for (tn, t) in TUNINGS, (kn, T, vb) in KEYS
    tt = CuMem.radix_fit(T, vb, t)
    write(joinpath(dir, "$(tn)_$(kn).cu"), CuMem.radix_source(T, vb, false, tt))
    tt.items != t.items && println("$(tn)_$(kn): $(tt.items) items (radix_fit)")
end

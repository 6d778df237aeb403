#!/usr/bin/env bash
# Several GPUs (issue 14) on a machine with two or more: the Rust multi-device tests, the
# Julia multi-device and Distributed tests under CUMEM_DEVICE=cuda, and peer-copy
# bandwidth through CuMem beside PyTorch's `tensor.to("cuda:1")` in the same run, as a table.
#
# On the GPU machine (no Rust there), from the repository root, with Julia 1.5.3 or later
# on PATH (or in $JULIA) and a libcumem.so built elsewhere:
#   CUMEM_LIBRARY=<kit>/libcumem.so OUT=<dir outside the checkout> bash bench/gpu/multigpu_run_gpu.sh
# Rust test binaries are taken from $RUST_DIR (default target/gpu-kit/rust/): copy
# target/release/deps/multidevice-<hash> there (`cargo test --release --test multidevice
# --no-run` prints its path); compute-<hash> too to run the compute suite on device 0.
# Writes $OUT/{topology.txt, rust_multidevice.log, julia_multidevice.log,
# julia_distributed.log, peer_cumem.jsonl, peer_torch.jsonl, peer_table.md, run.log}.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
RUST_DIR=${RUST_DIR:-target/gpu-kit/rust}
JULIA=${JULIA:-julia}
MIB=${PEER_MIB:-256}
REPS=${PEER_REPS:-20}
export CUMEM_LIBRARY=${CUMEM_LIBRARY:-$PWD/target/release/libcumem.so}
# cuBLAS is in /usr/local/cuda/lib64 there, outside the loader's cache.
if [ -z "${CUMEM_CUBLAS_LIBRARY:-}" ] && [ -d /usr/local/cuda/lib64 ]; then
    export CUMEM_CUBLAS_LIBRARY=/usr/local/cuda/lib64
fi
# log and step: bench/gpu/lib.sh
source "bench/gpu/lib.sh"

{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } \
    > "$OUT/topology.txt" 2>&1 || true
cat "$OUT/topology.txt" | tee -a "$LOG" >&2

# 1. Rust: per-device engines, peer and staged copies, per-device limits and kernels.
for t in "$RUST_DIR"/multidevice-* "$RUST_DIR"/compute-*; do
    [ -f "$t" ] || continue
    chmod +x "$t" 2>/dev/null || true
    name=$(basename "$t" | sed 's/-[0-9a-f]*$//')
    step "rust $name (CUMEM_TEST_CUDA=1)" "$OUT/rust_$name.log" \
        env CUMEM_TEST_CUDA=1 timeout 300 "$t" --test-threads=1
done

# 2. Julia on the GPUs: the multi-device tests and Distributed with one GPU per worker.
step "julia multidevice_tests.jl" "$OUT/julia_multidevice.log" \
    env CUMEM_DEVICE=cuda JULIA_CUDA_MEMORY_LIMIT=4GiB timeout 400 "$JULIA" --project=. test/devices/multidevice_tests.jl
step "julia distributed_tests.jl" "$OUT/julia_distributed.log" \
    env CUMEM_DEVICE=cuda timeout 400 "$JULIA" --project=. test/devices/distributed_tests.jl

# 3. Peer-copy bandwidth, CuMem then PyTorch in the same run.
step "peer copy, CuMem" "$OUT/peer_cumem.jsonl" \
    env CUMEM_DEVICE=cuda timeout 300 "$JULIA" --project=. bench/julia/peer_copy.jl "$MIB" "$REPS"
step "peer copy, PyTorch" "$OUT/peer_torch.jsonl" \
    env -u LD_PRELOAD timeout 300 python3 bench/anchors/peer_copy_torch.py "$MIB" "$REPS"
env -u LD_PRELOAD python3 - "$OUT/peer_cumem.jsonl" "$OUT/peer_torch.jsonl" > "$OUT/peer_table.md" <<'PY'
import json, sys
rows = []
for f in sys.argv[1:]:
    for l in open(f):
        if l.startswith("{"):
            rows.append(json.loads(l))
if rows:
    print(f"Copies of {rows[0]['bytes'] >> 20} MiB between two GPUs ({rows[0]['device']}), medians, synchronous\n")
print("| implementation | copy | median (ms) | GB/s |")
print("|---|---|---:|---:|")
for r in rows:
    print(f"| {r['impl']} | {r['what']} | {1000 * r['median_s']:.2f} | {r['GBps']:.1f} |")
PY
cat "$OUT/peer_table.md" | tee -a "$LOG"
log "done (status $status); files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $status

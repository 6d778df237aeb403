#!/usr/bin/env bash
# Linear algebra beyond gemm (issue 25) on one GPU: the Rust suites of the cuBLAS/cuSOLVER
# C functions (tests/linalg.rs, tests/compute.rs) with CUMEM_TEST_CUDA=1, the Julia tests
# (test/compute/linalg/linalg_factor_tests.jl, test/compute/linalg/linalg_tests.jl) under CUMEM_DEVICE=cuda, then the
# benchmark beside PyTorch in the same call (bench/julia/linalg_bench.jl, bench/anchors/linalg_anchor.py:
# solve, cholesky, qr, svd, eigh for n = 1024 and 4096 Float32) and its table.
#
# The kit, built here (no Rust on the GPU machine): KIT=target/gpu-kit/linalg,
#   cargo build --release && mkdir -p $KIT && cp target/release/libcumem.so $KIT/
#   cargo test --release --test linalg --test compute --no-run   # prints the binaries' paths
#   cp target/release/deps/linalg-<hash> target/release/deps/compute-<hash> $KIT/
# then on the GPU machine, from the repository root, with Julia 1.5.3 on PATH:
#   OUT=dir bash bench/gpu/linalg_run_gpu.sh [--no-bench | --bench-only]
# (on the H100 the tests take about 5 minutes, the benchmark about 1: `all` fits one call
# of the 10-minute limit, the two halves are safer). test/compute/linalg/linalg_kernel_tests.jl is
# not run here: it emulates the kernels with g++ on the host device by design (CI runs it).
# Each Rust test runs in a process of its own; a failed cuda_svd_* case is rerun under
# compute-sanitizer and with PyTorch's libcusolver. $KIT and $CUMEM_LIBRARY override the kit folder and the library. Writes $OUT/{rust_linalg.log, rust_compute.log,
# julia_linalg_factor.log, julia_linalg.log, linalg_cumem.jsonl, linalg_torch.jsonl,
# linalg_table.md, run.log}; exits 1 if a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
KIT=${KIT:-target/gpu-kit/linalg}
RUST_DIR=$KIT
JULIA=${JULIA:-julia}
if [ -z "${CUMEM_LIBRARY:-}" ]; then
    if [ -f "$KIT/libcumem.so" ]; then CUMEM_LIBRARY=$PWD/$KIT/libcumem.so; else CUMEM_LIBRARY=$PWD/target/release/libcumem.so; fi
fi
export CUMEM_LIBRARY
# cuBLAS and cuSOLVER are in /usr/local/cuda/lib64 there, outside the loader's cache.
for v in CUMEM_CUBLAS_LIBRARY CUMEM_CUSOLVER_LIBRARY; do
    if [ -z "${!v:-}" ] && [ -d /usr/local/cuda/lib64 ]; then export "$v=/usr/local/cuda/lib64"; fi
done
# log and step: bench/gpu/lib.sh
TAIL=12
source "bench/gpu/lib.sh"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 | tee -a "$LOG" >&2

MODE=${1:-all}
if [ "$MODE" != "--bench-only" ]; then
# 1. Rust: every C function on small problems with known answers, info codes, bad input.
# Each test runs in a process of its own (a cuSOLVER fault poisons the CUDA context of its
# process: the other tests must not inherit it). A failed SVD case is run again under
# compute-sanitizer (memcheck: which kernel read or wrote where), and with the libcusolver
# that PyTorch ships (a fault of the toolkit's library, or of our arguments?).
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
TORCH_CUSOLVER=$(python3 -c '
import glob, os, site
for d in site.getsitepackages():
    for f in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libcusolver.so*"), recursive=True)):
        print(os.path.dirname(f)); raise SystemExit
' 2>/dev/null || true)
log "compute-sanitizer: ${SAN:-none}; PyTorch's libcusolver: ${TORCH_CUSOLVER:-none}"
for t in "$RUST_DIR"/linalg-* "$RUST_DIR"/compute-*; do
    [ -f "$t" ] || continue
    chmod +x "$t" 2>/dev/null || true
    name=$(basename "$t" | sed 's/-[0-9a-f]*$//')
    out="$OUT/rust_$name.log"
    : > "$out"
    t0=$SECONDS; pass=0; fail=0; failed=""
    for tn in $("$t" --list 2>/dev/null | sed -n 's/: test$//p'); do
        if env CUMEM_TEST_CUDA=1 timeout 120 "$t" --exact "$tn" --test-threads=1 >> "$out" 2>&1; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1)); failed="$failed $tn"
        fi
    done
    log "rust $name (CUMEM_TEST_CUDA=1, one process a test): $pass passed, $fail failed:${failed:- none} ($((SECONDS - t0)) s)"
    [ $fail -eq 0 ] || status=1
    grep -E "panicked|^---- " "$out" | head -n 20 | sed 's/^/      /' | tee -a "$LOG" >&2
    for tn in $failed; do
        case $tn in cuda_svd_*) ;; *) continue ;; esac
        if [ -n "$SAN" ]; then
            env CUMEM_TEST_CUDA=1 timeout 120 "$SAN" --tool memcheck --print-limit 10 "$t" --exact "$tn" \
                --test-threads=1 > "$OUT/sanitizer_$tn.log" 2>&1
            log "  $tn under compute-sanitizer: exit $?; first reports:"
            grep -m 6 -E "Invalid|Address|of size|at 0x|Program hit" "$OUT/sanitizer_$tn.log" | sed 's/^/      /' | tee -a "$LOG" >&2
        fi
        if [ -n "$TORCH_CUSOLVER" ]; then
            env CUMEM_TEST_CUDA=1 CUMEM_CUSOLVER_LIBRARY="$TORCH_CUSOLVER" timeout 120 "$t" --exact "$tn" \
                --test-threads=1 > "$OUT/torchlib_$tn.log" 2>&1
            log "  $tn with PyTorch's libcusolver ($TORCH_CUSOLVER): exit $?"
            tail -n 4 "$OUT/torchlib_$tn.log" | sed 's/^/      /' | tee -a "$LOG" >&2
        fi
    done
done

# 2. Julia on the GPU: factorizations, solves, triangular/symmetric, generic products, kernels.
step "julia linalg_factor_tests.jl" "$OUT/julia_linalg_factor.log" \
    env CUMEM_DEVICE=cuda timeout 420 "$JULIA" --project=. test/compute/linalg/linalg_factor_tests.jl
step "julia linalg_tests.jl" "$OUT/julia_linalg.log" \
    env CUMEM_DEVICE=cuda timeout 120 "$JULIA" --project=. test/compute/linalg/linalg_tests.jl

fi

# 3. The benchmark beside PyTorch, then the table.
if [ "$MODE" != "--no-bench" ]; then
    step "bench CuMem" "$OUT/linalg_cumem.log" \
        env CUMEM_DEVICE=cuda timeout 330 "$JULIA" --project=. bench/julia/linalg_bench.jl
    grep '^{' "$OUT/linalg_cumem.log" > "$OUT/linalg_cumem.jsonl" || true
    step "bench PyTorch" "$OUT/linalg_torch.log" timeout 240 python3 bench/anchors/linalg_anchor.py
    grep '^{' "$OUT/linalg_torch.log" > "$OUT/linalg_torch.jsonl" || true
    python3 bench/anchors/linalg_table.py "$OUT/linalg_cumem.jsonl" "$OUT/linalg_torch.jsonl" | tee "$OUT/linalg_table.md" | tee -a "$LOG"
fi
log "done, status $status"
exit $status

#!/usr/bin/env bash
# Issue 27 on the GPU machine, in one call: records a variable-length BERT-like inference
# trace of its own (bench/anchors/record_trace.py bertsmall_infer_varlen: transformers' BertModel,
# hidden 512, 8 layers, random weights, 100 batches of batch 1..32 x sequence 16..512,
# seed 1), then runs bench/gpu/run_gpu.sh (anchors: PyTorch default and expandable segments,
# cudaMallocAsync, cudaMalloc; every CuMem pool's replay; pair; threads; chart; tables) on
# that trace and every data/*.trace.
#
#   cargo build --release -p cumem-bench        # on the build machine
#   mkdir -p KIT && cp target/release/cumem-bench KIT/
#   CUMEM_KIT_DIR=KIT OUT=/some/dir bash bench/gpu/memory_run_gpu.sh
#
# Writes under $OUT: traces/ (data/*.trace and the recorded one), record.log, and run/
# (run_gpu.sh's anchor.jsonl, results.jsonl, tables.txt, tables.md, perf.svg, run.log).
# Without transformers the recording is skipped and the rest still runs. ~6 minutes.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
KIT=${CUMEM_KIT_DIR:-target/gpu-kit}
[ -x "$KIT/cumem-bench" ] || chmod +x "$KIT/cumem-bench" 2>/dev/null || { echo "no $KIT/cumem-bench" >&2; exit 2; }
mkdir -p "$OUT/traces" "$OUT/kit"
cp data/*.trace "$OUT/traces/"
OUT="$OUT/traces" timeout 300 python3 bench/anchors/record_trace.py bertsmall_infer_varlen > "$OUT/record.log" 2>&1
echo "record_trace.py: exit $? ($(ls "$OUT/traces" | tr '\n' ' '))" | tee -a "$OUT/record.log" >&2
cp "$KIT/cumem-bench" "$OUT/kit/cumem-bench"
ln -sfn "$(cd "$OUT/traces" && pwd)" "$OUT/kit/traces"
CUMEM_KIT_DIR="$OUT/kit" OUT="$OUT/run" bash bench/gpu/run_gpu.sh
status=$?
rm -rf "$OUT/kit"   # the binary and a link: nothing to bring back
exit $status

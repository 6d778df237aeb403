#!/usr/bin/env bash
# Puts the replay traces for a GPU run into $1/traces: every data/*.trace plus three freshly
# generated BERT-like inference traces that no pool was tuned on (bench/anchors/gen_varlen_trace.py,
# each with another length distribution and a seed drawn now, or from $2 onwards):
#   varlen_lognormal_s<N>.trace, varlen_bimodal_s<N+1>.trace, varlen_zipf_math_s<N+2>.trace
# Run on the build machine (python3, no GPU), then copy $1 along as the kit:
#   bash bench/gpu/fresh_traces.sh target/gpu-kit [SEED]
#   CUMEM_KIT_DIR=target/gpu-kit OUT=... bash bench/gpu/run_gpu.sh
# run_gpu.sh replays whatever lies in $CUMEM_KIT_DIR/traces, the anchors (PyTorch, both modes, and
# cudaMallocAsync) in the same call. The seeds used are printed and written to traces/SEEDS.
set -euo pipefail
KIT=${1:?usage: fresh_traces.sh KIT_DIR [SEED]}
SEED=${2:-$(( $(date +%s) % 100000 ))}
mkdir -p "$KIT/traces"
cp data/*.trace "$KIT/traces/"
G=bench/anchors/gen_varlen_trace.py
python3 "$G" --seed "$SEED" --lengths lognormal > "$KIT/traces/varlen_lognormal_s$SEED.trace"
python3 "$G" --seed $((SEED + 1)) --lengths bimodal > "$KIT/traces/varlen_bimodal_s$((SEED + 1)).trace"
python3 "$G" --seed $((SEED + 2)) --lengths zipf --attention math > "$KIT/traces/varlen_zipf_math_s$((SEED + 2)).trace"
echo "seeds $SEED $((SEED + 1)) $((SEED + 2))" | tee "$KIT/traces/SEEDS"
ls "$KIT/traces"

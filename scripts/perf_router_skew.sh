#!/usr/bin/env bash
# Route prediction on routers with trained-MoE statistics, on the lent GPU
# machine: the synthetic Qwen3-30B-A3B Q4_K_M file written with $SET (vkmoe
# synth --set; default router_skew=0.3,branch_scale=0.2: skewed expert
# popularity, a slowly changing residual stream) and, with FLAT=1, the plain
# preset too. Each is decoded under 12 GiB of VRAM with and without
# --predict-prefetch (interleaved, $PASSES passes) with the --expert-stats
# totals (hit rate, prediction recall, token-to-token reuse, top-quarter
# share), then beside llama-bench -ncmoe 18 / 20 on the same file.
# Carry devbin/, .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
N=${N:-256}
PASSES=${PASSES:-1 2}
routing_model_path
MODELS=$M
[ "${FLAT:-0}" = 1 ] && MODELS="/tmp/qwen3-30b-a3b-synth-q4km.gguf $MODELS"
echo "synth $(date +%T)"
for M in $MODELS; do
  if [[ $M == *synth-q4km* ]]; then args=(); else args=(--set "$SET"); fi
  [ -f $M ] || $B/vkmoe synth --preset qwen3-30b-a3b "${args[@]}" -o $M 2>&1 | tail -1 &
done
wait; sync; sleep 3; echo "synth done $(date +%T)"
unpack_llama
for pass in $PASSES; do
  for M in $MODELS; do
    for pred in "" "--predict-prefetch"; do
      tag="$(basename $M .gguf)${pred:+-predict}-$pass"
      echo "--- $tag ($(date +%T))"
      peak $B/vkmoe bench -m $M -p 0 -n $N -r 2 --vram-budget 12GiB --expert-stats $pred >"$OUT/$tag.txt" 2>&1
      grep "tg$N\|^  total\|peak" "$OUT/$tag.txt"
    done
  done
done 2>&1 | tee -a "$OUT/router_skew.txt"
for M in $MODELS; do
  run /tmp/ll/llama-bench -m $M -ngl 99 -ncmoe 18,20 -fa 1 -p 0 -n $N -r 2 2>&1 | grep "tg$N\|peak" |
    tee -a "$OUT/llama_$(basename $M .gguf).txt"
done

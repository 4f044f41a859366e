#!/usr/bin/env bash
# Offload decode A/B on the lent GPU machine, interleaved: devbin_base/
# (carried, vkmoe only) against devbin/ under 12 GiB of VRAM, then the experts
# on the CPU, beside llama-bench (-ncmoe 20 / 48) on the same synthetic
# Qwen3-30B-A3B Q4_K_M file in the same call. Carry devbin/, devbin_base/,
# .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
qwen3_model
sync; sleep 3; unpack_llama
for b in devbin_base devbin devbin_base devbin devbin_base devbin; do
  echo "--- $b ($(date +%T))"; run $b/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --vram-budget 12GiB 2>&1 | grep "tg128\|peak"
done 2>&1 | tee -a "$OUT/ab_budget.txt"
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -fa 1 -p 0 -n 128 -d 0,4096 -r 3 2>&1 | grep "tg128\|peak" | tee -a "$OUT/llama_budget.txt"
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 4096 -r 3 --vram-budget 12GiB 2>&1 | grep "tg128\|peak" | tee -a "$OUT/ab_budget.txt"
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe 2>&1 | grep "tg128\|peak" | tee -a "$OUT/cpu_moe.txt"
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 48 -p 0 -n 128 -r 3 2>&1 | grep "tg128\|peak" | tee -a "$OUT/llama_cpu_moe.txt"

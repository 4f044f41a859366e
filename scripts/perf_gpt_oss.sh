#!/usr/bin/env bash
# gpt-oss-20b-shaped (MXFP4_MOE) figures on the lent GPU machine: vkmoe and
# llama.cpp's llama-bench side by side on the same synthetic file, resident
# and under an 8 GiB budget (llama.cpp: -ncmoe, routed experts of the first
# N layers on the CPU), with peak VRAM. Carry devbin/, .gl/, anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
MODEL=/tmp/gpt-oss-20b-synth-mxfp4.gguf
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
[ -f $MODEL ] || { echo "synth $(date +%T)"; $B/vkmoe synth --preset gpt-oss-20b -o $MODEL 2>&1 | tail -1; }
unpack_llama
$B/vkmoe plan -m $MODEL --vram-budget 8GiB 2>&1 | head -4 | tee "$OUT/plan_8g.txt"
for a in "--moe-mode resident" "--vram-budget 8GiB"; do
  run $B/vkmoe bench -m $MODEL -p 512 -n 128 -r 2 $a
done 2>&1 | tee "$OUT/vkmoe_gpt_oss.txt"
for a in "-ncmoe 0" "-ncmoe 10"; do
  run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 128 -r 2 $a
done 2>&1 | tee "$OUT/llama_gpt_oss.txt"

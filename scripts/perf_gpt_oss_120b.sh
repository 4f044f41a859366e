#!/usr/bin/env bash
# gpt-oss-120b-shaped (MXFP4_MOE, ~59 GiB) under a 24 GiB budget on the lent
# GPU machine: vkmoe (expert cache) beside llama-bench (-ncmoe N: the routed
# experts of the first N layers on the CPU) on the same file, one repetition
# each, with peak VRAM. Carry devbin/, .gl/, anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
MODEL=/tmp/gpt-oss-120b-synth-mxfp4.gguf
df -h /tmp | tail -1
avail=$(df --output=avail -B1G /tmp | tail -1)
[ "$avail" -ge 62 ] || { echo "only ${avail} GiB free on /tmp: the 59 GiB file does not fit"; exit 1; }
echo "synth $(date +%T)"; $B/vkmoe synth --preset gpt-oss-120b -o $MODEL 2>&1 | tail -1; echo "done $(date +%T)"
unpack_llama
$B/vkmoe plan -m $MODEL --vram-budget 24GiB 2>&1 | head -4 | tee "$OUT/plan_24g.txt"
run $B/vkmoe bench -m $MODEL -p 512 -n 128 -r 1 --vram-budget 24GiB 2>&1 | tee "$OUT/vkmoe_120b.txt"
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 128 -r 1 -ncmoe ${NCMOE:-24} 2>&1 | tee "$OUT/llama_120b.txt"

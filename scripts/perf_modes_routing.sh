#!/usr/bin/env bash
# tg128 with the experts on the CPU and all on the GPU, on the synthetic
# Qwen3-30B-A3B Q4_K_M file with trained-MoE routing statistics ($SET, as
# scripts/perf_offload_routing.sh), beside llama-bench (-ncmoe 48; -ngl 99
# -fa 1) in the same call, the two tools alternated, with peak VRAM.
# Carry devbin/, .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
routing_model; unpack_llama
vk() { run $B/vkmoe bench -m $M -p 0 -n 128 -r 3 "$@" 2>&1 | grep "tg128\|peak"; }
ll() { run /tmp/ll/llama-bench -m $M -ngl 99 -p 0 -n 128 -r 3 "$@" 2>&1 | grep "tg128\|peak"; }
{ vk --moe-mode cpu-moe; ll -ncmoe 48; ll -ncmoe 48; vk --moe-mode cpu-moe
  vk --moe-mode resident; ll -fa 1; ll -fa 1; vk --moe-mode resident; } 2>&1 | tee "$OUT/modes.txt"

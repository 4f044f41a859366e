#!/usr/bin/env bash
# Prompt-processing figures on the lent GPU machine, vkmoe and llama.cpp's
# llama-bench side by side on the same synthetic Qwen3-30B-A3B file, with
# peak VRAM sampled by nvidia-smi. Carry devbin/ (scripts/pack_devbin.sh),
# .gl/ and anchors/ (../shared/anchors/llama_cpp.sh anchors).
# usage: scripts/perf_prefill.sh [vkmoe|llama|all|pp|ttft|quick]
#   all: both programs, pp512/pp2048 and the 4096-token prompts; vkmoe, llama: one of them;
#   pp, ttft: both programs, one part (each fits one 10-minute device call);
#   quick: pp512 and tg128 only, both programs, each mode
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
qwen3_model
unpack_llama
if [ "$what" = quick ]; then
  for a in "--moe-mode resident" "--vram-budget 12GiB" "--moe-mode cpu-moe"; do
    run $B/vkmoe bench -m $MODEL -p 512 -n 128 -r 2 $a
  done 2>&1 | tee -a "$OUT/vkmoe_quick.txt"
  for a in "-fa 0" "-ncmoe 20" "-ncmoe 48"; do
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 128 -r 2 $a
  done 2>&1 | tee -a "$OUT/llama_quick.txt"
fi
pp=0 ttft=0 vk=0 ll=0
case "$what" in all|vkmoe|llama) pp=1 ttft=1 ;; pp) pp=1 ;; ttft) ttft=1 ;; esac
case "$what" in all|pp|ttft) vk=1 ll=1 ;; vkmoe) vk=1 ;; llama) ll=1 ;; esac
if [ $vk = 1 ]; then
  if [ $pp = 1 ]; then
    run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 --moe-mode resident
    run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 --vram-budget 12GiB --expert-stats
    run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 --moe-mode cpu-moe --expert-stats
  fi
  if [ $ttft = 1 ]; then
    for a in "--moe-mode resident" "--vram-budget 12GiB" "--moe-mode cpu-moe"; do
      run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 $a
    done
  fi
fi | tee -a "$OUT/vkmoe_prefill.txt"
if [ $ll = 1 ]; then
  if [ $pp = 1 ]; then
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa 0
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa 1
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -p 512,2048 -n 0 -r 3
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 48 -p 512,2048 -n 0 -r 3
  fi
  if [ $ttft = 1 ]; then
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -p 4096 -n 0 -r 1
    run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 48 -p 4096 -n 0 -r 1
  fi
fi | tee -a "$OUT/llama_prefill.txt"

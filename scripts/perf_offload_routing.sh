#!/usr/bin/env bash
# tg128 under 12 GiB of VRAM on the synthetic Qwen3-30B-A3B Q4_K_M file with
# trained-MoE routing statistics ($SET, as scripts/perf_router_skew.sh), on the
# lent GPU machine: vkmoe with and without --predict-prefetch and llama-bench
# -ncmoe 18 / 20, interleaved in two passes (the second in reverse order, so
# neither side always runs first after the file is written), peak VRAM each.
# Carry devbin/, .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
routing_model; unpack_llama
vk() {
  echo "--- vkmoe $* ($(date +%T))"
  peak $B/vkmoe bench -m $M -p 0 -n 128 -r 3 --vram-budget 12GiB --expert-stats "$@" >/tmp/vk.txt 2>&1
  grep "tg128\|^  total\|peak" /tmp/vk.txt; cat /tmp/vk.txt >>"$OUT/vkmoe_full.txt"
}
ll() { run /tmp/ll/llama-bench -m $M -ngl 99 -ncmoe 18,20 -fa 1 -p 0 -n 128 -r 3 2>&1 | grep "tg128\|peak"; }
{ vk; vk --predict-prefetch; ll; ll; vk --predict-prefetch; vk; } 2>&1 | tee "$OUT/routing.txt"

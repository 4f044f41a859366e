#!/usr/bin/env bash
# gpt-oss-20b-shaped (MXFP4_MOE) figures on the lent GPU machine: vkmoe and
# llama.cpp's llama-bench side by side on the same synthetic file, resident
# and under an 8 GiB budget (llama.cpp: -ncmoe, routed experts of the first
# N layers on the CPU), with peak VRAM. Carry devbin/, .gl/, anchors/llama.tar.xz.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
if ! ls /usr/share/vulkan/icd.d/*nvidia* >/dev/null 2>&1 && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export LD_LIBRARY_PATH=$PWD/devbin/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=devbin; MODEL=/tmp/gpt-oss-20b-synth-mxfp4.gguf
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
[ -f $MODEL ] || { echo "synth $(date +%T)"; $B/vkmoe synth --preset gpt-oss-20b -o $MODEL 2>&1 | tail -1; }
mkdir -p /tmp/ll && tar xJf anchors/llama.tar.xz -C /tmp/ll
peak() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/vram.log & local s=$!
  "$@"; local rc=$?
  kill $s 2>/dev/null; wait $s 2>/dev/null
  echo "peak VRAM: $(sort -n /tmp/vram.log | tail -1) MiB"
  return $rc
}
run() { echo "--- $*"; peak "$@" 2>&1 | grep -v "^  layer\|uploading\|copying experts"; }
$B/vkmoe plan -m $MODEL --vram-budget 8GiB 2>&1 | head -4 | tee "$OUT/plan_8g.txt"
for a in "--moe-mode resident" "--vram-budget 8GiB"; do
  run $B/vkmoe bench -m $MODEL -p 512 -n 128 -r 2 $a
done 2>&1 | tee "$OUT/vkmoe_gpt_oss.txt"
for a in "-ncmoe 0" "-ncmoe 10"; do
  run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 128 -r 2 $a
done 2>&1 | tee "$OUT/llama_gpt_oss.txt"

# Sourced by the scripts that run on the lent GPU machine (device tool):
# the carried Vulkan loader (.gl/), the NVIDIA ICD, the binaries and their
# libraries (devbin/, scripts/pack_devbin.sh), $OUT, llama.cpp's prebuilt
# binaries (anchors/llama.tar.xz, when carried) and `run`: a command with its
# peak VRAM sampled by nvidia-smi.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
if ! ls /usr/share/vulkan/icd.d/*nvidia* >/dev/null 2>&1 && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export LD_LIBRARY_PATH=$PWD/devbin/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=devbin
unpack_llama() { mkdir -p /tmp/ll && tar xJf anchors/llama.tar.xz -C /tmp/ll; }
# ~1 s of GPU load, so that a measurement does not start at an idle H100's 345 MHz
warm_up() { $B/vkmoe bench-shaders --kernels q4_k --shapes 4096x4096 >/dev/null 2>&1; }
# peak VRAM (MiB) of one command
peak() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/vram.log & local s=$!
  "$@"; local rc=$?
  kill $s 2>/dev/null; wait $s 2>/dev/null
  echo "peak VRAM: $(sort -n /tmp/vram.log | tail -1) MiB"
  return $rc
}
run() { echo "--- $*"; peak "$@" 2>&1 | grep -v "^  layer\|uploading\|copying experts"; }
# Per-repetition t/s of a `-o jsonl` bench (vkmoe or llama-bench) on stdin (scripts/bench_samples.py).
samples() { python3 "$(dirname "${BASH_SOURCE[0]}")/bench_samples.py"; }
# The synthetic Qwen3-30B-A3B Q4_K_M file (uniform routing): its path in
# MODEL; qwen3_model also writes it once per machine.
MODEL=/tmp/qwen3-30b-a3b-synth-q4km.gguf
qwen3_model() { [ -f $MODEL ] || { echo "synth $(date +%T)"; $B/vkmoe synth --preset qwen3-30b-a3b -o $MODEL 2>&1 | tail -1; }; }
# The synthetic Qwen3-30B-A3B Q4_K_M file with trained-MoE routing statistics
# (vkmoe synth --set $SET, default router_skew=0.3,branch_scale=0.2): its path
# in M; routing_model also writes it once per machine and lets it settle.
routing_model_path() { SET=${SET:-router_skew=0.3,branch_scale=0.2}; M=/tmp/qwen3-30b-a3b-${SET//[=,]/_}.gguf; }
routing_model() {
  routing_model_path
  [ -f $M ] || { echo "synth $(date +%T)"; $B/vkmoe synth --preset qwen3-30b-a3b --set "$SET" -o $M 2>&1 | tail -1; }
  sync; sleep 30
}

set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "main|devbin" \
  "first_tile_with_q|devbin|VKMOE_SHADER_DIR=$PWD/devbin_var"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"

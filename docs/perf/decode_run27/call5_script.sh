set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
ROUNDS=3 ARGS="-p 0 -n 128 -d 4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "splits_256wg_128keys|devbin" \
  "splits_384wg_96keys|devbin|VKMOE_ATTN_TARGET_WGS=384 VKMOE_ATTN_MIN_SPLIT_KEYS=96" \
  "splits_512wg_64keys|devbin|VKMOE_ATTN_TARGET_WGS=512 VKMOE_ATTN_MIN_SPLIT_KEYS=64" \
  "splits_128wg|devbin|VKMOE_ATTN_TARGET_WGS=128"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"

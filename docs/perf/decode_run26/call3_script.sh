set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "main|devbin" \
  "decode_tiles_64_keys|devbin|VKMOE_ATTN_DECODE_BC=64" \
  "splits_of_64_keys_512_wgs|devbin|VKMOE_ATTN_MIN_SPLIT_KEYS=64 VKMOE_ATTN_TARGET_WGS=512"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
for f in 0 1; do for d in 0 4096; do
  echo "--- VKMOE_ATTN_ROPE_FOLD=$f profile d$d"
  VKMOE_ATTN_ROPE_FOLD=$f VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -d $d -r 1 --expert-stats 2>&1 | sed -n '/per decoded token/,/output head/p'
done; done | tee "$OUT/profile.txt"
for e in VKMOE_ATTN_ROPE_FOLD=0 VKMOE_ATTN_DECODE_BC=64 VKMOE_X=1; do
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'pipeline attn' | head -2
done | tee -a "$OUT/profile.txt"

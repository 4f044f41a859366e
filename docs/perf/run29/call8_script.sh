set -uo pipefail
source scripts/device_env.sh
qwen3_model
for r in 1 2; do for v in new old; do
  e=VKMOE_X=1; [ $v = old ] && e=VKMOE_COOPMAT_IDS_SHAPE=64,64,32,32,32
  echo "--- round $r $v 12GiB $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --vram-budget 12GiB -o jsonl 2>/dev/null | samples
done; done 2>&1 | tee "$OUT/offload.txt"

set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "old|devbin|VKMOE_LOGITS_OLD=1 VKMOE_HOST_GAP=1" \
  "new|devbin|VKMOE_HOST_GAP=1" \
  "new_poll10ms|devbin|VKMOE_HOST_GAP=1 VKMOE_POLL_US=10000"
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"

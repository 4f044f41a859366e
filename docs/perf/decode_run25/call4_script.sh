set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
for round in 1 2 3; do
  for cfg in "old|VKMOE_LOGITS_OLD=1 VKMOE_HOST_GAP=1" "new|VKMOE_HOST_GAP=1"; do
    IFS='|' read -r label envs <<< "$cfg"
    warm_up
    echo "--- round $round $label ($envs) $(date +%T)"
    ( export $envs; $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident ) 2>&1 | grep -E "^\| qwen|^host gap"
  done
done 2>&1 | tee "$OUT/decode_ab.txt"
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"
timeout 200 devbin/vkmoe_tests --gtest_filter='*NonFiniteWeights*:*GpuForward*:*Prefill*:*GpuOffload*:*Session*' 2>&1 | grep -E '^\[  (PASSED|FAILED)|^\[==|FAILED' | tee "$OUT/gpu_tests.txt"

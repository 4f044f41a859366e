set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "full|devbin|VKMOE_BARRIER_FULL=1 VKMOE_HOST_GAP=1" \
  "narrow|devbin|VKMOE_HOST_GAP=1" \
  "narrow_poll10ms|devbin|VKMOE_HOST_GAP=1 VKMOE_POLL_US=10000"
ROUNDS=2 ARGS="-p 0 -n 128 -r 3 --vram-budget 12GiB" LLAMA=0 scripts/perf_prefill_ab.sh \
  "full_12g|devbin|VKMOE_BARRIER_FULL=1 VKMOE_HOST_GAP=1" "narrow_12g|devbin|VKMOE_HOST_GAP=1"
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"
timeout 240 devbin/vkmoe_tests --gtest_filter='*GpuForward*:*Prefill*:Vk*:*GpuOffload*' 2>&1 | grep -E '^\[  (PASSED|FAILED)|^\[==|FAILED' | tee "$OUT/gpu_tests.txt"

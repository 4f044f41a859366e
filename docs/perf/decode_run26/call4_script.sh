set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "first_tile_after_q|devbin|VKMOE_SHADER_DIR=$PWD/devbin_prev" \
  "first_tile_with_q|devbin"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
timeout 150 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:GpuForward.F16*:GpuForward.LongContext*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30
unpack_llama
{
warm_up
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
} 2>&1 | grep -E '^---|^\| |^peak' | tee "$OUT/side_by_side.txt"

set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for n in b1 b2; do
  echo "--- tests $n"
  VKMOE_SHADER_DIR=$PWD/devbin_$n timeout 100 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:*SplitKeys*:GpuForward.F16Kv*:GpuForward.LongContext*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
done 2>&1 | tee "$OUT/gpu_tests.txt"
qwen3_model
for d in "VKMOE_X=1" "VKMOE_SHADER_DIR=$PWD/devbin_b1" "VKMOE_SHADER_DIR=$PWD/devbin_b2"; do
  echo "--- isolated $d"; env $d $B/vkmoe bench-shaders --kernels attn_decode --attn-depths 64,1024,4096 2>&1 | grep -v "^#" | tail -3
done | tee "$OUT/attn_isolated.txt"
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "f16_tiles|devbin" \
  "warp_rows|devbin|VKMOE_SHADER_DIR=$PWD/devbin_b1" \
  "warp_rows_two_tiles|devbin|VKMOE_SHADER_DIR=$PWD/devbin_b2"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"

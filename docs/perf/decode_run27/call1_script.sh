set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
for d in "VKMOE_SHADER_DIR=$PWD/devbin_base" "VKMOE_X=1" "VKMOE_SHADER_DIR=$PWD/devbin_base" "VKMOE_X=1"; do
  echo "--- isolated $d"; env $d $B/vkmoe bench-shaders --kernels attn_decode --attn-depths 64,1024,4096 2>&1 | grep -v "^#" | tail -5
done | tee "$OUT/attn_isolated.txt"
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "f32_tiles|devbin|VKMOE_SHADER_DIR=$PWD/devbin_base" \
  "f16_tiles|devbin"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
timeout 200 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:*SplitKeys*:GpuForward.*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30

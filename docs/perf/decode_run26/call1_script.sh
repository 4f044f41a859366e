set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
for d in "VKMOE_SHADER_DIR=$PWD/devbin_base" "VKMOE_X=1" "VKMOE_SHADER_DIR=$PWD/devbin_t16" "VKMOE_X=1"; do
  echo "--- isolated $d"; env $d $B/vkmoe bench-shaders --kernels attn_decode --attn-depths 64,1024,4096 2>&1 | grep -v "^#" | tail -5
done | tee "$OUT/attn_isolated.txt"
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "base_kv_per_tile|devbin|VKMOE_SHADER_DIR=$PWD/devbin_base" \
  "values_ahead|devbin" \
  "values_ahead_tail16|devbin|VKMOE_SHADER_DIR=$PWD/devbin_t16" \
  "values_ahead_wgs128|devbin|VKMOE_ATTN_TARGET_WGS=128"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
timeout 240 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:*SplitKeys*:GpuForward.*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"

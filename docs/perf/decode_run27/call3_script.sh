set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:GpuForward.*' 2>&1 | grep -E 'seed|subgroup|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30
qwen3_model
for d in "VKMOE_SHADER_DIR=$PWD/devbin_f16tile" "VKMOE_ATTN_SUBGROUP_ROWS=0" "VKMOE_X=1"; do
  echo "--- isolated $d"; env $d $B/vkmoe bench-shaders --kernels attn_decode --attn-depths 64,1024,4096 2>&1 | grep -v "^#" | tail -3
done | tee "$OUT/attn_isolated.txt"
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "f16_tiles_eb3b208|devbin|VKMOE_SHADER_DIR=$PWD/devbin_f16tile" \
  "two_tiles_shared_softmax|devbin|VKMOE_ATTN_SUBGROUP_ROWS=0" \
  "subgroup_rows|devbin"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'pipeline attn' | head -4 | tee "$OUT/pipeline_stats.txt"
unpack_llama
{
warm_up
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
} 2>&1 | grep -E '^---|^\| |^peak' | tee "$OUT/side_by_side.txt"

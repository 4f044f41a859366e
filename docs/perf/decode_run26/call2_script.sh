set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "rope_store_step|devbin|VKMOE_ATTN_ROPE_FOLD=0" \
  "rope_folded|devbin"
mv "$OUT/prefill_ab.txt" "$OUT/decode_ab.txt"
for f in 0 1; do
  echo "--- VKMOE_ATTN_ROPE_FOLD=$f profile d4096"
  VKMOE_ATTN_ROPE_FOLD=$f VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -d 4096 -r 1 2>&1 | sed -n '/per decoded token/,/output head/p'
done | tee "$OUT/profile.txt"
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'pipeline attn' | head -4 | tee -a "$OUT/profile.txt"
timeout 200 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:GpuForward.*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30
unpack_llama
{
warm_up
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --vram-budget 12GiB
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 20 -fa 1
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 48 -fa 1
} 2>&1 | grep -E '^---|^\| |^peak' | tee "$OUT/side_by_side.txt"

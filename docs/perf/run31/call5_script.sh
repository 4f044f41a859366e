# Session 37 call 5: subgroup rope/store A/B, then the side by side with per-repetition samples.
set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "build $(cat devbin_scripts/HEAD)"
{
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -8
} 2>&1 | tee "$OUT/gpu_tests.txt"
qwen3_model; unpack_llama
{
for r in 1 2; do for v in sg nosg; do
  e=VKMOE_X=1; [ $v = nosg ] && e=VKMOE_ROPE_STORE_SG=0
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per prompt"
} 2>&1 | tee "$OUT/inplace.txt"
{
for r in 1 2; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  for fa in 1 0; do
    warm_up; echo "--- round $r llama-bench -fa $fa $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa $fa -o jsonl 2>/dev/null | samples
  done
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
} 2>&1 | tee "$OUT/side_by_side.txt"

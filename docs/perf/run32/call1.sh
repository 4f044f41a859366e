# Prepared in session 37 for the next device session. Pack devbin/ from the branch
# next/attn-one-pass (worktree /work/wt_attn: `cmake --build build`, then run
# scripts/pack_devbin.sh there and copy its devbin/ here, or pack from that tree and
# carry it). One binary holds both attention kernels (VKMOE_ATTN_CM_ONE_PASS=0: two passes)
# and both prompt combines (VKMOE_PROMPT_COMBINE_NORM=0: the next layer norms separately).
set -uo pipefail
source scripts/device_env.sh
{
echo "--- tests $(date +%T)"
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.*:*Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|worst|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
} 2>&1 | tee "$OUT/tests.txt"
qwen3_model
{
for r in 1 2 3; do for v in one two nofold; do
  e=VKMOE_X=1; [ $v = two ] && e=VKMOE_ATTN_CM_ONE_PASS=0; [ $v = nofold ] && e=VKMOE_PROMPT_COMBINE_NORM=0
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
  env $e $B/vkmoe bench -m $MODEL -p 4096 -n 0 -r 2 -o jsonl 2>/dev/null | samples
done; done
for v in one two nofold; do
  e=VKMOE_X=1; [ $v = two ] && e=VKMOE_ATTN_CM_ONE_PASS=0; [ $v = nofold ] && e=VKMOE_PROMPT_COMBINE_NORM=0
  warm_up; echo "--- profile $v"; env $e VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 2048 -n 0 -r 1 --expert-stats 2>&1 | grep -A14 "GPU time per prompt"
done
} 2>&1 | tee "$OUT/inplace.txt"

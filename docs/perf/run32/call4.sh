# Session 38 call 4: the prompt attention's keys split over more workgroups while
# its grid is small (VKMOE_ATTN_CM_SPLIT=0: whole); GPU tests, mutations; A/B in
# place; the side by side with llama-bench, including a 12 GiB budget.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.*:*Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|worst|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -16
for m in mut_split_reduce mut_split_cm; do
  echo "--- mutation $m: expect failures"
  VKMOE_SHADER_DIR=devbin_scripts/$m timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.CoopmatPrompt*' 2>&1 | grep -E '^\[  (PASSED|FAILED)|FAILED  \]' | tail -2
done
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do for v in split whole; do
  e=VKMOE_X=1; [ $v = whole ] && e=VKMOE_ATTN_CM_SPLIT=0
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
  env $e $B/vkmoe bench -m $MODEL -p 4096 -n 0 -r 2 -o jsonl 2>/dev/null | samples
done; done
for v in split whole; do
  e=VKMOE_X=1; [ $v = whole ] && e=VKMOE_ATTN_CM_SPLIT=0
  warm_up; echo "--- profile $v pp2048"; env $e VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 2048 -n 0 -r 1 --expert-stats 2>&1 | grep -A14 "GPU time per prompt"
done
} 2>&1 | tee "$OUT/inplace.txt"
{
for r in 1 2; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
echo "--- 12 GiB"
warm_up; run $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --vram-budget 12GiB
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -p 512 -n 0 -r 3 -fa 1
} 2>&1 | tee "$OUT/side_by_side.txt"

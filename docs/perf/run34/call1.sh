# Session 40 call 1 (s40/try = main de7f2e9 + next/attn-pairs): where a slow first pp512 repetition
# goes (bench --progress wall times, VKMOE_PROFILE=2 GPU time per ubatch, nvidia-smi clocks every 20 ms);
# prefetch A/B (devbin_scripts/vkmoe_noprefetch = c45ffc3 with prefetch a no-op); then next_pairs.sh's
# GPU tests and alternated rounds (paired attention, moe_group without binary searches).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.*:Prefill.*:GpuForward.*' 2>&1 | grep -E 'Failure|worst|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
VKMOE_SHADER_DIR=devbin_scripts/group_fast timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoe.*:Prefill.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -6 | tee -a $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
stamp() { while IFS= read -r l; do echo "$(date +%T.%3N) $l"; done; }
{
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader -lms 20 > $OUT/clocks.txt & CLK=$!
for i in 1 2; do
  echo "--- first-rep trace $i $(date +%T.%3N)"; $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --progress 2>&1 | grep -v "^|" | stamp
  echo "--- first-rep trace $i, VKMOE_PROFILE=2 $(date +%T.%3N)"; VKMOE_PROFILE=2 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --progress 2>&1 | grep -E "vkmoe bench|GPU time of" | stamp
done
kill $CLK
for b in nopf pf nopf pf; do
  bin=$B/vkmoe; [ $b = nopf ] && bin=devbin_scripts/vkmoe_noprefetch
  echo "--- $b"; $bin bench -m $MODEL -p 512 -n 0 -r 5 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/first_rep.txt
{
for r in 1 2 3; do for v in pairs whole group_fast; do
  e=VKMOE_ATTN_CM_PAIRS=1; [ $v = whole ] && e=VKMOE_ATTN_CM_PAIRS=0
  [ $v = group_fast ] && e="VKMOE_ATTN_CM_PAIRS=0 VKMOE_SHADER_DIR=devbin_scripts/group_fast"
  warm_up; echo "--- round $r $v $(date +%T)"; env $e $B/vkmoe bench -m $MODEL -p 512,2048,4096 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
for v in pairs whole; do
  e=VKMOE_ATTN_CM_PAIRS=1; [ $v = whole ] && e=VKMOE_ATTN_CM_PAIRS=0
  warm_up; echo "--- profile $v"; env $e VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 2048 -n 0 -r 2 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
done
} 2>&1 | tee $OUT/inplace.txt

# Session 39 call 6 (8f0cba2): GPU tests (the deferred split sums); q/k/v together vs
# VKMOE_QKV_TOGETHER=0, alternated with llama-bench -fa 1 on the same file; time to first
# token for 4096 tokens with peak VRAM; a per-step profile.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Dense/coopmat_*:Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do
  for v in together apart; do
    e=VKMOE_X=1; [ $v = apart ] && e=VKMOE_QKV_TOGETHER=0
    warm_up; echo "--- round $r vkmoe $v $(date +%T)"; env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
} 2>&1 | tee "$OUT/side_by_side.txt"

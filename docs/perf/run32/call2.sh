# Session 38 call 2: the experts' gate/up products with their activation in one
# product (VKMOE_EXPERT_GLU=0: two products and the activation pass), on top of
# the one-pass prompt attention; then the side by side with llama-bench.
set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 230 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*:*GemmCoopmatGateUp*:*Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -14
echo "--- mutation (gate and up swapped in the Q4_K gate/up kernel): expect failures"
VKMOE_SHADER_DIR=devbin_scripts/mut_glu timeout 60 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmatGateUp*Q4_K' 2>&1 | grep -E '^\[  (PASSED|FAILED)|FAILED  \]' | tail -3
echo "--- alone"
VKMOE_COOPMAT_BENCH=1 timeout 90 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E " ids "
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do for v in glu two; do
  e=VKMOE_X=1; [ $v = two ] && e=VKMOE_EXPERT_GLU=0
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
for v in glu two; do
  e=VKMOE_X=1; [ $v = two ] && e=VKMOE_EXPERT_GLU=0
  warm_up; echo "--- profile $v"; env $e VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A15 "GPU time per prompt"
done
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

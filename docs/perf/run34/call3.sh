# Session 40 call 3 (2e7dd4a): GPU tests of the GEMMs on f16 rows; f16 rows against VKMOE_F16_ROWS=0
# alternated with llama-bench -fa 1 on the same file; time to first token for 4096 tokens with
# peak VRAM; a per-step profile of each.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 280 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*:ShaderTrunk*:ShaderAttention.Coopmat*:Prefill*:GpuForward*:GpuOffload*' 2>&1 | grep -E 'Failure|worst|^\[  (PASSED|FAILED)|FAILED  \]|^\[==|SKIPPED \]' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do
  for v in f16 f32; do
    e=VKMOE_X=1; [ $v = f32 ] && e=VKMOE_F16_ROWS=0
    warm_up; echo "--- round $r vkmoe $v rows $(date +%T)"; env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
for v in f16 f32; do
  e=VKMOE_X=1; [ $v = f32 ] && e=VKMOE_F16_ROWS=0
  warm_up; echo "--- profile $v rows"; env $e VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
done
} 2>&1 | tee "$OUT/side_by_side.txt"

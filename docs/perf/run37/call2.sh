# Session 43 call 2: GPU tests of the fused block; lanes per row of the fused steps (VKMOE_MOE_FUSED_LANES=gu,dn,o,qkv),
# two rounds alternated, tg128 depth 0; with and without the q/k/v step.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:*FusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2; do
  for l in 32,32,32,32 32,32,32,8 32,32,32,16 16,32,32,16 8,32,32,8 4,32,32,8 16,16,32,16 8,32,16,8; do
    warm_up; echo "--- r$r lanes $l"; VKMOE_MOE_FUSED_LANES=$l timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
  done
  for l in 32,32,32,32 16,32,32,32 8,32,32,32; do
    warm_up; echo "--- r$r no q/k/v step, lanes $l"; VKMOE_FUSED_QKV=0 VKMOE_MOE_FUSED_LANES=$l timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
  done
done
} 2>&1 | tee $OUT/sweep.txt

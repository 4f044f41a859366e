# Session 50 call 2: step A with its register loops unrolled (call 1: 21 us a layer, 128 registers).
# Pipeline statistics (whole lines); timelines at depth 0 with and without step A; tg128 at depth 0,
# alternated, two rounds; step A's cost by depth (VKMOE_FUSED_ATTENTION_MAX=100000 against =0).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.Attention*:ShaderMoeFused.Clock*' 2>&1 | grep -E -A8 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -20 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//' | tee $OUT/pipeline_stats.txt
for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A6 "one layer's timeline"
done 2>&1 | tee $OUT/timelines.txt
{
for r in 1 2; do
  for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
    warm_up; echo "--- r$r vkmoe $v d0"; env $v $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
for v in "VKMOE_FUSED_ATTENTION_MAX=100000" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- $v d256,d512,d1024"; env $v timeout 100 $B/vkmoe bench -m $MODEL -d 256,512,1024 -p 0 -n 64 -r 2 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

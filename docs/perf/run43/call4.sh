# Session 50 call 4: step A with eight lanes a key, q padded, the next pass's loads ahead. GPU tests; pipeline
# statistics; timelines at depth 0 with and without it; tg128 at depth 0 (three rounds alternated) and 4096
# (once) against VKMOE_FUSED_ATTENTION=0; its cost by depth.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
{
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:*GpuForwardFusedMoe*' 2>&1 | grep -E -A8 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -30
} 2>&1 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//' | tee $OUT/pipeline_stats.txt
for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A17 "one layer's timeline" | grep -v "expert statistics"
done > $OUT/timelines.txt 2>&1
{
for r in 1 2 3; do
  for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
    warm_up; echo "--- r$r vkmoe $v d0"; env $v $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- vkmoe $v d4096"; env $v $B/vkmoe bench -m $MODEL -d 4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for v in "VKMOE_FUSED_ATTENTION_MAX=100000" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- $v d256,d384,d512"; env $v timeout 100 $B/vkmoe bench -m $MODEL -d 256,384,512 -p 0 -n 64 -r 2 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

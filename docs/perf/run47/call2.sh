# Session 54 call 2: step A by subgroups with the rotation's (cos, sin) formed by other subgroups meanwhile
# (VKMOE_FUSED_ATT_V2=1) against the default; the code-footprint probe with its chains used (one pass now runs).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
VKMOE_FUSED_ATT_V2=1 timeout 150 $B/vkmoe_tests --gtest_filter='ShaderMoeFused*:GpuForwardFusedMoe*:Archs/GpuForwardFusedMoe*' 2>&1 | grep -E "^\[ +(PASSED|FAILED|OK) |Failure" | tail -40 > $OUT/tests_v2.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests_v2.txt; grep -A3 Failure $OUT/tests_v2.txt | head
for v in "X=0" "VKMOE_FUSED_ATT_V2=1" "VKMOE_FUSED_CODE_PAD=128,1" "VKMOE_FUSED_CODE_PAD=256,1"; do
  echo "--- $v"; env $v VKMOE_PIPELINE_STATS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//' | sort | uniq -c
done > $OUT/pipeline_stats.txt 2>&1
cat $OUT/pipeline_stats.txt
{
for v in "X=0" "VKMOE_FUSED_ATT_V2=1" "VKMOE_FUSED_CODE_PAD=128,1" "VKMOE_FUSED_CODE_PAD=128,2" "VKMOE_FUSED_CODE_PAD=256,1" "VKMOE_FUSED_CODE_PAD=256,2" "VKMOE_FUSED_CODE_PAD=256,3"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 1 --expert-stats 2>&1 | grep -A18 "one layer's timeline" | head -19
done
warm_up; echo "--- timeline VKMOE_FUSED_ATT_V2=1 d512"
VKMOE_FUSED_ATT_V2=1 VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $MODEL -d 512 -p 0 -n 32 -r 1 --expert-stats 2>&1 | grep -A18 "one layer's timeline" | head -19
warm_up; echo "--- timeline X=0 d512"
VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $MODEL -d 512 -p 0 -n 32 -r 1 --expert-stats 2>&1 | grep -A18 "one layer's timeline" | head -19
} > $OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
{
for round in 1 2 3; do
  for v in "X=0" "VKMOE_FUSED_ATT_V2=1"; do
    warm_up; echo "--- round $round $v d0"; env $v $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
for round in 1 2; do
  for v in "X=0" "VKMOE_FUSED_ATT_V2=1"; do
    warm_up; echo "--- round $round $v d512"; env $v $B/vkmoe bench -m $MODEL -d 512 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
} 2>&1 | tee $OUT/ab.txt
for v in "X=0" "VKMOE_FUSED_ATT_V2=1"; do
  warm_up; echo "--- profile $v d0"; env $v VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics"
done | tee $OUT/profile.txt

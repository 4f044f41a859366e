# Session 53 call 2: fused-block weights touched into L2 before their grid barriers (VKMOE_FUSED_PREFETCH bits:
# 1 router, 2 out proj, 4 down, 8 q/k/v) against none, one binary; tests with it on; llama-bench side by side.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
VKMOE_FUSED_PREFETCH=15 timeout 100 $B/vkmoe_tests --gtest_filter='ShaderMoeFused*:GpuForwardFusedMoe*:Archs/GpuForwardFusedMoe*' 2>&1 | grep -E "^\[ +(PASSED|FAILED|OK) |Failure" | tail -30 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests.txt; grep -A3 Failure $OUT/tests.txt | head
{
for round in 1 2; do
  for pf in 0 15; do
    warm_up; echo "--- round $round prefetch $pf d0,d4096"
    VKMOE_FUSED_PREFETCH=$pf $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
for pf in 1 2 4 8; do
  warm_up; echo "--- prefetch $pf d0"
  VKMOE_FUSED_PREFETCH=$pf $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/ab.txt
{
for pf in 0 15; do
  warm_up; echo "--- timeline prefetch $pf d0"
  VKMOE_FUSED_PREFETCH=$pf VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 16 -r 1 --expert-stats 2>&1 | grep -A16 "one layer's timeline" | head -40
done
} > $OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
for pf in 0 15; do
  warm_up; echo "--- profile prefetch $pf d0"; VKMOE_FUSED_PREFETCH=$pf VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics"
done | tee $OUT/profile.txt

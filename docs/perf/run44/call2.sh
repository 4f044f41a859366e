# Session 51 call 2: one fused pipeline for every layer (new build, devbin) against the session's start
# (77fab1b, devbin_old) and the new build with VKMOE_FUSED_ONE_PIPELINE=0 (a pipeline per layer's types);
# tests on the H200; registers; per-layer timelines; GPU time a token.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD), old $(cat devbin_old/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 200 $B/vkmoe_tests --gtest_filter='ShaderMoeFused*:GpuForwardFusedMoe*:GpuForward.*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |^\[  FAILED|SKIPPED|Failure|error" | tail -60 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests.txt
for v in "" "VKMOE_FUSED_ONE_PIPELINE=0"; do
  echo "--- new ${v:-default}"; env $v VKMOE_PIPELINE_STATS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//'
done > $OUT/pipeline_stats.txt 2>&1
{
for v in "" "VKMOE_FUSED_ONE_PIPELINE=0"; do
  warm_up; echo "--- timeline new ${v:-default} d0"
  env $v VKMOE_FUSED_CLOCKS=1 VKMOE_FUSED_CLOCKS_LAYERS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A72 "one layer's timeline"
done
warm_up; echo "--- timeline new default d4096"
VKMOE_FUSED_CLOCKS=1 VKMOE_FUSED_CLOCKS_LAYERS=1 timeout 60 $B/vkmoe bench -m $MODEL -d 4096 -p 0 -n 16 -r 1 --expert-stats 2>&1 | grep -A90 "one layer's timeline"
} > $OUT/timelines.txt 2>&1
{
for round in 1 2 3; do
  warm_up; echo "--- round $round old d0";  devbin_old/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new d0";  $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new one_pipeline=0 d0"; VKMOE_FUSED_ONE_PIPELINE=0 $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for d in 512 4096; do
  warm_up; echo "--- old d$d";  devbin_old/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- new d$d";  $B/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ab.txt
warm_up; echo "--- profile d0"; VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt

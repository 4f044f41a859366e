# Session 51 call 1: the output projection loaded ahead by the workgroups without a head (new build, devbin)
# against the session's start (77fab1b, devbin_old) and the new build with VKMOE_FUSED_OPROJ_AHEAD=0; tests on
# the H200; registers; one layer's timeline with step A's new stamps.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD), old $(cat devbin_old/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 200 $B/vkmoe_tests --gtest_filter='ShaderMoeFused*:GpuForwardFusedMoe*:ShaderAttention*:GpuForward.*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |^\[  FAILED|SKIPPED|Failure|error" | tail -60 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -5 $OUT/tests.txt
for b in devbin devbin_old; do
  echo "--- $b"; VKMOE_PIPELINE_STATS=1 timeout 60 $b/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//'
done > $OUT/pipeline_stats.txt 2>&1
{
for v in "" "VKMOE_FUSED_OPROJ_AHEAD=0"; do
  warm_up; echo "--- timeline new ${v:-default} d0"
  env $v VKMOE_FUSED_CLOCKS=1 VKMOE_FUSED_CLOCKS_LAYERS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A72 "one layer.s timeline"
done
} > $OUT/timelines.txt 2>&1
{
for round in 1 2 3; do
  warm_up; echo "--- round $round old d0";  devbin_old/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new d0";  $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new ahead=0 d0"; VKMOE_FUSED_OPROJ_AHEAD=0 $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for d in 256 512; do
  warm_up; echo "--- old d$d";  devbin_old/vkmoe bench -m $MODEL -d $d -p 0 -n 64 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- new d$d";  $B/vkmoe bench -m $MODEL -d $d -p 0 -n 64 -r 3 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ab.txt

# Session 49 call 1: session 48's per-layer fused counters and VKMOE_FUSED_QUANT_AHEAD on the H200.
# The changed kernels' GPU tests; the fused pipeline's driver statistics; one layer's timeline at depth 0 for
# QUANT_AHEAD 1, 2, 3; tg128 at depth 0 and 4096 (-r 3) of this build with QUANT_AHEAD 1 / 2 / 3, of 743e8d1
# (run 41's build: one shared counter pair) and llama-bench -fa 1 -r 5, two rounds alternated.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
mkdir -p /tmp/old && xz -dc devbin_old/vkmoe.xz > /tmp/old/vkmoe && chmod +x /tmp/old/vkmoe
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.Folded*:ShaderMoeFused.*:*GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline " > $OUT/pipeline_stats.txt; grep -c . $OUT/pipeline_stats.txt; grep moe_decode_fused $OUT/pipeline_stats.txt | cut -c1-400
for qa in 1 2 3; do
  warm_up; echo "--- timeline QUANT_AHEAD=$qa d0"
  VKMOE_FUSED_QUANT_AHEAD=$qa VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A40 "one layer's timeline"
done > $OUT/timelines.txt 2>&1
{
for r in 1 2; do
  for v in "VKMOE_FUSED_QUANT_AHEAD=1" "VKMOE_FUSED_QUANT_AHEAD=2" "VKMOE_FUSED_QUANT_AHEAD=3"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- r$r vkmoe 743e8d1 d0,d4096"; /tmp/old/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

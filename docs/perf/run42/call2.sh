# Session 49 call 2: the fused MoE kernel with its loops kept rolled (VKMOE_FUSED_ROLLED=1: the executed
# instruction footprint, run 24's lead) against the default; the OLMoE fused test that failed in call 1,
# repeated with its seeds and differences shown; the fused pipelines' driver statistics for the default,
# rolled, QUANT_AHEAD=2 and 3; timelines at depth 0; tg128 at depth 0 and 4096 (-r 3), two rounds; llama-bench.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 120 $B/vkmoe_tests --gtest_filter='*GpuForwardFusedMoe.DecodeStaysNearCpuReference/1' --gtest_repeat=8 2>&1 | grep -E -A6 'Failure|FAILED  \]' | grep -v '^\[ RUN' | head -60
timeout 100 $B/vkmoe_tests --gtest_filter='*GpuForwardFusedMoe.DecodeStaysNearCpuReference/1' --gtest_repeat=8 2>&1 | grep -cE '^\[       OK'
VKMOE_FUSED_ROLLED=1 timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:*GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12
} 2>&1 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
for v in "X=0" "VKMOE_FUSED_ROLLED=1" "VKMOE_FUSED_QUANT_AHEAD=2" "VKMOE_FUSED_QUANT_AHEAD=3"; do
  echo "--- $v"; env $v VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | cut -c1-200
done 2>&1 | tee $OUT/pipeline_stats.txt
for v in "X=0" "VKMOE_FUSED_ROLLED=1"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A30 "one layer's timeline"
done > $OUT/timelines.txt 2>&1
{
for r in 1 2; do
  for v in "X=0" "VKMOE_FUSED_ROLLED=1" "VKMOE_FUSED_ROLLED=1 VKMOE_FUSED_QUANT_AHEAD=2"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt

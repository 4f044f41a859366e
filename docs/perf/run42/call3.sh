# Session 49 call 3: the fused MoE kernel's int8 x in a swizzled shared-memory layout (VKMOE_FUSED_XQ_SWIZZLE=1:
# each 64-value group's four 16-byte parts apart, so that the lanes of a warp, which read consecutive groups,
# read consecutive words instead of words 64 bytes apart, a 4-way bank conflict) against the adjacent layout;
# the OLMoE fused engine test that failed once in call 1, repeated 15 times with its seeds and differences shown;
# the fused GPU tests with the swizzle; pipeline statistics; timelines at depth 0; tg128 at depth 0 and 4096
# (-r 3), three rounds alternated; llama-bench -fa 1 once.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 150 $B/vkmoe_tests --gtest_filter='*GpuForwardFusedMoe.DecodeStaysNearCpuReference/olmoe' --gtest_repeat=15 > /tmp/olmoe.log 2>&1
echo "olmoe repeats passed: $(grep -c '^\[       OK' /tmp/olmoe.log) of 15"; grep -B3 -A8 'Failure' /tmp/olmoe.log | head -80
VKMOE_FUSED_XQ_SWIZZLE=1 timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:*GpuForwardFusedMoe*' 2>&1 | grep -E -A5 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -30
} 2>&1 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
for v in "X=0" "VKMOE_FUSED_XQ_SWIZZLE=1"; do
  echo "--- $v"; env $v VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | cut -c1-200
done 2>&1 | tee $OUT/pipeline_stats.txt
for v in "X=0" "VKMOE_FUSED_XQ_SWIZZLE=1"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A30 "one layer's timeline"
done > $OUT/timelines.txt 2>&1
{
for r in 1 2 3; do
  for v in "X=0" "VKMOE_FUSED_XQ_SWIZZLE=1"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt

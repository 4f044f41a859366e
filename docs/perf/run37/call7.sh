# Session 43 call 7: the fused tests; prefetching during grid barriers (default) against none
# (VKMOE_MOE_FUSED_PREFETCH=0), three rounds alternated, tg128 at depth 0 and 4096; a profile of each at depth 0.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 60 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:Archs/GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2 3; do
  warm_up; echo "--- r$r prefetch d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r no prefetch d0,d4096"; VKMOE_MOE_FUSED_PREFETCH=0 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
done
for s in "" "VKMOE_MOE_FUSED_PREFETCH=0"; do
  warm_up; echo "--- profile ${s:-prefetch}"; env $s VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A8 "GPU time per decoded"
done
} 2>&1 | tee $OUT/ab.txt

# Session 43 call 8 (cff3292 + the grid barrier's last arriver skipping its polls, with a knob): the fused tests;
# the new barrier (default) against run 36's (VKMOE_MOE_FUSED_LAST_SKIPS=0), two rounds alternated, depth 0 and 4096.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 60 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:Archs/GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2; do
  warm_up; echo "--- r$r last skips d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r run 36 barrier d0,d4096"; VKMOE_MOE_FUSED_LAST_SKIPS=0 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ab.txt

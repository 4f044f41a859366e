# Session 42 call 4: tests; tg128 alternated: fused (default) / separate (VKMOE_MOE_FUSED=0) / gate-up split, and
# launch variants; side by side with llama-bench -fa 1 at depth 0 and 4096; a profile of the default.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.FusedMoe*:GpuForward.Int8*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2; do
  for s in "VKMOE_MOE_FUSED=1" "VKMOE_MOE_FUSED=0" "VKMOE_MOE_FUSED_GU_SPLIT=1" "VKMOE_MOE_FUSED_GU_SPLIT=1 VKMOE_MOE_FUSED_WG=1024" \
           "VKMOE_MOE_FUSED_GU_SPLIT=1 VKMOE_MOE_FUSED_RPT=2"; do
    warm_up; echo "--- r$r $s"; env $s timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
  done
done
warm_up; echo "--- GRID=264 WG=256 (two workgroups an SM)"; VKMOE_MOE_FUSED_GRID=264 VKMOE_MOE_FUSED_WG=256 timeout 60 $B/vkmoe bench -m $MODEL $TG 2>&1 | tail -3
} 2>&1 | tee $OUT/ab.txt
{
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe separate d0,d4096"; VKMOE_MOE_FUSED=0 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 120 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- profile"; VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A8 "GPU time per decoded"
} 2>&1 | tee $OUT/side_by_side.txt

# Session 42 call 2 (fused MoE decode, x staged in shared memory, down loads first): tests; tg128 fused / separate
# alternated; launch shapes (workgroup, items and units per lane); depth 4096; profiles; llama-bench -fa 1 tg128.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.FusedMoe*:GpuForward.Int8*:GpuForward.LogitsMatch*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2; do
  warm_up; echo "--- round $r fused $(date +%T)"; $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
  warm_up; echo "--- round $r separate $(date +%T)"; VKMOE_MOE_FUSED=0 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
done
for s in "VKMOE_MOE_FUSED_WG=1024" "VKMOE_MOE_FUSED_WG=256" "VKMOE_MOE_FUSED_RPT=2" "VKMOE_MOE_FUSED_WG=1024 VKMOE_MOE_FUSED_RPT=2" \
         "VKMOE_MOE_FUSED_UPL=2" "VKMOE_MOE_FUSED_WG=1024 VKMOE_MOE_FUSED_UPL=2" "VKMOE_MOE_FUSED_UPL=1"; do
  warm_up; echo "--- $s"; env $s timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
done
warm_up; echo "--- d4096 fused"; $B/vkmoe bench -m $MODEL -d 4096 $TG 2>/dev/null | samples
warm_up; echo "--- d4096 separate"; VKMOE_MOE_FUSED=0 $B/vkmoe bench -m $MODEL -d 4096 $TG 2>/dev/null | samples
} 2>&1 | tee $OUT/ab.txt
{
warm_up; echo "--- profile fused"; VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per decoded"
warm_up; echo "--- profile separate"; VKMOE_MOE_FUSED=0 VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A16 "GPU time per decoded"
warm_up; echo "--- llama-bench -fa 1 tg128"; timeout 60 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/profile.txt

# Session 42 call 1 (the fused MoE decode block): GPU tests; compute units seen; tg128 alternated fused / separate
# (VKMOE_MOE_FUSED=0) at depth 0 and 4096; launch-shape sweeps; profiles of both; llama-bench -fa 1 tg128.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
$B/vkmoe info 2>&1 | grep -E "compute units|subgroup|NVIDIA" | head -4 | tee $OUT/info.txt
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:ShaderMoe.*:GpuForward.*:VkRuntime.*' 2>&1 | grep -E 'Failure|grid|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -20 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2 3; do
  warm_up; echo "--- round $r fused $(date +%T)"; $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
  warm_up; echo "--- round $r separate $(date +%T)"; VKMOE_MOE_FUSED=0 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
done
for r in 1 2; do
  warm_up; echo "--- d4096 round $r fused"; $B/vkmoe bench -m $MODEL -d 4096 $TG 2>/dev/null | samples
  warm_up; echo "--- d4096 round $r separate"; VKMOE_MOE_FUSED=0 $B/vkmoe bench -m $MODEL -d 4096 $TG 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ab.txt
{
for s in "VKMOE_MOE_FUSED_RPT=1" "VKMOE_MOE_FUSED_RPT=4" "VKMOE_MOE_FUSED_WG=512" "VKMOE_MOE_FUSED_WG=128" \
         "VKMOE_MOE_FUSED_GRID=264" "VKMOE_MOE_FUSED_GRID=66" "VKMOE_MOE_FUSED_WG=512 VKMOE_MOE_FUSED_RPT=1"; do
  warm_up; echo "--- $s"; env $s $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
done
warm_up; echo "--- fused again"; $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
} 2>&1 | tee $OUT/sweep.txt
{
warm_up; echo "--- profile fused"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per decoded"
warm_up; echo "--- profile separate"; VKMOE_MOE_FUSED=0 VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A16 "GPU time per decoded"
warm_up; echo "--- llama-bench -fa 1 tg128"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/profile.txt

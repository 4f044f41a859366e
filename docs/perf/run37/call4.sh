# Session 43 call 4 (the final build): GPU tests; the fused pipelines' driver statistics (VKMOE_PIPELINE_STATS=1)
# with both extra steps, the output projection only and the block alone; profiles at depth 4096 of the first two;
# tg128 of each once.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 170 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.*:Archs/GpuForward*:ShaderMatvec*:*Q8x*:ShaderMoe.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for s in "" "VKMOE_FUSED_QKV=0" "VKMOE_FUSED_OUT_PROJ=0 VKMOE_FUSED_QKV=0"; do
  echo "--- pipeline statistics ${s:-default}"; env $s VKMOE_PIPELINE_STATS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -A3 "pipeline moe_decode_fused" | head -8
done
for s in "" "VKMOE_FUSED_QKV=0"; do
  warm_up; echo "--- profile d4096 ${s:-default}"; env $s VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -d 4096 -r 2 2>&1 | grep -A10 "GPU time per decoded"
done
for s in "" "VKMOE_FUSED_QKV=0" "VKMOE_FUSED_OUT_PROJ=0 VKMOE_FUSED_QKV=0"; do
  warm_up; echo "--- tg128 ${s:-default}"; env $s timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/check.txt

# Session 43 call 1: GPU tests; the fused dispatch with the output projection and the next q/k/v (default) against
# the block alone (VKMOE_FUSED_OUT_PROJ=0 VKMOE_FUSED_QKV=0) and llama-bench -fa 1, alternated, depth 0 and 4096;
# each step alone at depth 0; a profile of each.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.*:Archs/GpuForward*:ShaderMatvec*:*Q8x*:ShaderMoe.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
OFF="VKMOE_FUSED_OUT_PROJ=0 VKMOE_FUSED_QKV=0"
{
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe block only d0,d4096"; env $OFF $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 120 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- out proj only d0"; VKMOE_FUSED_QKV=0 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
warm_up; echo "--- q/k/v only d0"; VKMOE_FUSED_OUT_PROJ=0 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
for s in "" "$OFF"; do
  warm_up; echo "--- profile ${s:-default}"; env $s VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 2 --expert-stats 2>&1 | grep -A12 "GPU time per decoded"
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
} 2>&1 | tee $OUT/side_by_side.txt

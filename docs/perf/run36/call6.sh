# Session 42 call 6 (daf9a56, the final review build): GPU tests of the fused block, the decode paths and the
# int8 matvec (now on q8x_type.glsl); tg128 fused / four dispatches once each.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.*:ShaderMatvec*:*Q8x*:ShaderMoe.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
warm_up; echo "--- fused"; timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
warm_up; echo "--- four dispatches"; VKMOE_MOE_FUSED=0 timeout 60 $B/vkmoe bench -m $MODEL $TG 2>/dev/null | samples
} 2>&1 | tee $OUT/check.txt

# Session 44 call 5 (5adeb62): the GPU tests run 37 ran (fused block, every GpuForward test, matvec, int8
# matvec, MoE routing) on the H200; peak VRAM of vkmoe and llama-bench -fa 1 for tg128 at depth 0 and 4096
# (context 4224), as runs 22-35 compared it.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:GpuForward.*:Archs/GpuForward*:ShaderMatvec*:*Q8x*:ShaderMoe.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
} 2>&1 | tee $OUT/vram.txt

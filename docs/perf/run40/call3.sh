# Session 46 call 3 (build cdc6b24): every GpuForward and prompt test on the H200; the resident decode's GPU time
# a token by the profile at depth 0 and 4096; peak VRAM of vkmoe and llama-bench -fa 1 at context 4224
# (-d 0,4096) and context 128.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 280 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GpuForward*:*Prefill*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for d in 0 4096; do
  warm_up; echo "--- profile d$d"; VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics"
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1
} 2>&1 | tee $OUT/profile_vram.txt

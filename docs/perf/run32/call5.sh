# Session 38 call 5: the committed build with the smaller up rows: GPU Prefill and
# GpuForward tests, then resident prompt speed and the 4096-token prompt's peak VRAM.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 110 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -8 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
} 2>&1 | tee "$OUT/bench.txt"

# Session 40 call 6 (c727cc7): GPU tests of the offload modes; four more alternated pp512 rounds of
# vkmoe and llama-bench -fa 1 (the pp512 samples of call 5 dipped in two of three rounds); the
# 12 GiB prompt as a check of the offload prefill with the token rows decoded on the GPU.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='GpuOffload*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==|SKIPPED \]' | tail -8 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3 4; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
echo "--- 12 GiB pp512 (check)"; warm_up; run $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --vram-budget 12GiB
} 2>&1 | tee "$OUT/side_by_side.txt"

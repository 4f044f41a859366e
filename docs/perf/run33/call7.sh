# Session 39 call 7 (ee2c188: review commit, test helper and formatting only): GPU tests, then one
# more alternated round of vkmoe and llama-bench -fa 1 (pp512, five repetitions).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Dense/coopmat_*:Prefill.*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
warm_up; echo "--- vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 -o jsonl 2>/dev/null | samples
warm_up; echo "--- llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee "$OUT/side_by_side.txt"

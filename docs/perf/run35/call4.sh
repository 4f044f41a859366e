# Session 41 call 4 (HEAD after review): three more alternated pp512/pp2048 rounds against llama-bench -fa 1;
# the 4096-token prompt of both with peak VRAM; pp512 under 12 GiB (llama-bench -ncmoe 20) and with the experts
# on the CPU (-ncmoe 48), each side by side.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Prefill.*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -6 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt
{
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 0 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 3 -fa 1
warm_up; run $B/vkmoe bench -m $MODEL --vram-budget 12GiB -p 512 -n 0 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -p 512 -n 0 -r 3 -fa 1
warm_up; run $B/vkmoe bench -m $MODEL --moe-mode cpu-moe -p 512 -n 0 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 48 -p 512 -n 0 -r 3 -fa 1
} 2>&1 | tee $OUT/modes.txt

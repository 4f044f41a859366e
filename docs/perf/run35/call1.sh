# Session 41 call 1: GPU tests of the build (review commits 9002641..33ac8a1 + parallel staging copies);
# model load times with and without VKMOE_PARALLEL_UPLOAD, clocks traced (nvidia-smi every 20 ms) through
# vkmoe's and llama-bench's loads and first repetitions; alternated side-by-side pp512/pp2048 rounds.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*:ShaderTrunk.*:ShaderMatvec.*:Prefill.*:GpuForward.*:GpuOffload.*:VkRuntime.*:ThreadPool.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
stamp() { while IFS= read -r l; do echo "$(date +%T.%3N) $l"; done; }
{
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader -lms 20 > $OUT/clocks.txt & CLK=$!
for i in 1 2; do
  for v in par one llama; do
    warm_up; echo "--- trace $i $v $(date +%T.%3N)"
    if [ $v = llama ]; then
      /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 5 -fa 1 --progress 2>&1 | grep -E "llama-bench:|pp512" | stamp
    else
      e=VKMOE_PARALLEL_UPLOAD=1; [ $v = one ] && e=VKMOE_PARALLEL_UPLOAD=0
      env $e $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --progress 2>&1 | tr '\r' '\n' | grep -E "vkmoe bench|done,|loading|pp512" | stamp
    fi
  done
done
kill $CLK
} 2>&1 | tee $OUT/traces.txt
{
for r in 1 2 3; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

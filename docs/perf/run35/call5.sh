# Session 41 call 5 (pipelines created ahead): GPU tests; with the driver's shader disk cache off (each process compiles
# its pipelines), VKMOE_PIPELINES_AHEAD=1 against =0 alternated: load, warm-up and repetition times (--progress);
# two side-by-side pp512/pp2048 rounds against llama-bench -fa 1.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='VkRuntime.*:Prefill.*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -6 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do for a in 1 0; do
  d=$(mktemp -d); warm_up; echo "--- cold driver cache, VKMOE_PIPELINES_AHEAD=$a, round $r"
  t0=$(date +%s.%N)
  __GL_SHADER_DISK_CACHE=0 __GL_SHADER_DISK_CACHE_PATH=$d VKMOE_PIPELINES_AHEAD=$a $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --progress 2>&1 | tr '\r' '\n' | grep -E "vkmoe bench|done,|pp512"
  python3 -c "import sys; print(\"process wall %.2f s\" % (float(sys.argv[1]) - float(sys.argv[2])))" $(date +%s.%N) $t0
done; done
for r in 1 2; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ahead.txt

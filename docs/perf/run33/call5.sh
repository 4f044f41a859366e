# Session 39 call 5 (ccfece7): GPU tests of the padding-column skip; expert kernels alone and
# in place against the previous SPIR-V (devbin_scripts/pre_skip, 20ddc50, via VKMOE_SHADER_DIR),
# alternated with llama-bench on the same file; time to first token for 4096 tokens; a profile.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*:*GateUp*:Prefill*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
for d in "" devbin_scripts/pre_skip; do
  echo "--- alone, shader dir '${d}'"
  VKMOE_SHADER_DIR=$d VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E "tile auto|gate\+up"
done
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do
  for v in skip pre_skip; do
    s=""; [ $v = pre_skip ] && s=devbin_scripts/pre_skip
    warm_up; echo "--- round $r vkmoe $v $(date +%T)"; VKMOE_SHADER_DIR=$s $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
} 2>&1 | tee "$OUT/side_by_side.txt"

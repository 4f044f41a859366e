# Session 39 call 2: the vec4-epilogue candidate (dcd2048) against main's SPIR-V
# (devbin_scripts/main_gemm via VKMOE_SHADER_DIR), and F16/BF16 dense GEMM rates
# (is dequantizing the trunk weights to f16 once per ubatch worth it?).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
{
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*:*GateUp*:*Prefill*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -10
for d in "" devbin_scripts/main_gemm; do
  echo "--- alone, shader dir '${d}'"
  VKMOE_SHADER_DIR=$d VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E "tile auto|gate\+up"
done
for t in F16 BF16 Q8_0; do
  echo "--- $t dense, both paths"
  VKMOE_COOPMAT_BENCH_TYPE=$t VKMOE_COOPMAT_BENCH=1 timeout 90 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*' 2>&1 | grep -E "dense"
done
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do for d in vec4 main; do
  s=""; [ $d = main ] && s=devbin_scripts/main_gemm
  warm_up; echo "--- round $r $d $(date +%T)"
  VKMOE_SHADER_DIR=$s $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
{
echo "--- tests new"; timeout 80 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat.*' 2>&1 | grep -E "PASSED|FAILED" | head -30
for m in m1 m2; do echo "--- mutation $m (must fail)"; VKMOE_SHADER_DIR=$S/$m timeout 80 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat.*q4_k*:*GemmCoopmat.*q5_k*' 2>&1 | grep -E "PASSED|FAILED" | head -12; done
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do for v in old new; do
  e=VKMOE_X=1; [ $v = old ] && e=VKMOE_SHADER_DIR=$S/old
  echo "--- round $r $v"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q5_k,gemm_ids --gemm-shapes 2048x4096:512,4096x2048:512,2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_ids_q4" | sort -u
done; done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2 3; do for v in old new; do
  e=VKMOE_X=1; [ $v = old ] && e=VKMOE_SHADER_DIR=$S/old
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

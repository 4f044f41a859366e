set -uo pipefail
source scripts/device_env.sh
V=$PWD/devbin_scripts/gemmvar
VKMOE_SHADER_DIR=$V timeout 70 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*/coopmat_*' 2>&1 | tail -5 | tee "$OUT/tests.txt"
warm_up
for r in 1 2; do for cfg in old new; do
  echo "--- round $r $cfg"
  e=VKMOE_X=1; [ $cfg = new ] && e=VKMOE_SHADER_DIR=$V
  env $e $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k,gemm_ids --gemm-shapes 2048x4096:512,2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "gemm_" 
done; done 2>&1 | tee "$OUT/bench.txt"

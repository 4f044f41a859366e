set -uo pipefail
source scripts/device_env.sh
{
echo "--- tests default $(date +%T)"; timeout 150 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*' 2>&1 | grep -E "PASSED|FAILED|Failure" | head -20
for sh in 128,64,32,32,32,1 128,64,32,32,64,1; do echo "--- tests dense shape $sh"; VKMOE_COOPMAT_SHAPE=$sh timeout 120 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Dense/coopmat_*' 2>&1 | grep -E "PASSED|FAILED|Failure|fit" | head -12; done
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do
for sh in default 128,64,32,32,32,1 128,64,32,32,64,1; do for x in f32 f16; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_SHAPE=$sh
  echo "--- round $r dense shape $sh x $x"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k,gemm_f32 --gemm-shapes 2048x4096:512,4096x2048:512,2048x512:512,2048x128:512 --gemm-x $x --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat|fit" | sort -u
done; done
echo "--- round $r ids default"
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat|fit" | sort -u
done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2 3; do for sh in default 128,64,32,32,32,1 128,64,32,32,64,1; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_SHAPE=$sh
  warm_up; echo "--- round $r dense $sh $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

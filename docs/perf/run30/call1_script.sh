set -uo pipefail
source scripts/device_env.sh
SH="128,64,32,32,32,1 128,64,32,32,64,1 256,64,32,32,32,1 256,64,64,32,32,1"
{
echo "--- tests default $(date +%T)"; timeout 120 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Indexed/coopmat_*' 2>&1 | grep -E "PASSED|FAILED|Failure" | head -20
for sh in $SH; do echo "--- tests ids shape $sh"; VKMOE_COOPMAT_IDS_SHAPE=$sh timeout 120 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Indexed/coopmat_Q*' 2>&1 | grep -E "PASSED|FAILED|Failure|fit" | head -12; done
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do
for x in f32 f16; do for sh in default $SH; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_IDS_SHAPE=$sh
  echo "--- round $r x $x ids shape $sh"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-x $x --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat|fit" | sort -u
done; done
echo "--- round $r dense x f32 / f16"
for x in f32 f16; do $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k --gemm-shapes 2048x4096:512,4096x2048:512,2048x512:512 --gemm-x $x --gemm-path coopmat 2>&1 | grep -E "^gemm_"; done
done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2; do for sh in default 128,64,32,32,64,1 256,64,32,32,32,1; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_IDS_SHAPE=$sh
  warm_up; echo "--- round $r $sh $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

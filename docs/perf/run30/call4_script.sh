set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
{
for v in acc16 alias; do echo "--- tests $v"; VKMOE_SHADER_DIR=$S/$v timeout 120 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Indexed/coopmat_Q*' 2>&1 | grep -E "PASSED|FAILED|Failure" | head -12; done
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do for v in base acc16 alias; do
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  echo "--- round $r $v"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_ids_q4" | sort -u
done; done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2; do for v in base acc16 alias; do
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
for v in nbuf2 base; do
  e=VKMOE_X=1; [ $v = nbuf2 ] && e=VKMOE_COOPMAT_IDS_SHAPE=128,64,32,32,32,2
  warm_up; echo "--- 12GiB $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --vram-budget 12GiB -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee "$OUT/inplace.txt"

set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
IDS=VKMOE_COOPMAT_IDS_SHAPE=128,64,32,32,32
{
for v in pf1 pf2; do echo "--- tests $v"; VKMOE_SHADER_DIR=$S/$v timeout 80 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat.*' 2>&1 | grep -E "Failure|PASSED|FAILED|Skipped" | head -8; done
echo "--- tests pf2 ids128"; env $IDS VKMOE_SHADER_DIR=$S/pf2 timeout 80 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat.Indexed*' 2>&1 | grep -E "Failure|PASSED|FAILED|Skipped|fit" | head -8
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do for v in pf1 pf2; do for ids in d x; do
  e=VKMOE_X=1; [ $ids = x ] && e=$IDS
  echo "--- round $r $v ids=$ids"
  env $e VKMOE_SHADER_DIR=$S/$v VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_ids --gemm-shapes 2048x4096:512,2048x512:512,4096x2048:512,2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat" | sort -u
done; done; done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2; do
for cfg in base ids128 ids128_pf2 pf2; do
  case $cfg in base) e="VKMOE_X=1";; ids128) e="$IDS";; ids128_pf2) e="$IDS VKMOE_SHADER_DIR=$S/pf2";; pf2) e="VKMOE_SHADER_DIR=$S/pf2";; esac
  warm_up; echo "--- round $r $cfg $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"
unpack_llama
{ warm_up; echo "--- llama-bench -fa 1"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa 1 -o jsonl 2>/dev/null | samples; } 2>&1 | tee "$OUT/llama.txt"

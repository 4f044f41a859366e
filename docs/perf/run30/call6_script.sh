set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
{
echo "--- tests new"; timeout 100 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_Q*' 2>&1 | grep -E "PASSED|FAILED" | head -20
echo "--- tests mutation (must fail)"; VKMOE_SHADER_DIR=$S/mut2 timeout 60 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_Q4_K' 2>&1 | grep -E "PASSED|FAILED" | head -8
} 2>&1 | tee "$OUT/tests.txt"
qwen3_model
{
for r in 1 2; do for v in old new; do
  e=VKMOE_X=1; [ $v = old ] && e=VKMOE_SHADER_DIR=$S/old
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

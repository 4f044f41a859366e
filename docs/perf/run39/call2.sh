# Session 45 call 2 (the final build: down rows by pair, the split tail reverted to eight loads): the GPU
# tests of the changed kernels on the H200 in two parts (call 1's single 240 s run timed out before its
# summary): every GEMM path's expert-grouped form, the MoE table, combine and attention kernels; every
# GpuForward test (GPU = CPU reference, budgets, prompts).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
t() { timeout $1 $B/vkmoe_tests --gtest_brief=1 --gtest_filter="$2" 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14; }
{
echo "--- kernels"; t 250 '*Indexed*:GemmCoopmat*:ShaderMoe.*:ShaderAttention*:ShaderGemm*'
echo "--- forward"; t 330 'GpuForward.*:Archs/GpuForward*:*Prefill*'
} 2>&1 | tee $OUT/tests.txt

# Session 49 call 5: the final build's fused GPU tests (grids of 132) and the chained engine tests.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
timeout 130 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:*GpuForwardFusedMoe*:ShaderAttention.Folded*' 2>&1 | grep -E -A5 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt

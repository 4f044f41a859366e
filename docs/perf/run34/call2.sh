# Session 40 call 2: the KHR coopmat GEMM on f16 activation rows (GemmArgs::x_f16) — GPU tests,
# then GemmCoopmatBench's f32-against-f16 rows, alternated, twice (each after 1 s of GPU load).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
timeout 300 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==|SKIPPED' | tail -12 | tee $OUT/tests.txt
for i in 1 2; do
  warm_up; VKMOE_COOPMAT_BENCH=1 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*coopmat' 2>&1 | grep -E "rows|auto|gate\+up" | tee -a $OUT/bench.txt
done

# Session 38 call 3: expert tiles for the gate/up form and the down product, alone;
# registers of the expert kernels.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
{
warm_up
for s in 128,64,32,32,32,1 128,64,64,16,32,1 256,64,32,32,32,1 128,64,32,32,64,1 64,64,32,32,32,1 128,64,32,32,32,2 128,64,32,16,32,1; do
  echo "--- shape $s"
  VKMOE_COOPMAT_IDS_SHAPE=$s VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E "ids .*tile auto|gate\+up|does not fit"
done
echo "--- registers"
VKMOE_PIPELINE_STATS=1 VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -iE "gemm_coopmat_(glu|ids)" | sort | uniq | head -20
} 2>&1 | tee "$OUT/tiles.txt"

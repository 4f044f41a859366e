set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout 240 $B/vkmoe_tests --gtest_repeat=25 --gtest_filter='GpuForward.Int8*:Archs/GpuForwardFusedMoe.DecodeStaysNearCpuReference/*' 2>&1 | grep -E "^\[ +(FAILED|OK) |Failure|seed|actual" > $OUT/repeat.txt
echo "repeat: $(( $(date +%s) - t0 )) s, OK $(grep -c '^\[       OK' $OUT/repeat.txt), FAILED $(grep -c '^\[  FAILED' $OUT/repeat.txt)"
grep -B3 -A3 Failure $OUT/repeat.txt | head -40
t0=$(date +%s)
timeout 200 $B/vkmoe_tests --gtest_filter='GpuForward*:Archs/GpuForward*:*/GpuForward*' 2>&1 | grep -E "^\[ +(PASSED|FAILED|OK) |Failure|tests ran" > $OUT/family.txt
echo "family: $(( $(date +%s) - t0 )) s"; tail -5 $OUT/family.txt; grep -A3 Failure $OUT/family.txt | head

# Session 39 call 3 (87e5c13): GPU tests of the 4x4-fragment tiles and the last-layer rows;
# dense Q4_K tiles alone on four shapes plus a few forced shapes; in place: the last-layer
# rows on/off and the candidate dense tiles forced, alternated.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
{
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*:*GateUp*:Prefill*:GpuForward.*:GpuOffload.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
echo "--- dense alone"
VKMOE_COOPMAT_BENCH=1 timeout 90 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E "dense|gate\+up|ids.*auto"
for sh in 128,64,64,64,32,2 64,64,32,64,32,1 64,64,32,64,32,2 256,128,64,64,32,1 128,128,64,64,32,1 64,128,32,64,32,1; do
  echo "--- shape $sh"
  VKMOE_COOPMAT_SHAPE=$sh VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E "dense.*tile auto"
done
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do for v in default rows_all LW L1W MW; do
  case $v in
    default) e="";; rows_all) e="VKMOE_LAST_LAYER_ROWS=0";; *) e="VKMOE_COOPMAT_TILE=$v";;
  esac
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"

# Session 44 call 1 (5dc2485): fused tests on the H200; the fused dispatch's clock timeline with the router
# folded into the output projection (default) and without (VKMOE_FUSED_ROUTER_FOLD=0), depth 0 and 4096; then
# side by side, alternated two rounds: fold / no fold / llama-bench -fa 1, tg128 at depth 0 and 4096.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:Archs/GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
$B/vkmoe info 2>&1 | grep -i "clock\|compute units"
TG="-p 0 -n 128 -r 5 -o jsonl"
{
for s in "" "VKMOE_FUSED_ROUTER_FOLD=0"; do
  for d in 0 4096; do
    warm_up; echo "--- clocks ${s:-fold} d$d"; env $s VKMOE_FUSED_CLOCKS=1 VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A30 "GPU time per decoded" | grep -v "expert statistics"
  done
done
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe fold d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe no fold d0,d4096"; VKMOE_FUSED_ROUTER_FOLD=0 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
} 2>&1 | tee $OUT/side_by_side.txt

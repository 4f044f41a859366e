# Session 49 call 4: two variants of the fused MoE kernel (swizzled x, the default since call 3), alone
# against the default: VKMOE_FUSED_ROUTER_IN_NORM=1 (a workgroup's router row read in the ffn norm's
# pass over x, one workgroup sum for both) and VKMOE_FUSED_QKV_TOUCH=1 (a word of each lane's share of its next
# q/k/v rows read right after the next norm's loads of x). Their GPU tests; pipeline statistics; timelines at
# depth 0; the default's VKMOE_PROFILE=1 GPU time a token; tg128 at depth 0 and 4096 (-r 3), two rounds alternated (the variants together not run: device time); llama-bench -fa 1 -r 3 once (the first try of this call lost its machine).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
VS=("X=0" "VKMOE_FUSED_ROUTER_IN_NORM=1" "VKMOE_FUSED_QKV_TOUCH=1")
{
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*' 2>&1 | grep -E -A5 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -12
VKMOE_FUSED_ROUTER_IN_NORM=1 VKMOE_FUSED_QKV_TOUCH=1 timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GpuForwardFusedMoe*' 2>&1 | grep -E -A5 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -12
} 2>&1 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
for v in "${VS[@]}"; do
  echo "--- $v"; env $v VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | cut -c1-200
done 2>&1 | tee $OUT/pipeline_stats.txt
for v in "${VS[@]}"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A17 "one layer's timeline"
done > $OUT/timelines.txt 2>&1
warm_up; echo "--- profile d0 (default)"; VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt
{
for r in 1 2; do
  for v in "${VS[@]}"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt

# Session 50 call 3: step A with its first keys' cache loads and the norm weights issued with its inputs and
# the slot sums' shuffle rounds outermost; default up to 384 positions. GPU tests; pipeline statistics;
# timelines at depth 0 with and without step A; the profile; tg128 at depth 0 and 4096 alternated with
# VKMOE_FUSED_ATTENTION=0 (two rounds); llama-bench -fa 1 once; step A's cost by depth.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*' 2>&1 | grep -E -A8 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -30
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GpuForwardFusedMoe*:ShaderAttention.Folded*' 2>&1 | grep -E -A8 'Failure|^\[  (PASSED|FAILED)|FAILED  \]' | tail -30
} 2>&1 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep "^pipeline moe_decode_fused" | sed 's/\[.*\]//' | tee $OUT/pipeline_stats.txt
for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- timeline $v d0"
  env $v VKMOE_FUSED_CLOCKS=1 $B/vkmoe bench -m $MODEL -p 0 -n 48 -r 1 --expert-stats 2>&1 | grep -A22 "one layer's timeline" | grep -v "expert statistics"
done > $OUT/timelines.txt 2>&1
warm_up; echo "--- profile d0 (default)"; VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt
{
for r in 1 2; do
  for v in "X=0" "VKMOE_FUSED_ATTENTION=0"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt
{
for v in "VKMOE_FUSED_ATTENTION_MAX=100000" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- $v d128,d256,d384,d512"; env $v timeout 100 $B/vkmoe bench -m $MODEL -d 128,256,384,512 -p 0 -n 64 -r 2 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/by_depth.txt

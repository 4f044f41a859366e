# Session 47 call 3: chained decode layers after the fix of call 2's bug (the token-start fill zeroed the q/k/v
# counter but not the attention's count, so from the second token on the block's waits passed at once; call 2's
# chained figures, all but VKMOE_CHAIN_LAYERS=qkv, are void), with exact waits (a count past its target
# fails the token). The changed kernels' GPU tests, the two chained engine tests three times; clocks at depth 0
# and 4096; tg128 at depth 0 and 4096, -r 3: chained polled by loads (default), by atomics, with the weights
# read ahead (VKMOE_CHAIN_PREFETCH=1), barriers; llama-bench -fa 1 -r 5; two rounds alternated.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.Folded*:ShaderMoeFused*:*GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_repeat=3 --gtest_filter='GpuForwardFusedMoeLong.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
VKMOE_CHAIN_POLL=atomics timeout 60 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='GpuForwardFusedMoeLong.Chained*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|^\[==' | tail -4
} | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for d in 0 4096; do
  warm_up; echo "--- clocks d$d chained"
  VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A36 "one layer's timeline"
done
for r in 1 2; do
  for v in "X=0" "VKMOE_CHAIN_POLL=atomics" "VKMOE_CHAIN_PREFETCH=1" "VKMOE_CHAIN_LAYERS=0"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

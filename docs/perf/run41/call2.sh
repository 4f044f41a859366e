# Session 47 call 2: chained decode layers with their counters on their own cache lines, polled by loads
# (default) or atomics (VKMOE_CHAIN_POLL=atomics), the block reading wo and the router ahead while it waits
# (default) or not (VKMOE_CHAIN_PREFETCH=0), each boundary alone (VKMOE_CHAIN_LAYERS=qkv / att) and barriers
# (VKMOE_CHAIN_LAYERS=0); the changed kernels' GPU tests; clocks at depth 0 with and without the prefetch; tg128
# at depth 0 and 4096, -r 3, two rounds alternated, and llama-bench -fa 1 -r 5 once per round.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.Folded*:ShaderMoeFused*:*GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -20 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for v in X=0 VKMOE_CHAIN_PREFETCH=0; do
  warm_up; echo "--- clocks d0 chained $v"
  env $v VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d 0 --expert-stats 2>&1 | grep -A36 "one layer's timeline"
done
for r in 1 2; do
  for v in "X=0" "VKMOE_CHAIN_PREFETCH=0" "VKMOE_CHAIN_POLL=atomics" "VKMOE_CHAIN_LAYERS=qkv" "VKMOE_CHAIN_LAYERS=att" "VKMOE_CHAIN_LAYERS=0"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

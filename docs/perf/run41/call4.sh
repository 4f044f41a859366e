# Session 47 call 4: chained decode layers only where the decoded token's keys split (the default now), against
# chained at any depth (VKMOE_CHAIN_LAYERS=1) and barriers (=0); the changed kernels' GPU tests; tg128 at
# depth 0 and 4096, -r 3, and llama-bench -fa 1 -r 5, two rounds alternated.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention.Folded*:ShaderMoeFused.Chained*:*GpuForwardFusedMoe*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do
  for v in "X=0" "VKMOE_CHAIN_LAYERS=1" "VKMOE_CHAIN_LAYERS=0"; do
    warm_up; echo "--- r$r vkmoe $v d0,d4096"; env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

# Session 54 call 3: ebe48f1 (step A by subgroups, the default) against VKMOE_FUSED_ATT_SUBGROUPS=0, three rounds
# alternated at depths 0 and 4096; tests on the H200; GPU time a token; llama-bench side by side.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_filter='ShaderMoeFused*:GpuForwardFusedMoe*:Archs/GpuForwardFusedMoe*:GpuForward.*:ShaderAttention.Decode*' 2>&1 | grep -E "^\[ +(PASSED|FAILED|OK) |Failure" | tail -80 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests.txt; grep -A3 Failure $OUT/tests.txt | head
{
for round in 1 2 3; do
  for v in "X=0" "VKMOE_FUSED_ATT_SUBGROUPS=0"; do
    warm_up; echo "--- round $round $v d0,d4096"
    env $v $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
for v in "X=0" "VKMOE_FUSED_ATT_SUBGROUPS=0"; do
  warm_up; echo "--- profile $v d0"; env $v VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep "GPU time per decoded"
done
} 2>&1 | tee $OUT/ab.txt

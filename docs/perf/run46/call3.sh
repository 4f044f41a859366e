# Session 53 call 3: the down rows touched into L2 before the gate/up barrier (VKMOE_FUSED_PREFETCH=4)
# against none, three rounds alternated; GPU time per token; llama-bench side by side.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
wait $SYN; cat $OUT/synth.txt
{
for round in 1 2 3; do
  for pf in 0 4; do
    warm_up; echo "--- round $round prefetch $pf d0,d4096"
    VKMOE_FUSED_PREFETCH=$pf $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
for pf in 0 4; do
  warm_up; echo "--- profile prefetch $pf d0"; VKMOE_FUSED_PREFETCH=$pf VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep "GPU time per decoded"
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/ab.txt

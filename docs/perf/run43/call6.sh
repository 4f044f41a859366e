# Session 50 call 6: the default build (step A up to 640 positions) side by side with llama-bench -fa 1 in one
# call; VKMOE_PROFILE=1 GPU time a token at depth 0.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama; wait $SYN; cat $OUT/synth.txt
{
warm_up; echo "--- vkmoe d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt
warm_up; echo "--- profile d0"; VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt

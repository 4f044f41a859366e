# Session 50 call 5: fc5b0e3's step A at depths 768 and 1024 against the attention apart (the default limit).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
qwen3_model > $OUT/synth.txt 2>&1; cat $OUT/synth.txt
for v in "VKMOE_FUSED_ATTENTION_MAX=100000" "VKMOE_FUSED_ATTENTION=0"; do
  warm_up; echo "--- $v d768,d1024"; env $v timeout 100 $B/vkmoe bench -m $MODEL -d 768,1024 -p 0 -n 64 -r 2 -o jsonl 2>/dev/null | samples
done 2>&1 | tee $OUT/by_depth.txt

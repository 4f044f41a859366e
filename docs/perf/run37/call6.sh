# Session 43 call 6 (af572e1 + two measuring knobs, uncommitted): grid barriers polling by atomic loads
# (VKMOE_MOE_FUSED_POLL=load) against adds of 0, its fused tests; decode attention's split targets at depth 4096
# (VKMOE_ATTN_SPLIT_KEYS / VKMOE_ATTN_SPLIT_WGS), two rounds alternated.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
VKMOE_MOE_FUSED_POLL=load timeout 60 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 3 -o jsonl"
{
for r in 1 2; do
  warm_up; echo "--- r$r poll add d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r poll load d0,d4096"; VKMOE_MOE_FUSED_POLL=load $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
done
for r in 1 2; do
  for s in 96,384 64,512 48,768 128,256 32,1024; do
    warm_up; echo "--- r$r split keys,wgs $s d4096"; VKMOE_ATTN_SPLIT_KEYS=${s%,*} VKMOE_ATTN_SPLIT_WGS=${s#*,} $B/vkmoe bench -m $MODEL -d 4096 $TG 2>/dev/null | samples
  done
done
warm_up; echo "--- profile d4096 split 64,512"; VKMOE_ATTN_SPLIT_KEYS=64 VKMOE_ATTN_SPLIT_WGS=512 VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -d 4096 -r 2 --expert-stats 2>&1 | grep -A8 "GPU time per decoded"
} 2>&1 | tee $OUT/sweep.txt

# For a later session: is the fused kernel's code, which run 47 found fetched anew every layer (~0.1 us a KB),
# fetched from L2 or from DRAM? The code probe on the Qwen3 file (~33 MB of weights a layer through the 50 MB
# L2) and on a 2-layer model whose ~20 MB of weights a token stay in L2; and the same with the fused kernel's
# weight loads marked Nontemporal (scripts/spirv_nontemporal.py, through VKMOE_SHADER_DIR), which might leave
# the L2 to the code. If the probe's first pass costs much less on the small model, the weight stream evicts it.
# Before the call, on the build machine (a build of experiment/code-pad-probe, or main with probe.diff applied):
#   bash scripts/pack_devbin.sh && mkdir -p devbin/nt && for k in moe_decode_fused moe_decode_fused_clock; do
#     python3 scripts/spirv_nontemporal.py build/shaders/$k.spv.h devbin/nt/$k.spv 2 3 4 5 15 16 17 18; done
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
SMALL=/tmp/small-l2.gguf
$B/vkmoe synth --preset qwen3-30b-a3b --set n_layer=2,n_embd=1024,n_head=8,n_head_kv=2,n_ff_exp=512,n_expert=8,n_expert_used=8,n_vocab=4096 -o $SMALL 2>&1 | tail -1
wait $SYN; cat $OUT/synth.txt
NT="VKMOE_SHADER_DIR=$PWD/devbin/nt"
{
for m in $SMALL $MODEL; do
  for s in "X=0" "$NT"; do
    for v in "X=0" "VKMOE_FUSED_CODE_PAD=128,1" "VKMOE_FUSED_CODE_PAD=256,1" "VKMOE_FUSED_CODE_PAD=256,2"; do
      warm_up; echo "--- timeline $(basename $m) $s $v d0"
      env $s $v VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $m -p 0 -n 32 -r 1 --expert-stats 2>&1 | grep -A18 "one layer's timeline" | head -19
    done
  done
done
} 2>&1 | tee $OUT/timelines.txt
{
for round in 1 2 3; do
  for s in "X=0" "$NT"; do
    warm_up; echo "--- round $round $s d0"; env $s $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  done
done
} 2>&1 | tee $OUT/ab.txt

# Session 46 call 1: where the one-token attention's time goes, by device clock (VKMOE_FUSED_CLOCKS=1 now also
# stamps the attention kernel): depth 0 and 4096, then depth 4096 under other split settings
# (VKMOE_ATTN_SPLIT=min_keys,target_workgroups; default 96,384) and without the split tail. GPU tests of the
# changed attention kernel and the engine's clock report first; tg128 of the build at the end.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention*:Archs/GpuForwardFusedMoe*:GpuForward.F16Kv*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
clocks() {  # label, depth, env...
  local l=$1 d=$2; shift 2
  warm_up; echo "--- clocks d$d $l"
  env "$@" VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A30 "one layer's timeline"
}
{
clocks default 0 X=0
clocks default 4096 X=0
for sp in 96,192 128,256 64,512 192,128 256,64; do clocks "split $sp" 4096 VKMOE_ATTN_SPLIT=$sp; done
clocks "no tail" 4096 VKMOE_ATTN_SPLIT_TAIL=0
clocks "no subgroup rows" 4096 VKMOE_ATTN_SUBGROUP_ROWS=0
warm_up; echo "--- tg128 d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/clocks.txt

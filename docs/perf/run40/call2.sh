# Session 46 call 2: the attention's split-K partials combined in the fused MoE block (default) against the
# attention's split tail (VKMOE_FUSED_ATT_SPLITS=0): GPU tests of the changed kernels and the engine; clocks at
# depth 0 and 4096 both ways and at depth 4096 under other split settings; tg128 at depth 0 and 4096 both ways
# and llama-bench -fa 1, alternated two rounds, -r 5.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention*:ShaderMoeFused*:*GpuForwardFusedMoe*:GpuForward.F16Kv*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
clocks() {  # label, depth, env...
  local l=$1 d=$2; shift 2
  warm_up; echo "--- clocks d$d $l"
  env "$@" VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A34 "one layer's timeline"
}
{
clocks "block combine" 0 X=0
clocks "block combine" 4096 X=0
clocks "split tail" 4096 VKMOE_FUSED_ATT_SPLITS=0
for sp in 64,512 96,512 128,256 128,384; do clocks "block combine, split $sp" 4096 VKMOE_ATTN_SPLIT=$sp; done
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe block combine d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe split tail d0,d4096"; VKMOE_FUSED_ATT_SPLITS=0 $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

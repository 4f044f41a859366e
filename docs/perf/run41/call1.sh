# Session 47 call 1: chained decode layers (the attention and the fused MoE block wait for each other by
# counters instead of barriers; VKMOE_CHAIN_LAYERS=0: barriers). GPU tests of the changed kernels and the engine
# on the H200's own grid; clocks at depth 0 and 4096 both ways; tg128 at depth 0 and 4096 both ways and
# llama-bench -fa 1, alternated two rounds, -r 5.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention*:ShaderMoeFused*:*GpuForward*:*Prefill*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -20 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
clocks() {  # label, depth, env...
  local l=$1 d=$2; shift 2
  warm_up; echo "--- clocks d$d $l"
  env "$@" VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A36 "one layer's timeline\|chained decode"
}
{
clocks "chained" 0 X=0
clocks "barriers" 0 VKMOE_CHAIN_LAYERS=0
clocks "chained" 4096 X=0
clocks "barriers" 4096 VKMOE_CHAIN_LAYERS=0
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe chained d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe barriers d0,d4096"; VKMOE_CHAIN_LAYERS=0 $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

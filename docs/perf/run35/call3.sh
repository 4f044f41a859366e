# Session 41 call 3 (e251c1a): GPU tests; in place, alternated: default (four prompt folds) / the router and k/v
# sums apart (VKMOE_TOPK_SUMS_ROUTER=0 VKMOE_ROPE_SUMS_KV=0) / all four apart / llama-bench -fa 1; a profile;
# tg128 of both programs (decode unchanged; a check).
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 260 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*:ShaderTrunk.*:ShaderMoe.*:ShaderAttention.*:Prefill.*:GpuForward.*:GpuOffload.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
NEW="VKMOE_TOPK_SUMS_ROUTER=0 VKMOE_ROPE_SUMS_KV=0"
ALL="$NEW VKMOE_PROMPT_COMBINE_NORM=0 VKMOE_PROMPT_FFN_NORM=0"
{
for r in 1 2 3; do
  warm_up; echo "--- round $r default $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r two apart $(date +%T)"; env $NEW $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r four apart $(date +%T)"; env $ALL $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- profile default"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A18 "GPU time per prompt"
warm_up; echo "--- tg128 vkmoe"; $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
warm_up; echo "--- tg128 llama-bench -fa 1"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/side_by_side.txt

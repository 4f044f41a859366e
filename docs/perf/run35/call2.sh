# Session 41 call 2 (8161a56): GPU tests; in place, alternated: both prompt norm folds (default) / neither
# (VKMOE_PROMPT_COMBINE_NORM=0 VKMOE_PROMPT_FFN_NORM=0) / llama-bench -fa 1; a profile; offload-mode loads
# with and without VKMOE_PARALLEL_UPLOAD; the 4096-token prompt of both programs with peak VRAM.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*:ShaderTrunk.*:ShaderMoe.*:Prefill.*:GpuForward.*:GpuOffload.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do
  warm_up; echo "--- round $r folds $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r apart $(date +%T)"; VKMOE_PROMPT_COMBINE_NORM=0 VKMOE_PROMPT_FFN_NORM=0 $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- profile folds"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A18 "GPU time per prompt"
} 2>&1 | tee $OUT/side_by_side.txt
{
for v in 1 0; do
  echo "--- 12 GiB, VKMOE_PARALLEL_UPLOAD=$v"; VKMOE_PARALLEL_UPLOAD=$v $B/vkmoe bench -m $MODEL --vram-budget 12GiB -p 512 -n 0 -r 3 2>&1 | tr '\r' '\n' | grep -E "done,|pp512"
  echo "--- cpu-moe, VKMOE_PARALLEL_UPLOAD=$v"; VKMOE_PARALLEL_UPLOAD=$v $B/vkmoe bench -m $MODEL --moe-mode cpu-moe -p 512 -n 0 -r 3 2>&1 | tr '\r' '\n' | grep -E "done,|pp512"
done
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 0 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 3 -fa 1
} 2>&1 | tee $OUT/loads_ttft.txt

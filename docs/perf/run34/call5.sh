# Session 40 call 5 (c727cc7): GPU tests (token rows decoded on the GPU, GEMMs on f16 rows); three
# rounds of vkmoe (default, VKMOE_GPU_EMBED=0) alternated with llama-bench -fa 1 on the same file;
# one llama-bench -fa 0 round; time to first token for 4096 tokens with peak VRAM; host/GPU time of
# each ubatch (VKMOE_PROFILE=2) and a per-step profile.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderTrunk*:Prefill*:GpuForward*:Paths/GemmCoopmat.Dense/coopmat_Q4_K' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==|SKIPPED \]' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2 3; do
  for v in gpu_embed host_embed; do
    e=VKMOE_X=1; [ $v = host_embed ] && e=VKMOE_GPU_EMBED=0
    warm_up; echo "--- round $r vkmoe $v $(date +%T)"; env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- llama-bench -fa 0 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 0 -o jsonl 2>/dev/null | samples
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; echo "--- host and GPU time of each ubatch"; VKMOE_PROFILE=2 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --progress 2>&1 | grep -E "vkmoe bench|time of"
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
} 2>&1 | tee "$OUT/side_by_side.txt"

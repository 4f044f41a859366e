# Session 45 call 1: the expert down product's rows by routing pair (Activations::eo without the padding
# slots' rows) and the split tail's partial loads 16 in flight (TAIL_LOADS). GPU tests of the changed
# kernels (every GEMM path's expert-grouped form, MoE table and combine, attention, every GpuForward test);
# peak VRAM of vkmoe and llama-bench -fa 1 at context 128 (-p 0 -n 128) and 4224 (-d 0,4096); pp512 and
# the profile of a prompt; tg128 at depth 0 and 4096 with VKMOE_ATTN_TAIL_LOADS=8 (the kernel before),
# 16 (the default) and 32, and llama-bench -fa 1, alternated two rounds, -r 5.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Indexed*:GemmCoopmat*:ShaderMoe.*:ShaderAttention*:GpuForward.*:Archs/GpuForward*:*Prefill*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up; run $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 5
warm_up; echo "--- profile pp512"; VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per prompt" | grep -v "expert statistics"
for r in 1 2; do
  for t in 8 16 32; do
    warm_up; echo "--- r$r vkmoe TAIL_LOADS=$t d0,d4096"; VKMOE_ATTN_TAIL_LOADS=$t $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  done
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

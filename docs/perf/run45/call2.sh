# Session 52 call 2: attn_flash with two key/value tiles in shared memory (new build, devbin; the first two
# loaded before the wait) against 246cc2b (devbin_old); tests on the H200; timelines; llama-bench side by side.
set -uo pipefail
source scripts/device_env.sh
xz -d -k devbin_old/vkmoe.xz
echo "build $(cat devbin/HEAD), old $(cat devbin_old/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_filter='ShaderAttention.Decode*:ShaderAttention.Folded*:ShaderAttention.Split*:ShaderMoeFused*:GpuForwardFusedMoe*' 2>&1 | grep -E "^\[ +(PASSED|FAILED|OK) |Failure|runs with|cases with" | tail -60 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -4 $OUT/tests.txt
{
for round in 1 2; do
  warm_up; echo "--- round $round old d0,d4096";  devbin_old/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new d0,d4096";  $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- new d1024,d2048"; $B/vkmoe bench -m $MODEL -d 1024,2048 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/ab.txt
{
for b in devbin_old $B; do
  warm_up; echo "--- timeline $b d4096"
  VKMOE_FUSED_CLOCKS=1 timeout 60 $b/vkmoe bench -m $MODEL -d 4096 -p 0 -n 16 -r 1 --expert-stats 2>&1 | grep -B2 -A12 "attention between them"
done
} > $OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
warm_up; echo "--- profile d0"; VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt

# Session 51 call 3: Q6_K/Q8_0 blocks read as aligned words (new build, devbin) against the one-pipeline build
# before it (fb6c559, devbin_old); llama-bench -fa 1 side by side; tests on the H200; per-layer timeline;
# GPU time a token; step A by 4 (2) workgroups a head at depth 4096 (2048) against the attention apart.
set -uo pipefail
source scripts/device_env.sh
xz -d -k devbin_old/vkmoe.xz
echo "build $(cat devbin/HEAD), old $(cat devbin_old/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 200 $B/vkmoe_tests --gtest_filter='ShaderMatvec*:ShaderMoeFused*:GpuForwardFusedMoe*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |^\[  FAILED|SKIPPED|Failure|error" | tail -80 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests.txt
{
for round in 1 2; do
  warm_up; echo "--- round $round old d0";  devbin_old/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new d0";  $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- old d4096";  devbin_old/vkmoe bench -m $MODEL -d 4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
warm_up; echo "--- new d0,d4096";  $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
for d in 2048 4096; do
  warm_up; echo "--- new d$d splits=4 max=1100"; VKMOE_FUSED_ATTENTION_SPLITS=4 VKMOE_FUSED_ATTENTION_MAX=1100 $B/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- new d$d default"; $B/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/ab.txt
{
warm_up; echo "--- timeline new d0"
VKMOE_FUSED_CLOCKS=1 VKMOE_FUSED_CLOCKS_LAYERS=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 32 -r 1 --expert-stats 2>&1 | grep -A72 "one layer's timeline"
warm_up; echo "--- timeline new d4096 splits=4 max=1100"
VKMOE_FUSED_ATTENTION_SPLITS=4 VKMOE_FUSED_ATTENTION_MAX=1100 VKMOE_FUSED_CLOCKS=1 timeout 60 $B/vkmoe bench -m $MODEL -d 4096 -p 0 -n 16 -r 1 --expert-stats 2>&1 | grep -A24 "one layer's timeline"
} > $OUT/timelines.txt 2>&1
warm_up; echo "--- profile d0"; VKMOE_PROFILE=1 timeout 40 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A12 "GPU time per decoded" | grep -v "expert statistics" | tee $OUT/profile.txt

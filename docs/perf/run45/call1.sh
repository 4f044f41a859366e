# Session 52 call 1: attn_flash's first tile loaded before the wait for its inputs, the rope's cos/sin
# too, and its tile loops unrolled with four running sums a score (new build, devbin) against af50375
# (devbin_old, the same code as 94e34f9); split sweeps at depth 4096; timelines; llama-bench side by side.
set -uo pipefail
source scripts/device_env.sh
xz -d -k devbin_old/vkmoe.xz
echo "build $(cat devbin/HEAD), old $(cat devbin_old/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 150 $B/vkmoe_tests --gtest_filter='ShaderAttention*:ShaderMoeFused*:GpuForwardFusedMoe*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |^\[  FAILED|SKIPPED|Failure|error" | tail -80 > $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt; tail -3 $OUT/tests.txt
{
for round in 1 2; do
  warm_up; echo "--- round $round old d0,d4096";  devbin_old/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $round new d0,d4096";  $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for s in 64,512 128,256 160,192; do
  warm_up; echo "--- new d4096 VKMOE_ATTN_SPLIT=$s"; VKMOE_ATTN_SPLIT=$s $B/vkmoe bench -m $MODEL -d 4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for d in 1024 2048; do
  warm_up; echo "--- old d$d"; devbin_old/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- new d$d"; $B/vkmoe bench -m $MODEL -d $d -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for mx in 256 384 1100; do
  warm_up; echo "--- new d512,d1024 VKMOE_FUSED_ATTENTION_MAX=$mx"; VKMOE_FUSED_ATTENTION_MAX=$mx $B/vkmoe bench -m $MODEL -d 512,1024 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
warm_up; echo "--- llama-bench -fa 1 d0,d4096"; timeout 100 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | samples
} 2>&1 | tee $OUT/ab.txt
{
for b in devbin_old $B; do
  warm_up; echo "--- timeline $b d4096"
  VKMOE_FUSED_CLOCKS=1 timeout 60 $b/vkmoe bench -m $MODEL -d 4096 -p 0 -n 16 -r 1 --expert-stats 2>&1 | grep -B2 -A12 "attention between them"
done
} > $OUT/timelines.txt 2>&1
cat $OUT/timelines.txt

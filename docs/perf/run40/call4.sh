# Session 46 call 4: the folded rope prologue with its norm weights in shared memory and its angles before the
# first barrier (693f4d2, devbin/vkmoe) against the build before it (cc6fce9, devbin/vkmoe_prev): attention GPU
# tests; the attention timeline at depth 0 and 4096; tg128 at depth 0 and 4096 both builds and llama-bench -fa 1,
# alternated two rounds, -r 5.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD), previous $(cat devbin/PREV)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
xz -dkf devbin/vkmoe_prev.xz && chmod +x devbin/vkmoe_prev
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderAttention*:GpuForward.F16Kv*:GpuForwardFusedMoeLong*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -14 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
{
for d in 0 4096; do
  warm_up; echo "--- clocks d$d"; VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A12 "attention between"
done
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe $(cat devbin/HEAD) d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe $(cat devbin/PREV) d0,d4096"; $B/vkmoe_prev bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee $OUT/side_by_side.txt

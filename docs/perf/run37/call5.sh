# Session 43 call 5 (q/k/v step opt-in): GPU tests; profiles at depth 0 and 4096 of the default (output projection
# in the fused dispatch) and with VKMOE_FUSED_QKV=1; tg128 at depth 0 and 4096, alternated, two rounds: default /
# VKMOE_FUSED_QKV=1 / llama-bench -fa 1; peak VRAM.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
timeout 120 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:Archs/GpuForwardFusedMoe*:GpuForward.Int8*:GpuForward.LongContext*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 5 -o jsonl"
{
for s in "" "VKMOE_FUSED_QKV=1"; do
  for d in 0 4096; do
    warm_up; echo "--- profile d$d ${s:-default}"; env $s VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -d $d -r 2 --expert-stats 2>&1 | grep -A8 "GPU time per decoded"
  done
done
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe VKMOE_FUSED_QKV=1 d0,d4096"; VKMOE_FUSED_QKV=1 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 120 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
} 2>&1 | tee $OUT/side_by_side.txt

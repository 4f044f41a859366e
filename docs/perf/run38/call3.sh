# Session 44 call 3 (c0fb718; devbin_old: f227f32, the session's start): fused and top-k tests on the H200; the
# clock timeline with and without the router fold (VKMOE_FUSED_ROUTER_FOLD=0) at depth 0, the default at 4096;
# then side by side, alternated two rounds: c0fb718 / f227f32 / llama-bench -fa 1,
# tg128 at depth 0 and 4096, -r 5; peak VRAM.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
mkdir -p /tmp/old && xz -dc devbin_old/vkmoe.xz > /tmp/old/vkmoe && chmod +x /tmp/old/vkmoe
timeout 150 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderMoeFused.*:Archs/GpuForwardFusedMoe*:ShaderMoe.Topk*:ShaderMoe.RouterMatvecTopk*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|^\[==' | tail -12 | tee $OUT/tests.txt
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 5 -o jsonl"
{
for c in "d0" "d4096"; do
  set -- $c; d=${1#d}; shift
  warm_up; echo "--- clocks d$d ${*:-default}"; env "$@" VKMOE_FUSED_CLOCKS=1 VKMOE_PROFILE=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A30 "GPU time per decoded" | grep -v "expert statistics"
done
warm_up; echo "--- profile f227f32"; VKMOE_PROFILE=1 timeout 90 /tmp/old/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A10 "GPU time per decoded" | grep -v "expert statistics"
for r in 1 2; do
  warm_up; echo "--- r$r vkmoe c0fb718 d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe f227f32 d0,d4096"; /tmp/old/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
} 2>&1 | tee $OUT/side_by_side.txt

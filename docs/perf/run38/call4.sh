# Session 44 call 4 (5adeb62, this session's final kernel; devbin_old: f227f32, the session's start): fused and
# top-k tests on the H200; profiles without clocks (5adeb62, f227f32) and the clock timeline (stamps now in device
# memory) at depth 0 and 4096; decode attention's existing switches at depth 4096 with the new block (split tail
# off, subgroup rows off); side by side, alternated three rounds: 5adeb62 / f227f32 / llama-bench -fa 1, tg128 at
# depth 0 and 4096, -r 5; peak VRAM.
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
for b in $B/vkmoe /tmp/old/vkmoe; do
  warm_up; echo "--- profile $b d0"; VKMOE_PROFILE=1 timeout 90 $b bench -m $MODEL -p 0 -n 64 -r 2 --expert-stats 2>&1 | grep -A10 "GPU time per decoded" | grep -v "expert statistics"
done
for d in 0 4096; do
  warm_up; echo "--- clocks d$d"; VKMOE_FUSED_CLOCKS=1 timeout 90 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 2 -d $d --expert-stats 2>&1 | grep -A16 "one layer's timeline"
done
for s in VKMOE_ATTN_SPLIT_TAIL=0 VKMOE_ATTN_SUBGROUP_ROWS=0; do
  warm_up; echo "--- $s d0,d4096"; env $s $B/vkmoe bench -m $MODEL -d 0,4096 -p 0 -n 128 -r 3 -o jsonl 2>/dev/null | samples
done
for r in 1 2 3; do
  warm_up; echo "--- r$r vkmoe 5adeb62 d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe f227f32 d0,d4096"; /tmp/old/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 150 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -fa 1
} 2>&1 | tee $OUT/side_by_side.txt

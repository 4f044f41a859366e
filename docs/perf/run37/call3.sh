# Session 43 call 3 (e72690d): profiles of the fused dispatch with both extra steps (default), with the output
# projection only (VKMOE_FUSED_QKV=0) and of the block alone; then side by side, alternated three rounds:
# default / out proj only / llama-bench -fa 1, tg128 at depth 0 and 4096; peak VRAM.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
wait $SYN; cat $OUT/synth.txt
TG="-p 0 -n 128 -r 5 -o jsonl"
{
for s in "" "VKMOE_FUSED_QKV=0" "VKMOE_FUSED_OUT_PROJ=0 VKMOE_FUSED_QKV=0"; do
  warm_up; echo "--- profile ${s:-default}"; env $s VKMOE_PROFILE=1 timeout 60 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 3 --expert-stats 2>&1 | grep -A12 "GPU time per decoded"
done
for r in 1 2 3; do
  warm_up; echo "--- r$r vkmoe d0,d4096"; $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r vkmoe out proj only d0,d4096"; VKMOE_FUSED_QKV=0 $B/vkmoe bench -m $MODEL -d 0,4096 $TG 2>/dev/null | samples
  warm_up; echo "--- r$r llama-bench -fa 1 d0,d4096"; timeout 120 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
warm_up; run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3
} 2>&1 | tee $OUT/side_by_side.txt

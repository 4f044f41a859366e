# Session 40 call 9 (b10664c): two alternated rounds of vkmoe and llama-bench -fa 1 on the same file.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
unpack_llama
{
for r in 1 2; do
  warm_up; echo "--- round $r vkmoe $(date +%T)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  warm_up; echo "--- round $r llama-bench -fa 1 $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa 1 -o jsonl 2>/dev/null | samples
done
} 2>&1 | tee "$OUT/side_by_side.txt"

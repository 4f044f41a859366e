set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
qwen3_model
for d in 0 4096; do
  echo "--- profile d$d"
  VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -d $d -r 1 --expert-stats 2>&1 | sed -n '/per decoded token/,/output head/p'
done | tee "$OUT/profile.txt"
unpack_llama
{
warm_up
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --vram-budget 12GiB
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 20 -fa 1
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 48 -fa 1
} 2>&1 | grep -E '^---|^\| |^peak' | tee "$OUT/side_by_side.txt"

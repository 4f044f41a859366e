set -uo pipefail
source scripts/device_env.sh
qwen3_model
{
for v in main dense1; do
  bin=$B/vkmoe; [ $v = dense1 ] && bin=$B/vkmoe_dense1
  warm_up; echo "--- profile $v"; VKMOE_PROFILE=1 $bin bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A40 "GPU time per prompt"
done
warm_up; echo "--- decode profile d0"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 --expert-stats 2>&1 | grep -A40 "GPU time per decoded"
warm_up; echo "--- decode profile d4096"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -d 4096 -r 1 --expert-stats 2>&1 | grep -A40 "GPU time per decoded"
} 2>&1 | tee "$OUT/profiles.txt"

set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/Flags:.*\(avx512[a-z_]*\).*/Flags: ...avx512.../' | head -3
grep -o 'avx512[a-z_]*\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
qwen3_model
unpack_llama
$B/vkmoe bench -m $MODEL -p 0 -n 8 -r 1 >/dev/null 2>&1
for d in 0 4096; do
  echo "--- profile d$d"
  VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 32 -d $d -r 1 --expert-stats 2>&1 | sed -n '/per decoded token/,/output head/p'
done | tee "$OUT/profile.txt"
{
warm_up
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
warm_up
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --vram-budget 12GiB
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 20 -fa 1
run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -r 3 -ncmoe 48 -fa 1
} 2>&1 | grep -E '^---|^\| |^peak' | tee "$OUT/side_by_side.txt"

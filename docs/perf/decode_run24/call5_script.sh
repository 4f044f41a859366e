set -uo pipefail
source scripts/device_env.sh
CONFIGS=("main|devbin" "live1600|devbin|VKMOE_SHADER_DIR=$PWD/devbin_live")
{
for pass in 1 2; do
  for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r label bin envs <<< "$cfg"
    echo "--- pass $pass $label"
    env $envs VKMOE_PIPELINE_STATS=$((pass == 1)) $B/vkmoe bench-shaders --kernels attn_decode --attn-depths 64,4096 2>&1 | grep -E "attn_|pipeline attn"
  done
done
} 2>&1 | tee "$OUT/attn_bench.txt"
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh "${CONFIGS[@]}"

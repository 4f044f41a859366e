set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "main|devbin" "nt_w|devbin|VKMOE_SHADER_DIR=$PWD/devbin_nt_w" "nt_wkv|devbin|VKMOE_SHADER_DIR=$PWD/devbin_nt_wkv" \
  "br8|devbin|VKMOE_ATTN_DECODE_BR=8"
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"

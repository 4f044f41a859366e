#!/usr/bin/env bash
# The experts' down product on int8 input (matvec_q8x's GLU variant) on the
# lent GPU machine: bench-shaders of Qwen3-30B-A3B's down shape (768x2048,
# top-8 of 128, SwiGLU input) on f32 and on int8 input over launch shapes
# (twice), then resident decode in place with VKMOE_Q8X_GLU=1 against the
# default, alternated (ROUNDS, default 2), and llama-bench in the same call.
# Carry devbin/ (scripts/pack_devbin.sh), .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
qwen3_model
warm_up
for pass in 1 2; do
  # WG:TPR:RPT:SG:PF:QX; a Q4_K row of 768 has 12 int8 units, a Q6_K row 12 as well
  for cfg in 0:0:0:1:0:0 0:0:0:1:0:1 128:4:4:1:0:1 128:8:4:1:0:1 128:8:2:1:0:1 128:16:2:1:0:1 128:4:8:1:0:1 \
      64:4:4:1:0:1 256:8:4:1:0:1; do
    $B/vkmoe bench-shaders --kernels q4_k_ids,q6_k_ids --ids-shapes 768x2048:8 --glu --config $cfg 2>&1 | grep -E "_ids"
  done
done 2>&1 | tee -a "$OUT/down_bench.txt"
ROUNDS=${ROUNDS:-2} LLAMA=0 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" \
  scripts/perf_prefill_ab.sh "main|devbin||" "int8-down|devbin|VKMOE_Q8X_GLU=1|"
if [ -f anchors/llama.tar.xz ]; then
  unpack_llama
  run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee -a "$OUT/llama_decode.txt"
fi

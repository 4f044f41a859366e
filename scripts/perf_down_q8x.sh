#!/usr/bin/env bash
# The experts' down product on int8 input (matvec_q8x's GLU variant) on the
# lent GPU machine: bench-shaders of Qwen3-30B-A3B's down shape (768x2048,
# top-8 of 128, SwiGLU input) with the engine's default launch shapes on f32
# and int8 input, the int8 tests, then resident decode in place by default
# (int8 for Q4_K/Q5_K down products) against VKMOE_Q8X_GLU=0, alternated
# (ROUNDS, default 3), and llama-bench in the same call.
# Carry devbin/ (scripts/pack_devbin.sh), .gl/ and anchors/llama.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
qwen3_model
warm_up
for pass in 1 2; do
  for cfg in 0:0:0:1:0:0 0:0:0:1:0:1; do  # WG:TPR:RPT:SG:PF:QX (0: the default)
    $B/vkmoe bench-shaders --kernels q4_k_ids,q6_k_ids --ids-shapes 768x2048:8 --glu --config $cfg 2>&1 | grep -E "_ids"
  done
done 2>&1 | tee -a "$OUT/down_bench.txt"
timeout 300 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Int8Activation*:*GluInput*' 2>&1 | tail -3 | tee "$OUT/int8_tests.txt"
ROUNDS=${ROUNDS:-3} LLAMA=0 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" \
  scripts/perf_prefill_ab.sh "int8-down|devbin||" "f32-down|devbin|VKMOE_Q8X_GLU=0|"
if [ -f anchors/llama.tar.xz ]; then
  unpack_llama
  run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee -a "$OUT/llama_decode.txt"
fi

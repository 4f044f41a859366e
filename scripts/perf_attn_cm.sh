#!/usr/bin/env bash
# The cooperative-matrix prompt attention (shaders/attn_flash_cm.comp) on the
# lent GPU machine: its tests (with the default subgroups per workgroup and
# each of SWEEP, VKMOE_ATTN_CM_SUBGROUPS), resident prompt processing of the
# default, each of SWEEP and VKMOE_ATTN_COOPMAT=0 (the scalar flash kernel)
# alternated in one binary (pp512/pp2048, then a 4096-token prompt),
# llama-bench on the same file when anchors/ was carried, then the prefill
# tests each in its own process. Carry devbin/, .gl/ (and anchors/llama.tar.xz).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
qwen3_model > "$OUT/synth.txt" 2>&1 &
SWEEP=${SWEEP:-8}
for n in default $SWEEP; do
  echo "--- ShaderAttention, subgroups $n"
  ( [ $n = default ] || export VKMOE_ATTN_CM_SUBGROUPS=$n
    $B/vkmoe_tests --gtest_brief=1 --gtest_filter="ShaderAttention.${TESTS:-*}" 2>&1 | grep -E "worst|PASSED|FAILED|Failure|rel_err" )
done 2>&1 | tee "$OUT/attn_tests.txt"
wait
cfgs=("scalar|$B|VKMOE_ATTN_COOPMAT=0" "coopmat|$B|")
for n in $SWEEP; do cfgs+=("coopmat-${n}sg|$B|VKMOE_ATTN_CM_SUBGROUPS=$n"); done
OUT=$OUT bash "$(dirname "$0")/perf_prefill_ab.sh" "${cfgs[@]}"
OUT=$OUT LLAMA=0 ROUNDS=1 ARGS="-p 4096 -n 0 -r 1 --moe-mode resident" bash "$(dirname "$0")/perf_prefill_ab.sh" "${cfgs[@]}"
if [ -f anchors/llama.tar.xz ]; then
  for fa in 0 1; do run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa $fa; done 2>&1 | tee -a "$OUT/prefill_ab.txt"
fi
OUT=$OUT GTEST_FILTER="${FORWARD_TESTS:-*Prefill*}" bash "$(dirname "$0")/device_run.sh" each

#!/usr/bin/env bash
# A/B of prompt processing on the lent GPU machine: configurations alternated
# over ROUNDS rounds (default 2), each after ~1 s of GPU load, on the synthetic
# Qwen3-30B-A3B file, then llama.cpp's llama-bench on the same file when
# anchors/llama.tar.xz was carried (LLAMA=0 skips it).
# A configuration is "label|build dir|VAR=value ...|extra bench arguments"
# (environment and arguments optional).
# usage: [ROUNDS=N] [ARGS="vkmoe bench arguments"] scripts/perf_prefill_ab.sh CONFIG...
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
qwen3_model
read -r -a args <<< "${ARGS:--p 512,2048 -n 0 -r 3 --moe-mode resident}"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for cfg in "$@"; do
    IFS='|' read -r label bin envs extra <<< "$cfg"
    warm_up
    echo "--- round $round $label ($bin${envs:+, $envs}${extra:+, $extra}) $(date +%T)"
    ( [ -n "$envs" ] && export $envs; peak $bin/vkmoe bench -m $MODEL "${args[@]}" $extra ) 2>&1 | grep -E "^\| qwen|^peak"
  done
done 2>&1 | tee -a "$OUT/prefill_ab.txt"
if [ "${LLAMA:-1}" = 1 ] && [ -f anchors/llama.tar.xz ]; then
  unpack_llama
  for fa in 0 1; do
    echo "--- llama-bench -fa $fa"
    peak /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa $fa 2>&1 | grep -E "^\| |^peak"
  done 2>&1 | tee -a "$OUT/prefill_ab.txt"
fi

#!/usr/bin/env bash
# A/B decode on the lent GPU machine: the builds in BINS (default devbin_base
# devbin) alternated over ROUNDS rounds (default 2), each run after ~1 s of GPU
# load so none starts at the idle clock (an idle H100 sits at 345 MHz), on the
# synthetic Qwen3-30B-A3B file; PROFILE=1 prints each run's per-step GPU time
# per decoded token (VKMOE_PROFILE, with --expert-stats). Carry devbin/, the other builds and .gl/.
# usage: [ROUNDS=N] [BINS="a b"] [PROFILE=1] scripts/perf_ab.sh [vkmoe bench arguments]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
qwen3_model
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-p 0 -n 128 -r 5 --moe-mode resident)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BINS:-devbin_base devbin}; do
    warm_up
    echo "--- round $round $b $(date +%T)"
    VKMOE_PROFILE=${PROFILE:-} LD_LIBRARY_PATH=$PWD/$b/lib:$LD_LIBRARY_PATH $b/vkmoe bench -m $MODEL "${args[@]}" ${PROFILE:+--expert-stats} 2>&1 |
      if [ -n "${PROFILE:-}" ]; then sed -n '/per decoded token/,/^expert/p'; else grep -E "^\| qwen"; fi
  done
done 2>&1 | tee -a "$OUT/ab.txt"

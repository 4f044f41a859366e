#!/usr/bin/env bash
# Decode figures on the lent GPU machine: vkmoe's resident and 12 GiB decode
# (tg128 at depth 0 and 4096) and its per-step GPU profile, for the build in
# devbin/ and, when carried, a baseline build in devbin_base/, beside
# llama.cpp's llama-bench on the same synthetic Qwen3-30B-A3B file in the same
# call. Carry devbin/ (scripts/pack_devbin.sh), devbin_base/, .gl/ and
# anchors/llama.tar.xz.
# usage: [MODES="--moe-mode resident,..."] [LLAMA_MODES="-fa 1,..."] scripts/perf_decode.sh [profile] [bench] [llama]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
qwen3_model
bins=devbin
[ -d devbin_base ] && bins="devbin_base devbin"
for step in "${@:-profile bench llama}"; do
  for s in $step; do
    echo "=== $s ($(date +%T))"
    case $s in
      profile)
        for b in $bins; do
          echo "--- $b"
          VKMOE_PROFILE=1 LD_LIBRARY_PATH=$PWD/$b/lib:$LD_LIBRARY_PATH $b/vkmoe bench -m $MODEL -p 16 -n 64 -r 1 --expert-stats \
            --moe-mode resident 2>&1 | grep -v uploading
        done 2>&1 | tee -a "$OUT/profile.txt" ;;
      bench)
        for b in $bins; do
          IFS=, read -ra modes <<< "${MODES:---moe-mode resident,--vram-budget 12GiB}"
          for a in "${modes[@]}"; do
            run env LD_LIBRARY_PATH=$PWD/$b/lib:$LD_LIBRARY_PATH $b/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 $a
          done
        done 2>&1 | tee -a "$OUT/vkmoe_decode.txt" ;;
      llama)
        unpack_llama
        IFS=, read -ra lmodes <<< "${LLAMA_MODES:--fa 1,-fa 0,-ncmoe 20 -fa 1}"
        for a in "${lmodes[@]}"; do
          run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 $a
        done 2>&1 | tee -a "$OUT/llama_decode.txt" ;;
      *) echo "unknown step $s" ;;
    esac
  done
done

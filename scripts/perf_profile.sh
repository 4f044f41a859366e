#!/usr/bin/env bash
# GPU-side diagnostics on the synthetic Qwen3-30B-A3B shapes: GPU time per step
# (VKMOE_PROFILE=1) of resident prompt ubatches and decoded tokens, the
# cooperative-matrix GEMM per tile (GemmCoopmatBench) and matrix-vector launch
# shapes (bench-shaders --sweep). Each part runs after some GPU load: an idle
# H100 sits at 345 MHz and the first tests after a pause ran 2-5x slower.
# shapes: the default launch shapes of those products, for devbin/ and (when
# carried) devbin_base/.
# Carry devbin/ and .gl/.   usage: scripts/perf_profile.sh [profile|gemm|sweep|shapes|all]...
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
for what in "${@:-all}"; do
  if [ "$what" = all ] || [ "$what" = gemm ]; then
    warm_up
    VKMOE_COOPMAT_BENCH=1 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*coopmat' 2>&1 |
      grep -E "TFLOP|OK|FAIL|Skipped|rror" | tee -a "$OUT/gemm_bench.txt"
  fi
  if [ "$what" = all ] || [ "$what" = sweep ]; then
    warm_up
    { $B/vkmoe bench-shaders --kernels f32 --shapes 2048x128 --sweep
      $B/vkmoe bench-shaders --kernels q4_k --shapes 4096x2048,2048x512,2048x4096 --sweep
      $B/vkmoe bench-shaders --kernels q6_k --shapes 768x2048,2048x512 --sweep
      $B/vkmoe bench-shaders --kernels q4_k_ids,q6_k_ids --ids-shapes 2048x768:8,768x2048:8 --sweep; } 2>&1 |
      tee -a "$OUT/sweep.txt" | grep -v "^ *$" | tail -5
  fi
  if [ "$what" = all ] || [ "$what" = shapes ]; then
    warm_up
    for b in devbin_base devbin; do
      [ -d $b ] || continue
      echo "--- $b"
      $b/vkmoe bench-shaders --kernels f32 --shapes 2048x128
      $b/vkmoe bench-shaders --kernels q4_k,q6_k --shapes 4096x2048,2048x512,2048x4096,768x2048
      $b/vkmoe bench-shaders --kernels q4_k_ids --experts 128
    done 2>&1 | grep -E "^---|^(f32|q4_k|q6_k)" | tee -a "$OUT/shapes.txt"
  fi
  if [ "$what" = all ] || [ "$what" = profile ]; then
    qwen3_model
    warm_up
    VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 64 -r 3 --moe-mode resident --expert-stats 2>&1 |
      grep -v "uploading" | tee -a "$OUT/profile.txt"
  fi
done

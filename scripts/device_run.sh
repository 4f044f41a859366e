#!/usr/bin/env bash
# Runs on the lent GPU machine (device tool): binaries built here travel in
# devbin/ (see scripts/pack_devbin.sh), the Vulkan loader in .gl/.
# usage: scripts/device_run.sh STEP...
#   steps: info tests golden each (GTEST_FILTER) coopmat hf shaders cpu synth bench profile ds-perf
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
for step in "$@"; do
  echo "=== $step ($(date +%T))"
  case $step in
    info) nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv; nproc; free -g | head -2
          $B/vkmoe info ;;
    tests) $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Vk*:Shader*:GpuForward*:GpuOffload*' 2>&1 | tail -30 ;;
    golden) $B/vkmoe_tests --gtest_brief=1 \
              --gtest_filter='GoldenLogits.*:Arch*:*Mla*:*Deepseek*:*HeadMatmul*:*ShaderAttention*' 2>&1 |
              tee "$OUT/golden.txt" | grep -E "gpu|PASSED|FAILED|Failure" ;;
    each)  # every test of GTEST_FILTER in its own process, as ctest runs them
      for t in $($B/vkmoe_tests --gtest_list_tests --gtest_filter="$GTEST_FILTER" | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
        $B/vkmoe_tests --gtest_brief=1 --gtest_filter="$t" > /tmp/one.log 2>&1 && echo "ok   $t" || { echo "FAIL $t"; tail -15 /tmp/one.log; }
      done 2>&1 | tee "$OUT/each.txt" | grep -v "^ok" ; echo "$(grep -c '^ok' "$OUT/each.txt") passed" ;;
    coopmat) $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Coopmat*:*Cm2*' 2>&1 | tee "$OUT/coopmat.txt" | tail -30 ;;
    hf)  # against transformers (installed there); HF_ARCHS limits the architectures
      mkdir -p /tmp/conv && tar xzf anchors/convert.tar.gz -C /tmp/conv
      python3 scripts/hf_compare.py $B/vkmoe /tmp/conv /tmp/hf ${HF_ARCHS:-} 2>&1 | grep -v "^INFO\|^WARNING" | tail -30
      cp /tmp/hf/hf_compare.json "$OUT/" ;;
    ds-perf)  # deepseek-v2-lite shapes (Q4_K_M): resident and under 8 GiB, beside llama-bench
      DS=/tmp/deepseek-v2-lite-synth-q4km.gguf
      [ -f $DS ] || $B/vkmoe synth --preset deepseek-v2-lite -o $DS 2>&1 | tail -1
      unpack_llama
      $B/vkmoe plan -m $DS --vram-budget 8GiB 2>&1 | head -4
      { for a in "--moe-mode resident" "--vram-budget 8GiB"; do run $B/vkmoe bench -m $DS -p 512 -n 128 -r 2 $a; done
        for a in "-ncmoe 0" "-ncmoe ${DS_NCMOE:-11}"; do run /tmp/ll/llama-bench -m $DS -ngl 99 -p 512 -n 128 -r 2 $a; done
      } 2>&1 | tee "$OUT/ds_perf.txt" ;;
    shaders) $B/vkmoe bench-shaders 2>&1 | tee "$OUT/bench_shaders.txt" ;;
    cpu) $B/bench_cpu_kernels --benchmark_min_time=0.2 2>&1 | tee "$OUT/bench_cpu.txt" | tail -40 ;;
    synth) [ -f $MODEL ] || $B/vkmoe synth --preset qwen3-30b-a3b -o $MODEL; ls -la $MODEL ;;
    bench)
      for args in "--moe-mode resident" "--vram-budget 12GiB" "--vram-budget 12GiB --predict-prefetch" \
                  "--vram-budget 12GiB --predict-prefetch --cpu-f32" "--moe-mode cpu-moe"; do
        echo "--- vkmoe bench -m $MODEL -p 64 -n 64 $args"
        $B/vkmoe bench -m $MODEL -p 64 -n 64 -r 2 --expert-stats $args 2>&1 | tee -a "$OUT/bench_e2e.txt" | grep -v "^  layer"
      done ;;
    profile)  # per-step GPU time of the resident decode (full model when synthesized, else 8 layers)
      M8=$MODEL
      if [ ! -f $M8 ]; then M8=/tmp/q3-8layers.gguf; [ -f $M8 ] || $B/vkmoe synth --preset qwen3-30b-a3b --set n_layer=8 -o $M8; fi
      VKMOE_PROFILE=1 $B/vkmoe bench -m $M8 -p 16 -n 32 -r 1 --expert-stats --moe-mode resident 2>&1 | grep -v uploading | tee -a "$OUT/profile.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done

#!/usr/bin/env bash
# CPU-expert figures on the lent GPU machine's host: the CPU kernels
# (bench_cpu_kernels: memory read bandwidth, one decoded token's 48 layers of
# experts from DRAM, the 8-expert FFN, single matrices), then decode with the
# experts on the CPU and under 12 GiB of VRAM, vkmoe (Q8 activations, and the
# exact --cpu-f32 path) beside llama-bench on the same synthetic
# Qwen3-30B-A3B Q4_K_M file in the same call. Carry devbin/, .gl/ and
# anchors/llama.tar.xz.
# usage: scripts/perf_cpu_experts.sh [kernels] [cpu-moe] [budget]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))"
grep -o -w -E "avx512_vnni|avx_vnni|avx512bw|avx2" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
qwen3_model
sync; sleep 3  # the file's write-back would take memory bandwidth from the first runs
unpack_llama
for s in ${@:-cpu-moe budget kernels}; do
  echo "=== $s ($(date +%T))"
  case $s in
    kernels)
      $B/bench_cpu_kernels --benchmark_min_time=0.2 \
        --benchmark_filter='memory_read|decode_token|moe_ffn_cpu|^matvec/(Q4_K|Q6_K|Q8_0)/2048x768' \
        2>&1 | tee -a "$OUT/bench_cpu.txt" ;;
    cpu-moe)
      {
        run $B/vkmoe bench -m $MODEL -p 512 -n 128 -r 3 --moe-mode cpu-moe
        run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe --cpu-f32
        echo "(VKMOE_PIN=0 VKMOE_POLL_US=0: workers unpinned, sleeping between jobs)"
        VKMOE_PIN=0 VKMOE_POLL_US=0 run $B/vkmoe bench -m $MODEL -p 0 -n 128 -r 3 --moe-mode cpu-moe
      } 2>&1 | tee -a "$OUT/vkmoe_cpu_moe.txt"
      run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 48 -p 512 -n 128 -r 3 2>&1 | tee -a "$OUT/llama_cpu_moe.txt" ;;
    budget)
      run $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 --vram-budget 12GiB 2>&1 | tee -a "$OUT/vkmoe_budget.txt"
      run /tmp/ll/llama-bench -m $MODEL -ngl 99 -ncmoe 20 -fa 1 -p 0 -n 128 -d 0,4096 -r 3 2>&1 | tee -a "$OUT/llama_budget.txt" ;;
    *) echo "unknown step $s" ;;
  esac
done

#!/usr/bin/env bash
# Cooperative-matrix GEMM workgroup shapes on the lent GPU machine:
# bench-shaders TFLOP/s of the dense and expert-grouped Q4_K GEMMs (512 tokens)
# for each BM,BN,WM,WN,BK in DENSE / IDS (VKMOE_COOPMAT_SHAPE / _IDS_SHAPE),
# then, when PP=1, resident pp512 of the synthetic Qwen3-30B-A3B file with the
# default shapes and with the fastest of each sweep (scripts/perf_prefill_ab.sh).
# Carry devbin/ and .gl/.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
DENSE=${DENSE:-"64,32,32,16,32 64,64,32,32,32 128,64,64,32,32 128,128,64,32,32 128,32,64,32,32 64,32,32,32,32 128,64,32,32,32 64,64,64,32,32 128,32,32,32,32 64,32,64,32,32 64,64,32,32,64"}
IDS=${IDS:-"64,32,32,16,32 64,32,32,32,32 128,32,32,32,32 128,32,64,32,32 64,32,64,32,32 128,32,64,16,32 64,32,32,32,64"}
[ "${PP:-}" = 1 ] && { qwen3_model > "$OUT/synth.txt" 2>&1 & }
warm_up
best() {  # kernel shapes list var -> lines "tflops shape"
  local kernel=$1 gshapes=$2 var=$3; shift 3
  for s in "$@"; do
    env "$var=$s" $B/vkmoe bench-shaders --kernels $kernel --gemm-shapes $gshapes --gemm-path coopmat 2>&1 |
      awk -v s="$s" '/^gemm/ {print s, $0}'
  done
}
{
  echo "# dense (VKMOE_COOPMAT_SHAPE)"; best gemm_q4_k 2048x4096:512,4096x2048:512,2048x5120:512 VKMOE_COOPMAT_SHAPE $DENSE
  echo "# expert-grouped (VKMOE_COOPMAT_IDS_SHAPE)"; best gemm_ids 2048x768:512,768x2048:512 VKMOE_COOPMAT_IDS_SHAPE $IDS
} 2>&1 | tee "$OUT/sweep.txt"
[ "${PP:-}" = 1 ] || exit 0
wait
# fastest shape by summed time (column 5: µs) over its shapes
pick() { awk -v k="$1" '$2 == k && $4 == "coopmat" && $5 + 0 > 0 {t[$1] += $5} END {for (s in t) print t[s], s}' "$OUT/sweep.txt" | sort -n | head -1 | cut -d' ' -f2; }
bd=$(pick gemm_q4_k); bi=$(pick gemm_ids)
echo "fastest: dense $bd, grouped $bi" | tee -a "$OUT/sweep.txt"
[ -x $B/vkmoe_tests ] && for e in "" "VKMOE_COOPMAT_SHAPE=$bd VKMOE_COOPMAT_IDS_SHAPE=$bi"; do
  echo "--- GemmCoopmat tests $e"; env $e $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*coopmat_*' 2>&1 | tail -2
done 2>&1 | tee -a "$OUT/sweep.txt"
OUT=$OUT LLAMA=0 ARGS="-p 512 -n 0 -r 3 --moe-mode resident" bash "$(dirname "$0")/perf_prefill_ab.sh" \
  "default|$B|" "tuned|$B|VKMOE_COOPMAT_SHAPE=$bd VKMOE_COOPMAT_IDS_SHAPE=$bi" | tee -a "$OUT/sweep.txt"

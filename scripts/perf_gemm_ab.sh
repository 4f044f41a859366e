#!/usr/bin/env bash
# Cooperative-matrix GEMM kernels of this build against the SPIR-V of another
# (OLD, default shadervar_old/: NAME.spv files run through VKMOE_SHADER_DIR)
# on the lent GPU machine: the GemmCoopmat tests, bench-shaders TFLOP/s of the
# dense and expert-grouped Q4_K products (512 tokens) per path and tile, then
# resident pp512/pp2048 of the synthetic Qwen3-30B-A3B file alternated
# (scripts/perf_prefill_ab.sh). Carry devbin/, .gl/ and OLD.
#   here:  scripts/perf_gemm_ab.sh old REV   # REV's GEMM shaders -> shadervar_old/ (git-ignored)
#   there: [VAR=...] scripts/perf_gemm_ab.sh  # carry .gl devbin shadervar_old (anchors/llama.tar.xz for LLAMA=1)
set -uo pipefail
if [ "${1:-}" = old ]; then
  cd "$(dirname "$0")/.." && rm -rf shadervar_old && mkdir -p shadervar_old /tmp/gemm_old/shaders
  for f in gemm_coopmat.comp gemm_cm2.comp $(git ls-tree --name-only "$2" shaders/ | grep '\.glsl$' | xargs -n1 basename); do
    git show "$2:shaders/$f" > /tmp/gemm_old/shaders/$f
  done
  G=${VKMOE_GLSLANG15:-$HOME/.cache/vkmoe/glslang15/bin/glslangValidator}
  for t in f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7; do
    for k in coopmat:gemm_coopmat cm2:gemm_cm2; do
      $G -V --target-env vulkan1.3 -DWTYPE=${t#*:} -I/tmp/gemm_old/shaders -o shadervar_old/gemm_${k%%:*}_${t%%:*}.spv \
        /tmp/gemm_old/shaders/${k#*:}.comp > /dev/null
      $G -V --target-env vulkan1.3 -DWTYPE=${t#*:} -DINDEXED=1 -I/tmp/gemm_old/shaders \
        -o shadervar_old/gemm_${k%%:*}_ids_${t%%:*}.spv /tmp/gemm_old/shaders/${k#*:}.comp > /dev/null
    done
  done
  ls shadervar_old | wc -l; exit 0
fi
source "$(dirname "$0")/device_env.sh"
OLD=${OLD:-shadervar_old}
# BENCH_VARIANTS: SPIR-V folders benched (KHR path) without their tests (ablations).
# Workgroup shapes swept (VKMOE_COOPMAT_IDS_SHAPE / _SHAPE; empty: none), coopmat2
# tiles (VKMOE_COOPMAT2_TILE) and coopmat2 SPIR-V variant folders (CM2_VARIANTS).
IDS_SHAPES=${IDS_SHAPES-"64,64,32,32,32 128,64,32,32,32 192,64,32,32,32"}
DENSE_SHAPES=${DENSE_SHAPES-"64,64,32,32,32 128,128,64,32,32"}
DENSE_GEMM=${DENSE_GEMM:-2048x4096:512,4096x2048:512,2048x512:512}
qwen3_model > "$OUT/synth.txt" 2>&1 &
warm_up
# Further kernel:shapes pairs benched per path (e.g. the router, gemm_f32:2048x128:512).
EXTRA_BENCH=${EXTRA_BENCH:-}
# bench PATH: dense 2048x4096 / 4096x2048 and per-expert 2048x768 / 768x2048 (top-8 of 128)
bench() {
  for ks in gemm_q4_k:$DENSE_GEMM gemm_ids:2048x768:512,768x2048:512 $EXTRA_BENCH; do
    timeout 120 $B/vkmoe bench-shaders --kernels ${ks%%:*} --gemm-shapes ${ks#*:} --gemm-path "$1" 2>&1 |
      grep -v "^vkmoe bench-shaders on\|^read bandwidth\|^dispatch floor\|^shape =\|^time =\|^config =\|^kernel \|^GEMM\|^ *$"; echo "  (exit ${PIPESTATUS[0]})"
  done
}
# tests NAME_FILTER: the GemmCoopmat tests of one path, in their own process
tests() { timeout 300 $B/vkmoe_tests --gtest_brief=1 --gtest_filter="$1" 2>&1 | tail -8; echo "  (exit ${PIPESTATUS[0]})"; }
{
  for v in ${BENCH_VARIANTS:-}; do echo "# coopmat, $v (bench only)"; VKMOE_SHADER_DIR=$v bench coopmat; done
  for v in ${VARIANTS:-}; do
    echo "# GemmCoopmat KHR tests, $v"; VKMOE_SHADER_DIR=$v tests '*GemmCoopmat*/coopmat_*'
    echo "# coopmat, $v"; VKMOE_SHADER_DIR=$v bench coopmat
  done
  echo "# GemmCoopmat KHR tests (this build)"; tests '*GemmCoopmat*/coopmat_*'
  echo "# GemmCoopmat cm2 tests (this build)"; tests '*GemmCoopmat*/coopmat2_*'
  echo "# coopmat, OLD"; VKMOE_SHADER_DIR=$OLD bench coopmat
  echo "# coopmat, this build"; bench coopmat
  for s in $IDS_SHAPES; do echo "# coopmat ids $s"; VKMOE_COOPMAT_IDS_SHAPE=$s bench coopmat | grep "gemm_ids\|exit"; done
  for s in $DENSE_SHAPES; do echo "# coopmat dense $s"; VKMOE_COOPMAT_SHAPE=$s bench coopmat | grep "gemm_q4_k\|exit"; done
  echo "# coopmat2, OLD"; VKMOE_SHADER_DIR=$OLD bench coopmat2
  for t in ${CM2_TILES-L M L64 M64}; do echo "# coopmat2 tile $t"; VKMOE_COOPMAT2_TILE=$t bench coopmat2; done
  for v in ${CM2_VARIANTS:-}; do
    for t in ${CM2_VARIANT_TILES-L L64}; do echo "# coopmat2 $v tile $t"; VKMOE_SHADER_DIR=$v VKMOE_COOPMAT2_TILE=$t bench coopmat2; done
  done
} 2>&1 | tee "$OUT/gemm_kernels.txt"
wait
if [ "${PROFILES:-0}" = 1 ]; then  # per-step GPU time of a pp512 ubatch, vkmoe and llama.cpp
  warm_up
  VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats > "$OUT/vkmoe_profile.txt" 2>&1
  grep -A14 "GPU time per prompt" "$OUT/vkmoe_profile.txt"
  if [ -f anchors/llama.tar.xz ]; then
    unpack_llama
    GGML_VK_PERF_LOGGER=1 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 2 -fa 1 > "$OUT/llama_perf_logger.txt" 2>&1
    grep -E "^\| |MUL_MAT|FLASH|Total" "$OUT/llama_perf_logger.txt" | tail -40
  fi
fi
[ "${PP:-1}" = 1 ] || exit 0
OUT=$OUT LLAMA=${LLAMA:-0} ARGS="${ARGS:--p 512,2048 -n 0 -r 2 --moe-mode resident}" bash "$(dirname "$0")/perf_prefill_ab.sh" \
  "old|$B|VKMOE_SHADER_DIR=$OLD" "new|$B|" ${PP_CM2:+"cm2|$B||--gemm coopmat2"}

#!/usr/bin/env bash
# The cooperative-matrix GEMM on a GPU machine (the device tool): its tests
# and Q4_K TFLOP/s with 512 tokens (GemmCoopmatBench.Q4K).
#   here:  scripts/gpu_coopmat_test.sh pack [BUILD_DIR]   # -> devbin-B/ (git-ignored)
#   there: scripts/gpu_coopmat_test.sh run                # carry: .gl devbin-B
# BUILD_DIR (default build) must be configured with glslang 15 (scripts/build_glslang.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=devbin-B
case "${1:-run}" in
  pack)
    build=${2:-build}
    rm -rf $BIN && mkdir -p $BIN/lib
    cp "$build/vkmoe_tests" "$build/vkmoe" $BIN/ && strip $BIN/vkmoe_tests $BIN/vkmoe
    for so in libhwy.so.1 libgtest.so.1.12.1 libgtest_main.so.1.12.1; do
      [ -e /usr/lib/x86_64-linux-gnu/$so ] && cp -L /usr/lib/x86_64-linux-gnu/$so $BIN/lib/
    done
    du -sh $BIN ;;
  run)
    for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
    if ! ls /usr/share/vulkan/icd.d/*nvidia* >/dev/null 2>&1 && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
      export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    fi
    export LD_LIBRARY_PATH=$PWD/$BIN/lib:${LD_LIBRARY_PATH:-}
    $BIN/vkmoe info 2>&1 | head -20 || true
    $BIN/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat*' 2>&1 | tail -40 || true
    VKMOE_COOPMAT_BENCH=1 $BIN/vkmoe_tests --gtest_filter='*GemmCoopmatBench*' 2>&1 | grep -E "coopmat|OK|FAIL|Skipped|rror" ;;
  *) echo "usage: $0 pack [BUILD_DIR] | run" >&2; exit 2 ;;
esac

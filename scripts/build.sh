#!/usr/bin/env bash
# Installs the Debian 12 packages vkmoe needs (when missing) and builds into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_packages.sh cmake ninja-build g++ pkg-config libvulkan-dev glslc libshaderc-dev glslang-tools spirv-tools \
  libhwy-dev libgtest-dev libbenchmark-dev mesa-vulkan-drivers libcpp-httplib-dev nlohmann-json3-dev python3 python3-jinja2
# glslang 15 for the cooperative-matrix shaders (cached; optional).
scripts/build_glslang.sh ||
  echo "warning: could not build glslang 15 (scripts/build_glslang.sh): building without the cooperative-matrix GEMM" >&2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

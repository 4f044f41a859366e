#!/usr/bin/env bash
# Installs the Debian 12 packages vkmoe needs (when missing) and builds into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="cmake ninja-build g++ pkg-config libvulkan-dev glslc libshaderc-dev glslang-tools spirv-tools
      libhwy-dev libgtest-dev libbenchmark-dev mesa-vulkan-drivers libcpp-httplib-dev nlohmann-json3-dev python3 python3-jinja2"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi
# glslang 15 for the cooperative-matrix shaders (cached; optional).
scripts/build_glslang.sh ||
  echo "warning: could not build glslang 15 (scripts/build_glslang.sh): building without the cooperative-matrix GEMM" >&2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

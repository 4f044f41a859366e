#!/usr/bin/env bash
# Builds glslang 15 (Debian 13's source package) into a cache once, for the
# shaders that need GL_KHR_cooperative_matrix / GL_EXT_integer_dot_product,
# which Debian 12's glslang 12 lacks. A second run is a no-op.
# Never touches the system's apt state: a private sources list and lists dir.
# Output: $VKMOE_CACHE_DIR/glslang15/bin/glslangValidator (default ~/.cache/vkmoe).
set -euo pipefail
CACHE="${VKMOE_CACHE_DIR:-${HOME:-/tmp}/.cache/vkmoe}"
PREFIX="$CACHE/glslang15"
TOOL="$PREFIX/bin/glslangValidator"
if [ -x "$TOOL" ] && "$TOOL" --version 2>/dev/null | grep -q 'Glslang Version: 11:15'; then
  exit 0
fi
need() { command -v "$1" >/dev/null || { echo "build_glslang: missing $1" >&2; exit 1; }; }
need apt-get; need tar; need cmake; need ninja; need g++

# The Debian mirror named by the system's sources, suite trixie, deb-src.
MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
         grep -v '^[[:space:]]*#' | grep -oE 'https?://[^ ]*/debian/?( |$)' | head -n1 | tr -d ' ' || true)
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vkmoe-glslang.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/} trixie main" \
  >"$WORK/sources.list"
APT=(-q -o Dir::Etc::SourceList="$WORK/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$WORK/lists" -o Dir::Cache="$WORK/cache" -o Debug::NoLocking=1
     -o APT::Sandbox::User="$(id -un)")
mkdir -p "$WORK/cache/archives/partial"
echo "build_glslang: fetching glslang (trixie) source from ${MIRROR%/}"
apt-get "${APT[@]}" update >/dev/null
(cd "$WORK/src" && apt-get "${APT[@]}" source --download-only glslang >/dev/null)
# The upstream tarball alone (Debian's patches tie SPIRV to an external SPIRV-Tools).
mkdir -p "$WORK/src/glslang"
tar -xzf "$(ls "$WORK"/src/glslang_*.orig.tar.* | head -n1)" -C "$WORK/src/glslang" --strip-components=1
echo "build_glslang: building glslangValidator (about a minute)"
cmake -S "$WORK/src/glslang" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DENABLE_OPT=OFF -DENABLE_HLSL=OFF -DENABLE_SPVREMAPPER=OFF -DGLSLANG_TESTS=OFF \
  -DBUILD_SHARED_LIBS=OFF -DBUILD_EXTERNAL=OFF >/dev/null
ninja -C "$WORK/build" -j"$(nproc)" glslang-standalone >/dev/null
mkdir -p "$PREFIX/bin"
cp "$WORK/build/StandAlone/glslang" "$TOOL.tmp" 2>/dev/null || cp "$WORK/build/StandAlone/glslangValidator" "$TOOL.tmp"
mv "$TOOL.tmp" "$TOOL"
"$TOOL" --version | head -n1

#!/bin/sh
# Regenerates tests/golden/NAME.f32 for every case of tests/golden/cases.txt:
# the synthetic model written by `vkmoe synth --set SPEC`, evaluated by
# llama.cpp on the CPU (llama_logits ... 0: n_tokens x n_vocab float32).
# Usage: scripts/make_golden.sh [VKMOE_BINARY] [LLAMA_DIR]
#   defaults: build/vkmoe and /tmp/ll (unpack /work/main/anchors/llama.tar.xz there,
#   see ../shared/anchors/README.md).
set -eu
cd "$(dirname "$0")/.."
vkmoe=${1:-build/vkmoe}
ll=${2:-/tmp/ll}
cases=tests/golden/cases.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=$(awk '$1 == "tokens" { print $2 }' "$cases")
grep -v '^#' "$cases" | grep -v '^tokens ' | while read -r name spec; do
  [ -n "$name" ] || continue
  "$vkmoe" synth -o "$tmp/$name.gguf" --set "$spec" 2>/dev/null
  "$ll/llama_logits" "$tmp/$name.gguf" "$tokens" "tests/golden/$name.f32" 0 >"$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; exit 1; }
  echo "$name: $spec"
done

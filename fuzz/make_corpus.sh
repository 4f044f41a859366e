#!/bin/sh
# Writes fuzz/corpus/gguf/: one tiny synthetic model per architecture, the seeds of
# fuzz_gguf (no .gguf suffix, which git ignores). The shapes match
# tiny_model_spec() in tests/test_gguf_fuzz.cpp.
# Usage: fuzz/make_corpus.sh [path/to/vkmoe]
set -e
vkmoe=${1:-build/vkmoe}
dir=$(dirname "$0")/corpus/gguf
mkdir -p "$dir"
tiny=n_layer=1,n_embd=32,n_head=1,n_head_kv=1,head_dim=32,n_ff=32,n_expert=4,n_expert_used=2,n_ff_exp=32,n_ff_shexp=32,n_vocab=512,tied_output=1,quant=Q8_0
for arch in qwen3moe qwen3 llama olmoe qwen2moe; do
  "$vkmoe" synth -o "$dir/$arch" --set "arch=$arch,$tiny" > /dev/null
done

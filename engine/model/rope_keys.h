#pragma once
// RoPE context extension from the rope.scaling.* keys, derived as llama.cpp
// does at context creation: "none", "linear" (the default: a factor only
// scales the frequencies) or "yarn".
#include "engine/model/hparams.h"
#include "engine/model/model.h"

namespace vkmoe {

void read_rope_scaling(const Hparams& h, ModelConfig& c);
// Writes YaRN keys for a model extended by `factor` from `n_ctx_orig` (synth).
void write_yarn(const ModelConfig& c, float factor, int n_ctx_orig, GgufWriter& w);

}  // namespace vkmoe

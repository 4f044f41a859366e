#pragma once
// The one list of a layer's tensors for its spec: the loader fetches and
// checks them, synth writes them, the GPU upload places them.
#include <string>
#include <vector>

#include "engine/model/model.h"

namespace vkmoe {

// HeadMatrices: one matrix per attention head, stacked {in, out, n_head} (MLA's attn_k_b, attn_v_b).
enum class TensorKind : uint8_t { Norm, Bias, Matrix, HeadMatrices, Router, SharedGate, Experts };

struct LayerTensorSlot {
  Weight LayerWeights::*member;
  std::string name;         // after "blk.N."
  std::vector<int64_t> ne;  // {in, out[, n_expert]}
  TensorKind kind;
};

std::vector<LayerTensorSlot> layer_tensors(const ModelConfig& c, const LayerSpec& s);

}  // namespace vkmoe

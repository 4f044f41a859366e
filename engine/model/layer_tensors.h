#pragma once
// The one list of a layer's tensors for its spec: the loader fetches and
// checks them, synth writes them, the GPU upload places them.
#include <string>
#include <vector>

#include "engine/model/model.h"

namespace vkmoe {

enum class TensorKind : uint8_t { Norm, Bias, Matrix, Router, SharedGate, Experts };

struct LayerTensorSlot {
  Weight LayerWeights::*member;
  std::string name;         // after "blk.N."
  std::vector<int64_t> ne;  // {in, out[, n_expert]}
  TensorKind kind;
};

std::vector<LayerTensorSlot> layer_tensors(const ModelConfig& c, const LayerSpec& s);

}  // namespace vkmoe

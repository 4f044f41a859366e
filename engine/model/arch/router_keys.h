#pragma once
// The router's hyper-parameters as llama.cpp names them, shared by the
// architectures that read them: expert_gating_func (1 softmax, 2 sigmoid,
// 3 softmax over the selected logits), expert_weights_norm,
// expert_weights_scale (0 or 1: none), expert_group_count and
// expert_group_used_count.
#include "engine/model/hparams.h"
#include "engine/model/model.h"

namespace vkmoe {

void read_router(const Hparams& h, ModelConfig& c, Gating default_gating, bool default_normalize);
void write_router(const ModelConfig& c, GgufWriter& w);

}  // namespace vkmoe

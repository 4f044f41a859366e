#pragma once
// Files of glm4moe and deepseek2 may append next-token-prediction (MTP)
// layers after the trunk (nextn_predict_layers); vkmoe does not run them.
#include "engine/model/hparams.h"
#include "engine/model/model.h"

namespace vkmoe {

inline void drop_nextn_layers(const Hparams& h, ModelConfig& c) {
  const int nextn = h.opt_count("nextn_predict_layers", 0);
  if (nextn >= c.n_layer) h.fail("nextn_predict_layers is not below block_count");
  c.n_layer -= nextn;
}

}  // namespace vkmoe

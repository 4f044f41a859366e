#include "engine/offload/plan_model.h"

#include <algorithm>

#include "engine/forward/activations.h"
#include "engine/model/layer_tensors.h"

namespace vkmoe {

PlanInput plan_input_for(const Model& m, int n_ctx, uint64_t vram_budget, GgmlType kv_type, int n_ubatch,
                         bool gemm_converts_x, bool gate_up_in_one) {
  const ModelConfig& c = m.config();
  PlanInput in;
  in.vram_budget = vram_budget;
  // Shapes come from the model's layers, not from tensor names; tensors the
  // model does not use (e.g. glm4moe's next-token-prediction layers) are not planned.
  const bool tied = m.output.t == m.tok_embd.t;
  // The embedding table only needs a row gather: it stays in host memory
  // unless the output head shares it.
  in.trunk.push_back({m.tok_embd.t->name, m.tok_embd.t->nbytes, !tied});
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& lw = m.layers()[il];
    for (const LayerTensorSlot& slot : layer_tensors(c, lw.spec)) {
      const GgufTensor* t = (lw.*slot.member).t;
      if (slot.kind == TensorKind::Experts)
        in.experts.tensors.push_back({t->name, il, t->nbytes});
      else
        in.trunk.push_back({t->name, t->nbytes, false});
    }
  }
  in.trunk.push_back({m.output_norm.t->name, m.output_norm.t->nbytes, false});
  if (!tied) in.trunk.push_back({m.output.t->name, m.output.t->nbytes, false});
  in.experts.n_layer = c.n_layer;
  in.experts.n_expert = c.n_expert;
  in.experts.n_expert_used = c.n_expert_used;
  in.kv = {c.n_layer, n_ctx, c.kv_dim(), kv_type, kv_type, c.v_dim()};
  const uint32_t ub = uint32_t(std::clamp(n_ubatch, 1, std::max(n_ctx, 1)));
  ActivationShape shape = ActivationShape::of(c, ub, uint32_t(std::max(n_ctx, 1)));
  shape.gemm_converts_x = gemm_converts_x;
  shape.gate_up_in_one = gate_up_in_one;
  in.scratch_bytes = activation_bytes(shape) + kScratchSafetyMargin;
  in.prefill_staging_experts = ub > 1 ? c.n_expert : 0;
  return in;
}

}  // namespace vkmoe

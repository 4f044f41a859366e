#include "engine/offload/plan_model.h"

#include <algorithm>
#include <set>

#include "engine/forward/activations.h"

namespace vkmoe {

PlanInput plan_input_for(const Model& m, int n_ctx, uint64_t vram_budget, GgmlType kv_type, int n_ubatch) {
  const ModelConfig& c = m.config();
  PlanInput in;
  in.vram_budget = vram_budget;
  // Expert shapes come from the model's layers, not from tensor names.
  std::set<const GgufTensor*> experts;
  for (int il = 0; il < c.n_layer; ++il)
    for (const Weight* w : {&m.layers()[il].gate_exps, &m.layers()[il].up_exps, &m.layers()[il].down_exps})
      if (*w) {
        experts.insert(w->t);
        in.experts.tensors.push_back({w->t->name, il, w->t->nbytes});
      }
  const bool tied = m.output.t == m.tok_embd.t;
  for (const auto& t : m.gguf().tensors()) {
    if (experts.count(&t)) continue;
    // The embedding table only needs a row gather: it stays in host memory
    // unless the output head shares it.
    in.trunk.push_back({t.name, t.nbytes, &t == m.tok_embd.t && !tied});
  }
  in.experts.n_layer = c.n_layer;
  in.experts.n_expert = c.n_expert;
  in.experts.n_expert_used = c.n_expert_used;
  in.kv = {c.n_layer, n_ctx, c.kv_dim(), kv_type, kv_type};
  const uint32_t ub = uint32_t(std::clamp(n_ubatch, 1, std::max(n_ctx, 1)));
  in.scratch_bytes = activation_bytes(ActivationShape::of(c, ub, uint32_t(std::max(n_ctx, 1)))) + kScratchSafetyMargin;
  in.prefill_staging_experts = ub > 1 ? c.n_expert : 0;
  return in;
}

}  // namespace vkmoe

#include "engine/offload/plan_model.h"

namespace vkmoe {

bool is_expert_tensor(const std::string& name) {
  return name.find("_exps.weight") != std::string::npos;
}

PlanInput plan_input_for(const Model& m, int n_ctx, uint64_t vram_budget, GgmlType kv_type) {
  const ModelConfig& c = m.config();
  PlanInput in;
  in.vram_budget = vram_budget;
  for (const auto& t : m.gguf().tensors()) {
    if (is_expert_tensor(t.name)) {
      int layer = std::stoi(t.name.substr(4));  // "blk.N."
      in.experts.tensors.push_back({t.name, layer, t.nbytes});
    } else {
      // The embedding table only needs a row gather: it stays in host memory
      // unless the output head shares it.
      bool tied = m.output.t == m.tok_embd.t;
      in.trunk.push_back({t.name, t.nbytes, t.name == "token_embd.weight" && !tied});
    }
  }
  in.experts.n_layer = c.n_layer;
  in.experts.n_expert = c.n_expert;
  in.experts.n_expert_used = c.n_expert_used;
  in.kv = {c.n_layer, n_ctx, c.kv_dim(), kv_type, kv_type};
  ScratchSpec s;
  s.n_embd = c.n_embd;
  s.n_ff = c.is_moe() ? c.n_ff_exp * c.n_expert_used : c.n_ff;
  if (c.n_ff_shexp > s.n_ff) s.n_ff = c.n_ff_shexp;
  s.n_vocab = c.n_vocab;
  s.n_head = c.n_head;
  s.n_ctx = n_ctx;
  s.n_batch = 1;
  in.scratch_bytes = default_scratch_bytes(s);
  return in;
}

}  // namespace vkmoe

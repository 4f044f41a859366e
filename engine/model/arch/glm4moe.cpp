// glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6): q/k/v biases, per-head q/k norms
// when the file has them, NeoX RoPE over part of each head; leading dense
// layers, then experts scored by a sigmoid, selected with a per-expert bias,
// renormalized and scaled, beside one plain shared expert. The file's
// trailing next-token-prediction layers are not used.
#include "engine/model/arch/arch.h"
#include "engine/model/arch/nextn.h"
#include "engine/model/arch/router_keys.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  drop_nextn_layers(h, c);
  c.n_layer_dense_lead = h.opt_count("leading_dense_block_count", 0);
  if (c.n_layer_dense_lead > 0) c.n_ff = h.req_int("feed_forward_length");
  c.n_ff_exp = h.req_int("expert_feed_forward_length");
  c.n_ff_shexp = h.product("expert_feed_forward_length", c.n_ff_exp, "expert_shared_count",
                           h.opt_count("expert_shared_count", 0));
  read_router(h, c, Gating::Sigmoid, /*normalize=*/false);
  c.qk_norm = h.has_tensor("blk.0.attn_q_norm.weight") ? QkNorm::PerHead : QkNorm::None;
}

LayerSpec layer(const ModelConfig& c, int il) {
  LayerSpec s;
  s.qkv_bias = true;
  s.qk_norm = c.qk_norm;
  s.ffn_norm = "post_attention_norm";
  s.moe = il >= c.n_layer_dense_lead;
  s.probs_bias = s.moe;
  s.shared = s.moe && c.n_ff_shexp > 0 ? SharedExpert::Plain : SharedExpert::None;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.arch + ".";
  w.add_u32(a + "feed_forward_length", c.n_ff);
  w.add_u32(a + "expert_feed_forward_length", c.n_ff_exp);
  w.add_u32(a + "leading_dense_block_count", c.n_layer_dense_lead);
  w.add_u32(a + "expert_shared_count", c.n_ff_shexp / c.n_ff_exp);
  ModelConfig r = c;  // GLM's router: sigmoid scores, renormalized
  r.router.gating = Gating::Sigmoid;
  r.router.normalize = true;
  write_router(r, w);
}

}  // namespace

extern const ArchDef kArchGlm4Moe = {"glm4moe", configure, layer, write};

}  // namespace vkmoe

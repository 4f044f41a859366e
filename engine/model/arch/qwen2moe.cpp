// qwen2moe: q/k/v biases, NeoX RoPE; softmax top-k experts (not
// renormalized) plus a shared expert gated by sigmoid(w . x).
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  c.n_ff_exp = h.req_int("expert_feed_forward_length");
  c.n_ff_shexp = h.opt_int("expert_shared_feed_forward_length", h.opt_int("feed_forward_length", 0));
  c.router.normalize = h.opt_bool("expert_weights_norm", false);
}

LayerSpec layer(const ModelConfig&, int) {
  LayerSpec s;
  s.qkv_bias = true;
  s.moe = true;
  s.shared = SharedExpert::Gated;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  w.add_u32(c.arch + ".feed_forward_length", c.n_ff);
  w.add_u32(c.arch + ".expert_feed_forward_length", c.n_ff_exp);
  w.add_u32(c.arch + ".expert_shared_feed_forward_length", c.n_ff_shexp);
}

}  // namespace

extern const ArchDef kArchQwen2Moe = {"qwen2moe", configure, layer, write};

}  // namespace vkmoe

// llama: GQA attention with adjacent-pair RoPE and a dense SwiGLU FFN, or
// (Mixtral) softmax top-k routed experts whose width is feed_forward_length.
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = false;
  if (c.is_moe()) {
    c.n_ff_exp = h.opt_int("expert_feed_forward_length", h.opt_int("feed_forward_length", 0));
    c.router.normalize = h.opt_bool("expert_weights_norm", true);
  } else {
    c.n_ff = h.req_int("feed_forward_length");
  }
}

LayerSpec layer(const ModelConfig& c, int) {
  LayerSpec s;
  s.moe = c.is_moe();
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  w.add_u32(c.arch + ".feed_forward_length", c.is_moe() ? c.n_ff_exp : c.n_ff);
}

}  // namespace

extern const ArchDef kArchLlama = {"llama", configure, layer, write};

}  // namespace vkmoe

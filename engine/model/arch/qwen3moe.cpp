// qwen3moe: qwen3's attention; every layer routes softmax top-k experts,
// renormalized.
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  c.n_ff_exp = h.req_int("expert_feed_forward_length");
  c.router.normalize = h.opt_bool("expert_weights_norm", true);
}

LayerSpec layer(const ModelConfig&, int) {
  LayerSpec s;
  s.qk_norm = QkNorm::PerHead;
  s.moe = true;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  w.add_u32(c.arch + ".feed_forward_length", c.n_ff);
  w.add_u32(c.arch + ".expert_feed_forward_length", c.n_ff_exp);
}

}  // namespace

extern const ArchDef kArchQwen3Moe = {"qwen3moe", configure, layer, write};

}  // namespace vkmoe

// olmoe: q/k RMS norms over the whole projection, NeoX RoPE; softmax top-k
// experts (not renormalized) whose width is feed_forward_length.
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  c.n_ff_exp = h.opt_int("expert_feed_forward_length", h.opt_int("feed_forward_length", 0));
  c.router.normalize = h.opt_bool("expert_weights_norm", false);
}

LayerSpec layer(const ModelConfig&, int) {
  LayerSpec s;
  s.qk_norm = QkNorm::Whole;
  s.moe = true;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) { w.add_u32(c.arch + ".feed_forward_length", c.n_ff_exp); }

}  // namespace

extern const ArchDef kArchOlmoe = {"olmoe", configure, layer, write};

}  // namespace vkmoe

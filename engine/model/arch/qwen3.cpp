// qwen3 (dense): GQA attention with per-head q/k RMS norms and NeoX RoPE,
// dense SwiGLU FFN.
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  c.n_ff = h.req_int("feed_forward_length");
}

LayerSpec layer(const ModelConfig&, int) {
  LayerSpec s;
  s.qk_norm = QkNorm::PerHead;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) { w.add_u32(c.arch + ".feed_forward_length", c.n_ff); }

}  // namespace

extern const ArchDef kArchQwen3 = {"qwen3", configure, layer, write};

}  // namespace vkmoe

// gpt-oss (GGUF arch "gpt-oss"): GQA attention with q/k/v/o biases, a learned
// sink logit per head, sliding-window layers alternating with full ones
// (sliding_window_pattern, default 2: even layers slide), NeoX RoPE with
// YaRN; every layer routes experts chosen on biased router logits and
// weighted by a softmax over the chosen ones, with per-expert biases and the
// clamped SwiGLU.
#include "engine/model/arch/arch.h"

namespace vkmoe {
namespace {

void configure(const Hparams& h, ModelConfig& c) {
  c.rope_neox = true;
  c.n_ff_exp = h.req_int("expert_feed_forward_length");
  c.n_swa = h.req_int("attention.sliding_window");
  c.swa_pattern = h.opt_count("attention.sliding_window_pattern", 2);
  if (h.has("rope.freq_base_swa") && h.positive_float("rope.freq_base_swa", 1) != c.rope_theta)
    h.fail("a separate rope.freq_base_swa is not supported");
  c.router = RouterParams{};  // as llama.cpp: no router keys are read
  c.router.gating = Gating::SoftmaxWeight;
}

LayerSpec layer(const ModelConfig& c, int il) {
  LayerSpec s;
  s.qkv_bias = s.o_bias = s.sinks = true;
  // llama.cpp's standard pattern: all but every n-th layer slide (n 0: all).
  const bool swa = c.swa_pattern == 0 || il % c.swa_pattern < c.swa_pattern - 1;
  s.window = swa ? uint32_t(c.n_swa) : 0;
  s.ffn_norm = "post_attention_norm";
  s.moe = true;
  s.router_bias = s.expert_bias = true;
  s.act = FfnAct::OaiSwiGLU;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.arch + ".";
  w.add_u32(a + "expert_feed_forward_length", c.n_ff_exp);
  w.add_u32(a + "attention.sliding_window", c.n_swa);
}

}  // namespace

extern const ArchDef kArchGptOss = {"gpt-oss", configure, layer, write};

}  // namespace vkmoe

// deepseek2 (DeepSeek-V2/V2-Lite, V3, R1, Kimi-K2): multi-head latent
// attention (ModelConfig::Mla) with adjacent-pair RoPE on a decoupled part of
// each head and YaRN; leading dense layers, then routed experts (softmax or
// sigmoid scores, a selection bias, group-limited top-k, routed scaling)
// beside plain shared experts. Trailing next-token-prediction layers are not
// used. Files from before llama.cpp split attn_kv_b into attn_k_b / attn_v_b
// are refused.
#include <cmath>

#include "engine/model/arch/arch.h"
#include "engine/model/arch/nextn.h"
#include "engine/model/arch/router_keys.h"

namespace vkmoe {
namespace {

// llama.cpp's YaRN attention scaling for deepseek2: with a log multiplier the
// rotation keeps the magnitude rope.scaling.attn_factor; the logits are scaled
// by mscale^2 / sqrt(head_k), mscale = (the rotation's magnitude) * (1 + log_mul
// ln f), log_mul being the file's yarn_log_multiplier (0.1 * mscale_all_dim).
void yarn_scaling(ModelConfig& c) {
  const float ln_f = std::log(1.0f / c.rope_freq_scale);
  if (c.yarn_ext_factor != 0 && c.yarn_log_mul != 0) c.yarn_attn_factor = c.rope_attn_factor / (1.0f + 0.1f * ln_f);
  const float attn_org = c.yarn_attn_factor * (1.0f + 0.1f * ln_f);
  const float mscale = attn_org * (1.0f + c.yarn_log_mul * ln_f);
  c.kq_scale = mscale * mscale / std::sqrt(float(c.mla.head_k));
}

void configure(const Hparams& h, ModelConfig& c) {
  if (!h.has("attention.key_length_mla"))
    h.fail("deepseek2 file without attention.key_length_mla (attn_kv_b not yet split into attn_k_b/attn_v_b); "
           "re-convert it with a current llama.cpp");
  ModelConfig::Mla& m = c.mla;
  m.q_lora = h.opt_count("attention.q_lora_rank", 0);
  m.kv_lora = h.req_int("attention.kv_lora_rank");
  m.head_k = h.req_int("attention.key_length_mla");
  m.head_v = h.req_int("attention.value_length_mla");
  if (c.n_head_kv != 1) h.fail("attention.head_count_kv must be 1 with latent attention");
  if (c.head_dim != m.kv_lora + c.n_rot)
    h.fail("attention.key_length must be kv_lora_rank + rope.dimension_count");
  if (m.head_k <= c.n_rot) h.fail("attention.key_length_mla must exceed rope.dimension_count");
  h.product("attention.head_count", c.n_head, "attention.key_length_mla", m.head_k);
  h.product("attention.head_count", c.n_head, "attention.value_length_mla", m.head_v);
  c.rope_neox = false;
  drop_nextn_layers(h, c);  // DeepSeek-V3's MTP layer
  c.n_layer_dense_lead = h.opt_count("leading_dense_block_count", 0);
  if (c.n_layer_dense_lead > 0) c.n_ff = h.req_int("feed_forward_length");
  c.n_ff_exp = h.req_int("expert_feed_forward_length");
  c.n_ff_shexp = h.product("expert_feed_forward_length", c.n_ff_exp, "expert_shared_count",
                           h.opt_count("expert_shared_count", 0));
  // Older V2/V2.5 files name no gating function: softmax, except GLM-4.7-Lite's.
  const GgufTensor* embd = h.file().tensor("token_embd.weight");
  const bool glm_lite = (c.n_layer == 47 || c.n_layer == 48) && embd && embd->ne.size() > 1 && embd->ne[1] == 154880;
  read_router(h, c, glm_lite ? Gating::Sigmoid : Gating::Softmax, /*normalize=*/false);
  c.probs_bias = h.has_tensor("blk." + std::to_string(c.n_layer_dense_lead) + ".exp_probs_b.bias");
  yarn_scaling(c);
}

LayerSpec layer(const ModelConfig& c, int il) {
  LayerSpec s;
  s.mla = true;
  s.moe = il >= c.n_layer_dense_lead;
  s.probs_bias = s.moe && c.probs_bias;
  s.shared = s.moe && c.n_ff_shexp > 0 ? SharedExpert::Plain : SharedExpert::None;
  return s;
}

void write(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.arch + ".";
  const ModelConfig::Mla& m = c.mla;
  w.add_u32(a + "attention.q_lora_rank", m.q_lora);  // 0 (no bottleneck) spelled out for llama.cpp
  w.add_u32(a + "attention.kv_lora_rank", m.kv_lora);
  w.add_u32(a + "attention.key_length_mla", m.head_k);
  w.add_u32(a + "attention.value_length_mla", m.head_v);
  w.add_u32(a + "feed_forward_length", c.n_ff);
  w.add_u32(a + "expert_feed_forward_length", c.n_ff_exp);
  w.add_u32(a + "leading_dense_block_count", c.n_layer_dense_lead);
  w.add_u32(a + "expert_shared_count", c.n_ff_exp > 0 ? c.n_ff_shexp / c.n_ff_exp : 0);
  if (c.yarn_log_mul != 0) w.add_f32(a + "rope.scaling.yarn_log_multiplier", c.yarn_log_mul);
  write_router(c, w);
}

}  // namespace

extern const ArchDef kArchDeepseek2 = {"deepseek2", configure, layer, write};

}  // namespace vkmoe

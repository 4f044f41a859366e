#include "engine/model/layer_tensors.h"

namespace vkmoe {

namespace {

using L = LayerWeights;

// Multi-head latent attention (ModelConfig::Mla).
std::vector<LayerTensorSlot> mla_tensors(const ModelConfig& c) {
  const ModelConfig::Mla& m = c.mla;
  const int64_t E = c.n_embd, H = c.n_head, nope = m.head_k - c.n_rot;
  std::vector<LayerTensorSlot> v = {{&L::attn_norm, "attn_norm.weight", {E}, TensorKind::Norm}};
  if (m.q_lora > 0) {
    v.push_back({&L::wq_a, "attn_q_a.weight", {E, m.q_lora}, TensorKind::Matrix});
    v.push_back({&L::q_a_norm, "attn_q_a_norm.weight", {m.q_lora}, TensorKind::Norm});
    v.push_back({&L::wq_b, "attn_q_b.weight", {m.q_lora, H * m.head_k}, TensorKind::Matrix});
  } else {
    v.push_back({&L::wq, "attn_q.weight", {E, H * m.head_k}, TensorKind::Matrix});
  }
  v.push_back({&L::wkv_a, "attn_kv_a_mqa.weight", {E, m.kv_lora + c.n_rot}, TensorKind::Matrix});
  v.push_back({&L::kv_a_norm, "attn_kv_a_norm.weight", {m.kv_lora}, TensorKind::Norm});
  v.push_back({&L::wk_b, "attn_k_b.weight", {nope, m.kv_lora, H}, TensorKind::HeadMatrices});
  v.push_back({&L::wv_b, "attn_v_b.weight", {m.kv_lora, m.head_v, H}, TensorKind::HeadMatrices});
  v.push_back({&L::wo, "attn_output.weight", {H * m.head_v, E}, TensorKind::Matrix});
  return v;
}

}  // namespace

std::vector<LayerTensorSlot> layer_tensors(const ModelConfig& c, const LayerSpec& s) {
  // 64-bit products: synth builds files from unchecked configurations.
  const int64_t E = c.n_embd, D = c.head_dim, Q = int64_t{c.n_head} * D, KV = int64_t{c.n_head_kv} * D;
  std::vector<LayerTensorSlot> v;
  if (s.mla)
    v = mla_tensors(c);
  else
    v = {
        {&L::attn_norm, "attn_norm.weight", {E}, TensorKind::Norm},
        {&L::wq, "attn_q.weight", {E, Q}, TensorKind::Matrix},
        {&L::wk, "attn_k.weight", {E, KV}, TensorKind::Matrix},
        {&L::wv, "attn_v.weight", {E, KV}, TensorKind::Matrix},
        {&L::wo, "attn_output.weight", {Q, E}, TensorKind::Matrix},
    };
  if (s.qkv_bias) {
    v.push_back({&L::bq, "attn_q.bias", {Q}, TensorKind::Bias});
    v.push_back({&L::bk, "attn_k.bias", {KV}, TensorKind::Bias});
    v.push_back({&L::bv, "attn_v.bias", {KV}, TensorKind::Bias});
  }
  if (s.o_bias) v.push_back({&L::bo, "attn_output.bias", {E}, TensorKind::Bias});
  if (s.sinks) v.push_back({&L::attn_sinks, "attn_sinks.weight", {c.n_head}, TensorKind::Bias});
  if (s.qk_norm != QkNorm::None) {
    const bool per_head = s.qk_norm == QkNorm::PerHead;
    v.push_back({&L::q_norm, "attn_q_norm.weight", {per_head ? D : Q}, TensorKind::Norm});
    v.push_back({&L::k_norm, "attn_k_norm.weight", {per_head ? D : KV}, TensorKind::Norm});
  }
  v.push_back({&L::ffn_norm, std::string(s.ffn_norm) + ".weight", {E}, TensorKind::Norm});
  if (!s.moe) {
    v.push_back({&L::ffn_gate, "ffn_gate.weight", {E, c.n_ff}, TensorKind::Matrix});
    v.push_back({&L::ffn_up, "ffn_up.weight", {E, c.n_ff}, TensorKind::Matrix});
    v.push_back({&L::ffn_down, "ffn_down.weight", {c.n_ff, E}, TensorKind::Matrix});
    return v;
  }
  const int64_t F = c.n_ff_exp, N = c.n_expert, S = c.n_ff_shexp;
  v.push_back({&L::router, "ffn_gate_inp.weight", {E, N}, TensorKind::Router});
  if (s.router_bias) v.push_back({&L::router_b, "ffn_gate_inp.bias", {N}, TensorKind::Bias});
  if (s.probs_bias) v.push_back({&L::exp_probs_b, "exp_probs_b.bias", {N}, TensorKind::Bias});
  v.push_back({&L::gate_exps, "ffn_gate_exps.weight", {E, F, N}, TensorKind::Experts});
  v.push_back({&L::up_exps, "ffn_up_exps.weight", {E, F, N}, TensorKind::Experts});
  v.push_back({&L::down_exps, "ffn_down_exps.weight", {F, E, N}, TensorKind::Experts});
  if (s.expert_bias) {
    v.push_back({&L::gate_exps_b, "ffn_gate_exps.bias", {F, N}, TensorKind::Bias});
    v.push_back({&L::up_exps_b, "ffn_up_exps.bias", {F, N}, TensorKind::Bias});
    v.push_back({&L::down_exps_b, "ffn_down_exps.bias", {E, N}, TensorKind::Bias});
  }
  if (s.shared == SharedExpert::Gated)
    v.push_back({&L::shexp_gate, "ffn_gate_inp_shexp.weight", {E}, TensorKind::SharedGate});
  if (s.shared != SharedExpert::None) {
    v.push_back({&L::gate_shexp, "ffn_gate_shexp.weight", {E, S}, TensorKind::Matrix});
    v.push_back({&L::up_shexp, "ffn_up_shexp.weight", {E, S}, TensorKind::Matrix});
    v.push_back({&L::down_shexp, "ffn_down_shexp.weight", {S, E}, TensorKind::Matrix});
  }
  return v;
}

}  // namespace vkmoe

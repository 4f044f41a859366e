#pragma once
// Model hyper-parameters and weight views read from a GGUF file.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu/moe_route.h"
#include "cpu/rope.h"
#include "engine/model/gguf.h"
#include "engine/model/layer_spec.h"

namespace vkmoe {

struct ModelConfig {
  std::string arch = "llama";  // general.architecture; engine/model/arch/ has one file per name
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;        // key/value length per head (MLA: of the cached row, kv_lora + n_rot)
  int n_ff = 0;            // dense FFN width (0 for MoE-only models)
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_expert = 0;        // 0 for dense models
  int n_expert_used = 0;
  int n_ff_exp = 0;
  int n_ff_shexp = 0;      // shared expert width, 0 if none
  int n_layer_dense_lead = 0;  // leading layers with a dense FFN in a MoE model
  int n_swa = 0;           // sliding-window length of the layers that slide
  int swa_pattern = 0;     // gpt-oss: every swa_pattern-th layer attends to all keys
  int n_rot = 0;           // rotated dimensions of each head (rope.dimension_count)
  float rope_theta = 10000.f;
  // Context extension as llama.cpp derives it from rope.scaling.*: linear
  // (freq_scale) or YaRN (ext_factor 1, attn_factor, betas, original context).
  float rope_freq_scale = 1.f, yarn_ext_factor = 0.f, yarn_attn_factor = 1.f;
  float yarn_beta_fast = 32.f, yarn_beta_slow = 1.f;
  int n_ctx_orig_yarn = 0;
  float yarn_log_mul = 0;  // rope.scaling.yarn_log_multiplier as stored (0.1 * mscale_all_dim); deepseek2 only
  float rope_attn_factor = 1.f;  // rope.scaling.attn_factor as stored (folded into yarn_attn_factor)
  float norm_eps = 1e-6f;
  bool rope_neox = false;  // NeoX (half-split) rotation vs. adjacent pairs
  RouterParams router;     // how the top-k experts and their weights are chosen
  QkNorm qk_norm = QkNorm::None;  // for architectures where the file decides (glm4moe)
  bool probs_bias = false;         // likewise for exp_probs_b (deepseek2)
  // Multi-head latent attention (deepseek2). Each position caches one row of
  // head_dim = n_rot + kv_lora values: its rotated key part, then the
  // normalized latent, which also serves as the value. Queries come through a
  // q_lora bottleneck (0: one projection); each head's no-rope part (head_k -
  // n_rot values) is absorbed into latent space by attn_k_b, and its output
  // latent expanded to head_v values by attn_v_b. n_head_kv is 1.
  struct Mla {
    int q_lora = 0, kv_lora = 0, head_k = 0, head_v = 0;
  } mla;
  float kq_scale = 0;  // attention logit scale; 0: 1 / sqrt(head_dim)
  bool is_mla() const { return mla.kv_lora > 0; }
  float attn_scale() const { return kq_scale > 0 ? kq_scale : 1.0f / std::sqrt(float(head_dim)); }
  bool is_moe() const { return n_expert > 0; }
  // Model::load checks that these products fit.
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int v_dim() const { return is_mla() ? 0 : kv_dim(); }  // MLA's values are part of the key rows
  int attn_out_dim() const { return is_mla() ? n_head * mla.head_v : q_dim(); }  // attn_output's input
  RopeParams rope() const {
    RopeParams p;
    p.n_rot = n_rot;
    p.neox = rope_neox;
    p.theta = rope_theta;
    p.freq_scale = rope_freq_scale;
    p.ext_factor = yarn_ext_factor;
    p.attn_factor = yarn_attn_factor;
    p.beta_fast = yarn_beta_fast;
    p.beta_slow = yarn_beta_slow;
    p.n_ctx_orig = n_ctx_orig_yarn;
    return p;
  }
};

// A view of one GGUF tensor. For stacked expert tensors ne = {in, out, n_expert}.
struct Weight {
  const GgufTensor* t = nullptr;
  explicit operator bool() const { return t != nullptr; }
  GgmlType type() const { return t->type; }
  int64_t in() const { return t->ne[0]; }
  int64_t out() const { return t->ne.size() > 1 ? t->ne[1] : 1; }
  size_t row_bytes() const { return vkmoe::row_bytes(t->type, t->ne[0]); }
  const uint8_t* row(int64_t r) const { return t->data + r * row_bytes(); }
  // Stacked experts: the bytes of expert e (out rows of in elements each).
  size_t expert_bytes() const { return row_bytes() * out(); }
  const uint8_t* expert(int e) const { return t->data + e * expert_bytes(); }
  const float* f32() const;  // data as floats; throws unless type is F32
};

struct LayerWeights {
  LayerSpec spec;  // what the layer computes; which of the weights below it holds
  Weight attn_norm, wq, wk, wv, wo, bq, bk, bv, bo, attn_sinks, q_norm, k_norm;
  Weight wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, wk_b, wv_b;  // MLA (wq when there is no q_lora)
  Weight ffn_norm;
  Weight ffn_gate, ffn_up, ffn_down;                  // dense FFN
  Weight router, router_b, exp_probs_b, gate_exps, up_exps, down_exps;  // MoE
  Weight gate_exps_b, up_exps_b, down_exps_b;  // per-expert biases: {width, n_expert}
  Weight shexp_gate, gate_shexp, up_shexp, down_shexp;  // shared expert
  // Bytes of one routed expert (its gate, up and down slices); 0 for a layer without.
  uint64_t routed_expert_bytes() const {
    return gate_exps ? gate_exps.expert_bytes() + up_exps.expert_bytes() + down_exps.expert_bytes() : 0;
  }
};

class Model {
 public:
  // Opens and validates: throws Error for an unknown architecture, missing
  // hyper-parameters or tensors, or tensors of the wrong shape/type.
  static std::unique_ptr<Model> load(const std::string& path);
  static std::unique_ptr<Model> from_gguf(std::unique_ptr<GgufFile> file);
  // For tests: patch(il, spec) changes layer il's spec (which blocks it runs,
  // hence which tensors it reads) before its tensors are looked up.
  using SpecPatch = std::function<void(int il, LayerSpec& spec)>;
  static std::unique_ptr<Model> from_gguf(std::unique_ptr<GgufFile> file, const SpecPatch& patch);

  const ModelConfig& config() const { return cfg_; }
  const GgufFile& gguf() const { return *file_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  Weight tok_embd, output_norm, output;  // output == tok_embd when tied

 private:
  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  std::vector<LayerWeights> layers_;
};

}  // namespace vkmoe

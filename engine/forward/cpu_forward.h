#pragma once
// CPU forward pass for all supported architectures. With Kernels::Scalar it is
// the reference every other path is checked against (dequantize + float dot);
// Kernels::Simd uses the Highway kernels and a thread pool.
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/thread_pool.h"
#include "engine/model/model.h"

namespace vkmoe {

class ThreadPool;

struct Route {
  std::vector<int> experts;
  std::vector<float> weights;
};

class CpuForward {
 public:
  enum class Kernels { Scalar, Simd };
  CpuForward(const Model& model, int n_ctx, Kernels kernels = Kernels::Scalar, int n_threads = 0,
             ThreadPlacement placement = {});
  ~CpuForward();

  // Evaluates tokens at positions pos()..pos()+n-1 with causal attention over
  // the KV cache, appends them to it and returns the logits of the last one.
  std::vector<float> eval(const std::vector<int32_t>& tokens);
  std::vector<float> decode(int32_t token) { return eval({token}); }
  void reset() { pos_ = 0, first_non_finite_ = 0; }
  void truncate(int n_keep);  // keeps the first n_keep positions of the KV cache
  // Where NaN/Inf first appeared in the residual stream since reset()
  // (the smallest non_finite_site code seen; 0: nowhere).
  uint32_t first_non_finite() const { return first_non_finite_; }
  int pos() const { return pos_; }
  int n_ctx() const { return n_ctx_; }
  // Router decisions of the last evaluated token, one entry per layer (MoE only).
  const std::vector<Route>& last_routes() const { return routes_; }
  // The smallest route margin over every token and layer of the last eval
  // (+inf without MoE): another implementation whose router logits differ by
  // more may pick other experts, so its logits cannot be compared.
  float min_route_margin() const { return min_route_margin_; }

 private:
  void matvec(const Weight& w, const float* x, float* y, int expert = -1) const;
  // The attention inputs of one token at position p from its normalized
  // hidden state xn: q (q_dim) and its cache rows k, v (kv_dim; MLA: k only).
  void project_gqa(int il, const float* xn, int p, float* q, float* k, float* v);
  void project_mla(int il, const float* xn, int p, float* q, float* k);
  // MLA: each head's output latent (att, q_dim) expanded by attn_v_b (out, attn_out_dim).
  void expand_mla(int il, const float* att, float* out) const;
  void ffn_moe(int il, const float* x, float* out);
  // out = down(act(gate x + b_gate, up x + b_up)) + b_down; the biases are
  // expert `expert`'s rows of biases' *_exps_b tables (null: none).
  void swiglu_ffn(const Weight& gate, const Weight& up, const Weight& down, int expert,
                  const float* x, float* out, int n_ff, FfnAct act = FfnAct::SiLU,
                  const LayerWeights* biases = nullptr) const;

  const Model& model_;
  const ModelConfig& c_;
  int n_ctx_;
  Kernels kernels_;
  std::unique_ptr<ThreadPool> pool_;
  int pos_ = 0;
  uint32_t first_non_finite_ = 0;
  void check_finite(const float* x, size_t n, uint32_t site);
  std::vector<float> k_cache_, v_cache_;  // [layer][pos][kv_dim] (MLA: no v_cache_)
  struct LayerF32 {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, bq, bk, bv, shexp_gate, exp_probs_b;
    std::vector<float> bo, router_b, attn_sinks;  // empty when the layer has none
    std::vector<float> q_a_norm, kv_a_norm;          // MLA
  };
  std::vector<LayerF32> lf_;
  std::vector<float> output_norm_;
  std::vector<Route> routes_;
  float min_route_margin_ = 0;
  // project_mla's per-token scratch (sized once): all heads' queries, the
  // q_lora bottleneck, the kv_a projection (latent + rope key).
  std::vector<float> mla_qh_, mla_qa_, mla_kva_;
};

// Dequantizes a whole (small) tensor to floats.
std::vector<float> to_f32(const Weight& w);

// A small tensor's values as floats on the host: read in place when F32,
// else converted once; data() is null for an absent tensor.
class HostFloats {
 public:
  HostFloats() = default;
  explicit HostFloats(const Weight& w) : w_(w) {
    if (w && w.type() != GgmlType::F32) copy_ = to_f32(w);
  }
  const float* data() const { return !w_ ? nullptr : copy_.empty() ? w_.f32() : copy_.data(); }

 private:
  Weight w_;
  std::vector<float> copy_;
};
void rms_norm(const float* x, const float* w, float* y, int n, float eps);

}  // namespace vkmoe

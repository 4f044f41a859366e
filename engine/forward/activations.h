#pragma once
// Device buffers a forward pass works in, sized for up to n_ubatch tokens.
// activation_bytes() is what the planner reserves; Activations allocates it.
#include <algorithm>
#include <cstdint>

#include "engine/model/model.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

struct ActivationShape {
  uint32_t n_ubatch = 1, n_ctx = 0;
  uint32_t embd = 0, q = 0, kv = 0, v = 0, head_dim = 0, n_head = 0;
  uint32_t q_lora = 0, q_heads = 0, attn_out = 0;  // latent attention: q bottleneck, projected q, expanded output
  uint32_t ff = 0;        // dense FFN width (and the shared expert's)
  uint32_t ff_exp = 0, k = 0, n_expert = 0;
  uint32_t vocab = 0;
  MoeTableLayout table;   // grouping of n_ubatch tokens (MoE models)
  // Whether a GEMM path in use converts its activations into the GEMM scratch
  // (int8, coopmat2); without one the scratch is empty. The planner counts it in (true).
  bool gemm_converts_x = true;
  // Whether every MoE layer's prompt runs the experts' gate and up products as
  // one product (experts_gate_up_in_one): the up rows then serve decode only
  // (k rows, not a ubatch's slots). plan_input_for's default counts them in (false).
  bool gate_up_in_one = false;
  uint32_t expert_rows() const;  // rows of the routed-expert scratch
  uint64_t split_k_half_bytes() const;  // one half of Activations::gemm_split
  static ActivationShape of(const ModelConfig& c, uint32_t n_ubatch, uint32_t n_ctx);
};

uint64_t activation_bytes(const ActivationShape& s);

struct Activations {
  ActivationShape shape;
  vk::Buffer x, xn;        // [t][embd] residual stream and its normed copy
  vk::Buffer xh;           // [t][embd] f16: a ubatch's normed rows for GEMMs on f16 rows
  vk::Buffer q, k, v, att;  // [t][q|kv|kv|q]
  vk::Buffer attn_scratch;  // split-K partials of decode attention
  vk::Buffer qa, qh, ao;    // latent attention: [t][q_lora], [t][n_head * head_k], [t][n_head * head_v]
  vk::Buffer g, u, so;      // dense / shared-expert FFN: [t][ff], [t][ff], [t][embd]
  vk::Buffer gate1;         // shared-expert gate logit per token
  vk::Buffer rlog;          // [t][n_expert] router logits (2 rows for decode prediction)
  vk::Buffer ids, wts;      // [t][k] routing
  vk::Buffer table;         // MoeTable words
  vk::Buffer eg, eu, eo;    // routed experts: [slot][ff_exp], [slot][ff_exp], [pair][embd]
  vk::Buffer logits;        // [vocab] of the last token
  vk::Buffer gemm_scratch;  // one product's converted activations (int8, coopmat2)
  // Split-K partial sums (KHR coopmat path) in two halves of split_k_half_bytes(),
  // for two products in flight together.
  vk::Buffer gemm_split;
  vk::Buffer counters;      // zeroed uints: fused kernels count finished workgroups here
  // [0]: the router's top-k tail; [32], [64]: chained decode layers
  // (LayerProgram::FusedDecode; 128 bytes apart: polled from every SM, not in
  // the lines a grid barrier polls); from kMoeFusedCounters: layer il's fused
  // MoE block's grid barrier and finish count at kMoeFusedCounters + 2 * il
  // (il < kMoeFusedLayers); [kChainReady, moe_fused_counters_end) are zeroed
  // at a decoded token's start. From kAttentionCounters: split attention tails.
  static constexpr uint32_t kDispatchCounters = 2048, kChainReady = 32, kChainDone = 64, kMoeFusedCounters = 128,
                            kAttentionCounters = 1024, kMoeFusedLayers = (kAttentionCounters - kMoeFusedCounters) / 2;
  static constexpr uint32_t moe_fused_counter(int il) { return kMoeFusedCounters + 2 * uint32_t(il); }
  static constexpr uint32_t moe_fused_counters_end(int n_layer) {
    return moe_fused_counter(std::min<int>(n_layer, int(kMoeFusedLayers)));
  }
  // Host-visible uint: the smallest non_finite_site code whose check saw
  // NaN/Inf (kNoNonFinite while none did). Not device memory.
  vk::Buffer non_finite;
  static constexpr uint32_t kNoNonFinite = 0xFFFFFFFFu;
  uint32_t first_non_finite() const;  // 0 while none
  void clear_non_finite();
  // Its next uint: 1 once copy_finite saw NaN/Inf in the logits it copied.
  static constexpr uint32_t kLogitsFlagWord = 1;
  bool logits_non_finite() const;
  void clear_logits_flag();
  Activations(vk::Context& ctx, const ActivationShape& s);
};

}  // namespace vkmoe

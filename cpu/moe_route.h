#pragma once
#include <cstdint>

namespace vkmoe {

// SoftmaxWeight: gpt-oss, softmax over the k selected logits.
enum class Gating : uint8_t { Softmax, Sigmoid, SoftmaxWeight };
struct RouterParams {
  Gating gating = Gating::Softmax;
  bool normalize = false;  // renormalize the k weights to sum 1 (sum clamped below at 6.103515625e-5 as llama.cpp does)
  float scale = 1.f;       // routed scaling factor, applied last (0 reads as 1, as llama.cpp's unset scale)
  // Group-limited selection (DeepSeek-V3): experts split into n_group equal groups;
  // keep the topk_group groups with the largest sum of their 2 best selection scores.
  int n_group = 1, topk_group = 1;
};

// Router of one token in llama.cpp's build_moe_ffn order: probs = softmax or
// sigmoid of the logits (SoftmaxWeight: the logits); selection scores = probs
// + bias; with n_group > 1 only the experts of the topk_group best groups
// (ties: lower group) stay eligible, the others score -inf; ids = the k best
// scores (lower index wins ties); weights = their probs (SoftmaxWeight: the
// softmax of their logits), renormalized when normalize, times scale.
// NaN logits and scores read as -inf; p = exp(l - max) is exactly 1 where
// l == max, so rows of -inf or with +inf still give finite weights. Without
// bias and groups the scores are the logits (the same order as the probs).
// bias (n_expert values, may be null): added to the scores for selection only
// (DeepSeek-V3 exp_probs_b); weights come from the unbiased scores.
// Needs 1 <= k <= n_expert; with groups n_expert % n_group == 0 and
// 1 <= topk_group <= n_group.
// margin (may be null): how far the selection is from a tie, the smaller of
// the gaps between the k-th and (k+1)-th expert score and, with groups,
// between the topk_group-th and next group score (+inf when nothing is left
// out). A rounding difference smaller than it cannot change the choice.
void route_topk(const float* logits, const float* bias, int n_expert, int k, const RouterParams& p, int* ids,
                float* weights, float* margin = nullptr);

inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }

}  // namespace vkmoe
